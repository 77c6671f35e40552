"""The stats errors and warnings, and the input checks that raise them.

:class:`StatsError` is an :class:`~interlingua.core.errors.InterlinguaError` (so the
CLI prints it as one line) and a :class:`ValueError` (so generic callers can
catch it). :class:`StatsWarning` flags results that are valid but cannot say
what the caller may hope, e.g. a test that can never reach its level.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interlingua.core.errors import InterlinguaError

__all__ = ["StatsError", "StatsWarning", "as_vector", "check_level", "nan_positions"]


class StatsError(InterlinguaError, ValueError):
    """Inputs to a statistic are unusable (shape, NaN, too few values, bad option)."""


class StatsWarning(UserWarning):
    """A result is computed but limited, e.g. no p-value can reach the significance level."""


def _preview(positions: np.ndarray, limit: int = 10) -> str:
    shown = ", ".join(str(int(i)) for i in positions[:limit])
    return f"[{shown}{', ...' if positions.size > limit else ''}]"


def nan_positions(values: np.ndarray) -> str:
    """The positions of non-finite entries of a 1-D array, e.g. ``"[3, 7]"`` (first ten shown)."""
    return _preview(np.flatnonzero(~np.isfinite(values)))


def as_vector(values: Any, name: str, *, allow_nan: bool = False) -> np.ndarray:
    """``values`` as a 1-D float64 array; StatsError if it is not numeric, not 1-D, or holds NaN/inf.

    With ``allow_nan`` NaN passes (the caller drops or reports it); inf never does.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatsError(f"{name} must be numeric; got values that do not convert to float ({exc}).") from exc
    if arr.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional; got shape {arr.shape}. Pass one value per observation.")
    infinite = np.isinf(arr)
    if infinite.any():
        raise StatsError(
            f"{name} has infinite values at positions {_preview(np.flatnonzero(infinite))}; "
            "fix or remove those observations."
        )
    if not allow_nan and np.isnan(arr).any():
        raise StatsError(
            f"{name} has NaN at positions {nan_positions(arr)}; remove those observations "
            "(or pass nan_policy='omit' where the function offers it)."
        )
    return arr


def check_level(level: float, name: str = "level") -> float:
    """``level`` as a float strictly between 0 and 1, else StatsError."""
    try:
        value = float(level)
    except (TypeError, ValueError) as exc:
        raise StatsError(f"{name} must be a number between 0 and 1, e.g. 0.95; got {level!r}.") from exc
    if not 0.0 < value < 1.0:
        raise StatsError(f"{name} must be strictly between 0 and 1, e.g. 0.95; got {level!r}.")
    return value
