"""The feature form of the linear-CKA permutation null (issue 39, item 3): no n x n matrix.

With centred X and Y, ``<K, L[p][:, p]> = ||X^T Y[p]||_F^2`` (biased) and the U-centred inner product adds
two diagonal terms (debiased); the tests hold it to the Gram gather on the measure's own unit Grams,
permutation by permutation, and check the p-values and calibration thresholds it gives.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest

from interlingua.analysis.inference import grid_permutation_test, permutation_test
from interlingua.analysis.inference import permutation as perm_module
from interlingua.analysis.inference._gram import (
    FeatureNull,
    GramGather,
    feature_null_is_cheaper,
    permutation_batches,
)
from interlingua.analysis.inference.calibration import calibrate, calibrate_grid
from interlingua.analysis.measures import MeasureWarning, get_measure

IDS = ["cka_linear_biased", "cka_linear_debiased"]


def _layers(n: int, widths: list[int], seed: int, signal: np.ndarray | None = None) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for w in widths:
        x = rng.standard_normal((n, w)) * rng.uniform(0.1, 10)
        if signal is not None:
            x[:, 0] += 3 * signal
        out.append(x)
    return out


@pytest.mark.parametrize("mid", IDS)
def test_feature_null_equals_the_gram_gather_draw_by_draw(mid: str) -> None:
    """Every cell of every draw (and the identity) to 1e-12 of the unit-Gram inner product."""
    n = 120
    z = np.random.default_rng(1).standard_normal(n)
    A, B = _layers(n, [3, 7], 2, z), _layers(n, [5, 1, 9], 3, z)
    m = get_measure(mid)
    feat = FeatureNull(A, B, debiased=m.params["debiased"])
    gath = GramGather([m.unit_gram(a) for a in A], [m.unit_gram(b) for b in B])
    perms = np.vstack([np.arange(n), next(permutation_batches(n, 40, 7, 40))])
    got, ref = feat.values(perms), gath.values(perms)
    assert got.shape == ref.shape == (41, 2, 3)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    assert got[0, 1, 2] == pytest.approx(m(A[1], B[2]), abs=1e-12)


@pytest.mark.parametrize("mid", IDS)
def test_a_side_without_variance_is_nan_in_both_forms(mid: str) -> None:
    n = 30
    A, B = _layers(n, [4], 5), [np.ones((n, 3))]
    m = get_measure(mid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        ref = GramGather([m.unit_gram(A[0])], [m.unit_gram(B[0])]).values(np.arange(n)[None])
    got = FeatureNull(A, B, debiased=m.params["debiased"]).values(np.arange(n)[None])
    assert np.isnan(ref).all() and np.isnan(got).all()


@pytest.mark.parametrize("mid", IDS)
def test_scalar_null_takes_the_feature_form_with_the_same_p_and_tau(mid: str) -> None:
    """n = 400, p = 6, q = 4 (product 24 < 3 n): the default path is the feature form; against the forced
    Gram gather with the same seed, the null agrees to 1e-12, the p-value and the calibration threshold tau
    (the null's order statistic) are the same."""
    n = 400
    z = np.random.default_rng(4).standard_normal(n)
    (x,), (y,) = _layers(n, [6], 8, 0.3 * z), _layers(n, [4], 9, 0.3 * z)
    feat = permutation_test(mid, x, y, n_permutations=300, seed=11)
    gram = permutation_test(mid, x, y, n_permutations=300, seed=11, fast=True)
    assert (feat.method, gram.method) == ("feature", "gram_gather")
    np.testing.assert_allclose(feat.null, gram.null, rtol=0, atol=1e-12)
    assert feat.p_value == gram.p_value
    cf, cg = calibrate(feat.observed, feat.null), calibrate(gram.observed, gram.null)
    assert cf.tau == pytest.approx(cg.tau, abs=1e-12) and cf.p_value == cg.p_value


@pytest.mark.parametrize("mid", IDS)
def test_grid_null_feature_form_gives_the_gram_grid_results(mid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 150
    z = np.random.default_rng(6).standard_normal(n)
    A, B = _layers(n, [3, 5, 4], 10, 0.4 * z), _layers(n, [2, 6], 11, 0.4 * z)
    feat = grid_permutation_test(A, B, measure=mid, n_permutations=120, seed=3)
    monkeypatch.setattr(perm_module, "feature_null_is_cheaper", lambda *a: False)
    gram = grid_permutation_test(A, B, measure=mid, n_permutations=120, seed=3)
    for name in ("grid", "null", "cell_null"):
        np.testing.assert_allclose(getattr(feat, name), getattr(gram, name), rtol=0, atol=1e-12)
    assert feat.p_value == gram.p_value and feat.argmax == gram.argmax
    np.testing.assert_array_equal(feat.cell_p_values, gram.cell_p_values)
    np.testing.assert_array_equal(feat.adjusted_p_values, gram.adjusted_p_values)
    tf, tg = calibrate_grid(feat.grid, feat.cell_null), calibrate_grid(gram.grid, gram.cell_null)
    np.testing.assert_allclose(tf.cell_tau, tg.cell_tau, rtol=0, atol=1e-12)
    assert tf.maximum.tau == pytest.approx(tg.maximum.tau, abs=1e-12)
    assert tf.maximum.p_value == tg.maximum.p_value


def test_the_choice_follows_the_cost_model() -> None:
    """Gather: GATHER_COST n^2 a cell and draw; feature: 2 n sum(p) sum(q); the Gram path ends at 12,000 rows."""
    assert feature_null_is_cheaper(1000, [32], [32])  # 2 * 1024 < 6 * 1000
    assert not feature_null_is_cheaper(1000, [768], [768])
    assert feature_null_is_cheaper(6000, [64] * 3, [64] * 3)  # 2 * 192^2 = 73,728 < 6 * 6000 * 9 = 324,000
    assert not feature_null_is_cheaper(6000, [256] * 3, [256] * 3)
    assert feature_null_is_cheaper(12_001, [4096], [4096])


def test_the_feature_null_at_6000_rows_allocates_far_less_than_one_gram() -> None:
    """n = 6,000 rows, 3 x 3 layers of width 16: one n x n float64 Gram is 288 MB, the Gram path keeps
    (Lb + La / 2) of them (1.3 GB); the feature form's peak (tracemalloc: numpy's allocations) is under 20 MB."""
    n = 6000
    A, B = _layers(n, [16] * 3, 12), _layers(n, [16] * 3, 13)
    tracemalloc.start()
    try:
        res = grid_permutation_test(A, B, n_permutations=20, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.grid.shape == (3, 3) and np.isfinite(res.p_value)
    assert peak < 20 * 2**20, peak / 2**20


def test_the_null_and_the_cost_model_price_a_gathered_entry_alike() -> None:
    from interlingua.analysis.inference import _gram
    from interlingua.pipeline import cost

    assert cost.GATHER_COST == _gram.GATHER_COST
