"""The layer grid and its null hold no more than they must: the grid's memory is linear in n.

`cka_grid`'s Gram path accumulates the products of the centred Grams over row blocks of their
upper triangles; these tests check it against the whole-Gram form (`unit_centred_gram` stacks and
one product, what it computed before) and count what it allocates.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import interlingua.analysis.measures.cka as cka_mod
from interlingua.analysis.inference import grid_permutation_test
from interlingua.analysis.inference import permutation as perm_module
from interlingua.analysis.inference._gram import (
    GramGather,
    feature_null_is_cheaper,
    feature_null_peak_bytes,
    grid_null_peak_bytes,
)
from interlingua.analysis.measures import MeasureWarning, cka_grid, unit_centred_gram
from interlingua.analysis.measures.cka import cka_grid_peak_bytes


def _whole_gram_grid(a: list[np.ndarray], b: list[np.ndarray], debiased: bool) -> np.ndarray:
    ga = np.stack([unit_centred_gram(x, debiased).reshape(-1) for x in a])
    gb = np.stack([unit_centred_gram(x, debiased).reshape(-1) for x in b])
    return ga @ gb.T


def _sides(n: int, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 5))
    a = [(z @ rng.standard_normal((5, p)) + rng.standard_normal((n, p))).astype(np.float32) for p in (9, 30, 4)]
    b = [z @ rng.standard_normal((5, p)) + 3 * rng.standard_normal((n, p)) + 100.0 for p in (12, 7)]
    return a, b


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("budget", [None, 4000, 1])  # one block, a few blocks, one row per block
def test_blocked_grid_equals_whole_gram_form(monkeypatch: pytest.MonkeyPatch, debiased: bool, budget) -> None:
    if budget is not None:
        monkeypatch.setattr(cka_mod, "GRID_BLOCK_BYTES", budget)
    a, b = _sides(41)
    want = _whole_gram_grid(a, b, debiased)
    got = cka_grid(a, b, debiased, method="gram")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    want_self = _whole_gram_grid(a, a, debiased)
    np.testing.assert_allclose(cka_grid(a, None, debiased, method="gram"), want_self, rtol=1e-12, atol=0)
    # the feature path is the same quantity by another route
    np.testing.assert_allclose(cka_grid(a, b, debiased, method="feature"), want, rtol=1e-12, atol=0)


def test_blocked_grid_nan_for_a_layer_without_variance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cka_mod, "GRID_BLOCK_BYTES", 2000)
    a, b = _sides(30, seed=1)
    b.append(np.full((30, 3), 7.0))
    with pytest.warns(MeasureWarning, match=r"layers_b \[2\]"):
        grid = cka_grid(a, b, method="gram")
    assert np.isnan(grid[:, 2]).all() and np.isfinite(grid[:, :2]).all()


@pytest.mark.parametrize("method", ["gram", "feature"])
def test_grid_never_writes_the_callers_arrays(method: str) -> None:
    a, b = _sides(25, seed=2)
    a64 = [x.astype(np.float64) for x in a]
    stacked = np.stack([x[:, :4] for x in a64])  # (L, n, p) float64: its layers are views
    before = [x.copy() for x in a64] + [y.copy() for y in b] + [stacked.copy()]
    cka_grid(a64, b, method=method)
    cka_grid(stacked, None, method=method)
    for x, y in zip([*a64, *b, stacked], before):
        np.testing.assert_array_equal(x, y)


def test_grid_memory_is_linear_in_n(monkeypatch: pytest.MonkeyPatch) -> None:
    """At n = 3000 the Gram path allocates far less than ONE n x n Gram (72 MB), within its estimate."""
    monkeypatch.setattr(cka_mod, "GRID_BLOCK_BYTES", 4 * 2**20)
    n = 3000
    rng = np.random.default_rng(3)
    a = [rng.standard_normal((n, 6)) for _ in range(3)]
    b = [rng.standard_normal((n, 5)) for _ in range(2)]
    tracemalloc.start()
    try:
        cka_grid(a, b, True, method="gram")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    est = cka_grid_peak_bytes(n, [6] * 3, [5] * 2, method="gram", input_float64=True)
    assert peak < 8 * n * n / 4
    assert 0.5 * est <= peak <= 1.1 * est


def test_grid_null_holds_side_b_once_and_builds_side_a_one_gram_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _sides(60, seed=4)
    stack = np.stack([unit_centred_gram(y) for y in b])
    gather = GramGather([unit_centred_gram(x) for x in a], stack)
    assert np.shares_memory(gather._b, stack)  # no copy of side B
    import interlingua.analysis.measures.cka as c

    live = {"now": 0, "max": 0, "calls": 0}
    real = c._unit_centred_gram

    class Tracked(np.ndarray):
        def __del__(self) -> None:
            live["now"] -= 1

    def counting(X, debiased, stacklevel):
        live["calls"] += 1
        live["now"] += 1
        live["max"] = max(live["max"], live["now"])
        return real(X, debiased, stacklevel).view(Tracked)

    monkeypatch.setattr(c, "_unit_centred_gram", counting)
    # these widths take the feature form (no Gram at all); the Gram path is what is measured here
    monkeypatch.setattr(perm_module, "feature_null_is_cheaper", lambda *a: False)
    res = grid_permutation_test(a, b, n_permutations=30, seed=1)
    assert live["calls"] == len(a) + len(b)  # each Gram computed once
    assert live["max"] <= 2  # never the whole list of side A's (or B's) Grams at once
    # the same null as Grams handed over as lists
    monkeypatch.undo()
    whole = GramGather([unit_centred_gram(x) for x in a], [unit_centred_gram(y) for y in b])
    perms = np.stack([np.random.default_rng(1).permutation(60)])
    np.testing.assert_array_equal(whole.values(np.arange(60)[None])[0], res.grid)
    assert whole.values(perms).shape == (1, 3, 2)


def test_grid_null_peak_is_its_estimate_and_quadratic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perm_module, "feature_null_is_cheaper", lambda *a: False)  # the Gram path
    n = 600
    rng = np.random.default_rng(5)
    a = [rng.standard_normal((n, 10), dtype=np.float32) for _ in range(3)]
    b = [rng.standard_normal((n, 8), dtype=np.float32) for _ in range(2)]
    tracemalloc.start()
    try:
        grid_permutation_test(a, b, n_permutations=5, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    est = grid_null_peak_bytes(n, 3, 2, width_a=10, width_b=8)
    assert 0.6 * est <= peak <= 1.1 * est
    # side B's Grams whole and half of side A's: (Lb + La / 2) n^2 floats at least; 4x the bytes at 2n
    assert grid_null_peak_bytes(2000, 13, 13) > (13 + 6.5) * 2000**2 * 8
    assert grid_null_peak_bytes(2000, 13, 13) / grid_null_peak_bytes(1000, 13, 13) == pytest.approx(4, rel=0.05)


def test_feature_null_peak_is_its_estimate_and_linear() -> None:
    """The widths (10, 8) at n = 3,000 take the feature form: its peak (tracemalloc) is within its estimate,
    which is linear in n, and far below the Gram path's."""
    n = 3000
    rng = np.random.default_rng(6)
    a = [rng.standard_normal((n, 10), dtype=np.float32) for _ in range(3)]
    b = [rng.standard_normal((n, 8), dtype=np.float32) for _ in range(2)]
    assert feature_null_is_cheaper(n, [10] * 3, [8] * 2)
    tracemalloc.start()
    try:
        grid_permutation_test(a, b, n_permutations=5, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    est = feature_null_peak_bytes(n, [10] * 3, [8] * 2)
    assert 0.5 * est <= peak <= 1.1 * est, (peak, est)
    assert feature_null_peak_bytes(2 * n, [10] * 3, [8] * 2) / est == pytest.approx(2, rel=0.01)
    assert est < grid_null_peak_bytes(n, 3, 2, width_a=10, width_b=8) / 50
