"""Orthogonal Procrustes: perfect scores for (semi-)rotated copies, scipy agreement, float32 cancellation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from measures_helpers import random_orthogonal, related_pair
from scipy.linalg import orthogonal_procrustes

from interlingua.measures import MeasureWarning, procrustes, procrustes_map
from interlingua.measures.procrustes import procrustes_result


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


def test_residual_is_direct_not_the_cancelling_expansion() -> None:
    """A float32 rotated copy: the true residual is the float32 rounding (~1e-7); the expansion
    ||X||^2 + ||Y||^2 - 2||X^T Y||_* evaluated in float32 buries it in cancellation noise."""
    rng = np.random.default_rng(4)
    x32 = rng.standard_normal((500, 64)).astype(np.float32)
    y32 = (x32.astype(np.float64) @ random_orthogonal(rng, 64)).astype(np.float32)
    res = procrustes_result(x32, y32)
    xn, yn = unit(x32.astype(np.float64)), unit(y32.astype(np.float64))
    r, _ = orthogonal_procrustes(xn, yn)
    direct = np.linalg.norm(xn @ r - yn)
    assert 1e-9 < direct < 1e-5
    assert res.details["residual"] == pytest.approx(direct, rel=1e-6)
    assert 1.0 - res.value == pytest.approx(direct**2 / 2, rel=1e-6)
    xs, ys = unit(x32).astype(np.float32), unit(y32).astype(np.float32)
    nuc32 = np.linalg.svd(xs.T @ ys, compute_uv=False).astype(np.float32).sum(dtype=np.float32)
    expansion = math.sqrt(abs(float(np.float32(2.0) - np.float32(2.0) * nuc32)))
    assert abs(expansion - direct) > 10 * direct  # what the direct computation avoids


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
