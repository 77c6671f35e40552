"""CCA, SVCCA and PWCCA against brute-force computations, and the known failure cases of popular code."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from measures_helpers import random_orthogonal, related_pair

from interlingua.analysis.measures import MeasureWarning, canonical_correlations, cca, get_measure, pwcca, svcca
from interlingua.analysis.measures.cca import pwcca_result, svcca_result
from interlingua.core.errors import MeasureInputError


def _inv_sqrt(S: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(S)
    return (V / np.sqrt(w)) @ V.T


def brute_cca(x: np.ndarray, y: np.ndarray):
    """Textbook CCA by whitening covariances: rho, canonical variates of X and of Y (unit norm)."""
    xc, yc = x - x.mean(0), y - y.mean(0)
    wx, wy = _inv_sqrt(xc.T @ xc), _inv_sqrt(yc.T @ yc)
    u, rho, vt = np.linalg.svd(wx @ (xc.T @ yc) @ wy)
    m = min(x.shape[1], y.shape[1])
    return rho[:m], xc @ wx @ u[:, :m], yc @ wy @ vt.T[:, :m], xc, yc


def brute_pwcca(x: np.ndarray, y: np.ndarray, side: str) -> float:
    rho, hx, hy, xc, yc = brute_cca(x, y)
    h, neurons = (hx, xc) if side == "x" else (hy, yc)
    alpha = np.abs(h.T @ neurons).sum(1)
    return float(alpha @ rho / alpha.sum())


# --------------------------------------------------------------------------- CCA


def test_canonical_correlations_match_whitening() -> None:
    rng = np.random.default_rng(0)
    x, y = related_pair(rng, n=120, p=7, q=4)
    rho, *_ = brute_cca(x, y)
    np.testing.assert_allclose(canonical_correlations(x, y), rho, atol=1e-10)
    assert cca(x, y) == pytest.approx(rho.mean(), abs=1e-10)
    assert cca(x, y, "mean_sq") == pytest.approx((rho**2).mean(), abs=1e-10)


def test_cca_invariant_to_invertible_maps_and_exact_on_linear_copies() -> None:
    rng = np.random.default_rng(1)
    x, y = related_pair(rng, n=100, p=6, q=6)
    a = random_orthogonal(rng, 6) @ np.diag([0.05, 0.3, 1, 2, 9, 30]) @ random_orthogonal(rng, 6)
    assert cca(x, x @ a + 4.0) == pytest.approx(1.0, abs=1e-10)
    assert cca(x @ a, y) == pytest.approx(cca(x, y), abs=1e-10)


def test_dependent_columns_use_the_column_space() -> None:
    rng = np.random.default_rng(2)
    x, y = related_pair(rng, n=80, p=5, q=4)
    x_dup = np.column_stack([x, x[:, 0] * 2.0 + x[:, 1]])  # rank still 5
    np.testing.assert_allclose(canonical_correlations(x_dup, y), canonical_correlations(x, y), atol=1e-10)


def test_constant_columns_are_dropped_and_counted() -> None:
    rng = np.random.default_rng(3)
    x, y = related_pair(rng, n=60, p=5, q=4)
    x_const = np.column_stack([x, np.full(60, 3.0), np.zeros(60), np.full(60, -1e6)])
    for fn in (cca, svcca, pwcca):
        with pytest.warns(MeasureWarning, match="dropped 3 constant column"):
            got = fn(x_const, y)
        assert got == pytest.approx(fn(x, y), abs=1e-10)
    with pytest.raises(MeasureInputError, match="every column of Y is constant"):
        cca(x, np.ones((60, 3)))


@pytest.mark.parametrize("fn", [cca, svcca, pwcca])
def test_wider_than_n_is_never_silently_one(fn) -> None:
    """n <= width: every canonical correlation would be 1 by dimension counting alone."""
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((30, 50)), rng.standard_normal((30, 80))
    with pytest.warns(MeasureWarning, match=r"exactly 1 regardless of the data; reduced X to 14 and Y to 14"):
        value = fn(x, y)
    assert value < 0.99
    with pytest.raises(MeasureInputError, match="regardless of the data"):
        fn(x, y, wide="refuse")
    # exactly at the limit (rank X + rank Y = n - 1) nothing is reduced
    x, y = rng.standard_normal((31, 15)), rng.standard_normal((31, 15))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MeasureWarning)
        fn(x, y)


# --------------------------------------------------------------------------- SVCCA


def spectrum_data(rng: np.random.Generator, n: int, variance_fractions) -> np.ndarray:
    """Centred data whose principal variances are exactly the given fractions (up to scale)."""
    p = len(variance_fractions)
    u, _ = np.linalg.qr(rng.standard_normal((n, p)) - rng.standard_normal((n, p)).mean(0))
    u -= u.mean(0)
    u, _ = np.linalg.qr(u)
    return (u * np.sqrt(variance_fractions)) @ random_orthogonal(rng, p) * 7.0 + 3.0


def test_svcca_keeps_the_components_explaining_the_variance() -> None:
    """Fractions 0.6/0.3/0.085/0.01/0.004/0.001 reach 99% of the VARIANCE at k=4.

    The two published bugs pick other k: thresholding the sum of singular values
    (not squares) keeps 6; comparing a normalised cumulative sum with an
    unnormalised threshold keeps 1.
    """
    rng = np.random.default_rng(5)
    f = np.array([0.6, 0.3, 0.085, 0.01, 0.004, 0.001])
    x = spectrum_data(rng, 200, f)
    y = spectrum_data(rng, 200, [0.5, 0.5])
    res = svcca_result(x, y, 0.99)
    assert res.details["dims_x"] == 4 and res.details["dims_y"] == 2
    assert res.details["variance_kept_x"] == pytest.approx(0.995)
    assert svcca_result(x, y, 0.95).details["dims_x"] == 3
    assert svcca_result(x, y, 0.99, max_components=2).details["dims_x"] == 2
    s = np.sqrt(f)
    assert int(np.searchsorted(np.cumsum(s) / s.sum(), 0.99)) + 1 == 6  # the singular-value bug


def test_svcca_value_is_cca_of_the_kept_principal_components() -> None:
    rng = np.random.default_rng(6)
    x = spectrum_data(rng, 150, [0.6, 0.3, 0.085, 0.01, 0.004, 0.001])
    y = x[:, :5] @ rng.standard_normal((5, 5)) + 0.3 * rng.standard_normal((150, 5))
    res = svcca_result(x, y)
    kx, ky = res.details["dims_x"], res.details["dims_y"]

    def top_pcs(a, k):
        ac = a - a.mean(0)
        u, s, _ = np.linalg.svd(ac, full_matrices=False)
        return u[:, :k] * s[:k]

    rho, *_ = brute_cca(top_pcs(x, kx), top_pcs(y, ky))
    assert res.value == pytest.approx(rho.mean(), abs=1e-10)


def test_svcca_is_one_under_a_conditioned_invertible_map() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((200, 8))
    a = random_orthogonal(rng, 8) @ np.diag(np.linspace(0.7, 1.4, 8)) @ random_orthogonal(rng, 8)
    assert svcca(x, x @ a - 2.0) == pytest.approx(1.0, abs=1e-10)
    # an ill-conditioned map pushes directions below 1% of the variance: SVCCA is not invariant then
    # and the kept directions may be the unrelated ones: here Y's last column is pure noise
    y = np.column_stack([x[:, :7] + 0.1 * rng.standard_normal((200, 7)), rng.standard_normal(200)])
    b = np.diag([1.0, 1, 1, 1, 1, 1, 1, 30])
    assert svcca(x, y) > 0.8
    assert svcca(x, y @ b) < 0.3
    assert svcca_result(x, y @ b).details["dims_y"] == 1


def test_svcca_ids() -> None:
    assert get_measure("svcca_var0.99").params == {"threshold": 0.99, "max_components": None}
    m = get_measure("svcca_var0.95_max32")
    assert m.id == "svcca_var0.95_max32" and m.params["max_components"] == 32
    with pytest.raises(MeasureInputError, match="threshold"):
        get_measure("svcca_var1.5")


# --------------------------------------------------------------------------- PWCCA


@pytest.mark.parametrize("p,q", [(7, 3), (3, 7), (5, 5)])
def test_pwcca_matches_brute_force_on_the_correct_side(p: int, q: int) -> None:
    rng = np.random.default_rng(8 + p)
    x, y = related_pair(rng, n=150, p=p, q=q)
    assert pwcca(x, y, "x") == pytest.approx(brute_pwcca(x, y, "x"), abs=1e-10)
    assert pwcca(x, y, "y") == pytest.approx(brute_pwcca(x, y, "y"), abs=1e-10)
    assert pwcca(x, y, "y") == pytest.approx(pwcca(y, x, "x"), abs=1e-12)
    narrower = "x" if p <= q else "y"
    assert pwcca(x, y, "narrower") == pytest.approx(brute_pwcca(x, y, narrower), abs=1e-10)


def test_pwcca_does_not_mix_sides_when_widths_differ() -> None:
    """The widely copied reference code, when it picks Y, projects X's neurons on Y's variates."""
    rng = np.random.default_rng(9)
    x, y = related_pair(rng, n=150, p=8, q=3)
    rho, hx, hy, xc, yc = brute_cca(x, y)
    wrong = np.abs(hy.T @ xc).sum(1)
    wrong = float(wrong @ rho / wrong.sum())
    assert abs(pwcca(x, y, "y") - wrong) > 1e-3


def test_pwcca_weights_are_normalised_and_recorded() -> None:
    rng = np.random.default_rng(10)
    x, y = related_pair(rng, n=100, p=6, q=4)
    res = pwcca_result(x, y, "x")
    assert res.details["weights"].sum() == pytest.approx(1.0)
    assert res.details["weights"].shape == res.details["rho"].shape == (4,)
    assert res.value == pytest.approx(float(res.details["weights"] @ res.details["rho"]))
