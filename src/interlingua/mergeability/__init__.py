"""Weight surgery on checkpoints: rebuild what a published checkpoint should have held.

``build_tokenwise_merge(english, l2, tokenizer, out, alpha=...)``
(:mod:`interlingua.mergeability.tokenwise`) rebuilds a "bilingual merged"
checkpoint: the English model's backbone with an embedding table over a
bilingual tokenizer's vocabulary, each row taken from the English and/or the
L2 model's row of the same token string. ``tokenwise_merge_table`` is the pure
table rule, ``tokenwise_recipe_key`` the content key of a build.

Mergeability (issue 11): ``interlingua.mergeability.comparability.comparability(a, b)``
(route native / transport / none and the coverage table, headers only; not
re-exported here, its name is the module's),
``weight_diagnostics(a, b, base=...)`` (:mod:`.diagnostics`: cosine, relative
L2, norm ratio, task-vector cosine, TIES sign agreement, streamed),
``build_merge(models, out, method=...)`` / ``merge_recipe_key``
(:mod:`.merge`: linear, slerp, task_arithmetic, ties, dare_linear, dare_ties,
as mergekit computes them) and ``loss_barrier(a, b, texts)`` (:mod:`.barrier`).

Importing this package is cheap (no torch, no transformers); the heavy
modules load on first use.
"""

from __future__ import annotations

from typing import Any

from interlingua.core.lazy import lazy_loader
from interlingua.mergeability.errors import WeightsError  # noqa: F401 (exported)

_LAZY = {
    "build_tokenwise_merge": "tokenwise",
    "tokenwise_merge_table": "tokenwise",
    "tokenwise_recipe_key": "tokenwise",
    "MergeProvenance": "tokenwise",
    "SpecialTokens": "tokenwise",
    "TOKENWISE_FORMAT": "tokenwise",
    "SOURCES": "tokenwise",
    "coverage_table": "comparability",
    "read_checkpoint": "comparability",
    "Comparability": "comparability",
    "REASONS": "comparability",
    "ROUTES": "comparability",
    "weight_diagnostics": "diagnostics",
    "WeightDiagnostics": "diagnostics",
    "build_merge": "merge",
    "merge_recipe": "merge",
    "merge_recipe_key": "merge",
    "merge_tensors": "merge",
    "METHODS": "merge",
    "loss_barrier": "barrier",
    "BarrierResult": "barrier",
}

__all__ = sorted(["WeightsError", *_LAZY])


_load = lazy_loader(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    return _load(name)
