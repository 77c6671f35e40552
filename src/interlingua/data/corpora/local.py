"""Parallel text from local files: TSV, CSV, JSONL or a folder of ``<lang>.txt``.

Table formats have one row per sentence and one column per language; the
header row names the languages (``eng_Latn`` or ``eng_latn``), an optional
``id`` column gives stable ids, otherwise ids are row numbers ``"0".."n-1"``.

* ``.csv`` and ``.tsv``: read like ``pandas.read_csv`` (comma or tab): a
  field that starts with ``"`` is quoted and may contain separators, quotes
  written as ``""`` and newlines, which is what pandas, Excel and the
  ``csv`` module write. Quotes inside an unquoted field are kept as they
  are; malformed quoting is an error, never silently repaired.
* ``.jsonl``: one JSON object per line, keys = ``id`` and language codes.
* a folder: one plain-text file per language named ``<lang>.txt``, line
  ``k`` of every file is sentence ``k``; an optional ``ids.txt`` gives ids.

Anything misaligned (a missing cell, files of different lengths, duplicate
ids) raises :class:`CorpusError` naming the file, the language and the line.
Leading and trailing whitespace of every sentence is stripped.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.core.languages import normalize_language
from interlingua.data.corpora.corpus import ParallelCorpus

__all__ = ["load_local", "LOCAL_FORMATS"]

#: Format name -> file suffixes that select it automatically.
LOCAL_FORMATS: dict[str, tuple[str, ...]] = {
    "tsv": (".tsv", ".tab"),
    "csv": (".csv",),
    "jsonl": (".jsonl", ".ndjson"),
    "folder": (),
}
_ID_COLUMN = "id"
_IDS_FILE = "ids.txt"


def _detect_format(path: Path, format: str | None) -> str:
    """The format to read ``path`` with: ``format`` if given, else from the suffix."""
    if format is not None:
        fmt = str(format).lower().lstrip(".")
        if fmt == "txt":
            fmt = "folder"
        if fmt not in LOCAL_FORMATS:
            raise CorpusError(f"unknown local corpus format {format!r}; use one of: {', '.join(LOCAL_FORMATS)}")
        return fmt
    if path.is_dir():
        return "folder"
    suffix = path.suffix.lower()
    for fmt, suffixes in LOCAL_FORMATS.items():
        if suffix in suffixes:
            return fmt
    if suffix == ".txt":
        raise CorpusError(
            f"{path} is a single text file; a parallel corpus needs one file per language: "
            "put them in a folder as <lang>.txt (e.g. eng_Latn.txt, deu_Latn.txt) and pass "
            "the folder, or use a TSV/CSV/JSONL table with one column per language"
        )
    raise CorpusError(
        f"cannot tell the format of {path} from its suffix {suffix!r}; name it .tsv, .csv "
        "or .jsonl, pass a folder of <lang>.txt files, or set format= to one of "
        f"{', '.join(LOCAL_FORMATS)}"
    )


def _read_lines(path: Path) -> list[str]:
    """Lines of a UTF-8 text file, split on ``\\n`` only (not on U+2028 etc.)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path} is not valid UTF-8 ({exc}); re-save it as UTF-8") from exc
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from exc
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return lines


def _header_languages(path: Path, header: Sequence[str]) -> tuple[int | None, list[str]]:
    """Position of the id column (or None) and the canonical language of every column."""
    id_position: int | None = None
    codes: list[str] = []
    seen: dict[str, str] = {}
    for position, raw in enumerate(header):
        name = str(raw).strip()
        if name.lower() == _ID_COLUMN:
            if id_position is not None:
                raise CorpusError(f"{path}: the header has two 'id' columns; keep one")
            id_position = position
            codes.append("")
            continue
        try:
            code = normalize_language(name)
        except LanguageError as exc:
            raise LanguageError(
                f"{path}: header column {position + 1} is {name!r}, which is neither 'id' "
                f"nor a language code ({exc}); name every column 'id' or a code such as "
                "'eng_Latn', and remove other columns"
            ) from exc
        if code in seen:
            raise CorpusError(
                f"{path}: columns {seen[code]!r} and {name!r} are both {code}; keep one column per language"
            )
        seen[code] = name
        codes.append(code)
    if not seen:
        raise CorpusError(
            f"{path}: the header names no language column; the first row must name "
            "the languages, e.g. 'id<TAB>eng_Latn<TAB>deu_Latn'"
        )
    return id_position, codes


def _build(
    path: Path,
    rows: Iterator[tuple[int, Sequence[object]]],
    header: Sequence[str],
    header_line: int,
) -> tuple[list[str], dict[str, list[str]]]:
    """Turn ``(line number, cells)`` rows into ids and per-language columns."""
    id_position, codes = _header_languages(path, header)
    languages = [code for code in codes if code]
    columns: dict[str, list[str]] = {code: [] for code in languages}
    ids: list[str] = []
    id_lines: dict[str, int] = {}
    for line, cells in rows:
        if len(cells) != len(codes):
            raise CorpusError(
                f"{path}, line {line}: {len(cells)} fields but the header (line "
                f"{header_line}) has {len(codes)}; every row needs one cell per column "
                "(missing or extra separator?)"
            )
        row_number = len(ids)
        if id_position is None:
            sentence_id = str(row_number)
        else:
            raw_id = cells[id_position]
            sentence_id = "" if raw_id is None else str(raw_id).strip()
            if not sentence_id:
                raise CorpusError(f"{path}, line {line}: the 'id' cell is empty; give every row an id")
        if sentence_id in id_lines:
            raise CorpusError(
                f"{path}, line {line}: duplicate id {sentence_id!r} (first seen on line "
                f"{id_lines[sentence_id]}); ids must be unique"
            )
        id_lines[sentence_id] = line
        for position, code in enumerate(codes):
            if not code:
                continue
            cell = cells[position]
            if cell is None or not isinstance(cell, str) or not cell.strip():
                if cell is None:
                    what = "missing"
                elif not isinstance(cell, str):
                    what = f"not a string ({type(cell).__name__})"
                else:
                    what = "empty"
                raise CorpusError(
                    f"{path}, line {line}: the {code} cell of id {sentence_id!r} is {what}; "
                    "every row needs a sentence in every language (drop the row or fill it in)"
                )
            columns[code].append(cell.strip())
        ids.append(sentence_id)
    if not ids:
        raise CorpusError(f"{path} has a header but no sentences")
    return ids, columns


def _read_delimited(path: Path, delimiter: str) -> tuple[list[str], dict[str, list[str]]]:
    """CSV (``delimiter=","``) or TSV (``"\t"``) with standard quoting, strict."""
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc}") from exc
    separator = "tab" if delimiter == "\t" else repr(delimiter)
    with handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)

        def records() -> Iterator[tuple[int, list[str]]]:
            start = 1
            try:
                for record in reader:
                    if record and any(cell.strip() for cell in record):
                        yield start, record
                    start = reader.line_num + 1
            except csv.Error as exc:
                raise CorpusError(
                    f"{path}, line {reader.line_num}: malformed quoting ({exc}); a field that "
                    f'starts with a quote must be quoted as a whole ("...") and end just '
                    f'before the {separator}, with inner quotes doubled (""), as pandas '
                    "and the csv module write it; or store the corpus as JSONL"
                ) from exc
            except UnicodeDecodeError as exc:
                raise CorpusError(f"{path} is not valid UTF-8 ({exc}); re-save it as UTF-8") from exc

        iterator = records()
        first = next(iterator, None)
        if first is None:
            raise CorpusError(f"{path} is empty; the first line must name the languages")
        header_line, header = first
        return _build(path, iterator, header, header_line)


def _read_tsv(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    return _read_delimited(path, "\t")


def _read_csv(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    return _read_delimited(path, ",")


def _read_jsonl(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    records: list[tuple[int, dict[str, object]]] = []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}, line {number}: not valid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise CorpusError(
                f"{path}, line {number}: expected a JSON object like "
                '{"id": "1", "eng_Latn": "...", "deu_Latn": "..."}, got '
                f"{type(record).__name__}"
            )
        records.append((number, record))
    if not records:
        raise CorpusError(f"{path} has no JSON records")
    first_line, first = records[0]
    header = [str(key) for key in first]
    keys = set(first)

    def rows() -> Iterator[tuple[int, list[object]]]:
        for number, record in records:
            extra = sorted(set(record) - keys)
            if extra:
                raise CorpusError(
                    f"{path}, line {number}: key(s) {', '.join(map(repr, extra))} do not "
                    f"appear on line {first_line}; every record needs the same keys"
                )
            yield number, [record.get(key) for key in first]

    return _build(path, rows(), header, first_line)


def _read_folder(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() == ".txt")
    language_files: dict[str, Path] = {}
    for file in files:
        if file.name.lower() == _IDS_FILE:
            continue
        try:
            code = normalize_language(file.stem)
        except LanguageError as exc:
            raise LanguageError(
                f"{file}: the file name does not name a language ({exc}); name each file "
                f"<lang>.txt (e.g. eng_Latn.txt), keep ids in {_IDS_FILE}, and move other "
                "text files out of the folder"
            ) from exc
        if code in language_files:
            raise CorpusError(f"{language_files[code]} and {file} are both {code}; keep one file per language")
        language_files[code] = file
    if not language_files:
        raise CorpusError(
            f"{path} contains no <lang>.txt files; put one line-aligned text file per "
            "language there, e.g. eng_Latn.txt and deu_Latn.txt"
        )
    contents = {code: _read_lines(file) for code, file in language_files.items()}
    reference_code = max(contents, key=lambda code: len(contents[code]))
    reference = len(contents[reference_code])
    for code, lines in contents.items():
        if len(lines) != reference:
            raise CorpusError(
                f"{language_files[code]} ({code}) has {len(lines)} lines but "
                f"{language_files[reference_code].name} has {reference}; the files must be "
                f"line-aligned (first missing line: {len(lines) + 1})"
            )
    ids_file = next((f for f in files if f.name.lower() == _IDS_FILE), None)
    if ids_file is not None:
        raw_ids = [line.strip() for line in _read_lines(ids_file)]
        if len(raw_ids) != reference:
            raise CorpusError(
                f"{ids_file} has {len(raw_ids)} lines but the language files have {reference}; give one id per line"
            )
    else:
        raw_ids = [str(k) for k in range(reference)]
    ids: list[str] = []
    seen: dict[str, int] = {}
    for number, sentence_id in enumerate(raw_ids, start=1):
        if not sentence_id:
            raise CorpusError(f"{ids_file}, line {number}: empty id; give every line an id")
        if sentence_id in seen:
            raise CorpusError(
                f"{ids_file}, line {number}: duplicate id {sentence_id!r} (first on line "
                f"{seen[sentence_id]}); ids must be unique"
            )
        seen[sentence_id] = number
        ids.append(sentence_id)
    columns: dict[str, list[str]] = {}
    for code, lines in contents.items():
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                raise CorpusError(
                    f"{language_files[code]}, line {number}: the {code} sentence is empty; "
                    "every line needs a sentence (remove the line in every file, or fill it in)"
                )
        columns[code] = [line.strip() for line in lines]
    return ids, columns


_READERS = {"tsv": _read_tsv, "csv": _read_csv, "jsonl": _read_jsonl, "folder": _read_folder}


def load_local(
    path: str | Path,
    languages: Sequence[str] | None = None,
    format: str | None = None,
) -> ParallelCorpus:
    """Read a parallel corpus from a TSV/CSV/JSONL table or a folder of ``<lang>.txt``.

    Args:
        path: the file or folder.
        languages: languages to keep, in this order; ``None`` or empty keeps all.
        format: ``"tsv"``, ``"csv"``, ``"jsonl"`` or ``"folder"``; by default
            chosen from the suffix (a directory is a folder).

    Raises:
        CorpusError: the path is missing or the text is misaligned.
        LanguageError: a header is not a language code, or a requested
            language is not in the file (the message lists the ones that are).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise CorpusError(
            f"local corpus {path} does not exist; give the path of a .tsv/.csv/.jsonl file "
            "or of a folder of <lang>.txt files"
        )
    fmt = _detect_format(path, format)
    if fmt == "folder" and not path.is_dir():
        raise CorpusError(f"format 'folder' needs a directory, but {path} is a file")
    if fmt != "folder" and path.is_dir():
        raise CorpusError(f"format {fmt!r} needs a file, but {path} is a directory")
    ids, columns = _READERS[fmt](path)
    corpus = ParallelCorpus(f"local:{path.name}", tuple(ids), {lang: tuple(col) for lang, col in columns.items()})
    if isinstance(languages, str):
        languages = [languages]
    if languages:
        wanted = []
        for language in languages:
            code = normalize_language(language)
            if code not in columns:
                raise LanguageError(
                    f"{path} has no {code} column (asked for {language!r}); available: {', '.join(columns)}"
                )
            wanted.append(code)
        corpus = corpus.select(wanted)
    return corpus
