"""Grid-maximum permutation test: the observed grid is CKA, the max-null dominates every cell's null."""

from __future__ import annotations

import numpy as np
import pytest
from inference_helpers import correlated_layers, null_pair, ref_cka
from scipy import stats

from interlingua.analysis.inference import grid_permutation_test, permutation_test
from interlingua.analysis.measures import MeasureWarning, cka_grid
from interlingua.core.errors import MeasureInputError


@pytest.mark.parametrize("debiased", [False, True])
def test_observed_grid_is_linear_cka(debiased: bool) -> None:
    a, b = correlated_layers(np.random.default_rng(0), 4, 30, 12)
    b = list(b[:3]) + [b[3][:, :5]]  # widths may differ across layers
    res = grid_permutation_test(a, b, debiased=debiased, n_permutations=10, seed=0)
    np.testing.assert_allclose(res.grid, cka_grid(a, b, debiased=debiased), rtol=0, atol=1e-12)
    assert res.grid[2, 1] == pytest.approx(ref_cka(a[2], b[1], debiased), abs=1e-12)
    assert res.observed == res.grid.max() and res.grid[res.argmax] == res.observed


@pytest.mark.parametrize("debiased", [False, True])
def test_max_null_dominates_every_cell_null_draw_by_draw(debiased: bool) -> None:
    a, b = correlated_layers(np.random.default_rng(1), 3, 25, 10)
    k, seed = 80, 4
    grid = grid_permutation_test(a, b, debiased=debiased, n_permutations=k, seed=seed)
    mid = "cka_linear_debiased" if debiased else "cka_linear_biased"
    for i in range(3):
        for j in range(3):
            cell = permutation_test(mid, a[i], b[j], n_permutations=k, seed=seed, fast=True)
            assert np.all(grid.null >= cell.null - 1e-12)
            assert grid.cell_p_values[i, j] == pytest.approx(cell.p_value)
            assert grid.adjusted_p_values[i, j] >= cell.p_value
    i, j = grid.argmax
    assert grid.p_value >= grid.cell_p_values[i, j]
    assert grid.adjusted_p_values[i, j] == grid.p_value


def test_grid_pvalues_uniform_under_global_null() -> None:
    rng = np.random.default_rng(5)
    k = 99
    pvals = []
    for s in range(120):
        a = np.stack([null_pair(rng, 10, 2, 2)[0] for _ in range(3)])
        b = np.stack([null_pair(rng, 10, 2, 2)[0] for _ in range(2)])
        pvals.append(grid_permutation_test(a, b, n_permutations=k, seed=s).p_value)
    pvals_arr = np.array(pvals)
    assert stats.kstest(pvals_arr, "uniform").pvalue > 0.001
    lo, hi = int(stats.binom.ppf(0.0005, 120, 0.05)), int(stats.binom.isf(0.0005, 120, 0.05))
    assert lo <= np.count_nonzero(pvals_arr <= 0.05) <= hi


def test_grid_signal_is_detected_and_reproducible() -> None:
    a, b = correlated_layers(np.random.default_rng(6), 3, 60, 16)
    r1 = grid_permutation_test(a, b, n_permutations=99, seed=1)
    r2 = grid_permutation_test(a, b, n_permutations=99, seed=1)
    assert r1.p_value == pytest.approx(0.01)
    np.testing.assert_allclose(r1.null, r2.null, rtol=0, atol=1e-14)  # same permutations, same values
    assert r1.null_quantiles[0.99] < r1.observed


def test_grid_torch_agrees_with_numpy() -> None:
    pytest.importorskip("torch")
    a, b = correlated_layers(np.random.default_rng(7), 3, 20, 8)
    ref = grid_permutation_test(a, b, debiased=True, n_permutations=30, seed=0)
    res = grid_permutation_test(a, b, debiased=True, n_permutations=30, seed=0, device="cpu")
    np.testing.assert_allclose(res.null, ref.null, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.grid, ref.grid, rtol=0, atol=1e-12)


def test_grid_bad_inputs_raise() -> None:
    a, b = correlated_layers(np.random.default_rng(8), 2, 12, 4)
    with pytest.raises(MeasureInputError, match="every layer must hold the same"):
        grid_permutation_test(a, [b[0], b[1][:10]], n_permutations=5)
    with pytest.raises(MeasureInputError, match="expected \\(L, n, p\\)"):
        grid_permutation_test(a[0], b, n_permutations=5)
    with pytest.raises(MeasureInputError, match="is empty"):
        grid_permutation_test([], b, n_permutations=5)
    with pytest.raises(MeasureInputError, match="n_permutations"):
        grid_permutation_test(a, b, n_permutations=0)
    with pytest.raises(MeasureInputError, match="at least 4 paired examples"):
        grid_permutation_test(a[:, :3], b[:, :3], debiased=True, n_permutations=5)


def test_constant_layer_is_skipped_by_the_maximum() -> None:
    a, b = correlated_layers(np.random.default_rng(9), 3, 30, 6)
    a[1] = 1.0  # no variance: its CKA row is undefined
    with pytest.warns(MeasureWarning, match="centred Gram is 0"):
        res = grid_permutation_test(a, b, n_permutations=20, seed=0)
    assert np.all(np.isnan(res.grid[1])) and np.all(np.isnan(res.cell_p_values[1]))
    assert res.observed == np.nanmax(res.grid) and res.argmax[0] != 1
    assert np.all(np.isfinite(res.null)) and np.isfinite(res.p_value)


@pytest.mark.parametrize("debiased", [False, True])
def test_constant_column_in_a_layer_changes_nothing(debiased: bool) -> None:
    """Appending a constant column (inexact float mean) to a layer leaves its grid row and the
    max-statistic p-value unchanged (layers scaled by 2^-27 so that centring residue would show)."""
    a, b = correlated_layers(np.random.default_rng(10), 3, 30, 6)
    a = a * 2.0**-27
    a_const = [np.column_stack([layer, np.full(30, 0.1)]) for layer in a]
    a_const[1][:, 2] = 1e5 / 3
    with_const = grid_permutation_test(a_const, b, debiased=debiased, n_permutations=100, seed=1)
    without = grid_permutation_test(
        [a[0], np.delete(a[1], 2, axis=1), a[2]], b, debiased=debiased, n_permutations=100, seed=1
    )
    np.testing.assert_allclose(with_const.grid, without.grid, atol=1e-12)
    np.testing.assert_allclose(with_const.null, without.null, atol=1e-12)
    assert with_const.p_value == without.p_value
