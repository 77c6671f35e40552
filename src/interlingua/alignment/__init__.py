"""Word alignment (SimAlign-style), word-aligned token-level pooling, and AER.

- :mod:`.words`: word segmentation with character spans (jieba for Chinese);
- :mod:`.simalign`: ``align(loaded, sentences_a, sentences_b, options=AlignOptions(...))`` with the
  methods ``fwd``, ``rev``, ``inter``/``argmax``, ``itermax``, ``match``;
- :mod:`.pooling`: ``word_aligned_pool(model, sentences_a, sentences_b, alignments)``;
- :mod:`.aer`: alignment error rate and the hand-checked eng-deu sample.
"""

from __future__ import annotations

import importlib
from typing import Any

from interlingua.alignment.aer import (
    AERCounts,
    GoldPair,
    aer,
    aer_counts,
    corpus_aer,
    evaluate,
    load_gold_sample,
    parse_links,
)
from interlingua.alignment.words import AlignmentError, Word, segment, segment_many, segmenter_for

__all__ = [
    "METHODS",
    "AlignOptions",
    "AERCounts",
    "AlignmentError",
    "GoldPair",
    "SentenceAlignment",
    "Word",
    "WordAlignedPooling",
    "WordRow",
    "WordStates",
    "aer",
    "aer_counts",
    "align",
    "align_matrix",
    "align_states",
    "corpus_aer",
    "default_layer",
    "evaluate",
    "load_gold_sample",
    "parse_links",
    "segment",
    "segment_many",
    "segmenter_for",
    "similarity_matrix",
    "token_word_map",
    "word_aligned_pool",
    "word_states",
]

# torch-dependent parts load on first use, so segmentation checks (pre-flight, ``validate``) stay torch-free
_LAZY = {
    "WordAlignedPooling": "pooling",
    "WordRow": "pooling",
    "word_aligned_pool": "pooling",
    "METHODS": "simalign",
    "AlignOptions": "simalign",
    "SentenceAlignment": "simalign",
    "WordStates": "simalign",
    "align": "simalign",
    "align_matrix": "simalign",
    "align_states": "simalign",
    "default_layer": "simalign",
    "similarity_matrix": "simalign",
    "token_word_map": "simalign",
    "word_states": "simalign",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"interlingua.alignment.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'interlingua.alignment' has no attribute {name!r}")
