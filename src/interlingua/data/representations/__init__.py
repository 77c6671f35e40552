"""Sentence representations: poolings, all-layer extraction and per-layer diagnostics.

``extract(loaded, sentences, poolings)`` returns an :class:`Extraction` whose
``pooled`` maps each pooling to a ``(n_hidden_states, n, d)`` float32 array;
the run stores those arrays in the content-addressed :class:`interlingua.core.store.Store`.
"""

from __future__ import annotations

import sys
import types
from importlib import import_module
from typing import Any

from interlingua.data.representations.diagnostics import standardize, top_k_shares

# torch-backed names load on first use, so ``compare``/``plan`` (and ``interlingua plan``) stay torch-free
_LAZY = {
    **dict.fromkeys(
        ("Extraction", "TokenizedSentences", "extract", "length_sorted_batches", "tokenize_for_extraction"), "extract"
    ),
    **dict.fromkeys(
        ("POOLINGS", "PoolingError", "check_right_padded", "last_token_pool", "mean_pool", "pool", "sgpt_pool"),
        "pooling",
    ),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"interlingua.data.representations.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    """This package: importing its submodule ``extract`` does not shadow the function ``extract``."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "extract" and isinstance(value, types.ModuleType):
            return  # the submodule stays reachable as sys.modules["interlingua.data.representations.extract"]
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "POOLINGS",
    "Extraction",
    "PoolingError",
    "TokenizedSentences",
    "check_right_padded",
    "extract",
    "last_token_pool",
    "length_sorted_batches",
    "mean_pool",
    "pool",
    "sgpt_pool",
    "standardize",
    "tokenize_for_extraction",
    "top_k_shares",
]
