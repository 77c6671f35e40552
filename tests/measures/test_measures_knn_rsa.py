"""Mutual kNN (against brute force, chance level) and RSA (against scipy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from measures_helpers import related_pair
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

from interlingua.analysis.measures import MeasureWarning, get_measure, mutual_knn, mutual_knn_chance, rdm, rsa
from interlingua.core.errors import MeasureInputError


def brute_mknn(x: np.ndarray, y: np.ndarray, k: int) -> float:
    def neighbours(a, i):
        cos = a @ a[i] / (np.linalg.norm(a, axis=1) * np.linalg.norm(a[i]))
        order = [j for j in np.argsort(-cos, kind="stable") if j != i]
        return set(order[:k])

    return float(np.mean([len(neighbours(x, i) & neighbours(y, i)) / k for i in range(x.shape[0])]))


@pytest.mark.parametrize("k", [1, 5, 10])
def test_mutual_knn_matches_brute_force(k: int) -> None:
    rng = np.random.default_rng(k)
    x, y = related_pair(rng, n=50, p=6, q=9)
    assert mutual_knn(x, y, k) == pytest.approx(brute_mknn(x, y, k), abs=1e-12)
    assert mutual_knn(x, x, k) == 1.0


def test_mutual_knn_chance_level() -> None:
    n, k = 200, 10
    assert mutual_knn_chance(n, k) == k / (n - 1)
    rng = np.random.default_rng(0)
    values = [mutual_knn(rng.standard_normal((n, 8)), rng.standard_normal((n, 8)), k) for _ in range(10)]
    assert np.mean(values) == pytest.approx(k / (n - 1), abs=0.006)


def test_mutual_knn_input_checks() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((12, 3))
    with pytest.raises(MeasureInputError, match="at least k \\+ 2 = 13"):
        mutual_knn(x, x, 11)
    with pytest.raises(MeasureInputError, match="at least k \\+ 2"):
        mutual_knn_chance(5, 4)
    x0 = x.copy()
    x0[[2, 5]] = 0.0
    with pytest.raises(MeasureInputError, match="Y has 2 all-zero row"):
        mutual_knn(x, x0, 3)
    m = get_measure("mknn_k5")
    assert m.id == "mknn_k5" and m.metadata.min_n == 7
    assert m(x, x) == 1.0


@pytest.mark.parametrize("metric,short", [("correlation", "corr"), ("cosine", "cosine"), ("euclidean", "euclidean")])
def test_rsa_matches_scipy(metric: str, short: str) -> None:
    rng = np.random.default_rng(2)
    x, y = related_pair(rng, n=45, p=6, q=9)
    np.testing.assert_allclose(rdm(x, metric), pdist(x, metric), atol=1e-10)
    want = spearmanr(pdist(x, metric), pdist(y, metric)).statistic
    assert rsa(x, y, metric) == pytest.approx(want, abs=1e-12)
    assert get_measure(f"rsa_spearman_{short}")(x, y) == pytest.approx(want, abs=1e-12)


def test_rsa_default_is_correlation_distance() -> None:
    rng = np.random.default_rng(3)
    x, y = related_pair(rng, n=30, p=6, q=6)
    assert rsa(x, y) == pytest.approx(rsa(x, y, "correlation"), rel=0, abs=1e-14)
    assert abs(rsa(x, y) - rsa(x, y, "euclidean")) > 1e-3  # so the default is not just any metric


def test_rsa_undefined_cases() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((10, 4))
    x[[1, 7, 8]] = 3.0  # constant rows: correlation distance undefined
    with pytest.raises(MeasureInputError, match="X has 3 row\\(s\\) with zero variance"):
        rsa(x, rng.standard_normal((10, 4)))
    with pytest.warns(MeasureWarning, match="all dissimilarities equal"):
        assert math.isnan(rsa(np.eye(4), rng.standard_normal((4, 3)), "euclidean"))
    with pytest.raises(MeasureInputError, match="metric"):
        rsa(x, x, "manhattan")
