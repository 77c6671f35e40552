"""AER (Och & Ney 2003) on constructed alignments, and the packaged gold sample."""

from __future__ import annotations

import pytest

from interlingua.alignment import AlignmentError, aer, aer_counts, corpus_aer, load_gold_sample, parse_links


def test_perfect_alignment_is_zero():
    s = {(0, 0), (1, 2), (2, 1)}
    assert aer(s, s) == 0.0
    assert aer(s | {(3, 3)}, s, {(3, 3)}) == 0.0  # possible links are not penalised


def test_empty_prediction_is_one():
    assert aer(set(), {(0, 0), (1, 1)}) == 1.0


def test_published_formula():
    a = {(0, 0), (1, 1), (2, 3), (3, 2)}
    s = {(0, 0), (1, 1), (2, 2)}
    p = {(2, 3)}
    # |A∩S| = 2, P = S ∪ {(2,3)} so |A∩P| = 3, |A| = 4, |S| = 3
    assert aer(a, s, p) == pytest.approx(1 - (2 + 3) / (4 + 3))
    c = aer_counts(a, s, p)
    assert (c.n_predicted, c.n_sure, c.hits_sure, c.hits_possible) == (4, 3, 2, 3)
    assert c.precision == pytest.approx(3 / 4) and c.recall == pytest.approx(2 / 3)


def test_corpus_aer_sums_counts():
    a = [{(0, 0)}, {(0, 0), (1, 1)}]
    s = [{(0, 0)}, {(0, 1)}]
    c = corpus_aer(a, s)
    assert c.aer == pytest.approx(1 - (1 + 1) / (3 + 2))
    with pytest.raises(AlignmentError):
        corpus_aer(a, s[:1])
    with pytest.raises(AlignmentError):
        corpus_aer([], [])
    with pytest.raises(AlignmentError):
        aer(set(), set())


def test_parse_links():
    assert parse_links("0-1 2-3") == {(0, 1), (2, 3)}
    with pytest.raises(AlignmentError):
        parse_links("0:1")


def test_gold_sample_loads_and_is_consistent():
    header, pairs = load_gold_sample()
    assert "hand-checked" in header["description"].lower() and "NOT a standard gold set" in header["description"]
    assert 20 <= len(pairs) <= 30
    for p in pairs:
        assert p.sure <= p.possible
        for w in p.words_a:
            assert p.text_a[w.start : w.end] == w.text
        assert p.sure  # every pair has sure links
