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
