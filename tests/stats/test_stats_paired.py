"""paired_contrast: agreement with scipy's ttest_rel and wilcoxon, and the degenerate cases in words."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from interlingua.analysis.stats import PairedContrast, StatsError, paired_contrast
from interlingua.analysis.stats.paired import wilcoxon_auto_method
from interlingua.core.errors import InterlinguaError

TOL = 1e-12


def _scipy_method(name: str):
    return sps.PermutationMethod() if name == "permutation" else name


CASES = {
    "distinct, n=9 (exact)": (np.arange(1.0, 10.0) * 1.3 + np.sin(np.arange(1.0, 10.0)), np.arange(1.0, 10.0)),
    "ties, n=10 (permutation)": (
        np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3.0]),
        np.array([2, 2, 2, 2, 2, 8, 1, 5, 3, 1.0]),
    ),
    "zeros, n=10 (permutation)": (
        np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10.0]),
        np.array([1, 2, 0, 4, 1, 7, 7, 2, 9, 3.0]),
    ),
    "ties, n=30 (asymptotic)": (
        np.round(np.random.default_rng(3).normal(size=30), 1),
        np.round(np.random.default_rng(4).normal(size=30), 1),
    ),
    "n=60 (asymptotic)": (np.random.default_rng(5).normal(size=60) + 0.3, np.random.default_rng(6).normal(size=60)),
}


@pytest.mark.parametrize(  # fast: one permutation case; the full suite: every case
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "zeros, n=10 (permutation)" else n for n in CASES]
)
def test_tests_equal_scipy(name: str) -> None:
    a, b = CASES[name]
    res = paired_contrast(a, b)
    assert res.wilcoxon_method == name.split("(")[1].rstrip(")")
    tt, wx = sps.ttest_rel(a, b), sps.wilcoxon(a, b)
    assert abs(res.t - tt.statistic) < TOL and abs(res.t_p - tt.pvalue) < TOL
    assert res.df == len(a) - 1
    assert abs(res.wilcoxon_stat - wx.statistic) < TOL and abs(res.wilcoxon_p - wx.pvalue) < TOL
    # the method named is the one scipy's 'auto' used: asking for it explicitly gives the same p
    explicit = sps.wilcoxon(a, b, method=_scipy_method(res.wilcoxon_method))
    assert abs(explicit.pvalue - res.wilcoxon_p) < TOL


def test_auto_method_resolution() -> None:
    assert wilcoxon_auto_method(np.arange(1.0, 10.0)) == "exact"
    assert wilcoxon_auto_method(np.array([1.0, 1.0, 2.0, 3.0])) == "permutation"  # ties, n <= 13
    assert wilcoxon_auto_method(np.array([0.0, 1.0, 2.0, 3.0])) == "permutation"  # a zero
    assert wilcoxon_auto_method(np.r_[np.zeros(1), np.arange(1.0, 20.0)]) == "asymptotic"  # zero, n > 13
    assert wilcoxon_auto_method(np.arange(1.0, 52.0)) == "asymptotic"  # n > 50


def test_means_and_t_interval_equal_scipy() -> None:
    a, b = CASES["distinct, n=9 (exact)"]
    for level in (0.9, 0.95, 0.99):
        res = paired_contrast(a, b, level=level)
        ci = sps.ttest_rel(a, b).confidence_interval(confidence_level=level)
        assert abs(res.ci_low - ci.low) < TOL and abs(res.ci_high - ci.high) < TOL
    d = a - b
    assert abs(res.mean_a - a.mean()) < TOL and abs(res.mean_b - b.mean()) < TOL
    assert abs(res.mean_diff - d.mean()) < TOL and abs(res.sd_diff - d.std(ddof=1)) < TOL
    assert res.n == 9 and res.n_nonzero == 9 and res.note == ""


def test_smallest_wilcoxon_p_is_attained_when_all_differences_share_a_sign() -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0])
    res = paired_contrast(a + np.array([0.1, 0.2, 0.3, 0.4]), a)
    assert res.wilcoxon_min_p == 2 / 2**4 == 0.125
    assert res.wilcoxon_p == pytest.approx(0.125, abs=TOL)  # the exact null's extreme
    assert "smallest attainable Wilcoxon p is 0.125" in res.note and "cannot be significant at 0.05" in res.note


def test_swapping_arms_flips_the_sign_only() -> None:
    a, b = CASES["ties, n=10 (permutation)"]
    ab, ba = paired_contrast(a, b), paired_contrast(b, a)
    assert ab.mean_diff == -ba.mean_diff and abs(ab.t + ba.t) < TOL and abs(ab.t_p - ba.t_p) < TOL
    assert abs(ab.wilcoxon_p - ba.wilcoxon_p) < TOL and abs(ab.ci_low + ba.ci_high) < TOL


def test_identical_arms_no_test() -> None:
    a = [0.5, 0.7, 0.9]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no scipy warnings leak
        res = paired_contrast(a, a)
    assert "all differences are zero: the arms are identical (no test)" in res.note
    assert math.isnan(res.t_p) and math.isnan(res.wilcoxon_p) and math.isnan(res.t)
    assert res.n_nonzero == 0 and res.mean_diff == 0.0 and res.wilcoxon_method == "none"


def test_constant_nonzero_difference_is_noted() -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = paired_contrast(a + 0.5, a)
    assert res.sd_diff == 0.0 and res.t == math.inf and res.t_p == 0.0  # as scipy reports
    assert "sd 0" in res.note and "degenerate" in res.note
    assert res.ci_low == res.ci_high == 0.5


def test_labels_and_to_dict() -> None:
    res = paired_contrast([1.0, 2.0, 4.0], [0.0, 1.0, 1.0], labels=("tuned", "base"))
    assert isinstance(res, PairedContrast)
    out = res.to_dict()
    assert out["labels"] == ["tuned", "base"] and out["n"] == 3 and set(out) >= {"t_p", "wilcoxon_p", "note", "ci_low"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.n = 4  # type: ignore[misc]  # frozen


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        ([1.0], [2.0], "at least 2 pairs"),
        ([1.0, 2.0, 3.0], [1.0, 2.0], "paired cell by cell"),
        ([1.0, np.nan, 3.0, np.nan], [1.0, 2.0, 3.0, 4.0], r"NaN at positions \[1, 3\]"),
        ([1.0, np.inf, 3.0], [1.0, 2.0, 3.0], "infinite"),
        ([[1.0, 2.0]], [[1.0, 2.0]], "one-dimensional"),
        (["x", "y"], [1.0, 2.0], "numeric"),
    ],
)
def test_bad_input_raises(a, b, match: str) -> None:
    with pytest.raises(StatsError, match=match) as info:
        paired_contrast(a, b)
    assert isinstance(info.value, InterlinguaError) and isinstance(info.value, ValueError)


def test_bad_level_raises() -> None:
    with pytest.raises(StatsError, match="level"):
        paired_contrast([1.0, 2.0], [0.0, 0.5], level=95)
