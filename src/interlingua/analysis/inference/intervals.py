"""Confidence intervals for a measure on paired rows: delete-a-group jackknife and bootstrap.

The bootstrap interval is the percentile one, recentred on the estimate for the CCA family (see
:func:`bootstrap_interval`).

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

__all__ = [
    "JackknifeInterval",
    "BootstrapInterval",
    "jackknife_interval",
    "bootstrap_interval",
    "BOOTSTRAP_MIN_N",
    "bootstrap_min_n",
    "jackknife_min_n",
    "resample_distinct_floor",
]

#: Fewest rows for any percentile bootstrap: below it there are few distinct resamples (C(2n - 1, n) = 6435
#: at n = 8) and the replicates' quantiles are a handful of repeated values, not an interval.
BOOTSTRAP_MIN_N = 8


def bootstrap_min_n(min_n: int) -> int:
    """Fewest rows for a bootstrap of a measure whose own minimum is ``min_n``.

    A resample of n rows holds about 0.632 n distinct ones, and a replicate with fewer than ``min_n``
    distinct rows is degenerate (e.g. biased CKA of two distinct rows is 1 whatever the data) and counted as
    undefined; ``2 * min_n`` keeps such resamples rare. At least :data:`BOOTSTRAP_MIN_N`.
    """
    return max(BOOTSTRAP_MIN_N, 2 * int(min_n))


def jackknife_min_n(min_n: int) -> int:
    """Fewest rows for a (leave-one-out) jackknife: every leave-out must keep ``min_n`` rows, and with fewer
    than 3 leave-outs the t interval has under 2 degrees of freedom. With G groups the condition is
    ``n - ceil(n / G) >= min_n``."""
    return max(int(min_n) + 1, 3)


def _distinct_rows_only(m: Any) -> bool:
    """Whether the measure is defined only on distinct examples (kNN: a copy would be its own neighbour)."""
    return getattr(getattr(m.fn, "metadata", None), "resample_distinct", False) is True


def resample_distinct_floor(n: int) -> float:
    """Four standard deviations below the expected number of distinct rows in n draws with replacement.

    ``D = sum_i [row i drawn]``: ``E D = n (1 - (1 - 1/n)^n)``, ``Var D = n (1 - 1/n)^n
    + n (n - 1) (1 - 2/n)^n - n^2 (1 - 1/n)^(2n)`` (indicators of two rows both missed).
    """
    miss1, miss2 = (1 - 1 / n) ** n, (1 - 2 / n) ** n
    var = n * miss1 + n * (n - 1) * miss2 - n * n * miss1 * miss1
    return n * (1 - miss1) - 4 * float(np.sqrt(max(var, 0.0)))


def _is_cca_family(result: Any) -> bool:
    """Whether the measure's result reports kept CCA dimensions (CCA, SVCCA, PWCCA: ``dims_x``, ``dims_y``)."""
    details = getattr(result, "details", None) or {}
    return "dims_x" in details and "dims_y" in details


def _dims_needed(m: Any, result: Any, n: int) -> int:
    """Distinct rows a resample needs to keep the estimate's dimensions (CCA family: ``dims_x + dims_y + 1``);
    refuses the bootstrap where resamples cannot (see :func:`bootstrap_interval`)."""
    details = getattr(result, "details", None) or {}
    if "dims_x" not in details or "dims_y" not in details:
        return m.min_n
    kx, ky = int(details["dims_x"]), int(details["dims_y"])
    capped = bool(details.get("wide_capped", False))
    floor = resample_distinct_floor(n)
    if capped or kx + ky + 1 > floor:
        why = (
            "the full sample already needs the wide='reduce' cap, so every resample, with fewer distinct rows, "
            "would be cut to fewer components than the estimate"
            if capped
            else f"a resample of n={n} rows holds about {0.632 * n:.0f} distinct ones (at least {floor:.0f} but "
            "for 1 in 30,000), and with fewer than kx + ky + 1 it would keep fewer components or force "
            "canonical correlations of 1"
        )
        raise MeasureInputError(
            f"a bootstrap of {m.id} is not defined here: the estimate keeps {kx} + {ky} dimensions of X and Y and "
            f"{why}, so the replicates would measure something other than the estimate. Reduce the widths first "
            f"(PCA or SVCCA to at most {max(int(floor - 1) // 2, 1)} components per side at this n), or use the "
            "jackknife."
        )
    return max(m.min_n, kx + ky + 1)


def _pseudo_value_deviations(m: Any, x: np.ndarray, y: np.ndarray, kwargs: dict[str, Any]) -> np.ndarray:
    """``(n - 1) (mean(v) - v_(r))`` for the leave-one-out values ``v_(r)`` of a distinct-rows measure."""
    if kwargs:
        raise MeasureInputError(
            f"{m.id}: its bootstrap uses the measure's own leave-one-out form, which takes no options; got "
            f"{sorted(kwargs)}."
        )
    loo = m.fn.leave_one_out(x, y)
    bad = int(np.count_nonzero(~np.isfinite(loo)))
    if bad:
        raise MeasureInputError(
            f"{m.id} is undefined on {bad} of the {loo.size} leave-one-out samples (a tie at the k-th or "
            "(k+1)-th nearest neighbour: constant or duplicated rows), so its bootstrap is not defined; remove "
            "duplicated examples, or use a layer or pooling whose rows differ."
        )
    return (loo.size - 1) * (float(loo.mean()) - loo)


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
    """Bootstrap interval from the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the replicates.

    ``method`` says how: ``"percentile"``, the quantiles themselves, or ``"recentred"`` (the CCA family,
    see :func:`bootstrap_interval`), ``estimate`` plus the quantiles of the replicates less their mean.
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
    method: str = "percentile"


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
    if n < jackknife_min_n(m.min_n):
        raise MeasureInputError(
            f"a jackknife of {m.id} needs at least {jackknife_min_n(m.min_n)} rows (each leave-out keeps "
            f"{m.min_n} or more, and a t interval needs at least 3 leave-outs); got n={n}."
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
    """Bootstrap confidence interval for ``measure(X, Y)`` over paired rows (percentile; recentred for CCA).

    Each replicate draws n row indices with replacement (``default_rng(seed)``, one ``integers(0, n, n)``
    call per replicate) and evaluates the measure on ``X[idx], Y[idx]``. A resample holds about 0.632 n
    distinct rows; one with fewer than the measure's ``min_n`` distinct rows is degenerate and counts as
    undefined (nan), and n below :func:`bootstrap_min_n` is refused.

    Which measures it suits. The percentile interval covers the population value at about the nominal
    rate when the measure is a smooth function of moments of the rows, where a duplicated row is just a
    row counted twice, and its bias is small next to its spread: linear CKA (biased), Procrustes, ANC, and
    RSA (Spearman ties of duplicated rows are averaged exactly, as :func:`scipy.stats.spearmanr` does).

    The CCA family (CCA, SVCCA, PWCCA: every measure whose result reports kept dimensions) gets a
    RECENTRED interval, ``estimate + quantiles(replicates - mean(replicates))`` (``method="recentred"``):
    the replicates give the spread, the estimate the location. Why: canonical correlations overfit, upwards,
    by an amount that grows as the distinct rows shrink, so the replicates (about 0.632 n distinct rows)
    sit above the estimate and the percentile interval can miss the estimate itself (p = q = 10,
    n = 150: estimate 0.469, percentile interval [0.480, 0.536]). The recentred interval covers the
    estimator's expectation at this n, the value the measure has at this sample size, at or above the
    nominal rate (the coverage test: p = q = 10 and 20 at n = 150, three shared latent dimensions; the
    replicates' spread is 1.0-1.6 times the true one there, most for SVCCA, whose kept components vary
    between resamples, so it is conservative). It
    does NOT remove CCA's bias with respect to the population (n -> infinity) value, and nothing
    resampled here does: where some population canonical correlations are 0 their sample values are of
    order sqrt(p / n), not a smooth function of moments, and in that model (population value 0.288,
    expectation at n = 150 0.418, standard deviation 0.013) the percentile, basic, BCa, bias-corrected
    normal and jackknife intervals covered the population value in 0-14% of 100 datasets. Where the
    widths are small next to n (bias well under the spread: p = q = 3 at n = 150) the expectation at n is
    the population value to within the spread, and the recentred interval covers that too. It is not
    defined, and refused with a :class:`MeasureInputError`, when the kept dimensions ``kx + ky`` reach
    what a resample's distinct rows can carry (``kx + ky <= d - 1`` for d distinct rows): such a
    resample either keeps fewer dimensions than the estimate (the wide='reduce' cap follows its distinct
    rows) or forces canonical correlations of 1, and either way it measures something other than the
    estimate (at n = 48, p = 48, q = 36 the estimate was 0.697 and the interval [0.801, 0.942]). The
    refusal applies when ``kx + ky + 1`` exceeds the resample's expected distinct rows less four standard
    deviations (:func:`resample_distinct_floor`), which includes every input where the full sample
    itself needs the cap; a resample with fewer distinct rows than that (rarer than 1 in 30,000) counts
    as undefined. Reduce the widths first (PCA / SVCCA to well under 0.3 n per side).

    It does NOT suit, by construction:

    - debiased (U-statistic) CKA, which assumes distinct rows: a copy pairs with itself and shifts every
      replicate (use the jackknife);
    - a row resample of mutual kNN (``metadata.resample_distinct``): a copy of a row would be its own
      nearest neighbour, and the measure on a resample's distinct rows (about 0.632 n of them) is the
      overlap at a smaller n, which with k fixed has another expectation: that interval covers the
      estimator's expectation at n in 0 of 100 datasets of the coverage simulation. Such measures are
      bootstrapped through their leave-one-out values instead (below).

    Measures defined only on distinct rows (``metadata.resample_distinct``: mutual kNN) get a bootstrap of
    the jackknife linearisation: the n leave-one-out values ``v_(r)`` come from one pass over the full
    sample (:meth:`~interlingua.analysis.measures.Measure.leave_one_out`: neighbours are computed once,
    a removed neighbour is replaced by the next), and replicate b is
    ``estimate + mean_{i in idx_b} (n - 1) (mean(v) - v_(i))``, the mean of n resampled pseudo-value
    deviations. No replicate evaluates the measure on duplicated rows, every replicate is finite, and its
    variance is the leave-one-out jackknife variance times (n - 1) / n. Why not resample the per-row
    overlaps with the neighbours fixed: rows that are each other's neighbours have correlated overlaps,
    and that interval is too narrow (its standard error is 0.66-0.85 of the true one in the simulations
    behind the tests). The jackknife variance errs the other way: it is biased upwards (Efron & Stein
    1981), by 1.25-1.6x here, where a row's removal also reshuffles its neighbours' sets, so this interval
    covers the estimator's expectation at n at or above the nominal rate (conservative).

    ``fast`` as in :func:`~interlingua.analysis.inference.permutation_test`.
    """
    m = resolve_measure(measure)
    lv = check_level(level)
    seed = check_seed(seed)
    b = check_count(n_boot, "n_boot", minimum=2)
    x, y = as_pair(X, Y, m.min_n, m.id)
    n = x.shape[0]
    if n < bootstrap_min_n(m.min_n):
        raise MeasureInputError(
            f"a bootstrap of {m.id} needs at least {bootstrap_min_n(m.min_n)} rows (a resample holds about 0.632 n "
            f"distinct rows and the measure needs {m.min_n}); got n={n}. Use the jackknife, or more examples."
        )
    result = m.fn.compute(x, y, **measure_kwargs) if hasattr(m.fn, "compute") else m.fn(x, y, **measure_kwargs)
    estimate = float(result.value if hasattr(result, "value") else result)
    need = _dims_needed(m, result, n) if np.isfinite(estimate) else m.min_n
    rng = np.random.default_rng(seed)
    reps = np.empty(b)
    too_few = 0
    if _distinct_rows_only(m):
        dev = _pseudo_value_deviations(m, x, y, measure_kwargs)
        for i in range(b):
            reps[i] = estimate + float(dev[rng.integers(0, n, size=n)].mean())
    else:
        f = _replicate_fn(m, x, y, fast, measure_kwargs)
        for i in range(b):
            idx = rng.integers(0, n, size=n)
            if np.unique(idx).size < need:
                reps[i] = np.nan
                too_few += 1
                continue
            reps[i] = f(idx)
    finite = reps[np.isfinite(reps)]
    if finite.size < 2:
        raise MeasureInputError(
            f"{m.id}: only {finite.size} of {b} bootstrap replicates are finite: {too_few} resamples had fewer "
            f"than {need} distinct rows, and the measure was undefined (nan, see its warnings) on "
            f"{b - too_few - finite.size} others; use the jackknife, or more examples."
        )
    recentred = _is_cca_family(result)
    spread = finite - float(finite.mean()) if recentred else finite
    low, high = np.quantile(spread, [0.5 - lv / 2, 0.5 + lv / 2]) + (estimate if recentred else 0.0)
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
        method="recentred" if recentred else "percentile",
    )
