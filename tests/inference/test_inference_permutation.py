"""Permutation tests: calibration under the null, power under a planted signal, exactness of the Gram gather."""

from __future__ import annotations

import numpy as np
import pytest
from inference_helpers import null_pair, ref_cka, signal_pair
from scipy import stats

from interlingua.analysis.inference import permutation_test, shuffle_permutation
from interlingua.analysis.inference._gram import permutation_batches
from interlingua.analysis.measures import get_measure, linear_cka
from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult
from interlingua.core.errors import MeasureInputError

CKA_IDS = ["cka_linear_biased", "cka_linear_debiased"]


def _binomial_band(trials: int, prob: float, alpha: float = 0.001) -> tuple[int, int]:
    return int(stats.binom.ppf(alpha / 2, trials, prob)), int(stats.binom.isf(alpha / 2, trials, prob))


def _assert_uniform(pvals: np.ndarray, k: int) -> None:
    """Permutation p-values live on {1/(K+1), ..., 1}; under H0 P(p <= j/(K+1)) = j/(K+1) exactly."""
    assert stats.kstest(pvals, "uniform").pvalue > 0.001
    lo, hi = _binomial_band(len(pvals), 0.05)
    assert lo <= np.count_nonzero(pvals <= 0.05) <= hi
    assert pvals.min() >= 1 / (k + 1)


@pytest.mark.parametrize("mid", CKA_IDS)
def test_pvalues_uniform_under_null_gram_path(mid: str) -> None:
    rng = np.random.default_rng(20240601)
    k = 199
    pvals = np.array(
        [
            permutation_test(mid, *null_pair(rng, 12, 3, 2), n_permutations=k, seed=s, fast=True).p_value
            for s in range(200)
        ]
    )
    _assert_uniform(pvals, k)


def test_pvalues_uniform_under_null_recompute_distance() -> None:
    """A distance (smaller = more similar) tests the lower tail and is calibrated too."""

    def mean_sq_dist(X: np.ndarray, Y: np.ndarray) -> float:
        return float(np.mean((X - Y) ** 2))

    rng = np.random.default_rng(7)
    k = 99
    pvals = np.array(
        [
            permutation_test(
                mean_sq_dist, *null_pair(rng, 10, 2, 2), n_permutations=k, seed=s, larger_is_more_similar=False
            ).p_value
            for s in range(150)
        ]
    )
    _assert_uniform(pvals, k)


@pytest.mark.parametrize("mid", CKA_IDS)
def test_planted_signal_gives_the_smallest_pvalue(mid: str) -> None:
    X, Y = signal_pair(np.random.default_rng(3), 40, 6, 5)
    res = permutation_test(mid, X, Y, n_permutations=199, seed=1)
    assert res.p_value == pytest.approx(1 / 200)
    assert res.observed > res.null_quantiles[0.99]


def test_distance_direction_is_read_from_metadata() -> None:
    """A Measure declaring larger_is_more_similar=False counts null values <= observed."""

    def fn(X: np.ndarray, Y: np.ndarray) -> MeasureResult:
        return MeasureResult(float(np.mean((X - Y) ** 2)), "", "mean squared distance", X.shape[0])

    dist = Measure("test_sq_distance", MeasureMetadata(False, True, frozenset()), fn)
    X, Y = signal_pair(np.random.default_rng(4), 30, 3, 3, noise=0.1)
    Y = X + 0.1 * Y  # nearly identical rows: a tiny distance, far below every permuted one
    res = permutation_test(dist, X, Y, n_permutations=99, seed=0)
    assert not res.larger_is_more_similar
    assert res.p_value == pytest.approx(1 / 100)
    assert np.all(res.null > res.observed)
    with pytest.raises(MeasureInputError, match="contradicts the measure's metadata"):
        permutation_test(dist, X, Y, n_permutations=9, larger_is_more_similar=True)


def test_ties_count_as_extreme() -> None:
    """A statistic that ignores the pairing ties with every permutation: p = 1 exactly."""
    X, Y = null_pair(np.random.default_rng(0), 20, 3, 3)
    res = permutation_test(lambda a, b: 0.25, X, Y, n_permutations=49, seed=0)
    assert res.p_value == 1.0


@pytest.mark.parametrize("mid", CKA_IDS)
@pytest.mark.parametrize("shape", [(30, 50, 7), (64, 5, 90), (9, 3, 3)])
def test_gram_gather_equals_recomputation(mid: str, shape: tuple[int, int, int]) -> None:
    n, p, q = shape
    X, Y = signal_pair(np.random.default_rng(n + p + q), n, p, q)
    fast = permutation_test(mid, X, Y, n_permutations=60, seed=5, fast=True)
    slow = permutation_test(mid, X, Y, n_permutations=60, seed=5, fast=False)
    assert fast.method == "gram_gather" and slow.method == "recompute"
    np.testing.assert_allclose(fast.null, slow.null, rtol=0, atol=1e-12)
    assert fast.p_value == slow.p_value
    # ...and with the textbook definition on explicitly permuted rows
    debiased = mid.endswith("debiased")
    perms = next(permutation_batches(n, 5, 5, 5))
    for j, perm in enumerate(perms):
        assert fast.null[j] == pytest.approx(ref_cka(X, Y[perm], debiased), abs=1e-12)


def test_shuffled_control_is_the_first_null_draw() -> None:
    X, Y = signal_pair(np.random.default_rng(11), 25, 4, 4)
    res = permutation_test("cka_linear_biased", X, Y, n_permutations=10, seed=42)
    assert res.null[0] == pytest.approx(linear_cka(X, Y[shuffle_permutation(25, 42)]), abs=1e-12)


def test_same_seed_same_result_different_seed_different() -> None:
    X, Y = null_pair(np.random.default_rng(2), 40, 6, 6)
    a = permutation_test("cka_linear_debiased", X, Y, n_permutations=100, seed=9)
    b = permutation_test("cka_linear_debiased", X, Y, n_permutations=100, seed=9)
    c = permutation_test("cka_linear_debiased", X, Y, n_permutations=100, seed=10)
    # same permutations, so the same values (to rounding: BLAS need not repeat bit for bit)
    np.testing.assert_allclose(a.null, b.null, rtol=0, atol=1e-14)
    assert a.p_value == b.p_value
    assert list(a.null_quantiles.values()) == pytest.approx(list(b.null_quantiles.values()), rel=0, abs=1e-14)
    assert np.abs(a.null - c.null).max() > 1e-3  # other permutations, other values


def test_null_does_not_depend_on_batching_or_memory_budget() -> None:
    X, Y = signal_pair(np.random.default_rng(12), 50, 8, 8)
    big = permutation_test("cka_linear_biased", X, Y, n_permutations=70, seed=3, fast=True)
    tiny = permutation_test("cka_linear_biased", X, Y, n_permutations=70, seed=3, fast=True, memory_bytes=1)
    np.testing.assert_allclose(big.null, tiny.null, rtol=0, atol=1e-13)  # only the summation order differs
    assert big.p_value == tiny.p_value


@pytest.mark.parametrize("mid", CKA_IDS)
def test_torch_gather_agrees_with_numpy(mid: str) -> None:
    pytest.importorskip("torch")
    X, Y = signal_pair(np.random.default_rng(13), 33, 10, 6)
    ref = permutation_test(mid, X, Y, n_permutations=40, seed=2, fast=True)
    devices = ["cpu"]
    import torch

    if torch.cuda.is_available():
        devices.append("cuda")
    for device in devices:
        res = permutation_test(mid, X, Y, n_permutations=40, seed=2, device=device)
        np.testing.assert_allclose(res.null, ref.null, rtol=0, atol=1e-12)


def test_measure_kwargs_reach_every_call() -> None:
    """ANC requires same_model=True; the test passes it to the observed and every permuted call."""
    anc = get_measure("anc_abs")
    X, Y = signal_pair(np.random.default_rng(14), 30, 5, 5)
    res = permutation_test(anc, X, Y, n_permutations=19, seed=0, same_model=True)
    assert res.observed == pytest.approx(anc(X, Y, same_model=True))
    with pytest.raises(MeasureInputError):
        permutation_test(anc, X, Y, n_permutations=19, seed=0)


def test_result_fields_and_quantiles() -> None:
    X, Y = null_pair(np.random.default_rng(15), 30, 4, 4)
    res = permutation_test("cka_linear_biased", X, Y, n_permutations=200, seed=0, quantiles=(0.5, 0.95))
    assert res.n_permutations == 200 and res.seed == 0 and res.null.shape == (200,)
    assert res.null_quantiles[0.5] == pytest.approx(np.median(res.null), rel=0, abs=1e-15)
    assert res.null_quantiles[0.95] == pytest.approx(np.quantile(res.null, 0.95), rel=0, abs=1e-15)
    d = res.to_dict()
    assert d["p_value"] == res.p_value and "null" not in d
    assert len(res.to_dict(include_null=True)["null"]) == 200


def test_bad_inputs_raise() -> None:
    X, Y = null_pair(np.random.default_rng(16), 10, 3, 3)
    with pytest.raises(MeasureInputError, match="n_permutations must be an integer >= 1"):
        permutation_test("cka_linear_biased", X, Y, n_permutations=0)
    with pytest.raises(MeasureInputError, match="seed must be a non-negative integer"):
        permutation_test("cka_linear_biased", X, Y, seed=-1)
    with pytest.raises(MeasureInputError, match="rows"):
        permutation_test("cka_linear_biased", X, Y[:9])
    with pytest.raises(MeasureInputError, match="at least 4"):
        permutation_test("cka_linear_debiased", X[:3], Y[:3])
    with pytest.raises(MeasureInputError, match="unknown measure id"):
        permutation_test("cka_typo", X, Y)
    with pytest.raises(MeasureInputError, match="non-finite"):
        permutation_test("cka_linear_biased", np.full_like(X, np.nan), Y)
    with pytest.raises(MeasureInputError, match="quantiles must lie in"):
        permutation_test("cka_linear_biased", X, Y, n_permutations=5, quantiles=(1.5,))
    with pytest.raises(MeasureInputError, match="callable"):
        permutation_test(3.0, X, Y)


def test_side_without_variance_gives_nan_pvalue() -> None:
    """CKA is undefined (nan, with a MeasureWarning) when a side is constant; the test says so with p = nan."""
    from interlingua.analysis.measures import MeasureWarning

    _, Y = null_pair(np.random.default_rng(17), 12, 3, 3)
    with pytest.warns(MeasureWarning, match="self-HSIC of X is <= 0"):
        res = permutation_test("cka_linear_biased", np.ones((12, 3)), Y, n_permutations=9)
    assert np.isnan(res.observed) and np.isnan(res.p_value)


@pytest.mark.parametrize("mid", ["cka_linear_biased", "cka_linear_debiased"])
@pytest.mark.parametrize("fast", [True, False])
def test_constant_column_changes_nothing(mid: str, fast: bool) -> None:
    """A constant column (0.1 and 1e5/3 repeated: float means that are not exact) carries no
    variance, so X with it and X without it have the same CKA, null and p-value, on the Gram
    gather (fast=True) and on recomputation alike. X is scaled by 2^-27 (CKA is scale invariant)
    so that the ~1e-11 residue a plain ``x - x.mean(0)`` leaves in the constant columns would
    show up at ~1e-6 instead of vanishing below rounding."""
    X, Y = signal_pair(np.random.default_rng(21), 30, 6, 5, noise=3.0)
    X = X * 2.0**-27
    X_const = np.column_stack([X[:, :3], np.full(30, 0.1), X[:, 3:], np.full(30, 1e5 / 3)])
    with_const = permutation_test(mid, X_const, Y, n_permutations=200, seed=4, fast=fast)
    without = permutation_test(mid, X, Y, n_permutations=200, seed=4, fast=fast)
    assert with_const.observed == pytest.approx(without.observed, abs=1e-12)
    assert with_const.observed == pytest.approx(linear_cka(X, Y, mid.endswith("debiased")), abs=1e-12)
    np.testing.assert_allclose(with_const.null, without.null, atol=1e-12)
    assert with_const.p_value == without.p_value
