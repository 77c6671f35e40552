"""Residual spectra on constructed matrices, fold bookkeeping, layer pairing by relative depth.

Spectral identities are checked on matrices built from known singular
vectors and values; their float64 singular values are exact to ~1e-15
relative, so 1e-9 is a loose bound that an off-by-one or a squared
normalisation misses by far more.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.maps import (
    Folds,
    MapInputError,
    effective_rank,
    energy_count,
    fraction_outside,
    kfold,
    layer_pairs,
    make_folds,
    residual_analysis,
    restricted_permutation,
    spectrum,
    train_test_split,
)


def _orthonormal(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((n, k)))
    return q


def _centred_orthonormal(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """k orthonormal columns, each orthogonal to the all-ones vector (so centring leaves them unchanged)."""
    a = rng.standard_normal((n, k))
    a -= a.mean(axis=0)
    q, _ = np.linalg.qr(a)
    return q


@pytest.mark.parametrize("k", [1, 2, 7, 30])
def test_k_equal_singular_values_have_effective_rank_k(k):
    assert effective_rank(np.r_[np.full(k, 3.5), np.zeros(5)]) == pytest.approx(k, rel=1e-12)
    assert energy_count(np.full(k, 2.0), 0.5) == math.ceil(k / 2)
    assert energy_count(np.full(k, 2.0), 0.9) == math.ceil(0.9 * k - 1e-9)
    assert energy_count(np.full(k, 2.0), 1.0) == k


def test_effective_rank_normalises_singular_values_not_their_squares():
    s = np.array([3.0, 1.0])
    p = s / s.sum()
    assert effective_rank(s) == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-14)
    assert effective_rank([5.0, 0.0, 0.0]) == 1.0
    assert math.isnan(effective_rank([0.0, 0.0]))
    assert energy_count([3.0, 1.0], 0.9) == 1  # 9 / 10 of the energy is in the first


def test_spectrum_of_a_constructed_matrix():
    rng = np.random.default_rng(0)
    u, v = _centred_orthonormal(rng, 50, 4), _orthonormal(rng, 12, 4)
    s = np.array([5.0, 3.0, 2.0, 0.5])
    got = spectrum(u @ np.diag(s) @ v.T)
    np.testing.assert_allclose(got[:4], s, rtol=1e-9)
    np.testing.assert_array_equal(got[4:], 0.0)  # rounding-level eigenvalues are zeroed


def test_energy_outside_the_targets_top_directions():
    rng = np.random.default_rng(1)
    n, q = 80, 20
    v = _orthonormal(rng, q, q)  # the target's principal directions, in order
    u = _centred_orthonormal(rng, n, q)
    target = u @ np.diag(np.linspace(20, 1, q)) @ v.T
    inside = rng.standard_normal((n, 3)) @ v[:, :3].T
    assert fraction_outside(inside, v, 10) == pytest.approx(0.0, abs=1e-12)
    outside = rng.standard_normal((n, 5)) @ v[:, 12:17].T
    assert fraction_outside(outside, v, 10) == pytest.approx(1.0, abs=1e-12)
    # half its energy in direction 0, half in direction 15: exactly half lies outside the top 10
    w = _centred_orthonormal(rng, n, 2)
    mixed = np.outer(w[:, 0], v[:, 0]) + np.outer(w[:, 1], v[:, 15])
    out = residual_analysis(target, target - mixed, ks=(10, 50))
    assert out["resid_out10"] == pytest.approx(0.5, abs=1e-9)
    assert out["resid_out50"] == pytest.approx(0.0, abs=1e-9)  # k cut to the width 20: every direction
    assert out["resid_erank"] == pytest.approx(2.0, rel=1e-9)
    assert out["resid_n50"] == 1 and out["resid_n90"] == 2
    assert out["resid_rel_norm"] == pytest.approx(math.sqrt(2 / np.sum(np.linspace(20, 1, q) ** 2)), rel=1e-9)
    s = np.linspace(20, 1, q)
    p = s / s.sum()
    assert out["target_erank"] == pytest.approx(math.exp(-(p * np.log(p)).sum()), rel=1e-9)


def test_kfold_covers_every_row_once_and_never_leaks():
    for n, k in [(10, 2), (101, 5), (1000, 7)]:
        folds = kfold(n, k, seed=3)
        seen = np.concatenate(folds.tests)
        np.testing.assert_array_equal(np.sort(seen), np.arange(n))
        sizes = [t.size for t in folds.tests]
        assert max(sizes) - min(sizes) <= 1
        for tr, te in folds:
            assert np.intersect1d(tr, te).size == 0
            np.testing.assert_array_equal(np.union1d(tr, te), np.arange(n))
    a, b, c = kfold(50, 5, 1), kfold(50, 5, 1), kfold(50, 5, 2)
    assert a.key == b.key != c.key
    again = Folds.from_dict(a.to_dict())
    assert again.key == a.key and all(np.array_equal(x, y) for x, y in zip(again.tests, a.tests))
    record = a.to_dict()
    record["tests"][0][0], record["tests"][1][0] = record["tests"][1][0], record["tests"][0][0]
    with pytest.raises(MapInputError, match="do not match their key"):
        Folds.from_dict(record)


def test_split_and_folds_arguments():
    s = train_test_split(100, 0.2, seed=0)
    assert s.k == 1 and s.tests[0].size == 20 and s.scheme == "split"
    assert make_folds(100, 0.5, 0).tests[0].size == 50
    assert make_folds(100, 4, 0).k == 4
    assert make_folds(100, s, 0) is s
    with pytest.raises(MapInputError, match=r"folds must be an integer in \[2, n/2\]"):
        kfold(10, 6)
    with pytest.raises(MapInputError, match="n=20"):
        make_folds(20, s, 0)


def test_the_control_permutation_is_restricted_to_training_rows():
    rng = np.random.default_rng(4)
    perm = rng.permutation(30)
    folds = kfold(30, 3, 0)
    for tr, te in folds:
        sigma = restricted_permutation(perm, tr)
        np.testing.assert_array_equal(np.sort(sigma), np.arange(tr.size))  # a permutation of the training rows
        partners = tr[sigma]  # side B rows paired with the training rows of side A
        assert np.intersect1d(partners, te).size == 0
        np.testing.assert_array_equal(partners, [j for j in perm if j in set(tr.tolist())])


def test_layers_pair_by_relative_depth_with_half_up_rounding():
    pairs = layer_pairs(19, 31)
    assert len(pairs) == 19 and pairs[0] == (0, 0) and pairs[-1] == (18, 30)
    assert pairs[:5] == [(0, 0), (1, 2), (2, 3), (3, 5), (4, 7)]  # 1 * 30/18 = 1.67 -> 2; 2 * 30/18 = 3.33 -> 3
    for a, b in pairs:
        assert abs(b / 30 - a / 18) <= 0.5 / 30 + 1e-12  # nearest state of the deeper side
    assert layer_pairs(31, 19) == [(b, a) for a, b in pairs]
    assert layer_pairs(3, 4) == [(0, 0), (1, 2), (2, 3)]  # 1 * 3/2 = 1.5, an exact half, goes up
    assert layer_pairs(4, 4) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert len(layer_pairs(3, 5, "grid")) == 15
    assert layer_pairs(3, 5, "last") == [(2, 4)]
    with pytest.raises(MapInputError, match="out of range"):
        layer_pairs(3, 5, [(3, 0)])
