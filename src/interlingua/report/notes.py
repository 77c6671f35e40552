"""Notes of a run's tables, merged: each kind of note once, with the rows it applies to.

Messages that differ only in their numbers are one kind (each number shown as the range it took,
:func:`merge_messages`); :func:`note_warnings` reads the ``note`` column of every table (notes joined with
:data:`interlingua.core.schema.NOTE_SEP`) and lists each kind once per table, with its rows, for ``run.json``'s
``warnings`` and the report's warnings section; the terminal's summary of raised warnings
(:mod:`interlingua.commands.warnings_summary`) merges messages by the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["merge_messages", "message_kind", "note_warnings"]

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
