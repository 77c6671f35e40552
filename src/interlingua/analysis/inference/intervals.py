"""Confidence intervals for a measure on paired rows: delete-a-group jackknife and percentile bootstrap.

Both resample ROWS (examples), keeping each row of X with its row of Y, and
both are seeded (numpy ``default_rng(seed)``), so the same call gives the same
interval. For linear CKA both reuse the centred Gram matrices of the full
sample (gather the kept rows, re-centre: O(m^2) per replicate instead of
O(m^2 p)); measures with a prepared form (``metadata.prepared``) prepare each
side once and evaluate every replicate from the prepared sides
(``measure.from_prepared``, equal to the direct call to rounding); other
measures are recomputed on the resampled rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from interlingua.analysis.inference._common import as_pair, check_count, check_level, check_seed, resolve_measure
from interlingua.analysis.inference._gram import gram_path_is_cheaper, resampled_cka
from interlingua.analysis.measures.cka import centred_linear_gram
from interlingua.core.errors import MeasureInputError
from interlingua.core.numerics import with_analysis_blas

__all__ = ["JackknifeInterval", "BootstrapInterval", "jackknife_interval", "bootstrap_interval"]


@dataclass(frozen=True, eq=False)
class JackknifeInterval:
    """Delete-a-group jackknife interval ``estimate -/+ t_{G-1, (1+level)/2} * se``.

    ``estimate`` is the full-sample value (the number a table reports) and the
    interval is centred on it; ``bias_corrected`` is the mean of the
    pseudo-values ``G * estimate - (G - 1) * leave_out[g]`` (Tukey's
    jackknife estimate), reported but not used for the interval.
    ``se = sqrt((G - 1) / G * sum_g (leave_out[g] - mean(leave_out))^2)``.
    """

    estimate: float
    low: float
    high: float
    se: float
    level: float
    n_groups: int
    seed: int
    bias_corrected: float
    leave_out: np.ndarray = field(repr=False)
    distribution: str = "t"


@dataclass(frozen=True, eq=False)
class BootstrapInterval:
    """Percentile bootstrap interval: the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the replicates.

    ``estimate`` is the full-sample value, ``se`` the standard deviation of the
    finite replicates, ``n_valid`` how many replicates were finite (a resample
    can make a measure undefined, e.g. all rows identical).
    """

    estimate: float
    low: float
    high: float
    se: float
    level: float
    n_boot: int
    seed: int
    n_valid: int
    replicates: np.ndarray = field(repr=False)


def _replicate_fn(m: Any, x: np.ndarray, y: np.ndarray, fast: bool | None, kwargs: dict[str, Any]) -> Any:
    """``f(idx) -> measure(X[idx], Y[idx])``: via full-sample Grams for linear CKA when cheaper, from the
    prepared sides for measures with ``metadata.prepared`` (unless ``fast=False``), else recomputed."""
    use_gram = m.linear_cka_debiased is not None and fast is not False
    if use_gram and fast is None:
        use_gram = gram_path_is_cheaper(x.shape[0], x.shape[1], y.shape[1])
    if use_gram:
        debiased = bool(m.linear_cka_debiased)
        Kx, Ly = centred_linear_gram(x), centred_linear_gram(y)
        return lambda idx: resampled_cka(Kx, Ly, idx, debiased)
    if m.prepared is not None and fast is not False:
        from interlingua.analysis.inference.permutation import _prepared_sides

        sx, sy = _prepared_sides(m, x, y, kwargs)
        return lambda idx: float(m.prepared.from_prepared(sx, sy, idx[None], idx[None])[0])
    return lambda idx: float(m.fn(x[idx], y[idx], **kwargs))


@with_analysis_blas
def jackknife_interval(
    measure: Any,
    X: Any,
    Y: Any,
    n_groups: int = 50,
    level: float = 0.95,
    seed: int = 0,
    *,
    fast: bool | None = None,
    **measure_kwargs: Any,
) -> JackknifeInterval:
    """Delete-a-group jackknife confidence interval for ``measure(X, Y)``.

    Rows are shuffled with ``default_rng(seed)`` and split into ``n_groups``
    contiguous groups of near-equal size (``numpy.array_split``: sizes differ
    by at most one); each group is left out once. The interval uses Student's
    t with ``n_groups - 1`` degrees of freedom (the jackknife variance has
    G - 1 degrees of freedom; with 50 groups t and normal differ by ~2%).
    ``fast`` as in :func:`~interlingua.analysis.inference.permutation_test`.
    """
    m = resolve_measure(measure)
    lv = check_level(level)
    seed = check_seed(seed)
    g = check_count(n_groups, "n_groups", minimum=2)
    x, y = as_pair(X, Y, m.min_n, m.id)
    n = x.shape[0]
    if g > n:
        raise MeasureInputError(
            f"n_groups={g} exceeds the number of rows n={n}; use at most n groups (n gives the leave-one-out "
            "jackknife)."
        )
    largest = -(-n // g)
    if n - largest < m.min_n:
        raise MeasureInputError(
            f"{m.id} needs at least {m.min_n} rows, but leaving out a group of {largest} of n={n} rows keeps "
            f"{n - largest}; use more groups or more rows."
        )
    estimate = float(m.fn(x, y, **measure_kwargs))
    groups = np.array_split(np.random.default_rng(seed).permutation(n), g)
    f = _replicate_fn(m, x, y, fast, measure_kwargs)
    keep_mask = np.ones(n, dtype=bool)
    leave_out = np.empty(g)
    for i, grp in enumerate(groups):
        keep_mask[grp] = False
        leave_out[i] = f(np.flatnonzero(keep_mask))
        keep_mask[grp] = True
    mean_lo = float(leave_out.mean())
    se = float(np.sqrt((g - 1) / g * np.sum((leave_out - mean_lo) ** 2)))
    half = float(stats.t.ppf(0.5 + lv / 2, df=g - 1)) * se
    return JackknifeInterval(
        estimate=estimate,
        low=estimate - half,
        high=estimate + half,
        se=se,
        level=lv,
        n_groups=g,
        seed=seed,
        bias_corrected=float(g * estimate - (g - 1) * mean_lo),
        leave_out=leave_out,
    )


@with_analysis_blas
def bootstrap_interval(
    measure: Any,
    X: Any,
    Y: Any,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    *,
    fast: bool | None = None,
    **measure_kwargs: Any,
) -> BootstrapInterval:
    """Percentile bootstrap confidence interval for ``measure(X, Y)`` over paired rows.

    Each replicate draws n row indices with replacement (``default_rng(seed)``,
    one ``integers(0, n, n)`` call per replicate) and evaluates the measure on
    ``X[idx], Y[idx]``. Resampling with replacement duplicates rows; that is
    the standard nonparametric bootstrap, but estimators that assume distinct
    rows (debiased HSIC, kNN overlaps) are shifted on resamples, which makes
    the percentile interval itself shifted: prefer the jackknife for those.
    ``fast`` as in :func:`~interlingua.analysis.inference.permutation_test`.
    """
    m = resolve_measure(measure)
    lv = check_level(level)
    seed = check_seed(seed)
    b = check_count(n_boot, "n_boot", minimum=2)
    x, y = as_pair(X, Y, m.min_n, m.id)
    n = x.shape[0]
    estimate = float(m.fn(x, y, **measure_kwargs))
    f = _replicate_fn(m, x, y, fast, measure_kwargs)
    rng = np.random.default_rng(seed)
    reps = np.empty(b)
    for i in range(b):
        reps[i] = f(rng.integers(0, n, size=n))
    finite = reps[np.isfinite(reps)]
    if finite.size < 2:
        raise MeasureInputError(
            f"{m.id}: only {finite.size} of {b} bootstrap replicates are finite (the measure is undefined on "
            "most resamples); check the inputs for constant or duplicated rows."
        )
    low, high = np.quantile(finite, [0.5 - lv / 2, 0.5 + lv / 2])
    return BootstrapInterval(
        estimate=estimate,
        low=float(low),
        high=float(high),
        se=float(finite.std(ddof=1)),
        level=lv,
        n_boot=b,
        seed=seed,
        n_valid=int(finite.size),
        replicates=reps,
    )
