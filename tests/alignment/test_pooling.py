"""Word-aligned pooling: rows, dropped links, special tokens, the shuffled control."""

from __future__ import annotations

import numpy as np
import pytest

from interlingua.alignment import (
    AlignmentError,
    AlignOptions,
    SentenceAlignment,
    Word,
    align,
    segment,
    word_aligned_pool,
    word_states,
)
from interlingua.data.models import ModelSpec, load_model

A = ["The old fisher carries a blue boat.", "My sister paints the warm bread.", "The baker sells seven apples."]
B = [
    "Der alte Fischer trägt ein blaues Boot.",
    "Meine Schwester malt das warme Brot.",
    "Der Bäcker verkauft sieben Äpfel.",
]


@pytest.fixture(scope="module")
def gpt2(tiny_gpt2_path):
    return load_model(ModelSpec(path=str(tiny_gpt2_path)))


@pytest.fixture(scope="module")
def bert(tiny_bert_path):
    return load_model(ModelSpec(path=str(tiny_bert_path)))


@pytest.fixture(scope="module")
def alignments(gpt2):
    return align(gpt2, A, B, language_a="eng_Latn", language_b="deu_Latn", options=AlignOptions(layer=1))


@pytest.mark.slow
def test_rows_equal_links_and_match_word_states(gpt2, bert, alignments):
    out = word_aligned_pool(gpt2, A, B, alignments, model_b=bert, seed=7)
    n_links = sum(len(al.links) for al in alignments)
    assert out.n_links == n_links and out.n_dropped == 0
    assert len(out.rows) == n_links - out.n_dropped
    assert out.reps_a.shape == (gpt2.n_hidden_states, len(out.rows), 32)
    assert out.reps_b.shape == (bert.n_hidden_states, len(out.rows), 32)
    reps_a, reps_b, rows = out  # unpacks as a triple
    ws = word_states(bert, B, [al.words_b for al in alignments])
    for r, row in enumerate(rows):
        np.testing.assert_allclose(reps_b[:, r], ws.vectors[row.sentence][:, row.index_b], rtol=1e-6)
        assert B[row.sentence][row.span_b[0] : row.span_b[1]] == row.word_b
        assert A[row.sentence][row.span_a[0] : row.span_a[1]] == row.word_a


def test_uncovered_word_is_dropped_with_a_count(gpt2):
    # GPT-2 (max 64 positions) truncates: words past the cut have no token
    long_a = " ".join(["boat"] * 100)
    wa = segment(long_a)
    wb = segment(B[0])
    al = SentenceAlignment(tuple(wa), tuple(wb), ((0, 0), (1, 1), (99, 2)))
    out = word_aligned_pool(gpt2, [long_a], [B[0]], [al], seed=1)
    assert out.n_links == 3 and out.n_dropped == 1 and out.dropped_a == 1 and out.dropped_b == 0
    assert len(out.rows) == 2


def test_shuffled_permutation_seeded_and_reproducible(gpt2, alignments):
    one = word_aligned_pool(gpt2, A, B, alignments, seed=3)
    two = word_aligned_pool(gpt2, A, B, alignments, seed=3)
    other = word_aligned_pool(gpt2, A, B, alignments, seed=4)
    n = len(one.rows)
    assert sorted(one.permutation.tolist()) == list(range(n))
    assert np.array_equal(one.permutation, two.permutation) and one.seed == 3
    assert not np.array_equal(one.permutation, other.permutation)
    assert np.array_equal(one.shuffled_b, one.reps_b[:, one.permutation])
    np.testing.assert_array_equal(one.reps_a, two.reps_a)


def test_bad_input(gpt2, alignments):
    with pytest.raises(AlignmentError):
        word_aligned_pool(gpt2, [], [], [])
    with pytest.raises(AlignmentError, match="one alignment per sentence pair"):
        word_aligned_pool(gpt2, A, B[:2], alignments)
    with pytest.raises(AlignmentError, match="is not in sentence"):
        word_aligned_pool(gpt2, B, A, alignments)  # spans belong to the other side
    bad = [SentenceAlignment((Word("The", 0, 3),), (Word("Der", 0, 3),), ((0, 5),))]
    with pytest.raises(AlignmentError, match="indexes no word"):
        word_aligned_pool(gpt2, A[:1], B[:1], bad)


def test_sentence_without_links_contributes_no_rows(gpt2, alignments):
    empty = SentenceAlignment(alignments[1].words_a, alignments[1].words_b, ())
    als = [alignments[0], empty, alignments[2]]
    out = word_aligned_pool(gpt2, A, B, als, seed=0)
    assert len(out.rows) == len(alignments[0].links) + len(alignments[2].links)
    assert {row.sentence for row in out.rows} == {0, 2}
    full = word_aligned_pool(gpt2, A, B, alignments, seed=0)
    keep = [r for r, row in enumerate(full.rows) if row.sentence != 1]
    np.testing.assert_allclose(out.reps_a, full.reps_a[:, keep], rtol=1e-5, atol=1e-6)
