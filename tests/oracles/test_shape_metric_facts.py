"""netrep (ahwillia/netrep) and wrongu/repsim are not installable from PyPI (netrep is not published;
the PyPI ``repsim`` is an unrelated package), so the facts their own tests assert are restated here on
our convention ids: ``procrustes_angular`` is netrep's ``LinearMetric(alpha=1, center_columns=True,
score_method="angular")`` and repsim's angular shape metric; ``procrustes_angular_raw`` is
``center_columns=False``; ``procrustes_euclidean`` is ``score_method="euclidean"``; ``arccos`` of
``cka_linear_biased`` is repsim's ``AngularCKA`` (biased HSIC). Constants follow theirs (netrep: seeds 1-3,
m=100 x n=10 for the invariances, m=31 x n=30 for the triangle inequality).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import subspace_angles

from interlingua.analysis.measures import get_measure, linear_cka

ANGULAR = get_measure("procrustes_angular")
ANGULAR_RAW = get_measure("procrustes_angular_raw")
EUCLID = get_measure("procrustes_euclidean")


def _orth(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((m, n)))
    return q * np.sign(np.diag(r))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_uncentred_rotated_copy_has_distance_zero(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((100, 10))
    assert ANGULAR_RAW(x, x @ _orth(rng, 10, 10)) == pytest.approx(0.0, abs=1e-10)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_centred_rotated_scaled_shifted_copy_has_distance_zero(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((100, 10))
    y = rng.exponential() * x @ _orth(rng, 10, 10) + rng.standard_normal((1, 10))
    assert ANGULAR(x, y) == pytest.approx(0.0, abs=1e-10)
    assert ANGULAR_RAW(x, y) > 1e-3  # the shift is not removed without centring
    z = x @ _orth(rng, 10, 10) + rng.standard_normal((1, 10))  # same scale: the Euclidean metric is 0 too
    assert EUCLID(x, z) == pytest.approx(0.0, abs=1e-9 * np.linalg.norm(x))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_general_linear_map_is_distance_zero_for_cca_but_not_for_procrustes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((100, 10))
    y = x @ rng.standard_normal((10, 10)) + rng.standard_normal((1, 10))
    assert get_measure("cca_mean")(x, y) == pytest.approx(1.0, abs=1e-10)  # netrep alpha=0: distance 0
    assert ANGULAR(x, y) > 1e-3


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_uncentred_angle_of_orthonormal_bases_is_the_mean_principal_angle_cosine(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = _orth(rng, 100, 10), _orth(rng, 100, 10)
    cosines = np.cos(subspace_angles(x, y))
    assert ANGULAR_RAW(x, y) == pytest.approx(math.acos(float(np.mean(cosines))), abs=1e-10)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_triangle_inequality(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y, m = (rng.standard_normal((31, 30)) for _ in range(3))
    for metric in (ANGULAR, ANGULAR_RAW, EUCLID):
        assert metric(x, y) <= metric(x, m) + metric(m, y) + 1e-12
    angular_cka = lambda a, b: math.acos(min(1.0, linear_cka(a, b)))  # noqa: E731  (repsim's AngularCKA)
    assert angular_cka(x, y) <= angular_cka(x, m) + angular_cka(m, y) + 1e-12


def test_triangle_inequality_is_tight_on_the_geodesic() -> None:
    """repsim's shape-metric test: after aligning x to y, the midpoint lies on the geodesic between them,
    so d(x, mid) + d(mid, y) = d(x, y) for the angular metric (and the Euclidean one)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 6))
    y = x @ _orth(rng, 6, 6) + 0.8 * rng.standard_normal((40, 6))
    xc, yc = x - x.mean(0), y - y.mean(0)
    u, _, vt = np.linalg.svd(xc.T @ yc)
    xa = xc @ (u @ vt)  # x rotated onto y
    mid = (xa / np.linalg.norm(xa) + yc / np.linalg.norm(yc)) / 2
    assert ANGULAR(xa, mid) + ANGULAR(mid, yc) == pytest.approx(ANGULAR(xa, yc), abs=1e-10)
    mid_e = (xa + yc) / 2
    assert EUCLID(xa, mid_e) + EUCLID(mid_e, yc) == pytest.approx(EUCLID(xa, yc), rel=1e-10)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_symmetric(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((50, 7)), rng.standard_normal((50, 4))  # p != q: zero padding, as netrep's
    for metric in (ANGULAR, ANGULAR_RAW, EUCLID):
        assert metric(x, y) == pytest.approx(metric(y, x), abs=1e-12)


def test_angular_distance_is_arccos_of_our_procrustes_score_and_in_its_range() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((30, 8))
    y = x[:, :5] + 0.5 * rng.standard_normal((30, 5))
    score = get_measure("procrustes_resid2_centered_unitnorm")(x, y)
    assert ANGULAR(x, y) == pytest.approx(math.acos(score), abs=1e-12)
    assert 0 < ANGULAR(x, y) < math.pi / 2


def test_euclidean_distance_is_the_residual_at_the_datas_scale() -> None:
    """sqrt(|Xc|^2 + |Yc|^2 - 2 ||Xc^T Yc||_*): scaling both sides by c scales it by c (no normalisation)."""
    rng = np.random.default_rng(10)
    x, y = rng.standard_normal((30, 5)), rng.standard_normal((30, 5))
    xc, yc = x - x.mean(0), y - y.mean(0)
    nuclear = np.linalg.svd(xc.T @ yc, compute_uv=False).sum()
    expected = math.sqrt(np.sum(xc**2) + np.sum(yc**2) - 2 * nuclear)
    assert EUCLID(x, y) == pytest.approx(expected, rel=1e-10)
    assert EUCLID(3 * x, 3 * y) == pytest.approx(3 * expected, rel=1e-10)


def test_angular_kernel_of_many_datasets_is_positive_semidefinite() -> None:
    """netrep's test_laplacian_kernel_posdef (one of its settings): exp(-lam D) of pairwise angular distances
    between 20 noisy copies of one dataset is positive semidefinite."""
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((31, 30))
    b = 0.5
    xs = [b * x0 + (1 - b) * rng.standard_normal((31, 30)) for _ in range(20)]
    d = np.array([[ANGULAR(a, c) if i != j else 0.0 for j, c in enumerate(xs)] for i, a in enumerate(xs)])
    for lam in (0.1, 1.0):
        assert np.linalg.eigvalsh(np.exp(-lam * d)).min() > -1e-6
