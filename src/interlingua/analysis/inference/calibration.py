"""Calibrated similarity: a score's excess over the critical value of its own permutation null.

A raw similarity's chance level depends on the width, the spectrum and n of
the pair (biased linear CKA of independent anisotropic Gaussians grows with
the width), and a score picked as the best cell of a layer grid is larger by
chance than any single cell. Calibration (Groeger, Wen & Brbic, "Revisiting
the Platonic Representation Hypothesis: An Aristotelian View", ICML 2026;
reference code: the ``calibrated-similarity`` package) puts every score on
the scale of its null:

- the critical value ``tau`` is the ``(1 - alpha)`` quantile of the
  permutation null *with the observed value included*, as a permutation
  test's order statistic: sort the K + 1 values (observed, K null draws)
  ascending and take the one at 1-based position ``ceil((1 - alpha)(K + 1))``
  (clamped to 1..K+1). ``s > tau`` is then the level-alpha permutation test's
  rejection, so under "rows are not paired" ``P(s > tau) <= alpha`` exactly;
- the calibrated score of a measure with a finite upper bound ``s_max``
  (``metadata.bounds``) is ``(s - tau) / (s_max - tau)`` clipped to [0, 1]
  (denominator floored at 1e-12); of an unbounded measure, the excess
  ``max(s - tau, 0)`` in the measure's units. Both are 0 whenever the test
  does not reject, and grow with the score above chance;
- a distance (``larger_is_more_similar=False``) is handled by mirroring:
  ``tau`` is the order statistic from the other end and the calibrated score
  is ``(tau - s) / (tau - s_min)`` (or ``max(tau - s, 0)``).

The quantile, the clipping, the excess and the add-one p-value
``(1 + #{null >= s}) / (K + 1)`` are those of ``calibrated-similarity`` 0.1.1
(``calibrate`` and ``calibrate_layers``); that package computes in float32,
this module in float64, and counts null values within ``1e-12 * max(1, |s|)``
of ``s`` as ties (:func:`~interlingua.analysis.inference._common.exceedances`).

Aggregation-aware calibration (:func:`calibrate_grid`): a score that is a
maximum or mean over a layer x layer grid, or the best match in the other
model for one layer, is compared with the same aggregate of the permuted
grids, where ONE permutation reorders the rows of every layer of side B at
once (the null of :func:`~interlingua.analysis.inference.grid_permutation_test`).

The analytic route (``null_method="moments"``, biased linear CKA only) has no
draws: ``tau`` is the ``(1 - alpha)`` quantile of the Pearson type III fit to
the exact permutation mean, variance and skewness (a continuous quantile, the
observed value not included; it approaches the order statistic as K grows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.analysis.inference._common import exceedances
from interlingua.core.errors import MeasureInputError

__all__ = [
    "DEFAULT_ALPHA",
    "Calibration",
    "GridCalibration",
    "check_alpha",
    "order_statistic_index",
    "critical_value",
    "calibrated_score",
    "calibrate",
    "calibrate_result",
    "calibrate_grid",
    "calibrate_grid_result",
    "measure_bounds",
]

DEFAULT_ALPHA = 0.05
_EPS = 1e-12  # floor of s_max - tau, as in calibrated-similarity


def check_alpha(alpha: Any) -> float:
    """A significance level strictly between 0 and 1."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise MeasureInputError(f"alpha must be a number in (0, 1), e.g. 0.05; got {alpha!r}.") from None
    if not 0.0 < a < 1.0:
        raise MeasureInputError(f"alpha must be in (0, 1), e.g. 0.05; got {alpha!r}.")
    return a


def order_statistic_index(n_permutations: int, alpha: float) -> int:
    """0-based index of ``tau`` among the K + 1 sorted values: ``ceil((1 - alpha)(K + 1)) - 1`` clamped to [0, K].

    The expression is evaluated in floating point exactly as ``calibrated-similarity`` does, so both pick the
    same order statistic for every (K, alpha).
    """
    k = int(n_permutations)
    return max(0, min(int(math.ceil((1.0 - alpha) * (k + 1))) - 1, k))


def measure_bounds(measure: Any) -> tuple[float, float]:
    """A measure's declared ``metadata.bounds`` (an id, a Measure, or a callable without metadata: unbounded)."""
    if isinstance(measure, str):
        from interlingua.analysis.measures import get_measure

        try:
            measure = get_measure(measure)
        except (KeyError, ValueError, MeasureInputError):  # a plain callable's name: no declared bounds
            measure = None
    meta = getattr(measure, "metadata", None)
    lo, hi = getattr(meta, "bounds", (-math.inf, math.inf))
    return float(lo), float(hi)


def _critical(observed: np.ndarray, null: np.ndarray, alpha: float, larger: bool) -> np.ndarray:
    """Vectorised ``tau``: ``observed`` of shape S, ``null`` of shape (K, *S); nan where any value is not finite."""
    k = null.shape[0]
    combined = np.concatenate([observed[None], null], axis=0)
    finite = np.all(np.isfinite(combined), axis=0)
    idx = order_statistic_index(k, alpha)
    ordered = np.sort(np.where(finite[None], combined, 0.0), axis=0)
    tau = ordered[idx] if larger else ordered[k - idx]
    return np.where(finite, tau, np.nan)


def critical_value(
    observed: float, null: Any, alpha: float = DEFAULT_ALPHA, larger_is_more_similar: bool = True
) -> float:
    """``tau``: the (1 - alpha) order statistic of the null with ``observed`` included (module docstring).

    For a distance (``larger_is_more_similar=False``) the alpha order statistic from below. nan when the
    observed value or any null value is not finite, or the null is empty.
    """
    alpha = check_alpha(alpha)
    nul = np.asarray(null, dtype=float).ravel()
    if nul.size == 0:
        return math.nan
    return float(_critical(np.asarray(float(observed)), nul, alpha, larger_is_more_similar))


def _score(observed: np.ndarray, tau: np.ndarray, bounds: tuple[float, float], larger: bool) -> np.ndarray:
    lo, hi = bounds
    with np.errstate(invalid="ignore"):
        if larger:
            if math.isfinite(hi):
                out = np.clip((observed - tau) / np.maximum(hi - tau, _EPS), 0.0, 1.0)
            else:
                out = np.maximum(observed - tau, 0.0)
        elif math.isfinite(lo):
            out = np.clip((tau - observed) / np.maximum(tau - lo, _EPS), 0.0, 1.0)
        else:
            out = np.maximum(tau - observed, 0.0)
    return np.where(np.isfinite(observed) & np.isfinite(tau), out, np.nan)


def calibrated_score(
    observed: float,
    tau: float,
    bounds: tuple[float, float] = (-math.inf, math.inf),
    larger_is_more_similar: bool = True,
) -> float:
    """``(s - tau) / (s_max - tau)`` clipped to [0, 1] with a finite ``s_max = bounds[1]``, else ``max(s - tau, 0)``.

    Mirrored for a distance (``(tau - s) / (tau - s_min)``, ``s_min = bounds[0]``). nan in, nan out.
    """
    return float(_score(np.asarray(float(observed)), np.asarray(float(tau)), bounds, larger_is_more_similar))


@dataclass(frozen=True)
class Calibration:
    """One calibrated score.

    ``observed``: the raw score; ``tau``: its critical value at level ``alpha``;
    ``calibrated``: the calibrated score (module docstring); ``p_value``: the
    add-one permutation p of ``observed`` against the same null;
    ``bounded``: the score was normalised by a finite bound (else it is the
    excess in the measure's units); ``method``: ``"permutation"`` (K draws,
    order statistic) or ``"moments"`` (the Pearson type III quantile).
    """

    observed: float
    tau: float
    calibrated: float
    p_value: float
    alpha: float
    n_permutations: int
    bounded: bool
    method: str = "permutation"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return dict(self.__dict__)


def calibrate(
    observed: float,
    null: Any,
    *,
    alpha: float = DEFAULT_ALPHA,
    bounds: tuple[float, float] = (-math.inf, math.inf),
    larger_is_more_similar: bool = True,
) -> Calibration:
    """Calibrate ``observed`` against its permutation ``null`` (K values, the observed pairing not among them)."""
    alpha = check_alpha(alpha)
    nul = np.asarray(null, dtype=float).ravel()
    if nul.size == 0:
        raise MeasureInputError("calibration needs a permutation null of at least one draw; got an empty null.")
    obs = float(observed)
    tau = critical_value(obs, nul, alpha, larger_is_more_similar)
    if math.isfinite(obs) and np.all(np.isfinite(nul)):
        p = (1 + exceedances(nul, obs, larger_is_more_similar)) / (1 + nul.size)
    else:
        p = math.nan
    hi_or_lo = bounds[1] if larger_is_more_similar else bounds[0]
    return Calibration(
        obs,
        tau,
        calibrated_score(obs, tau, bounds, larger_is_more_similar),
        float(p),
        alpha,
        int(nul.size),
        math.isfinite(hi_or_lo),
    )


def calibrate_result(
    result: Any, *, alpha: float = DEFAULT_ALPHA, bounds: tuple[float, float] | None = None
) -> Calibration:
    """Calibrate a :class:`~interlingua.analysis.inference.PermutationResult` (draws or moments).

    ``bounds``: default the declared bounds of ``result.measure_id``. A moments result needs the
    ``1 - alpha`` quantile among its ``null_quantiles`` (pass ``quantiles=(..., 1 - alpha)`` to
    :func:`~interlingua.analysis.inference.permutation_test`).
    """
    alpha = check_alpha(alpha)
    b = measure_bounds(result.measure_id) if bounds is None else (float(bounds[0]), float(bounds[1]))
    larger = bool(result.larger_is_more_similar)
    if result.method != "moments":
        return calibrate(result.observed, result.null, alpha=alpha, bounds=b, larger_is_more_similar=larger)
    q = 1.0 - alpha if larger else alpha
    match = [v for k, v in result.null_quantiles.items() if abs(float(k) - q) < 1e-12]
    if not match:
        raise MeasureInputError(
            f"this moments result has no {q:g} null quantile; call permutation_test(..., quantiles=(..., {q:g}))."
        )
    tau = float(match[0])
    hi_or_lo = b[1] if larger else b[0]
    return Calibration(
        float(result.observed),
        tau,
        calibrated_score(result.observed, tau, b, larger),
        float(result.p_value),
        alpha,
        0,
        math.isfinite(hi_or_lo),
        "moments",
    )


@dataclass(frozen=True, eq=False)
class GridCalibration:
    """Aggregation-aware calibration of a layer x layer grid (one permutation shared by every layer of B).

    ``cells``: per-cell ``tau`` and ``calibrated`` (La, Lb) arrays, each cell against its own null (no
    correction for the search); ``maximum``: the grid's maximum (the best layer pair, at ``argmax``) against
    the maxima of the permuted grids; ``mean``: the grid's mean against the permuted grids' means;
    ``best_b[i]``: layer i of A's best match in B (``max_j grid[i, j]``, at ``best_b_index[i]``) against
    ``max_j`` of the permuted grids' row i; ``best_a[j]``: layer j of B's best match in A alike.
    nan cells are left out of every aggregate.
    """

    alpha: float
    n_permutations: int
    cell_tau: np.ndarray = field(repr=False)
    cell_calibrated: np.ndarray = field(repr=False)
    maximum: Calibration
    argmax: tuple[int, int]
    mean: Calibration
    best_b: tuple[Calibration, ...] = field(repr=False)
    best_b_index: np.ndarray = field(repr=False)
    best_a: tuple[Calibration, ...] = field(repr=False)
    best_a_index: np.ndarray = field(repr=False)


def _nan_reduce(values: np.ndarray, axis: Any, how: str) -> np.ndarray:
    """nanmax / nanmean without the all-nan warning (all-nan -> nan)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(values, axis=axis) if how == "max" else np.nanmean(values, axis=axis)


def _argmax_along(grid: np.ndarray, axis: int) -> np.ndarray:
    filled = np.where(np.isfinite(grid), grid, -np.inf)
    idx = np.argmax(filled, axis=axis)
    return np.where(np.isfinite(grid).any(axis=axis), idx, -1)


def calibrate_grid(
    grid: Any,
    cell_null: Any,
    *,
    alpha: float = DEFAULT_ALPHA,
    bounds: tuple[float, float] = (-math.inf, math.inf),
) -> GridCalibration:
    """Calibrate a similarity grid and its aggregates from the permuted grids.

    ``grid``: the observed (La, Lb) values; ``cell_null``: (K, La, Lb), draw k being the whole grid
    under one row permutation of side B applied to every layer (as
    :func:`~interlingua.analysis.inference.grid_permutation_test` computes it). Similarities only
    (larger = more similar), as the grid test.
    """
    alpha = check_alpha(alpha)
    g = np.asarray(grid, dtype=float)
    nul = np.asarray(cell_null, dtype=float)
    if g.ndim != 2 or nul.ndim != 3 or nul.shape[1:] != g.shape or nul.shape[0] < 1:
        raise MeasureInputError(
            f"grid has shape {g.shape} and cell_null {nul.shape}; expected (La, Lb) and (K, La, Lb) with K >= 1."
        )
    k = nul.shape[0]
    cell_tau = _critical(g, nul, alpha, True)
    cell_cal = _score(g, cell_tau, bounds, True)

    def one(observed: float, draws: np.ndarray) -> Calibration:
        if not math.isfinite(observed):
            nan = math.nan
            return Calibration(nan, nan, nan, nan, alpha, k, math.isfinite(bounds[1]))
        return calibrate(observed, draws, alpha=alpha, bounds=bounds)

    flat_obs = g.ravel()
    if np.isfinite(flat_obs).any():
        flat = int(np.nanargmax(flat_obs))
        argmax = (int(flat // g.shape[1]), int(flat % g.shape[1]))
    else:
        argmax = (-1, -1)
    maximum = one(float(_nan_reduce(g, None, "max")), _nan_reduce(nul, (1, 2), "max"))
    mean = one(float(_nan_reduce(g, None, "mean")), _nan_reduce(nul, (1, 2), "mean"))
    row_obs, row_null = _nan_reduce(g, 1, "max"), _nan_reduce(nul, 2, "max")  # (La,), (K, La)
    col_obs, col_null = _nan_reduce(g, 0, "max"), _nan_reduce(nul, 1, "max")  # (Lb,), (K, Lb)
    best_b = tuple(one(float(row_obs[i]), row_null[:, i]) for i in range(g.shape[0]))
    best_a = tuple(one(float(col_obs[j]), col_null[:, j]) for j in range(g.shape[1]))
    return GridCalibration(
        alpha=alpha,
        n_permutations=k,
        cell_tau=cell_tau,
        cell_calibrated=cell_cal,
        maximum=maximum,
        argmax=argmax,
        mean=mean,
        best_b=best_b,
        best_b_index=_argmax_along(g, 1),
        best_a=best_a,
        best_a_index=_argmax_along(g, 0),
    )


def calibrate_grid_result(
    result: Any, *, alpha: float = DEFAULT_ALPHA, bounds: tuple[float, float] | None = None
) -> GridCalibration:
    """:func:`calibrate_grid` of a :class:`~interlingua.analysis.inference.GridPermutationResult`.

    Its ``maximum`` is the grid test's own statistic: the same observed maximum, the same max null
    (``result.null``) and the same p-value (``result.p_value``, up to the tie tolerance).
    """
    if getattr(result, "cell_null", None) is None:
        raise MeasureInputError("this grid result kept no per-cell null; rerun grid_permutation_test.")
    b = measure_bounds(result.measure_id) if bounds is None else (float(bounds[0]), float(bounds[1]))
    return calibrate_grid(result.grid, result.cell_null, alpha=alpha, bounds=b)
