"""ParallelCorpus: validation, selection, seeded sampling, fingerprints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.data.corpora import ParallelCorpus

SRC = Path(__file__).resolve().parents[2] / "src"


def make_corpus(n: int = 50) -> ParallelCorpus:
    """Invented sentences whose content encodes their id, in three scripts."""
    ids = tuple(f"s{i:03d}" for i in range(n))
    return ParallelCorpus(
        "toy",
        ids,
        {
            "eng_latn": [f"Sentence number {i} is about {i} apples." for i in range(n)],
            "rus_Cyrl": [f"Предложение номер {i} про {i} яблок." for i in range(n)],
            "cmn_Hans": [f"第{i}句话说的是{i}个苹果。" for i in range(n)],
        },
    )


def number_in(sentence: str) -> int:
    """The id number an invented sentence encodes (first run of digits)."""
    digits = ""
    for ch in sentence:
        if ch.isdigit():
            digits += ch
        elif digits:
            break
    return int(digits)


# ---------------------------------------------------------------- construction
def test_construction_normalises_codes_and_freezes() -> None:
    corpus = make_corpus(5)
    assert corpus.languages == ("eng_Latn", "rus_Cyrl", "cmn_Hans")
    assert len(corpus) == 5
    assert isinstance(corpus.texts["eng_Latn"], tuple)
    with pytest.raises(TypeError):
        corpus.texts["eng_Latn"] = ("x",)  # type: ignore[index]
    with pytest.raises(AttributeError):
        corpus.name = "other"  # type: ignore[misc]
    assert "sentences=5" in repr(corpus)


def test_misaligned_lengths_raise() -> None:
    with pytest.raises(CorpusError, match="misaligned: deu_Latn has 1 sentences but there are 2 ids"):
        ParallelCorpus("bad", ("a", "b"), {"eng_Latn": ["one", "two"], "deu_Latn": ["eins"]})


def test_duplicate_ids_raise_with_positions() -> None:
    with pytest.raises(CorpusError, match="'a' appears at positions 0 and 2"):
        ParallelCorpus("bad", ("a", "b", "a"), {"eng_Latn": ["x", "y", "z"]})


def test_same_language_twice_raises() -> None:
    with pytest.raises(CorpusError, match="eng_Latn is given twice"):
        ParallelCorpus("bad", ("a",), {"eng_Latn": ["x"], "eng_latn": ["y"]})


def test_non_string_ids_and_texts_raise() -> None:
    with pytest.raises(CorpusError, match="ids must be strings"):
        ParallelCorpus("bad", (1, 2), {"eng_Latn": ["x", "y"]})  # type: ignore[arg-type]
    with pytest.raises(CorpusError, match="not str"):
        ParallelCorpus("bad", ("a",), {"eng_Latn": [None]})  # type: ignore[list-item]
    with pytest.raises(CorpusError, match="is one string"):
        ParallelCorpus("bad", ("a",), {"eng_Latn": "x"})  # type: ignore[dict-item]


def test_empty_corpus_and_no_languages_raise() -> None:
    with pytest.raises(CorpusError, match="has no sentences"):
        ParallelCorpus("empty", (), {"eng_Latn": []})
    with pytest.raises(CorpusError, match="has no languages"):
        ParallelCorpus("empty", ("a",), {})


def test_bad_language_key_raises_language_error() -> None:
    with pytest.raises(LanguageError, match="cannot parse"):
        ParallelCorpus("bad", ("a",), {"English": ["x"]})


# ------------------------------------------------------------------- selection
def test_select_keeps_ids_and_order_of_request() -> None:
    corpus = make_corpus(4)
    sub = corpus.select(["cmn_hans", "eng_Latn"])
    assert sub.languages == ("cmn_Hans", "eng_Latn")
    assert sub.ids == corpus.ids
    assert sub.sentences("cmn_Hans") == list(corpus.texts["cmn_Hans"])


def test_unknown_language_lists_available() -> None:
    corpus = make_corpus(3)
    with pytest.raises(LanguageError, match="no language 'deu_Latn'.*available: eng_Latn, rus_Cyrl, cmn_Hans"):
        corpus.select(["deu_Latn"])
    with pytest.raises(LanguageError, match="available: eng_Latn"):
        corpus.sentences("fra_Latn")
    with pytest.raises(LanguageError, match="available"):
        corpus.fingerprint("fra_Latn")
    with pytest.raises(CorpusError, match="more than once"):
        corpus.select(["eng_Latn", "eng_latn"])


# -------------------------------------------------------------------- sampling
def test_sample_is_seeded_and_uses_default_rng() -> None:
    corpus = make_corpus(50)
    a = corpus.sample(10, seed=42)
    b = corpus.sample(10, seed=42)
    c = corpus.sample(10, seed=43)
    assert a.ids == b.ids
    assert a.ids != c.ids
    expected = np.sort(np.random.default_rng(42).choice(50, size=10, replace=False))
    assert a.ids == tuple(f"s{i:03d}" for i in expected)


def test_sample_without_replacement_sorted_and_aligned() -> None:
    corpus = make_corpus(50)
    sample = corpus.sample(30, seed=7)
    assert len(set(sample.ids)) == 30
    positions = [corpus.ids.index(i) for i in sample.ids]
    assert positions == sorted(positions)
    for k, sentence_id in enumerate(sample.ids):
        number = int(sentence_id[1:])
        for lang in sample.languages:
            assert number_in(sample.texts[lang][k]) == number


def test_sample_of_everything_is_the_corpus_rows() -> None:
    corpus = make_corpus(8)
    assert corpus.sample(8, seed=1).ids == corpus.ids


def test_sample_too_large_says_how_many_are_available() -> None:
    corpus = make_corpus(12)
    with pytest.raises(CorpusError, match="cannot sample 13 sentences.*only 12 are available"):
        corpus.sample(13, seed=0)
    with pytest.raises(CorpusError, match="at least 1"):
        corpus.sample(0, seed=0)
    with pytest.raises(CorpusError, match="must be an integer"):
        corpus.sample(2.5, seed=0)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**32 - 1))
def test_sample_property_alignment_and_uniqueness(n: int, seed: int) -> None:
    corpus = make_corpus(40)
    sample = corpus.sample(n, seed)
    assert len(sample) == n == len(set(sample.ids))
    for lang in sample.languages:
        assert [number_in(t) for t in sample.texts[lang]] == [int(i[1:]) for i in sample.ids]


def test_take_rejects_out_of_range() -> None:
    with pytest.raises(CorpusError, match="position 5 is outside the corpus"):
        make_corpus(5).take([5])


# ----------------------------------------------------------------- fingerprint
def test_fingerprint_is_sha256_and_ignores_name_and_other_languages() -> None:
    corpus = make_corpus(6)
    fp = corpus.fingerprint("eng_latn")
    assert len(fp) == 64 and set(fp) <= set("0123456789abcdef")
    renamed = ParallelCorpus("other name", corpus.ids, {"eng_Latn": corpus.texts["eng_Latn"]})
    assert renamed.fingerprint("eng_Latn") == fp
    assert corpus.fingerprint("rus_Cyrl") != fp


def test_fingerprint_changes_with_any_text_or_id() -> None:
    corpus = make_corpus(6)
    fp = corpus.fingerprint("eng_Latn")
    texts = list(corpus.texts["eng_Latn"])
    texts[3] = texts[3] + " "
    changed_text = ParallelCorpus("toy", corpus.ids, {"eng_Latn": texts})
    ids = list(corpus.ids)
    ids[5] = "s999"
    changed_id = ParallelCorpus("toy", tuple(ids), {"eng_Latn": corpus.texts["eng_Latn"]})
    reordered = corpus.take([1, 0, 2, 3, 4, 5])
    assert (
        len(
            {
                fp,
                changed_text.fingerprint("eng_Latn"),
                changed_id.fingerprint("eng_Latn"),
                reordered.fingerprint("eng_Latn"),
            }
        )
        == 4
    )


def test_fingerprint_has_no_concatenation_ambiguity() -> None:
    a = ParallelCorpus("x", ("a", "b"), {"eng_Latn": ["bc", "d"]})
    b = ParallelCorpus("x", ("a", "b"), {"eng_Latn": ["b", "cd"]})
    c = ParallelCorpus("x", ("ab", "c"), {"eng_Latn": ["bc", "d"]})
    assert len({a.fingerprint("eng_Latn"), b.fingerprint("eng_Latn"), c.fingerprint("eng_Latn")}) == 3


def test_fingerprint_is_the_same_in_another_process() -> None:
    """Different PYTHONHASHSEED, same fingerprint: no Python hash() inside."""
    script = (
        "from interlingua.data.corpora import ParallelCorpus\n"
        "n = 20\n"
        "corpus = ParallelCorpus('toy', tuple(f's{i:03d}' for i in range(n)), {\n"
        "    'eng_latn': [f'Sentence number {i} is about {i} apples.' for i in range(n)],\n"
        "    'rus_Cyrl': [f'Предложение номер {i} про {i} яблок.' for i in range(n)]})\n"
        "print(corpus.fingerprint('rus_Cyrl'))\n"
    )
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(SRC)}
        result = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        outputs.add(result.stdout.strip())
    assert outputs == {make_corpus(20).fingerprint("rus_Cyrl")}


def test_equality_and_hash_follow_content() -> None:
    assert make_corpus(4) == make_corpus(4)
    assert hash(make_corpus(4)) == hash(make_corpus(4))
    assert make_corpus(4) != make_corpus(5)
