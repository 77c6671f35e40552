"""Sentence representations: poolings, all-layer extraction and an on-disk cache.

``extract_representations(loaded, sentences, poolings)`` returns
``{pooling: (n_hidden_states, n, d) float32}``; ``RepresentationCache(root)``
stores those arrays content-addressed so reruns recompute nothing.
"""

from __future__ import annotations

from interlingua.representations.cache import CACHE_FORMAT_VERSION, RepresentationCache
from interlingua.representations.extract import (
    TokenizedSentences,
    extract_representations,
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
    "CACHE_FORMAT_VERSION",
    "POOLINGS",
    "PoolingError",
    "RepresentationCache",
    "TokenizedSentences",
    "check_right_padded",
    "extract_representations",
    "last_token_pool",
    "length_sorted_batches",
    "mean_pool",
    "pool",
    "sgpt_pool",
    "tokenize_for_extraction",
]
