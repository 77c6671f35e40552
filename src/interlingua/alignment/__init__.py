"""Word alignment (SimAlign-style), word-aligned token-level pooling, and AER.

- :mod:`.words`: word segmentation with character spans (jieba for Chinese);
- :mod:`.simalign`: ``align(loaded, sentences_a, sentences_b, ...)`` with the
  methods ``fwd``, ``rev``, ``inter``/``argmax``, ``itermax``, ``match``;
- :mod:`.pooling`: ``word_aligned_pool(model, sentences_a, sentences_b, alignments)``;
- :mod:`.aer`: alignment error rate and the hand-checked eng-deu sample.
"""

from __future__ import annotations

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
from interlingua.alignment.pooling import WordAlignedPooling, WordRow, word_aligned_pool
from interlingua.alignment.simalign import (
    METHODS,
    SentenceAlignment,
    WordStates,
    align,
    align_matrix,
    align_states,
    default_layer,
    similarity_matrix,
    token_word_map,
    word_states,
)
from interlingua.alignment.words import AlignmentError, Word, segment, segment_many, segmenter_for

__all__ = [
    "METHODS",
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
