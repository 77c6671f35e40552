"""Similarity measures on paired representations X (n x p), Y (n x q)."""

from __future__ import annotations

from interlingua.measures.base import Measure, MeasureMetadata, MeasureResult, get_measure, list_measures
from interlingua.measures.cka import center_gram, cka_from_grams, cka_grid, gram_linear, linear_cka, rbf_cka
from interlingua.measures.validation import MeasureWarning

__all__ = [
    "Measure",
    "MeasureMetadata",
    "MeasureResult",
    "MeasureWarning",
    "get_measure",
    "list_measures",
    "gram_linear",
    "center_gram",
    "cka_from_grams",
    "linear_cka",
    "rbf_cka",
    "cka_grid",
]
