"""The report's glossary: every column its tables show, explained, from the declared columns.

The descriptions are the ``doc`` of each declared :class:`~interlingua.core.schema.Column`: each capability
declares its tables' columns and the columns its report section derives
(:attr:`~interlingua.contract.capability.Capability.columns`, ``report_columns``), so the glossary cannot drift
from the files a run writes; the report frame (:mod:`interlingua.pipeline.report`) gathers them from the
registry and passes them here. A name that files describe differently (``n``: aligned sentences in
``results.csv``, pairs in ``predictors.csv``) is given each file's description.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import pandas as pd

from interlingua.core.schema import Column
from interlingua.report.markdown import md_table

__all__ = ["describe", "glossary_section", "table_headers"]


def table_headers(md: Iterable[str]) -> list[str]:
    """The header names of every Markdown table in ``md`` (lines), in order of first appearance."""
    lines = "\n".join(md).splitlines()
    names: dict[str, None] = {}
    for head, rule in zip(lines, lines[1:]):
        if head.startswith("| ") and rule.startswith("|---"):
            for name in re.split(r"(?<!\\) \| ", head.strip()[2:-2]):
                names.setdefault(name.strip().replace("\\|", "|"), None)
    return list(names)


def describe(
    name: str,
    files: Iterable[str],
    declared: Mapping[str, tuple[Column, ...]],
    derived: Iterable[Column] = (),
    extra: Mapping[str, str] | None = None,
) -> str:
    """What column ``name`` holds: ``extra`` (this run's own names), else the report's own declaration
    (``derived``: columns a report section makes, first match), else each of ``files``' (file stems) declarations in
    ``declared`` (with the file's name when they differ); empty when nothing declares it."""
    if extra and name in extra:
        return extra[name]
    for c in derived:
        if c.name == name:
            return c.doc
    docs: dict[str, list[str]] = {}
    for stem in files:
        for c in declared.get(stem, ()):
            if c.name == name:
                docs.setdefault(c.doc, []).append(f"{stem}.csv")
    if len(docs) == 1:
        return next(iter(docs))
    return "; ".join(f"{', '.join(f'`{f}`' for f in where)}: {doc}" for doc, where in docs.items())


def glossary_section(
    md: Iterable[str],
    files: Iterable[str],
    declared: Mapping[str, tuple[Column, ...]],
    derived: Iterable[Column] = (),
    extra: Mapping[str, str] | None = None,
) -> list[str]:
    """``## Glossary``: every column the tables of ``md`` show, with what it holds (see :func:`describe`).

    ``files``: the stems of the run's tables (``results``, ``maps``, ...), whose declarations (``declared``) are
    read; ``derived``: the columns report sections derive; ``extra``: descriptions of this run's own column names
    (e.g. a language code heading the quality table).
    """
    files = list(files)
    derived = tuple(derived)
    rows = [
        {"column": f"`{name}`", "meaning": describe(name, files, declared, derived, extra) or "(not described)"}
        for name in table_headers(md)
    ]
    if not rows:
        return []
    return [
        "## Glossary: the columns shown",
        "",
        "Every column of the tables above, as the run's files declare it (`results.csv` and the others have "
        "the same columns under the same names).",
        "",
        md_table(pd.DataFrame(rows)),
        "",
    ]
