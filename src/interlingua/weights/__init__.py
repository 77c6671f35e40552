"""Weight surgery on checkpoints: rebuild what a published checkpoint should have held.

``build_tokenwise_merge(english, l2, tokenizer, out, alpha=...)``
(:mod:`interlingua.weights.tokenwise`) rebuilds a "bilingual merged"
checkpoint: the English model's backbone with an embedding table over a
bilingual tokenizer's vocabulary, each row taken from the English and/or the
L2 model's row of the same token string. ``tokenwise_merge_table`` is the pure
table rule, ``tokenwise_recipe_key`` the content key of a build.

Importing this package is cheap (no torch, no transformers); the heavy
modules load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from interlingua.weights.errors import WeightsError  # noqa: F401 (exported)

_LAZY = {
    "build_tokenwise_merge": "tokenwise",
    "tokenwise_merge_table": "tokenwise",
    "tokenwise_recipe_key": "tokenwise",
    "MergeProvenance": "tokenwise",
    "TOKENWISE_FORMAT": "tokenwise",
    "SOURCES": "tokenwise",
}

__all__ = sorted(["WeightsError", *_LAZY])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
