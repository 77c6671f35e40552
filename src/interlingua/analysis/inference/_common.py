"""Shared plumbing of the inference routines: measure lookup, argument checks, which fast path a measure allows."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from interlingua.core.errors import MeasureInputError

__all__ = ["ResolvedMeasure", "resolve_measure", "check_seed", "check_count", "check_level", "as_pair"]

# Resampling (jackknife, bootstrap) gathers a block of a full-sample Gram and centres it again: valid
# only for a kernel without data-dependent parameters, i.e. the linear kernel. These ids and their
# estimator. (Permutation nulls need no such list: any measure declaring metadata.gram qualifies.)
_RESAMPLE_BY_GATHER = {"cka_linear_biased": False, "cka_linear_debiased": True}


@dataclass(frozen=True)
class ResolvedMeasure:
    """What the inference code needs to know about a measure."""

    fn: Callable[..., Any]
    id: str
    larger_is_more_similar: bool
    min_n: int
    unit_gram: Callable[[np.ndarray], np.ndarray] | None  # the measure's Gram form (metadata.gram), else None
    linear_cka_debiased: bool | None  # resampling by Gram gather: linear CKA's estimator; None: recompute
    prepared: Any = None  # the Measure itself when it declares metadata.prepared (prepare / from_prepared)


def resolve_measure(measure: Any, larger_is_more_similar: bool | None = None) -> ResolvedMeasure:
    """Accept a measure id, a :class:`~interlingua.analysis.measures.Measure`, or a plain callable ``(X, Y) -> float``.

    The direction of the test is read from ``measure.metadata.larger_is_more_similar``;
    a plain callable has no metadata, so it is taken as a similarity unless
    ``larger_is_more_similar=False`` says it is a distance.
    """
    if isinstance(measure, str):
        from interlingua.analysis.measures import get_measure

        measure = get_measure(measure)
    if not callable(measure):
        raise MeasureInputError(
            f"measure must be a measure id, a Measure or a callable (X, Y) -> float; got {type(measure).__name__}."
        )
    meta = getattr(measure, "metadata", None)
    mid = getattr(measure, "id", None) or getattr(measure, "__name__", None) or type(measure).__name__
    declared = getattr(meta, "larger_is_more_similar", None)
    if larger_is_more_similar is not None and declared is not None and bool(declared) != bool(larger_is_more_similar):
        raise MeasureInputError(
            f"{mid}: larger_is_more_similar={larger_is_more_similar} contradicts the measure's metadata "
            f"({declared}); drop the argument, the metadata already says which tail to test."
        )
    direction = (
        bool(declared)
        if declared is not None
        else (True if larger_is_more_similar is None else bool(larger_is_more_similar))
    )
    min_n = int(getattr(meta, "min_n", 2) or 2)
    unit_gram = measure.unit_gram if getattr(meta, "gram", False) else None
    debiased = _RESAMPLE_BY_GATHER.get(mid) if unit_gram is not None else None
    prepared = measure if getattr(meta, "prepared", False) else None
    return ResolvedMeasure(measure, str(mid), direction, max(min_n, 2), unit_gram, debiased, prepared)


def check_seed(seed: Any) -> int:
    """A non-negative integer seed for ``numpy.random.default_rng``."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise MeasureInputError(f"seed must be a non-negative integer; got {seed!r}.")
    return int(seed)


def check_count(value: Any, name: str, minimum: int = 1) -> int:
    """An integer count ``>= minimum`` (number of permutations, resamples, groups)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum:
        raise MeasureInputError(f"{name} must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def check_level(level: Any) -> float:
    """A confidence level strictly between 0 and 1."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        raise MeasureInputError(f"level must be a number in (0, 1), e.g. 0.95; got {level!r}.") from None
    if not (0.0 < lv < 1.0) or math.isnan(lv):
        raise MeasureInputError(f"level must be in (0, 1), e.g. 0.95; got {level!r}.")
    return lv


def as_pair(X: Any, Y: Any, min_n: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 copies of paired inputs (same rows, finite, at least ``min_n`` rows)."""
    from interlingua.analysis.measures.validation import check_pair

    return check_pair(X, Y, min_n=min_n, what=what)


def exceedances(null: np.ndarray, observed: float, larger_is_more_similar: bool) -> int:
    """How many null values are at least as extreme as ``observed``.

    Values within ``1e-12 * max(1, |observed|)`` of the observed value count as
    ties (and ties count as extreme), so rounding differences between two ways
    of computing the same number can only make the p-value larger.
    """
    tol = 1e-12 * max(1.0, abs(observed))
    if larger_is_more_similar:
        return int(np.count_nonzero(null >= observed - tol))
    return int(np.count_nonzero(null <= observed + tol))
