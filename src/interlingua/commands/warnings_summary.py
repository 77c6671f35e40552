"""Warnings of one run, summarised: each distinct message once, with how often it was raised and which rows it concerns.

A run warns per pair, layer and measure (SVCCA reducing its components says the same thing hundreds of times,
with different numbers). Three records, one merging rule:

- the terminal gets one line per kind of message at the end of the command (also when it fails or is
  interrupted): messages that differ only in their numbers are one line, each number shown as the range it
  took (``X keeps 22–25 ...``), with the count (:func:`summary_lines`);
- the rows a warning concerns carry it in their ``note`` column (notes joined with
  :data:`interlingua.core.schema.NOTE_SEP`);
- ``run.json``'s ``warnings`` and the report's warnings section list each kind of note once per table, with
  the rows it applies to (:func:`note_warnings`), read from the tables, so a run whose results all came from
  the cache reports the same as the run that computed them.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "dependency_log",
    "is_dependency_warning",
    "summarised_warnings",
    "summary_lines",
    "merge_messages",
    "note_warnings",
    "message_kind",
]

# a number standing alone (not part of a name such as eng_Latn, svcca_var0.99 or resid_out50)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*[A-Za-z_])")
_FOLD = re.compile(r"^fold \d+: ")
#: tables whose rows are copies of another table's rows (their notes are that table's)
_COPIES = frozenset({"predictor_pairs"})


_LIST = re.compile(r"\[[^\[\]]*,[^\[\]]*\]")


def message_kind(message: str) -> str:
    """The message with every stand-alone number replaced by ``#``: messages of one kind differ only there.

    A bracketed list (``first: [2, 9, 12]``) becomes ``[...]``: a range per position of two lists of ids
    would describe neither.
    """
    return _NUMBER.sub("#", _LIST.sub("[...]", " ".join(str(message).split())))


def _span(values: list[str]) -> str:
    nums = sorted({float(v) for v in values})
    lo, hi = nums[0], nums[-1]

    def f(x: float) -> str:
        return str(int(x)) if x == int(x) and "." not in "".join(values) else f"{x:g}"

    return f(lo) if lo == hi else f"{f(lo)}–{f(hi)}"


def merge_messages(messages: Iterable[str]) -> dict[str, tuple[str, int]]:
    """Kind -> (one message for every message of that kind, how many), in order of first appearance.

    Each number of the merged message is the range that number took over the kind's messages
    (``"X keeps 22–25 dimensions"``); one distinct message is returned as it is.
    """
    groups: dict[str, list[str]] = {}
    for m in messages:
        text = " ".join(str(m).split())
        groups.setdefault(message_kind(text), []).append(text)
    out: dict[str, tuple[str, int]] = {}
    for kind, texts in groups.items():
        distinct = list(dict.fromkeys(texts))
        if len(distinct) == 1:
            out[kind] = (distinct[0], len(texts))
            continue
        numbers = [_NUMBER.findall(_LIST.sub("[...]", t)) for t in distinct]
        pieces = kind.split("#")
        merged = pieces[0] + "".join(_span([n[i] for n in numbers]) + pieces[i + 1] for i in range(len(pieces) - 1))
        out[kind] = (merged, len(texts))
    return out


def summary_lines(caught: list[warnings.WarningMessage]) -> list[str]:
    """One line per kind of (category, message), in order of first appearance, with its count."""
    by_category: dict[str, list[str]] = {}
    for w in caught:
        by_category.setdefault(w.category.__name__, []).append(str(w.message))
    merged = {cat: merge_messages(msgs) for cat, msgs in by_category.items()}
    lines: list[str] = []
    for key in dict.fromkeys((w.category.__name__, message_kind(str(w.message))) for w in caught):
        cat, kind = key
        msg, n = merged[cat][kind]
        lines.append(f"interlingua: warning ({n}x): {msg} [{cat}]" if n > 1 else f"interlingua: warning: {msg} [{cat}]")
    return lines


def _values(frame: Any, column: str, rows: list[int]) -> list[str]:
    if column not in frame:
        return []
    return sorted({str(v) for v in frame[column].iloc[rows] if str(v) not in ("", "nan")})


def note_warnings(tables: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each kind of note of each table once, with the rows it applies to (``run.json``'s ``warnings``).

    ``tables``: file stem -> DataFrame (``results``, ``maps``, ...); tables without a ``note`` column, and
    ``predictor_pairs`` (copies of result rows), are skipped. A note is a measure's or a map's warning (SVCCA
    reducing its components, a rank-deficient Procrustes fit), why a value is NaN, or what was adjusted; notes
    of one kind (equal but for their numbers) are one entry, its numbers shown as ranges. Per entry: ``table``
    (the file), ``message``, ``rows`` (rows carrying it), ``of`` (rows of the table), ``notes`` (distinct
    messages merged), and where it applies: ``pairs``, ``poolings`` and ``measures`` (or a map table's
    ``estimators``), those the table has.
    """
    from interlingua.core.schema import split_notes

    out: list[dict[str, Any]] = []
    for name, frame in tables.items():
        if name in _COPIES or frame is None or "note" not in frame or not len(frame):
            continue
        rows_of: dict[str, list[int]] = {}
        texts: dict[str, list[str]] = {}
        for i, note in enumerate(frame["note"].astype(str)):
            for part in dict.fromkeys(_FOLD.sub("", p) for p in split_notes(note)):
                kind = message_kind(part)
                if not rows_of.get(kind) or rows_of[kind][-1] != i:
                    rows_of.setdefault(kind, []).append(i)
                texts.setdefault(kind, []).append(part)
        for kind, rows in rows_of.items():
            ((message, _),) = merge_messages(texts[kind]).values()
            entry: dict[str, Any] = {
                "table": f"{name}.csv",
                "message": message,
                "rows": len(rows),
                "of": int(len(frame)),
                "notes": len(set(texts[kind])),
            }
            for column in ("pair", "pooling", "measure") if "measure" in frame else ("pair", "pooling", "estimator"):
                if values := _values(frame, column, rows):
                    entry[f"{column}s"] = values
            out.append(entry)
    return out


_PACKAGE = __file__.rsplit("commands", 1)[0]  # the interlingua package folder, as warnings name files


def is_dependency_warning(w: warnings.WarningMessage) -> bool:
    """A deprecation or future warning raised outside interlingua (transformers, torch, ...): nothing a user of
    the command can act on, so it goes to the log file, not the terminal."""
    ours = str(w.filename).startswith(_PACKAGE)
    return not ours and issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))


def dependency_log() -> Path:
    """Where dependency warnings of the last command are written: ``<cache>/logs/warnings.log``."""
    import os

    root = os.environ.get("INTERLINGUA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "interlingua")
    return Path(root) / "logs" / "warnings.log"


def _log_dependencies(found: list[warnings.WarningMessage]) -> str | None:
    """Write the dependency warnings to :func:`dependency_log`; the one terminal line that says so."""
    path = dependency_log()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for w in found:
                f.write(f"{w.filename}:{w.lineno}: {w.category.__name__}: {w.message}\n")
    except OSError:
        return None  # not writable: they are summarised on the terminal with the others
    modules = sorted({Path(str(w.filename)).parts[-2] if len(Path(str(w.filename)).parts) > 1 else "?" for w in found})
    return (
        f"interlingua: {len(found)} deprecation warning(s) from dependencies ({', '.join(modules[:4])}"
        f"{', ...' if len(modules) > 4 else ''}) written to {path}"
    )


@contextlib.contextmanager
def summarised_warnings(stream: TextIO | None = None) -> Iterator[list[warnings.WarningMessage]]:
    """Record the warnings raised inside (every ``MeasureWarning``, others as their filters allow); print a summary."""
    from interlingua.analysis.measures import MeasureWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MeasureWarning)  # counted, not deduplicated by source line
        try:
            yield caught
        finally:
            dependencies = [w for w in caught if is_dependency_warning(w)]
            note = _log_dependencies(dependencies) if dependencies else None
            shown = [w for w in caught if note is None or not is_dependency_warning(w)]
            for line in summary_lines(shown) + ([note] if note else []):
                print(line, file=stream or sys.stderr)
