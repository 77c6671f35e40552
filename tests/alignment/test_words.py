"""Word segmentation: spans slice the text exactly; punctuation; Chinese via jieba."""

from __future__ import annotations

import pytest

from interlingua.alignment import AlignmentError, segment, segmenter_for
from interlingua.alignment.words import check_segmentable
from interlingua.core.errors import InterlinguaError


def _check_spans(text, words):
    for w in words:
        assert text[w.start : w.end] == w.text
    starts = [w.start for w in words]
    assert starts == sorted(starts)
    assert all(a.end <= b.start for a, b in zip(words, words[1:]))


def test_spaced_words_and_punctuation_dropped():
    text = 'Abraham said to him, "Beware that you don`t bring my son there again.'
    words = segment(text, "eng_Latn")
    _check_spans(text, words)
    assert [w.text for w in words] == [
        "Abraham",
        "said",
        "to",
        "him",
        "Beware",
        "that",
        "you",
        "don`t",
        "bring",
        "my",
        "son",
        "there",
        "again",
    ]


def test_every_word_character_is_covered():
    text = "und Hazar-Schual, l'horloge — 42 Äpfel; (Kuß)!  Füße."
    words = segment(text)
    _check_spans(text, words)
    assert [w.text for w in words] == ["und", "Hazar-Schual", "l'horloge", "42", "Äpfel", "Kuß", "Füße"]
    covered = {k for w in words for k in range(w.start, w.end)}
    for k, ch in enumerate(text):
        if ch.isalnum():
            assert k in covered


def test_trailing_joiner_is_not_part_of_a_word():
    words = segment("end- 'quoted' x-")
    assert [w.text for w in words] == ["end", "quoted", "x"]


def test_punctuation_kept_as_single_character_words():
    text = "Hi, you!"
    words = segment(text, punctuation=True)
    _check_spans(text, words)
    assert [w.text for w in words] == ["Hi", ",", "you", "!"]


def test_combining_marks_stay_in_the_word():
    text = "नमस्ते दुनिया"  # Devanagari with vowel signs and virama (category M)
    words = segment(text, "hin_Deva")
    assert [w.text for w in words] == ["नमस्ते", "दुनिया"]


@pytest.mark.slow
def test_chinese_with_jieba():
    pytest.importorskip("jieba")
    text = "我们的老师在市场附近卖面包。Hello world"
    words = segment(text, "cmn_Hans")
    _check_spans(text, words)
    assert "".join(w.text for w in words) == "我们的老师在市场附近卖面包Helloworld"
    assert len(words) >= 8  # segmented into words, not one run
    assert "老师" in [w.text for w in words]
    assert segmenter_for("zho_Hant") == "jieba"


def test_unsupported_script_raises_clear_error():
    with pytest.raises(AlignmentError, match="Khmer"):
        segment("សួស្តី", "khm_Khmr")
    assert issubclass(AlignmentError, InterlinguaError) and issubclass(AlignmentError, ValueError)


def test_missing_segmenter_names_the_package(monkeypatch):
    import builtins

    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("janome"):
            raise ImportError("no janome")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    from interlingua.alignment import words as words_mod

    words_mod._janome.cache_clear()
    with pytest.raises(AlignmentError, match="pip install janome"):
        segment("私は学生です", "jpn_Jpan")
    words_mod._janome.cache_clear()


def test_non_string_rejected():
    with pytest.raises(AlignmentError):
        segment(None)  # type: ignore[arg-type]


def test_japanese_with_janome():
    pytest.importorskip("janome")
    text = "私は学生です。東京に住んでいます。"
    words = segment(text, "jpn_Jpan")
    _check_spans(text, words)
    assert [w.text for w in words][:4] == ["私", "は", "学生", "です"]
    assert "東京" in [w.text for w in words]


@pytest.mark.slow
def test_thai_with_pythainlp():
    pytest.importorskip("pythainlp")
    text = "ฉันรักภาษาไทย มาก"
    words = segment(text, "tha_Thai")
    _check_spans(text, words)
    assert len(words) >= 3 and "".join(w.text for w in words) == text.replace(" ", "")


JAVANESE = "".join(chr(c) for c in (0xA98F, 0xA9A4, 0xA9B8, 0xA9A0, 0xA9C0, 0xA9B1, 0xA9AB))  # Aksara Jawa
BALINESE = "".join(chr(c) for c in (0x1B13, 0x1B35, 0x1B2B, 0x1B44, 0x1B32))


@pytest.mark.parametrize(
    "code, script",
    [
        ("jav_Java", "Javanese"),
        ("ban_Bali", "Balinese"),
        ("mya_Mymr", "Myanmar"),
        ("lao_Laoo", "Lao"),
        ("bod_Tibt", "Tibetan"),
        ("nod_Lana", "Tai Tham"),
    ],
)
def test_unspaced_scripts_without_a_segmenter_are_refused_by_code(code, script):
    """Before: jav_Java text became one word per sentence ("20 of 20 links"), exit 0."""
    with pytest.raises(AlignmentError, match=f"no word segmenter for {script} .*leave this language out"):
        segmenter_for(code)
    with pytest.raises(AlignmentError, match=script):
        check_segmentable(code, ["x"])


@pytest.mark.parametrize(
    "text, script, hint",
    [
        (f"{JAVANESE}{JAVANESE} {JAVANESE}", "Javanese", "no segmenter for it"),
        (BALINESE * 3, "Balinese", "no segmenter for it"),
        ("สวัสดีครับ ผมชื่อ", "Thai", "pass the language as a \\*_Thai code"),
        ("我们的老师在市场附近卖面包", "Han", "\\*_Hans or \\*_Hant"),
    ],
)
def test_text_in_an_unspaced_script_under_a_spaced_code_is_refused(text, script, hint):
    with pytest.raises(AlignmentError, match=f"jav_Latn: 100% of the word characters are {script} script.*{hint}"):
        check_segmentable("jav_Latn", [text, text])


def test_a_few_foreign_characters_in_spaced_text_are_fine():
    assert check_segmentable("eng_Latn", ["The city 北京 is large.", "Hello world, again and again."]) == "spaced"
    assert check_segmentable("cmn_Hans", ["我们的老师在市场附近卖面包。Hello"]) == "jieba"
    assert check_segmentable("eng_Latn", []) == "spaced"
