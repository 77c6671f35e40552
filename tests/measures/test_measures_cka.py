"""Linear / RBF CKA: known values, independent formulas, forms, backends, the layer grid."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from measures_helpers import random_orthogonal, related_pair

from interlingua.analysis.measures import (
    MeasureWarning,
    center_gram,
    cka_from_grams,
    cka_grid,
    get_measure,
    gram_linear,
    gram_rbf,
    linear_cka,
    rbf_cka,
)
from interlingua.analysis.measures.cka import _normalised, linear_cka_result
from interlingua.core.errors import MeasureInputError

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def explicit_hkh(K: np.ndarray) -> np.ndarray:
    """The textbook H K H with H formed explicitly (tests only)."""
    n = K.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    return H @ K @ H


def song_unbiased_hsic(K: np.ndarray, L: np.ndarray) -> float:
    """Song et al. (2012), eq. 5, written out term by term."""
    n = K.shape[0]
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (
        np.trace(Kt @ Lt)
        + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
        - 2 / (n - 2) * one @ Kt @ Lt @ one
    ) / (n * (n - 3))


def reference_cka(x: np.ndarray, y: np.ndarray, debiased: bool) -> float:
    K, L = x @ x.T, y @ y.T
    if debiased:
        return song_unbiased_hsic(K, L) / math.sqrt(song_unbiased_hsic(K, K) * song_unbiased_hsic(L, L))
    Kc, Lc = explicit_hkh(K), explicit_hkh(L)
    return float((Kc * Lc).sum() / (np.linalg.norm(Kc) * np.linalg.norm(Lc)))


# --------------------------------------------------------------------------- known values


def test_bias_on_independent_wide_gaussians() -> None:
    """docs/protocol.md, "Estimators": n=100, width 4096, independent: biased ~0.98, debiased ~0."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((100, 4096)), rng.standard_normal((100, 4096))
    assert linear_cka(x, y) > 0.9
    assert abs(linear_cka(x, y, debiased=True)) < 0.05


def test_identity_and_invariances_exactly() -> None:
    rng = np.random.default_rng(1)
    x, _ = related_pair(rng, n=50, p=8, q=8)
    q = random_orthogonal(rng, 8)
    for debiased in (False, True):
        assert linear_cka(x, x, debiased) == pytest.approx(1.0, abs=1e-12)
        assert linear_cka(x, 3.0 * x @ q + 7.0, debiased) == pytest.approx(1.0, abs=1e-12)


def test_not_invariant_to_anisotropic_scaling() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((50, 4))
    assert linear_cka(x, x * np.array([10.0, 1.0, 1.0, 1.0])) < 0.9


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("shape", [(30, 5, 7), (30, 60, 45), (12, 3, 100), (200, 20, 1)])
def test_matches_explicit_formulas(debiased: bool, shape: tuple[int, int, int]) -> None:
    """Biased: explicit H K H; debiased: Song et al.'s formula term by term (no U-centring)."""
    n, p, q = shape
    rng = np.random.default_rng(n + p + q)
    x, y = related_pair(rng, n=n, p=p, q=q)
    want = reference_cka(x, y, debiased)
    for method in ("gram", "feature", "auto"):
        assert linear_cka(x, y, debiased, method=method) == pytest.approx(want, abs=1e-10)


def test_matches_ckatorch() -> None:
    """An independent, widely used implementation (test-only dependency ckatorch)."""
    ckatorch = pytest.importorskip("ckatorch")
    rng = np.random.default_rng(3)
    x, y = related_pair(rng, n=80, p=30, q=50)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    for debiased in (False, True):
        theirs = float(ckatorch.cka_base(tx, ty, kernel="linear", unbiased=debiased))
        assert linear_cka(x, y, debiased) == pytest.approx(theirs, abs=1e-10)
    # their hsic1 is Song et al.'s closed form (batched), independent of U-centring
    K, L = torch.from_numpy(x @ x.T)[None], torch.from_numpy(y @ y.T)[None]
    h = lambda a, b: float(ckatorch.hsic1(a, b))  # noqa: E731
    assert linear_cka(x, y, True) == pytest.approx(h(K, L) / math.sqrt(h(K, K) * h(L, L)), abs=1e-10)
    # their hsic0 forms H explicitly
    h0 = lambda a, b: float(ckatorch.hsic0(a, b))  # noqa: E731
    assert linear_cka(x, y) == pytest.approx(h0(K[0], L[0]) / math.sqrt(h0(K[0], K[0]) * h0(L[0], L[0])), abs=1e-10)


# --------------------------------------------------------------------------- building blocks


def test_center_gram_never_needs_h() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((25, 7)) + 5.0
    K = gram_linear(x)
    np.testing.assert_allclose(center_gram(K), explicit_hkh(K), atol=1e-10)
    Ku = center_gram(K, unbiased=True)
    assert np.all(np.diag(Ku) == 0)
    # <U-centred K, U-centred L> = n (n - 3) x unbiased HSIC
    L = gram_linear(rng.standard_normal((25, 4)))
    n = 25
    assert float((Ku * center_gram(L, unbiased=True)).sum()) == pytest.approx(
        n * (n - 3) * song_unbiased_hsic(K, L), rel=1e-10
    )
    assert not np.shares_memory(Ku, K)
    with pytest.raises(MeasureInputError, match="square"):
        center_gram(np.ones((3, 4)))
    with pytest.raises(MeasureInputError, match="at least 4"):
        center_gram(np.eye(3), unbiased=True)


def test_cka_from_grams_matches_linear_cka() -> None:
    rng = np.random.default_rng(5)
    x, y = related_pair(rng, n=40, p=6, q=9)
    for unbiased in (False, True):
        got = cka_from_grams(center_gram(gram_linear(x), unbiased), center_gram(gram_linear(y), unbiased))
        assert got == pytest.approx(linear_cka(x, y, unbiased), abs=1e-12)
    # a permutation of examples is a gather on the centred Gram (what permutation tests rely on)
    perm = rng.permutation(40)
    Kc, Lc = center_gram(gram_linear(x), True), center_gram(gram_linear(y), True)
    assert cka_from_grams(Kc, Lc[perm][:, perm]) == pytest.approx(linear_cka(x, y[perm], True), abs=1e-12)


def test_self_hsic_guard_returns_nan_with_reason() -> None:
    rng = np.random.default_rng(6)
    x = np.ones((20, 3)) * 4.0  # no variance: every self-HSIC is 0
    y = rng.standard_normal((20, 3))
    for debiased in (False, True):
        for method in ("gram", "feature"):
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # no sqrt-of-negative / 0/0 from numpy
                with pytest.warns(MeasureWarning, match="self-HSIC of X is <= 0"):
                    res = linear_cka_result(x, y, debiased, method=method)
            assert math.isnan(res.value)
            assert "self-HSIC" in res.details["reason"]
    # a negative self term (rounding in the feature form) is caught before the square root
    value, reason = _normalised(0.1, -1e-18, 2.0)
    assert math.isnan(value) and "X" in reason


def test_debiased_can_be_negative() -> None:
    rng = np.random.default_rng(7)
    values = [linear_cka(rng.standard_normal((10, 50)), rng.standard_normal((10, 50)), True) for _ in range(20)]
    assert min(values) < 0 and all(np.isfinite(values))


def test_large_offsets_in_float32() -> None:
    """float32 activations with a large mean: float64 centring keeps full accuracy."""
    rng = np.random.default_rng(8)
    x, y = related_pair(rng, n=64, p=16, q=16)
    x32 = (x + 3e4).astype(np.float32)
    y32 = (y - 1e4).astype(np.float32)
    for debiased in (False, True):
        want = reference_cka(*(a.astype(np.float64) - a.astype(np.float64).mean(0) for a in (x32, y32)), debiased)
        for method in ("gram", "feature"):
            assert linear_cka(x32, y32, debiased, method=method) == pytest.approx(want, abs=1e-10)


# --------------------------------------------------------------------------- forms, backends, grid


@pytest.mark.parametrize("debiased", [False, True])
def test_gram_and_feature_forms_agree(debiased: bool) -> None:
    rng = np.random.default_rng(9)
    for n, p, q in [(10, 3, 40), (100, 300, 20), (500, 8, 8), (4, 2, 2)]:
        x, y = related_pair(rng, n=n, p=p, q=q)
        g = linear_cka_result(x, y, debiased, method="gram")
        f = linear_cka_result(x, y, debiased, method="feature")
        assert (g.details["form"], f.details["form"]) == ("gram", "feature")
        assert g.value == pytest.approx(f.value, abs=1e-10)


def test_auto_picks_the_cheaper_form() -> None:
    rng = np.random.default_rng(10)
    assert linear_cka_result(rng.standard_normal((500, 8)), rng.standard_normal((500, 8))).details["form"] == "feature"
    assert linear_cka_result(rng.standard_normal((20, 800)), rng.standard_normal((20, 800))).details["form"] == "gram"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("debiased", [False, True])
def test_torch_backend_matches_numpy(device: str, debiased: bool) -> None:
    rng = np.random.default_rng(11)
    x, y = related_pair(rng, n=60, p=40, q=90)
    for method in ("gram", "feature"):
        want = linear_cka(x, y, debiased, method=method)
        got = linear_cka(torch.from_numpy(x).float(), y, debiased, method=method, backend="torch", device=device)
        # float32 tensor in: cast to float64 first, so compare against the same float32 values
        want32 = linear_cka(x.astype(np.float32), y, debiased, method=method)
        assert got == pytest.approx(want32, abs=1e-10)
        assert linear_cka(x, y, debiased, method=method, backend="torch", device=device) == pytest.approx(
            want, abs=1e-10
        )
    assert rbf_cka(x, y, 0.8, debiased, backend="torch", device=device) == pytest.approx(
        rbf_cka(x, y, 0.8, debiased), abs=1e-10
    )
    layers = rng.standard_normal((3, 60, 10))
    np.testing.assert_allclose(
        cka_grid(layers, [x, y], debiased, "torch", device=device), cka_grid(layers, [x, y], debiased), atol=1e-10
    )


@pytest.mark.parametrize("debiased", [False, True])
@pytest.mark.parametrize("method", ["gram", "feature", "auto"])
def test_grid_matches_pairwise_loop(debiased: bool, method: str) -> None:
    rng = np.random.default_rng(12)
    a = rng.standard_normal((4, 30, 12))
    b = [rng.standard_normal((30, w)) + a[0][:, :1] for w in (3, 50, 12)]
    grid = cka_grid(a, b, debiased, method=method)
    loop = np.array([[linear_cka(x, y, debiased) for y in b] for x in a])
    assert grid.shape == (4, 3)
    np.testing.assert_allclose(grid, loop, atol=1e-10)
    # list input == 3-D input; self grid is symmetric with a unit diagonal
    np.testing.assert_allclose(cka_grid(list(a), b, debiased, method=method), grid, atol=1e-12)
    self_grid = cka_grid(a, None, debiased, method=method)
    np.testing.assert_allclose(self_grid, self_grid.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(self_grid), 1.0, atol=1e-12)
    np.testing.assert_allclose(cka_grid(a, a, debiased, method=method), self_grid, atol=1e-12)


def test_grid_gram_path_builds_each_gram_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Gram path computes each layer's Gram rows once (one block each here, n is small)."""
    import interlingua.analysis.measures.cka as cka_mod

    calls = {"blocks": 0}
    real = cka_mod._BlockGram.block

    def counting(self, *args, **kw):
        calls["blocks"] += 1
        return real(self, *args, **kw)

    monkeypatch.setattr(cka_mod._BlockGram, "block", counting)
    rng = np.random.default_rng(13)
    cka_grid(rng.standard_normal((5, 20, 40)), rng.standard_normal((3, 20, 30)), method="gram")
    assert calls["blocks"] == 8
    calls["blocks"] = 0
    cka_grid(rng.standard_normal((5, 20, 40)), None, method="gram")
    assert calls["blocks"] == 5


def test_grid_reports_layers_without_variance() -> None:
    rng = np.random.default_rng(14)
    a = [rng.standard_normal((20, 4)), np.zeros((20, 4))]
    with pytest.warns(MeasureWarning, match=r"layers_a \[1\]"):
        grid = cka_grid(a, [rng.standard_normal((20, 3))])
    assert np.isfinite(grid[0, 0]) and np.isnan(grid[1, 0])


def test_grid_input_errors() -> None:
    rng = np.random.default_rng(15)
    with pytest.raises(MeasureInputError, match=r"layers_b\[1\] has 19 rows"):
        cka_grid([rng.standard_normal((20, 3))], [rng.standard_normal((20, 3)), rng.standard_normal((19, 3))])
    bad = rng.standard_normal((2, 20, 3))
    bad[1, 0, 0] = np.nan
    with pytest.raises(MeasureInputError, match=r"layers_a\[1\] contains 1 non-finite"):
        cka_grid(bad, None)
    with pytest.raises(MeasureInputError, match="at least 4"):
        cka_grid(rng.standard_normal((2, 3, 3)), None, debiased=True)


# --------------------------------------------------------------------------- RBF


def test_rbf_bandwidth_is_factor_times_median_distance() -> None:
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(16)
    x = rng.standard_normal((31, 5))
    d = pdist(x)
    K, sigma = gram_rbf(x, factor=0.5)
    assert sigma == pytest.approx(0.5 * np.median(d), rel=1e-12)
    iu = np.triu_indices(31, 1)
    np.testing.assert_allclose(K[iu], np.exp(-(d**2) / (2 * sigma**2)), rtol=1e-10)
    np.testing.assert_allclose(np.diag(K), 1.0)


def test_rbf_cka_against_explicit_formula_and_ckatorch_centring() -> None:
    rng = np.random.default_rng(17)
    x, y = related_pair(rng, n=40, p=5, q=7)
    Kx, _ = gram_rbf(x)
    Ky, _ = gram_rbf(y)
    Kc, Lc = explicit_hkh(Kx), explicit_hkh(Ky)
    want = float((Kc * Lc).sum() / (np.linalg.norm(Kc) * np.linalg.norm(Lc)))
    assert rbf_cka(x, y) == pytest.approx(want, abs=1e-10)
    want_u = song_unbiased_hsic(Kx, Ky) / math.sqrt(song_unbiased_hsic(Kx, Kx) * song_unbiased_hsic(Ky, Ky))
    assert rbf_cka(x, y, debiased=True) == pytest.approx(want_u, abs=1e-10)
    ckatorch = pytest.importorskip("ckatorch")
    theirs = ckatorch.center_gram_matrix(torch.from_numpy(Kx), unbiased=True).numpy()
    np.testing.assert_allclose(center_gram(Kx, unbiased=True), theirs, atol=1e-12)


def test_rbf_ids_and_identical_rows() -> None:
    assert get_measure("cka_rbf_median0.5").params["factor"] == 0.5
    assert get_measure("cka_rbf_median2").id == "cka_rbf_median2.0"
    rng = np.random.default_rng(18)
    with pytest.warns(MeasureWarning, match="bandwidth is 0"):
        assert math.isnan(rbf_cka(np.ones((10, 3)), rng.standard_normal((10, 3))))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_constant_columns_leave_no_rounding_signal(backend: str) -> None:
    """0.1 repeated has a float mean != 0.1: centring leaves ~1e-17 noise that a scale-free
    measure would blow up to O(1). Constant columns must count as exactly zero."""
    rng = np.random.default_rng(19)
    x, y = related_pair(rng, n=30, p=4, q=5)
    x_const = np.column_stack([x, np.full(30, 0.1), np.full(30, 1e5 / 3)])
    for debiased in (False, True):
        for method in ("gram", "feature"):
            got = linear_cka(x_const, y, debiased, method=method, backend=backend)
            assert got == pytest.approx(linear_cka(x, y, debiased), abs=1e-12)
            with pytest.warns(MeasureWarning, match="self-HSIC of X"):
                assert math.isnan(linear_cka(np.full((30, 3), 0.1), y, debiased, method=method, backend=backend))
    with pytest.warns(MeasureWarning, match="bandwidth is 0"):
        assert math.isnan(rbf_cka(np.full((30, 3), 0.1), y, backend=backend))


def test_gram_helpers_check_their_inputs() -> None:
    K = np.eye(5)
    K[0, 1] = np.nan
    with pytest.raises(MeasureInputError, match="K contains 1 non-finite"):
        center_gram(K)
    with pytest.warns(MeasureWarning, match="not finite"):
        assert math.isnan(cka_from_grams(K, np.eye(5)))
    with pytest.raises(MeasureInputError, match="X contains 1 non-finite"):
        gram_linear(np.array([[1.0, np.inf], [0.0, 1.0]]))
    t = torch.randn(6, 3, dtype=torch.float32)
    assert gram_linear(t).dtype == torch.float64  # torch in, torch out


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("debiased", [False, True])
def test_grid_constant_columns_add_nothing(backend: str, debiased: bool) -> None:
    """In the grid's Gram path a constant column contributes an exact zero to the Gram, so a layer
    with constant columns has the grid row of the layer without them, and an all-constant layer is
    nan (never its normalised rounding noise). Layers are scaled by 2^-27 so that residue would show."""
    rng = np.random.default_rng(31)
    a = [related_pair(rng, n=30, p=6, q=5)[0] * 2.0**-27 for _ in range(2)]
    b = [rng.standard_normal((30, 4)) + a[0][:, :2] @ rng.standard_normal((2, 4)) * 2.0**27 for _ in range(3)]
    with_const = [np.column_stack([x, np.full(30, 0.1), np.full(30, 1e5 / 3)]) for x in a] + [np.full((30, 3), 0.1)]
    with pytest.warns(MeasureWarning, match=r"layers_a \[2\]"):
        got = cka_grid(with_const, b, debiased, backend=backend, method="gram")
    np.testing.assert_allclose(got[:2], cka_grid(a, b, debiased, method="gram"), atol=1e-12)
    assert np.all(np.isnan(got[2]))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("method", ["gram", "feature"])
def test_grid_is_scale_free_at_extreme_magnitudes(backend: str, method: str) -> None:
    """CKA is invariant to isotropic scaling; layers at ~1e120 or ~1e-120, whose Gram entries would
    overflow or underflow float64, give the same grid as the same layers at ~1."""
    rng = np.random.default_rng(32)
    a = [related_pair(rng, n=25, p=5, q=4)[0] for _ in range(3)]
    b = [x[:, :3] @ rng.standard_normal((3, 4)) + rng.standard_normal((25, 4)) for x in a]
    ref = cka_grid(a, b, method=method)
    for scale in (2.0**400, 2.0**-400):
        got = cka_grid([x * scale for x in a], [y / scale for y in b], backend=backend, method=method)
        np.testing.assert_allclose(got, ref, atol=1e-12)


def test_constant_columns_match_the_range_definition() -> None:
    """A column is constant when max - min <= 1e-12 max |x|; centring zeroes exactly those columns."""
    from interlingua.analysis.measures.validation import centre_columns, constant_columns

    rng = np.random.default_rng(33)
    x = rng.standard_normal((20, 6))
    x[:, 1] = -7.3  # constant, negative
    x[:, 2] = 0.0
    x[:, 3] = 0.1 + np.where(np.arange(20) % 2, 1e-14, 0.0)  # range 1e-14 <= 1e-12 * 0.1: constant
    x[:, 4] = 0.1 + np.where(np.arange(20) % 2, 1e-12, 0.0)  # range 1e-12 > 1e-13: not constant
    expected = np.ptp(x, axis=0) <= 1e-12 * np.abs(x).max(0)
    np.testing.assert_array_equal(expected, [False, True, True, True, False, False])
    np.testing.assert_array_equal(constant_columns(x), expected)
    np.testing.assert_array_equal(constant_columns(torch.from_numpy(x)).numpy(), expected)
    xc = centre_columns(x)
    assert np.all(xc[:, expected] == 0.0)
    np.testing.assert_allclose(xc[:, ~expected], (x - x.mean(0))[:, ~expected], atol=1e-15)
    xt = centre_columns(torch.from_numpy(x)).numpy()
    assert np.all(xt[:, expected] == 0.0)
    np.testing.assert_allclose(xt, xc, atol=1e-15)
