"""Confidence intervals for proportions (e.g. accuracy over n items).

The Wilson score interval keeps sensible coverage near 0 and 1, where the
normal (Wald) interval collapses to a point.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats as sps

from interlingua.analysis.stats.errors import StatsError, check_level

__all__ = ["wilson_interval"]


def wilson_interval(successes: Any, n: Any, level: float = 0.95) -> tuple[Any, Any]:
    """Wilson score interval ``(low, high)`` for ``successes`` out of ``n`` at ``level``.

    Vectorised: arrays broadcast and give arrays; scalars give floats. Equals
    ``statsmodels.stats.proportion.proportion_confint(..., method='wilson')``.
    StatsError when n <= 0 or successes is outside [0, n].
    """
    level = check_level(level)
    try:
        k = np.asarray(successes, dtype=np.float64)
        total = np.asarray(n, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StatsError(f"successes and n must be numeric ({exc}).") from exc
    if not (np.isfinite(k).all() and np.isfinite(total).all()):
        raise StatsError("successes and n must be finite numbers; remove NaN/inf entries first.")
    if (total <= 0).any():
        raise StatsError("n must be positive: a proportion of zero trials has no interval. Drop the empty cells.")
    if ((k < 0) | (k > total)).any():
        raise StatsError("successes must lie between 0 and n; check that successes and n are not swapped.")
    z = sps.norm.ppf(0.5 + level / 2)
    z2 = z * z
    centre = (k + z2 / 2) / (total + z2)
    half = z * np.sqrt(k * (total - k) / total + z2 / 4) / (total + z2)
    low, high = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high
