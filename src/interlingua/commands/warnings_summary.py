"""Warnings of one CLI command, summarised: each distinct message once, with how often it was raised.

A run warns per pair, layer and measure (SVCCA reducing its components can say the same thing hundreds
of times); the rows that a measure warning concerns carry it in their ``note`` column, and the terminal
gets one line per distinct message at the end of the command (also when it fails or is interrupted).
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import TextIO

__all__ = ["summarised_warnings", "summary_lines"]


def summary_lines(caught: list[warnings.WarningMessage]) -> list[str]:
    """One line per distinct (category, message), in order of first appearance, with its count."""
    counts: dict[tuple[str, str], int] = {}
    for w in caught:
        key = (w.category.__name__, " ".join(str(w.message).split()))
        counts[key] = counts.get(key, 0) + 1
    return [f"interlingua: warning ({n}x): {msg} [{cat}]" if n > 1 else f"interlingua: warning: {msg} [{cat}]"
            for (cat, msg), n in counts.items()]


@contextlib.contextmanager
def summarised_warnings(stream: TextIO | None = None) -> Iterator[list[warnings.WarningMessage]]:
    """Record the warnings raised inside (every ``MeasureWarning``, others as their filters allow); print a summary."""
    from interlingua.measures import MeasureWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MeasureWarning)  # counted, not deduplicated by source line
        try:
            yield caught
        finally:
            for line in summary_lines(caught):
                print(line, file=stream or sys.stderr)
