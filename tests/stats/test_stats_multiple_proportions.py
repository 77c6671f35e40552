"""benjamini_hochberg and wilson_interval against statsmodels (the test-only reference)."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from interlingua.analysis.stats import StatsError, benjamini_hochberg, wilson_interval

TOL = 1e-12


@pytest.mark.parametrize("m", [1, 2, 7, 55, 400])
def test_bh_equals_statsmodels(m: int) -> None:
    rng = np.random.default_rng(m)
    p = np.concatenate([rng.uniform(size=m - m // 3), rng.uniform(0, 0.01, size=m // 3)])
    p[: m // 5] = p[m // 5 : 2 * (m // 5)]  # ties
    q = benjamini_hochberg(p)
    assert np.abs(q - multipletests(p, method="fdr_bh")[1]).max() < TOL


def test_bh_nan_passes_through_and_is_not_counted() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 0.2, size=30)
    p[[2, 9, 20]] = np.nan
    q = benjamini_hochberg(p)
    keep = ~np.isnan(p)
    assert np.isnan(q[~keep]).all()
    assert np.abs(q[keep] - multipletests(p[keep], method="fdr_bh")[1]).max() < TOL


def test_bh_monotone_clipped_shape_kept() -> None:
    p = np.array([[0.01, 0.9], [0.04, 0.03]])
    q = benjamini_hochberg(p)
    assert q.shape == (2, 2) and (q <= 1).all() and (q >= p).all()
    order = np.argsort(p.ravel())
    assert (np.diff(q.ravel()[order]) >= 0).all()
    assert benjamini_hochberg([1.0, 1.0]).tolist() == [1.0, 1.0] and benjamini_hochberg([]).size == 0
    assert np.isnan(benjamini_hochberg([np.nan])).all()


@pytest.mark.parametrize("bad", [[0.2, 1.5], [-0.1], ["a"]])
def test_bh_bad_input_raises(bad: list) -> None:
    with pytest.raises(StatsError):
        benjamini_hochberg(bad)


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_wilson_equals_statsmodels(level: float) -> None:
    n = np.array([1, 5, 10, 10, 10, 37, 200, 1012])
    k = np.array([0, 5, 0, 3, 10, 20, 199, 611])
    low, high = wilson_interval(k, n, level)
    ref_low, ref_high = proportion_confint(k, n, alpha=1 - level, method="wilson")
    assert np.abs(low - ref_low).max() < TOL and np.abs(high - ref_high).max() < TOL
    for ki, ni, lo, hi in zip(k, n, low, high):
        assert wilson_interval(int(ki), int(ni), level) == (lo, hi)


def test_wilson_edges() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0 < high < 0.3
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and 0.7 < low < 1.0
    assert isinstance(low, float)


@pytest.mark.parametrize(
    ("k", "n", "match"),
    [(0, 0, "n must be positive"), (11, 10, "between 0 and n"), (-1, 10, "between 0 and n"), (np.nan, 3, "finite")],
)
def test_wilson_bad_input_raises(k: float, n: int, match: str) -> None:
    with pytest.raises(StatsError, match=match):
        wilson_interval(k, n)


def test_wilson_bad_level() -> None:
    with pytest.raises(StatsError, match="level"):
        wilson_interval(1, 2, level=0)
