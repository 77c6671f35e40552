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
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from interlingua.report.notes import merge_messages, message_kind, note_warnings

__all__ = [
    "dependency_log",
    "is_dependency_warning",
    "summarised_warnings",
    "summary_lines",
    "merge_messages",
    "note_warnings",
    "message_kind",
]


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
