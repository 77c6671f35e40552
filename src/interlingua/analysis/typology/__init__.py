"""Typological distances between languages, offline: URIEL via the data ``lang2vec`` ships.

- :func:`uriel_distance` (lang_a, lang_b, kind="syntactic") -> float: cosine
  distance between URIEL vectors; kinds ``syntactic`` (``syntax_knn``),
  ``genetic`` (``fam``), ``geographic`` (``geo``), ``phonological``,
  ``inventory``, ``featural``;
- :func:`uriel_distances` (languages, kinds=KINDS) -> DataFrame, one row per
  unordered pair;
- :func:`uriel_code`: FLORES-style code -> the URIEL code used (see
  :data:`URIEL_REMAPS`); :func:`uriel_coverage`: how much of a language's
  vector is observed rather than imputed;
- :class:`TypologyError` (an InterlinguaError and ValueError).

Needs the optional extra ``typology`` (``lang2vec``); see :mod:`interlingua.analysis.typology.uriel`
for the choice of source and what the numbers are.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported on first use: ``interlingua --help`` builds the typology parser without numpy
    from interlingua.analysis.typology.uriel import (
        KIND_ALIASES,
        KINDS,
        URIEL_REMAPS,
        TypologyError,
        TypologyWarning,
        uriel_code,
        uriel_coverage,
        uriel_distance,
        uriel_distances,
        uriel_languages,
        uriel_source,
    )


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.uriel"), name)
    globals()[name] = value
    return value


__all__ = [
    "KINDS",
    "KIND_ALIASES",
    "URIEL_REMAPS",
    "TypologyError",
    "TypologyWarning",
    "uriel_code",
    "uriel_coverage",
    "uriel_distance",
    "uriel_distances",
    "uriel_languages",
    "uriel_source",
]
