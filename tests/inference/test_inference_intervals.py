"""Jackknife and bootstrap intervals: contain the estimate, shrink with n, cover a known population CKA."""

from __future__ import annotations

import numpy as np
import pytest
from inference_helpers import ref_cka, signal_pair
from scipy import stats

from interlingua.analysis.inference import bootstrap_interval, jackknife_interval
from interlingua.analysis.measures import get_measure, linear_cka
from interlingua.core.errors import MeasureInputError

SIGMA = 1.0
TRUE_CKA = 1.0 / (1.0 + SIGMA**2)  # X ~ N(0, I_p), Y = X + SIGMA * E: ||I||^2 / (||I|| * (1 + SIGMA^2) ||I||)


def _population_pair(rng: np.random.Generator, n: int, p: int = 4) -> tuple[np.ndarray, np.ndarray]:
    X = rng.standard_normal((n, p))
    return X, X + SIGMA * rng.standard_normal((n, p))


def _coverage_band(trials: int, level: float) -> tuple[float, float]:
    lo = stats.binom.ppf(0.0005, trials, level) / trials
    hi = stats.binom.isf(0.0005, trials, level) / trials
    return lo, hi


def test_population_cka_construction() -> None:
    """The construction's truth: on a huge sample both estimators approach 1 / (1 + sigma^2)."""
    X, Y = _population_pair(np.random.default_rng(0), 200_000)
    assert linear_cka(X, Y, debiased=True) == pytest.approx(TRUE_CKA, abs=0.01)


@pytest.mark.slow
def test_jackknife_covers_the_population_value() -> None:
    reps, level = 150, 0.95
    covered = 0
    for r in range(reps):
        X, Y = _population_pair(np.random.default_rng(100 + r), 300)
        ci = jackknife_interval("cka_linear_debiased", X, Y, n_groups=20, level=level, seed=r)
        covered += ci.low <= TRUE_CKA <= ci.high
    lo, hi = _coverage_band(reps, level)
    assert lo <= covered / reps <= hi


@pytest.mark.slow
def test_bootstrap_covers_the_population_value() -> None:
    reps, level = 60, 0.9
    covered = 0
    for r in range(reps):
        X, Y = _population_pair(np.random.default_rng(500 + r), 300)
        ci = bootstrap_interval("cka_linear_biased", X, Y, n_boot=100, level=level, seed=r)
        covered += ci.low <= TRUE_CKA <= ci.high
    lo, hi = _coverage_band(reps, level)
    assert lo <= covered / reps <= hi


@pytest.mark.parametrize("kind", ["jackknife", "bootstrap"])
def test_interval_contains_estimate_and_shrinks_with_n(kind: str) -> None:
    widths = []
    for n in (200, 1600):
        X, Y = _population_pair(np.random.default_rng(n), n)
        if kind == "jackknife":
            ci = jackknife_interval("cka_linear_debiased", X, Y, n_groups=25, seed=0)
        else:
            ci = bootstrap_interval("cka_linear_biased", X, Y, n_boot=200, seed=0)
        assert ci.estimate == pytest.approx(linear_cka(X, Y, debiased=kind == "jackknife"), rel=0, abs=1e-12)
        if kind == "jackknife":  # a t interval: symmetric about the estimate by construction
            assert ci.high - ci.estimate == pytest.approx(ci.estimate - ci.low, rel=1e-9)
        else:  # percentiles of the replicates: containing the estimate is a property of the data
            assert ci.low < ci.estimate < ci.high
        widths.append(ci.high - ci.low)
    assert widths[1] < widths[0] / 2  # width ~ 1/sqrt(n): 8x the rows, ~2.8x narrower


def test_jackknife_formulas() -> None:
    """Leave-out values are CKA on the kept rows; se, t interval and bias correction follow the textbook."""
    X, Y = signal_pair(np.random.default_rng(1), 40, 5, 4)
    g, seed = 8, 3
    ci = jackknife_interval("cka_linear_biased", X, Y, n_groups=g, level=0.9, seed=seed)
    groups = np.array_split(np.random.default_rng(seed).permutation(40), g)
    for k, grp in enumerate(groups):
        keep = np.setdiff1d(np.arange(40), grp)
        assert ci.leave_out[k] == pytest.approx(ref_cka(X[keep], Y[keep]), abs=1e-12)
    theta = ref_cka(X, Y)
    pseudo = g * theta - (g - 1) * ci.leave_out
    se = pseudo.std(ddof=1) / np.sqrt(g)
    assert ci.se == pytest.approx(se, rel=1e-12)
    assert ci.bias_corrected == pytest.approx(pseudo.mean(), rel=1e-12)
    half = stats.t.ppf(0.95, g - 1) * se
    assert (ci.low, ci.high) == pytest.approx((theta - half, theta + half), rel=1e-12)


@pytest.mark.parametrize("mid", ["cka_linear_biased", "cka_linear_debiased"])
def test_gram_fast_path_equals_recomputation(mid: str) -> None:
    X, Y = signal_pair(np.random.default_rng(2), 36, 40, 30)
    for fn, kw in ((jackknife_interval, {"n_groups": 9}), (bootstrap_interval, {"n_boot": 40})):
        fast = fn(mid, X, Y, seed=4, fast=True, **kw)
        slow = fn(mid, X, Y, seed=4, fast=False, **kw)
        arr = "leave_out" if fn is jackknife_interval else "replicates"
        np.testing.assert_allclose(getattr(fast, arr), getattr(slow, arr), rtol=0, atol=1e-12)


def test_bootstrap_percentiles_and_resampling_scheme() -> None:
    X, Y = signal_pair(np.random.default_rng(3), 30, 3, 3)
    ci = bootstrap_interval("cka_linear_biased", X, Y, n_boot=50, level=0.8, seed=6)
    rng = np.random.default_rng(6)
    for b in range(3):
        idx = rng.integers(0, 30, size=30)
        assert ci.replicates[b] == pytest.approx(ref_cka(X[idx], Y[idx]), abs=1e-12)
    assert (ci.low, ci.high) == pytest.approx(tuple(np.quantile(ci.replicates, [0.1, 0.9])))
    assert ci.n_valid == 50 and ci.se == pytest.approx(ci.replicates.std(ddof=1))


def test_seeds_reproduce_and_differ() -> None:
    X, Y = signal_pair(np.random.default_rng(4), 50, 4, 4)
    for fn, kw in ((jackknife_interval, {"n_groups": 10}), (bootstrap_interval, {"n_boot": 60})):
        a, b, c = (fn("cka_linear_debiased", X, Y, seed=s, **kw) for s in (1, 1, 2))
        # same seed, same resamples: the same values (to rounding: BLAS need not repeat bit for bit)
        assert (a.low, a.high, a.se) == pytest.approx((b.low, b.high, b.se), rel=0, abs=1e-14)
        assert abs(a.low - c.low) + abs(a.high - c.high) > 1e-6  # another seed, other resamples


def test_other_measures_are_recomputed() -> None:
    """Without a Gram form every replicate is the measure itself on the kept / resampled rows."""
    X, Y = signal_pair(np.random.default_rng(5), 60, 4, 4)
    mid = "procrustes_resid2_centered_unitnorm"
    ci = jackknife_interval(mid, X, Y, n_groups=10, seed=2)
    groups = np.array_split(np.random.default_rng(2).permutation(60), 10)
    for k, grp in enumerate(groups):
        keep = np.setdiff1d(np.arange(60), grp)
        assert ci.leave_out[k] == pytest.approx(get_measure(mid)(X[keep], Y[keep]), rel=0, abs=1e-12)

    def corr(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.corrcoef(a[:, 0], b[:, 0])[0, 1])

    bs = bootstrap_interval(corr, X, Y, n_boot=100, seed=3)
    rng = np.random.default_rng(3)
    for b in range(3):
        idx = rng.integers(0, 60, size=60)
        assert bs.replicates[b] == pytest.approx(corr(X[idx], Y[idx]), rel=0, abs=1e-12)
    assert (bs.low, bs.high) == pytest.approx(tuple(np.quantile(bs.replicates, [0.025, 0.975])), rel=0, abs=1e-15)


def test_bad_inputs_raise() -> None:
    X, Y = signal_pair(np.random.default_rng(6), 20, 3, 3)
    with pytest.raises(MeasureInputError, match="n_groups=21 exceeds the number of rows n=20"):
        jackknife_interval("cka_linear_biased", X, Y, n_groups=21)
    with pytest.raises(MeasureInputError, match="n_groups must be an integer >= 2"):
        jackknife_interval("cka_linear_biased", X, Y, n_groups=1)
    with pytest.raises(MeasureInputError, match="keeps 3"):
        jackknife_interval("cka_linear_debiased", X[:6], Y[:6], n_groups=2)
    with pytest.raises(MeasureInputError, match="level must be in"):
        jackknife_interval("cka_linear_biased", X, Y, level=1.0)
    with pytest.raises(MeasureInputError, match="level must be a number"):
        bootstrap_interval("cka_linear_biased", X, Y, level="high")
    with pytest.raises(MeasureInputError, match="n_boot must be an integer >= 2"):
        bootstrap_interval("cka_linear_biased", X, Y, n_boot=1)
    with pytest.raises(MeasureInputError, match="seed"):
        bootstrap_interval("cka_linear_biased", X, Y, seed=1.5)
    with pytest.raises(MeasureInputError, match="rows"):
        bootstrap_interval("cka_linear_biased", X, Y[:-1])
    with pytest.raises(MeasureInputError, match="replicates are finite"):
        bootstrap_interval(lambda a, b: float("nan"), X, Y, n_boot=10)
