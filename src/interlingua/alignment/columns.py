"""The columns of ``alignments.csv`` (one row per aligned language pair), each with its glossary text."""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = ["ALIGNMENT_COLUMNS"]

ALIGNMENT_COLUMNS: tuple[Column, ...] = (
    Column("languages", "str", "the aligned language pair (side a-side b; one language: every word to itself)"),
    Column("identity", "bool", "the pair is one language: each word linked to itself, no encoder"),
    Column("encoder", "str", "the model whose contextual word vectors were aligned (empty for identity)"),
    Column("layer", "int", "the encoder's hidden state (0 = embeddings; -1 for identity)"),
    Column("method", "str", "inter, itermax or match (SimAlign's names; empty for identity)"),
    Column("sentences", "int", "sentence pairs aligned (the first n of the corpus)"),
    Column("words_a", "int", "words of side a (segmented; punctuation dropped)"),
    Column("words_b", "int", "words of side b"),
    Column("links", "int", "word links (a word can be linked twice by itermax)"),
    Column("unaligned_sentences", "int", "sentence pairs without a single link (dropped and counted, not an error)"),
    Column("seconds", "float", "time to align (encoder forward passes included)"),
)
