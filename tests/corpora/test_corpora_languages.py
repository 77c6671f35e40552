"""normalize_language: one canonical FLORES+ spelling for every accepted input."""

from __future__ import annotations

import pytest

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.data.corpora import normalize_language


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("eng_Latn", "eng_Latn"),
        ("eng_latn", "eng_Latn"),  # Goldfish spelling
        ("ENG_LATN", "eng_Latn"),
        ("eng-Latn", "eng_Latn"),
        ("  deu_Latn ", "deu_Latn"),
        ("rus_cyrl", "rus_Cyrl"),
        ("arb_arab", "arb_Arab"),
        ("hin_deva", "hin_Deva"),
        ("cmn_hans", "cmn_Hans"),
        ("eng", "eng_Latn"),  # bare code with an unambiguous default script
        ("jpn", "jpn_Jpan"),
    ],
)
def test_both_spellings_give_the_flores_code(code: str, expected: str) -> None:
    assert normalize_language(code) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("zho_hans", "cmn_Hans"),
        ("zho_Hans", "cmn_Hans"),
        ("zho_hant", "cmn_Hant"),
        ("swa", "swh_Latn"),
        ("swa_latn", "swh_Latn"),
        ("tgl", "fil_Latn"),
        ("tgl_Latn", "fil_Latn"),
        ("uzb", "uzn_Latn"),
        ("uzb_latn", "uzn_Latn"),
    ],
)
def test_known_remaps(code: str, expected: str) -> None:
    assert normalize_language(code) == expected


def test_normalisation_is_idempotent() -> None:
    for code in ["eng_latn", "zho_hans", "swa", "tgl", "uzb_Latn", "kor_hang"]:
        once = normalize_language(code)
        assert normalize_language(once) == once


@pytest.mark.parametrize(
    "garbage",
    ["", "english", "en", "eng_", "_Latn", "eng_Latin", "e1g_Latn", "eng_Lat1", "eng Latn", "eng_Latn_x"],
)
def test_garbage_is_rejected_with_guidance(garbage: str) -> None:
    with pytest.raises(LanguageError, match="cannot parse language code .*eng_Latn"):
        normalize_language(garbage)


def test_bare_code_without_known_script_asks_for_the_script() -> None:
    with pytest.raises(LanguageError, match="has no script.*'xyz_Latn'"):
        normalize_language("xyz")


def test_non_string_is_rejected() -> None:
    with pytest.raises(LanguageError, match="must be a string"):
        normalize_language(42)  # type: ignore[arg-type]


def test_language_error_is_a_corpus_error_and_prints_unquoted() -> None:
    with pytest.raises(CorpusError) as info:
        normalize_language("klingon")
    assert str(info.value).startswith("cannot parse")
