"""correlation: rho equals scipy, bootstrap, notes.

Exact and Monte-Carlo permutation p's against scipy and brute force.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from interlingua.analysis.stats import (
    Correlation,
    StatsError,
    StatsWarning,
    correlation,
    permutation_indices,
    smallest_attainable_p,
)
from interlingua.core.errors import InterlinguaError

TOL = 1e-12


def _data(n: int, seed: int = 0, slope: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return x, slope * x + rng.normal(size=n)


def _rho(x: np.ndarray, y: np.ndarray, method: str) -> float:
    """scipy's rho (spearmanr / pearsonr); NaN for a constant column."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant resamples: scipy warns and returns NaN
        fn = sps.spearmanr if method == "spearman" else sps.pearsonr
        return float(fn(x, y)[0])


def _scipy_exact_p(x: np.ndarray, y: np.ndarray, method: str) -> float:
    """scipy.stats.permutation_test over all n! orders of x against fixed y; two-sided = 2 * min(one-sided).

    One sample with permutation_type='pairings' (scipy permutes its order): passing (x, y) would make
    scipy enumerate the orders of both samples, (n!)^2 of them.
    """
    if method == "spearman":
        x, y = sps.rankdata(x), sps.rankdata(y)
    yc = y - y.mean()

    def stat(a: np.ndarray, axis: int = -1) -> np.ndarray:
        a = a - a.mean(axis=axis, keepdims=True)
        return (a * yc).sum(axis=axis) / np.sqrt((a * a).sum(axis=axis) * (yc * yc).sum())

    res = sps.permutation_test(
        (x,), stat, permutation_type="pairings", n_resamples=np.inf, alternative="two-sided", vectorized=True
    )
    assert res.null_distribution.size == math.factorial(len(x))
    return float(res.pvalue)


def _brute_exact_p(x: np.ndarray, y: np.ndarray, method: str) -> float:
    """Our definition by hand: share of all n! permutations with |rho| >= |rho_obs|."""
    obs = abs(_rho(x, y, method))
    if method == "spearman":  # Spearman = Pearson of average ranks; permuting y permutes its ranks
        x, y = sps.rankdata(x), sps.rankdata(y)
    perms = list(itertools.permutations(range(len(x))))
    hits = sum(abs(np.corrcoef(x, y[list(p)])[0, 1]) >= obs - TOL for p in perms)
    return hits / len(perms)


def _monte_carlo_perms(n: int, permutations: int, seed: int) -> list[np.ndarray]:
    """The documented stream, rebuilt one permutation at a time (independent of permutation_indices)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])
    return [np.argsort(rng.random(n), kind="stable") for _ in range(permutations)]


# --------------------------------------------------------------------------- rho


@pytest.mark.filterwarnings("ignore::interlingua.analysis.stats.StatsWarning")  # n = 3 cannot reach 0.05
@pytest.mark.parametrize("n", [3, 7, 25])
def test_rho_equals_scipy(n: int) -> None:
    x, y = _data(n, seed=n)
    y[0] = y[1]  # a tie
    for method in ("spearman", "pearson"):
        res = correlation(x, y, method=method, permutations=50, bootstrap=0)
        assert abs(res.rho - _rho(x, y, method)) < TOL


def test_spearman_invariant_to_monotone_transforms() -> None:
    x, y = _data(15, seed=1)
    base = correlation(x, y, permutations=500, bootstrap=200)
    moved = correlation(np.exp(x), y**3 - 2.0, permutations=500, bootstrap=200)
    assert moved.rho == pytest.approx(base.rho, abs=TOL)
    assert moved.p == base.p and moved.ci_low == pytest.approx(base.ci_low, abs=TOL)
    flipped = correlation(-x, y, permutations=500, bootstrap=0)
    assert flipped.rho == pytest.approx(-base.rho, abs=TOL) and flipped.p == base.p


def test_pearson_invariant_to_positive_affine_maps() -> None:
    x, y = _data(15, seed=2)
    base = correlation(x, y, method="pearson", permutations=500, bootstrap=0)
    moved = correlation(3.0 * x + 7.0, 0.5 * y - 1.0, method="pearson", permutations=500, bootstrap=0)
    assert moved.rho == pytest.approx(base.rho, abs=TOL) and moved.p == base.p


def test_symmetric_in_x_and_y() -> None:
    x, y = _data(6, seed=3)
    xy, yx = correlation(x, y, bootstrap=0), correlation(y, x, bootstrap=0)
    assert xy.p_method == "exact"
    assert xy.rho == pytest.approx(yx.rho, abs=TOL) and xy.p == yx.p  # the exact null is the same set


# --------------------------------------------------------------------------- exact p


def test_exact_enumeration_identities() -> None:
    assert smallest_attainable_p(4) == 2 / math.factorial(4) == pytest.approx(0.08333333333333333)
    assert smallest_attainable_p(5) == 2 / 120 and smallest_attainable_p(4, "pearson") == 1 / 24
    assert smallest_attainable_p(3) == 2 / 6 and smallest_attainable_p(2) == 1.0
    assert smallest_attainable_p([3, 4]) == 2 / (6 * 24) and smallest_attainable_p(400) == 0.0
    res = correlation([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], bootstrap=0, alpha=0.1)
    assert res.rho == 1.0 and res.p_method == "exact" and res.permutations == 24
    assert res.p == res.min_attainable_p == 2 / 24  # perfect order: only the identity and the reversal reach |rho| = 1


@pytest.mark.filterwarnings("ignore::interlingua.analysis.stats.StatsWarning")  # n = 4 cannot reach 0.05
@pytest.mark.parametrize("n", [4, 5, 6, 7])
def test_exact_p_equals_scipy_permutation_test_on_symmetric_nulls(n: int) -> None:
    # x without ties makes the Spearman null symmetric (reversing x's ranks negates rho), so scipy's
    # 2 * min(one-sided) and our |rho| >= |rho_obs| count the same permutations.
    x, y = _data(n, seed=10 + n)
    y[1] = y[0]  # ties in y alone keep the null symmetric
    res = correlation(x, y, bootstrap=0)
    assert res.p_method == "exact" and res.permutations == math.factorial(n)
    assert abs(res.p - _scipy_exact_p(x, y, "spearman")) < TOL
    assert abs(res.p - _brute_exact_p(x, y, "spearman")) < TOL


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_exact_p_equals_brute_force_on_asymmetric_nulls(method: str) -> None:
    # ties in both columns (Spearman) or skewed values (Pearson): the null is not symmetric, so
    # scipy's two-sided convention may differ from ours; ours is checked against its definition.
    x = np.array([1.0, 1.0, 2.0, 3.0, 9.0, 4.0])
    y = np.array([0.5, 0.5, 0.7, 2.0, 8.0, 0.1])
    res = correlation(x, y, method=method, bootstrap=0)
    assert res.p_method == "exact"
    assert abs(res.p - _brute_exact_p(x, y, method)) < TOL


def test_conventions_differ_on_an_asymmetric_null() -> None:
    # Pearson on skewed values: scipy doubles the smaller one-sided p, we count |r| >= |r_obs|
    x = np.array([2.3, 0.6, 3.2, 0.1, 0.3])
    y = np.array([0.4, 0.4, 0.7, -1.2, -0.7])
    ours = correlation(x, y, method="pearson", bootstrap=0).p
    assert ours == pytest.approx(14 / 120, abs=TOL) and abs(ours - _brute_exact_p(x, y, "pearson")) < TOL
    assert _scipy_exact_p(x, y, "pearson") == pytest.approx(4 / 120, abs=TOL)


# --------------------------------------------------------------------------- Monte Carlo p


def test_monte_carlo_stream_is_batch_independent_and_documented() -> None:
    whole = np.concatenate(list(permutation_indices(9, 50, seed=4)))
    pieces = np.concatenate(list(permutation_indices(9, 50, seed=4, batch=7)))
    assert whole.shape == (50, 9) and (whole == pieces).all()
    assert (whole == np.stack(_monte_carlo_perms(9, 50, seed=4))).all()
    assert (np.sort(whole, axis=1) == np.arange(9)).all()  # permutations


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_monte_carlo_count_equals_brute_force_loop(method: str) -> None:
    n, k, seed = 12, 400, 7
    x, y = _data(n, seed=5, slope=0.3)
    y[2] = y[3]
    res = correlation(x, y, method=method, permutations=k, seed=seed, bootstrap=0)
    assert res.p_method == "monte carlo" and res.permutations == k
    obs = abs(_rho(x, y, method))
    hits = sum(abs(_rho(x, y[p], method)) >= obs - TOL for p in _monte_carlo_perms(n, k, seed))
    assert res.p == (1 + hits) / (1 + k)


def test_monte_carlo_within_binomial_tolerance_of_scipy_exact() -> None:
    n, k = 8, 4000  # 8! = 40320 > k: Monte Carlo; scipy enumerates all 40320
    x, y = _data(n, seed=21, slope=0.5)
    exact = _scipy_exact_p(x, y, "spearman")
    for seed in (0, 1):
        res = correlation(x, y, permutations=k, seed=seed, bootstrap=0)
        assert res.p_method == "monte carlo"
        assert abs(res.p - exact) <= 4 * math.sqrt(exact * (1 - exact) / k) + 1 / (k + 1)


def test_same_seed_same_result_other_seed_other_draws() -> None:
    x, y = _data(20, seed=6)
    a = correlation(x, y, permutations=300, seed=3, bootstrap=100)
    assert a == correlation(x, y, permutations=300, seed=3, bootstrap=100)
    b = correlation(x, y, permutations=300, seed=4, bootstrap=100)
    assert (a.p, a.ci_low) != (b.p, b.ci_low)


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_bootstrap_equals_loop_over_documented_resamples(method: str) -> None:
    n, boots, seed = 4, 300, 2
    x = np.array([0.1, 0.4, 0.4, 0.9])
    y = np.array([1.0, 0.8, 1.5, 1.7])
    res = correlation(x, y, method=method, bootstrap=boots, seed=seed, level=0.9, alpha=0.1)
    draws = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1]).integers(0, n, size=(boots, n))
    rhos = np.array([_rho(x[d], y[d], method) for d in draws])
    kept = rhos[np.isfinite(rhos)]
    assert res.bootstrap_dropped == boots - kept.size > 0  # n = 4 with a tie gives constant resamples
    low, high = np.quantile(kept, [0.05, 0.95])
    assert abs(res.ci_low - low) < TOL and abs(res.ci_high - high) < TOL
    assert f"{res.bootstrap_dropped} of {boots} bootstrap resamples" in res.note


def test_no_bootstrap_gives_nan_interval() -> None:
    res = correlation(*_data(10), permutations=100, bootstrap=0)
    assert math.isnan(res.ci_low) and math.isnan(res.ci_high)


# --------------------------------------------------------------------------- reachability, notes, errors


def test_unreachable_level_warns_and_notes() -> None:
    x, y = _data(4, seed=8)
    with pytest.warns(
        StatsWarning, match=r"n = 4: the smallest attainable p is 0\.0833; nothing can be significant at 0\.05"
    ):
        res = correlation(x, y, bootstrap=0)
    assert not res.reachable and "nothing can be significant at 0.05" in res.note
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert correlation(x, y, bootstrap=0, alpha=0.1).reachable  # 0.0833 <= 0.1
        assert correlation(*_data(5), bootstrap=0).reachable  # 2/120 = 0.0167


def test_monte_carlo_floor_can_block_the_level() -> None:
    with pytest.warns(StatsWarning, match="raise permutations"):
        res = correlation(*_data(30), permutations=10, bootstrap=0)
    assert not res.reachable and res.min_attainable_p < 1e-20


def test_ties_note_in_the_exact_regime() -> None:
    res = correlation([1.0, 1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 5.0], bootstrap=0)
    assert "ties: the smallest attainable p is above the 2/n! shown" in res.note


@pytest.mark.parametrize(("x", "note"), [([2.0, 2.0, 2.0, 2.0, 2.0], "x is constant: rho is undefined")])
def test_constant_column_gives_nan_and_a_note(x: list[float], note: str) -> None:
    y = [1.0, 3.0, 2.0, 5.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = correlation(x, y)
        both = correlation(x, x, labels=("depth", "acc"))
    assert math.isnan(res.rho) and math.isnan(res.p) and math.isnan(res.ci_low)
    assert res.note == note and res.p_method == "none" and res.permutations == 0
    assert both.note == "depth and acc are constant: rho is undefined"
    assert correlation(y, x).note == "y is constant: rho is undefined"


def test_nan_raises_naming_positions_or_is_omitted() -> None:
    x, y = _data(12, seed=9)
    x[[2, 7]] = np.nan
    with pytest.raises(StatsError, match=r"x has NaN at positions \[2, 7\].*nan_policy='omit'"):
        correlation(x, y)
    res = correlation(x, y, nan_policy="omit", permutations=200, bootstrap=50)
    keep = np.isfinite(x)
    clean = correlation(x[keep], y[keep], permutations=200, bootstrap=50)
    assert res.n == 10 and res.n_dropped == 2 and "2 pairs with NaN dropped" in res.note
    assert (res.rho, res.p, res.ci_low, res.ci_high) == (clean.rho, clean.p, clean.ci_low, clean.ci_high)


@pytest.mark.parametrize(
    ("x", "y", "kwargs", "match"),
    [
        ([1.0, 2.0], [2.0, 1.0], {}, "at least 3 pairs"),
        ([1.0, 2.0, np.nan, 4.0], [2.0, 1.0, 3.0, np.nan], {"nan_policy": "omit"}, "after dropping 2 NaN pairs"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], {}, "pair row by row"),
        ([1.0, 2.0, np.inf], [1.0, 2.0, 3.0], {}, "infinite"),
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], {"method": "kendall"}, "'spearman' or 'pearson'"),
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], {"permutations": 0}, "permutations must be an integer >= 1"),
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], {"level": 1.5}, "level"),
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], {"nan_policy": "drop"}, "nan_policy"),
    ],
)
def test_bad_input_raises(x, y, kwargs, match: str) -> None:
    with pytest.raises(StatsError, match=match) as info:
        correlation(x, y, **kwargs)
    assert isinstance(info.value, InterlinguaError) and isinstance(info.value, ValueError)


def test_result_to_dict() -> None:
    res = correlation(*_data(8), permutations=100, bootstrap=20, labels=("depth", "acc"))
    assert isinstance(res, Correlation)
    out = res.to_dict()
    assert out["labels"] == ["depth", "acc"] and out["p_method"] == "monte carlo" and out["n"] == 8
