"""Sentence representations: poolings, all-layer extraction and per-layer diagnostics.

``extract(loaded, sentences, poolings)`` returns an :class:`Extraction` whose
``pooled`` maps each pooling to a ``(n_hidden_states, n, d)`` float32 array;
the run stores those arrays in the content-addressed :class:`interlingua.store.Store`.
"""

from __future__ import annotations

from interlingua.representations.diagnostics import standardize, top_k_shares
from interlingua.representations.extract import (
    Extraction,
    TokenizedSentences,
    extract,
    length_sorted_batches,
    tokenize_for_extraction,
)
from interlingua.representations.pooling import (
    POOLINGS,
    PoolingError,
    check_right_padded,
    last_token_pool,
    mean_pool,
    pool,
    sgpt_pool,
)

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
