"""Orthogonal Procrustes: perfect scores for (semi-)rotated copies, scipy agreement.

And 50-digit agreement near a perfect fit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from measures_helpers import random_orthogonal, related_pair
from scipy.linalg import orthogonal_procrustes

from interlingua.analysis.measures import MeasureWarning, procrustes, procrustes_map
from interlingua.analysis.measures.procrustes import procrustes_result


def unit(a: np.ndarray) -> np.ndarray:
    a = a - a.mean(0)
    return a / np.linalg.norm(a)


def test_rotated_copy_is_perfect() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 8))
    res = procrustes_result(x, 2.5 * x @ random_orthogonal(rng, 8) + 1.0)
    assert res.value == pytest.approx(1.0, abs=1e-14)
    assert res.details["residual"] < 1e-12


@pytest.mark.parametrize("p,q", [(5, 9), (9, 5)])
def test_semi_orthogonal_copy_is_perfect(p: int, q: int) -> None:
    rng = np.random.default_rng(1)
    d = min(p, q)
    x = rng.standard_normal((40, d))
    embed = random_orthogonal(rng, max(p, q))[:d]  # d x max(p, q), orthonormal rows
    wide = x @ embed
    a, b = (x, wide) if p < q else (wide, x)
    res = procrustes_result(a, b)
    assert res.value == pytest.approx(1.0, abs=1e-14)
    assert res.details["direction"] == ("X->Y" if p < q else "Y->X")


def test_matches_scipy_square() -> None:
    rng = np.random.default_rng(2)
    x, y = related_pair(rng, n=60, p=7, q=7)
    xn, yn = unit(x), unit(y)
    r, _ = orthogonal_procrustes(xn, yn)
    want = 1 - np.linalg.norm(xn @ r - yn) ** 2 / 2
    assert procrustes(x, y) == pytest.approx(want, abs=1e-12)
    np.testing.assert_allclose(procrustes_map(xn, yn), r, atol=1e-10)


@pytest.mark.parametrize("p,q", [(4, 11), (11, 4)])
def test_rectangular_matches_scipy_on_zero_padded_sides(p: int, q: int) -> None:
    """Mapping the narrower side isometrically into the wider space = square Procrustes after zero padding."""
    rng = np.random.default_rng(3)
    x, y = related_pair(rng, n=60, p=p, q=q)
    xn, yn = unit(x), unit(y)
    w = max(p, q)
    xp = np.pad(xn, ((0, 0), (0, w - p)))
    yp = np.pad(yn, ((0, 0), (0, w - q)))
    r, _ = orthogonal_procrustes(xp, yp)
    want = 1 - np.linalg.norm(xp @ r - yp) ** 2 / 2
    assert procrustes(x, y) == pytest.approx(want, abs=1e-12)
    assert procrustes(y, x) == pytest.approx(want, abs=1e-12)
    # equals the nuclear-norm convention on unit-norm sides
    assert procrustes(x, y) == pytest.approx(np.linalg.svd(xn.T @ yn, compute_uv=False).sum(), abs=1e-12)


EPS = np.finfo(np.float64).eps


def mp_procrustes(x: np.ndarray, y: np.ndarray, digits: int = 50) -> tuple[float, float]:
    """Residual ||X R - Y||_F and nuclear norm ||X^T Y||_* of the centred, unit-norm sides, in
    ``digits``-digit arithmetic (mpmath: means, norms, SVD and products all at that precision)."""
    import mpmath

    with mpmath.workdps(digits):

        def unit(a: np.ndarray):  # noqa: ANN202
            A = mpmath.matrix(a.tolist())  # float64 -> mpf is exact
            n, p = A.rows, A.cols
            for j in range(p):
                mean = mpmath.fsum(A[i, j] for i in range(n)) / n
                for i in range(n):
                    A[i, j] -= mean
            return A / mpmath.sqrt(mpmath.fsum(A[i, j] ** 2 for i in range(n) for j in range(p)))

        X, Y = unit(x), unit(y)
        if X.cols > Y.cols:  # map the narrower side into the wider one (the score is symmetric)
            X, Y = Y, X
        U, S, V = mpmath.svd_r(X.T * Y, full_matrices=False)  # X^T Y = U diag(S) V
        D = X * (U * V) - Y
        residual = mpmath.sqrt(mpmath.fsum(D[i, j] ** 2 for i in range(D.rows) for j in range(D.cols)))
        nuclear = mpmath.fsum(S)
        # the two exact routes to the same number agree at this precision: r^2 = 2 - 2 ||X^T Y||_*
        assert abs(residual**2 - (2 - 2 * nuclear)) < mpmath.mpf(10) ** (10 - digits)
        return float(residual), float(nuclear)


def near_perfect_float32_pair() -> tuple[np.ndarray, np.ndarray]:
    """Y = X Q rounded to float32: an exact rotation up to a residual ~3e-8 of the unit norm."""
    rng = np.random.default_rng(4)
    x32 = rng.standard_normal((40, 6)).astype(np.float32)
    return x32, (x32.astype(np.float64) @ random_orthogonal(rng, 6)).astype(np.float32)


@pytest.mark.parametrize("case", ["near_perfect_float32", "related_4_vs_7"])
def test_residual_agrees_with_50_digit_arithmetic(case: str) -> None:
    """The residual, score and nuclear norm agree with a 50-digit computation from the same inputs.

    Tolerance from float64: rounding in the centring, the products and the SVD moves the
    residual by O(eps * cond(X^T Y)) in absolute terms (observed ~1e-16); 100 eps = 2.2e-14
    allows for that. Near perfect alignment the residual is ~3e-8, so this pins it to ~1e-6
    relative: the cancelling expansion sqrt(2 - 2 ||X^T Y||_*) could not do that in float64,
    where the error of ||X^T Y||_* alone (~eps) moves it by ~sqrt(eps) ~ 1e-8. The score
    1 - r^2 / 2 is a float64 number near 1, hence the 2 eps on it.
    """
    if case == "near_perfect_float32":
        x, y = near_perfect_float32_pair()
    else:
        x, y = related_pair(np.random.default_rng(5), n=40, p=4, q=7)
    residual, nuclear = mp_procrustes(np.asarray(x, np.float64), np.asarray(y, np.float64))
    res = procrustes_result(x, y)
    if case == "near_perfect_float32":
        assert 1e-9 < residual < 1e-6  # the case is what it claims: float32 rounding, not exact
    assert abs(res.details["residual"] - residual) <= 100 * EPS
    assert abs(res.value - (1.0 - residual**2 / 2.0)) <= 2 * EPS
    assert abs(res.details["nuclear_norm"] - nuclear) <= 100 * EPS
    assert abs(procrustes(y, x) - res.value) <= 2 * EPS  # symmetric: the other direction, same number


def test_uncentred_variant_and_degenerate_input() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((30, 4))
    assert procrustes(x, x + 5.0, center=False) < 0.9
    assert procrustes(x, x + 5.0) == pytest.approx(1.0, abs=1e-14)
    with pytest.warns(MeasureWarning, match="X is zero after centring"):
        assert math.isnan(procrustes(np.ones((30, 4)), x))


def test_constant_input_with_inexact_mean_is_nan_not_noise() -> None:
    rng = np.random.default_rng(6)
    with pytest.warns(MeasureWarning, match="zero after centring"):
        assert math.isnan(procrustes(np.full((30, 4), 0.1), rng.standard_normal((30, 4))))


@pytest.mark.parametrize("p,q", [(6, 6), (4, 9), (9, 4)])
def test_torch_backend_matches_numpy(p: int, q: int) -> None:
    import torch

    rng = np.random.default_rng(7)
    x, y = related_pair(rng, n=50, p=p, q=q)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for center in (True, False):
            got = procrustes(torch.from_numpy(x), y, center=center, backend="torch", device=device)
            assert got == pytest.approx(procrustes(x, y, center=center), abs=1e-10)
