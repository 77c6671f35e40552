"""rsatoolbox 0.3 against interlingua: RDMs and their comparisons (all float64 numpy: tolerance 1e-9).

rsatoolbox's "euclidean" RDM is the SQUARED distance divided by the width; its "correlation" RDM is
``1 - Pearson`` between rows, as ours. Comparisons: ``spearman`` is our ``rsa_spearman_*``; ``corr``,
``cosine``, ``tau-a`` and ``rho-a`` are our ``rsa_pearson_*``, ``rsa_cosine_*``, ``rsa_kendalltaua_*``
and ``rsa_rhoa_*`` (on ``sqeuclidean`` RDMs for rsatoolbox's "euclidean").
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle_arrays import CASES, IDS
from rsatoolbox.data import Dataset
from rsatoolbox.rdm import calc_rdm

from interlingua.analysis.measures import get_measure, rdm
from interlingua.analysis.peers import RSATOOLBOX_COMPARISONS, TOL_FLOAT64, rsatoolbox_value


def _their_rdm(x: np.ndarray, method: str) -> np.ndarray:
    return np.asarray(calc_rdm(Dataset(x), method=method).dissimilarities).ravel()


@pytest.mark.parametrize("case", IDS)
def test_rdms_are_ours(case: str) -> None:
    x, _ = CASES[case]
    np.testing.assert_allclose(_their_rdm(x, "correlation"), rdm(x, "correlation"), rtol=0, atol=1e-12)
    scale = float(np.abs(x - x.mean(0)).max()) ** 2  # the squared distances' size, for an absolute tolerance
    np.testing.assert_allclose(
        _their_rdm(x, "euclidean"), rdm(x, "euclidean") ** 2 / x.shape[1], rtol=1e-9, atol=1e-12 * scale
    )


RDMS = {"correlation": "corr", "euclidean": "sqeuclidean"}


@pytest.mark.parametrize("case", IDS)
@pytest.mark.parametrize("method", list(RSATOOLBOX_COMPARISONS))
@pytest.mark.parametrize("rdm_method", list(RDMS))
def test_comparisons_equal_our_ids(case: str, method: str, rdm_method: str) -> None:
    x, y = CASES[case]
    ours_rdm = RDMS[rdm_method]
    cmp = RSATOOLBOX_COMPARISONS[method]
    if cmp == "spearman":  # our default: squared and plain Euclidean distances rank alike
        mid = f"rsa_spearman_{'corr' if ours_rdm == 'corr' else 'euclidean'}"
    else:
        mid = f"rsa_{cmp}_{ours_rdm}"
    assert rsatoolbox_value(x, y, rdm_method, method) == pytest.approx(get_measure(mid)(x, y), abs=TOL_FLOAT64)


@pytest.mark.parametrize("method", ["spearman", "tau-a", "rho-a", "corr", "cosine"])
def test_comparisons_with_tied_dissimilarities(method: str) -> None:
    """Integer points on a small grid: many equal distances, where tau-a, rho-a and Spearman differ in how
    they treat ties (tau-a counts tied pairs as 0 in a fixed denominator; rho-a and Spearman average ranks)."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, size=(14, 2)).astype(float)
    y = x + rng.integers(0, 2, size=(14, 2))
    d = rdm(x, "euclidean")
    assert np.unique(d).size < d.size / 4  # heavily tied
    cmp = RSATOOLBOX_COMPARISONS[method]
    mid = "rsa_spearman_euclidean" if cmp == "spearman" else f"rsa_{cmp}_sqeuclidean"
    assert rsatoolbox_value(x, y, "euclidean", method) == pytest.approx(get_measure(mid)(x, y), abs=TOL_FLOAT64)


def test_the_plain_euclidean_rdm_is_a_different_convention_for_linear_comparisons() -> None:
    """Pearson and cosine see the square of the distance; the ranks (Spearman, tau-a, rho-a) do not."""
    x, y = CASES["p!=q"]
    theirs = rsatoolbox_value(x, y, "euclidean", "corr")
    assert get_measure("rsa_pearson_sqeuclidean")(x, y) == pytest.approx(theirs, abs=TOL_FLOAT64)
    assert abs(get_measure("rsa_pearson_euclidean")(x, y) - theirs) > 1e-3
    for cmp in ("kendalltaua", "rhoa"):
        assert get_measure(f"rsa_{cmp}_euclidean")(x, y) == pytest.approx(
            get_measure(f"rsa_{cmp}_sqeuclidean")(x, y), abs=1e-12
        )


def test_equal_euclidean_distances_tie_exactly() -> None:
    """Found by the tied-data oracle above: the one-product squared distance rounded equal distances apart
    (8 distinct values instead of 6 on that grid), so Spearman broke ties that are in the data."""
    rng = np.random.default_rng(5)
    grid = rng.integers(0, 3, size=(14, 2)).astype(float)
    exact = np.sqrt(((grid[:, None, :] - grid[None, :, :]) ** 2).sum(-1))[np.triu_indices(14, 1)]
    assert np.unique(rdm(grid, "euclidean")).size == np.unique(exact).size
    x = np.vstack([CASES["p!=q"][0], CASES["p!=q"][0][:3]])  # three duplicated rows
    d = rdm(x, "euclidean")
    full = np.zeros((x.shape[0], x.shape[0]))
    full[np.triu_indices(x.shape[0], 1)] = d
    full = full + full.T
    n0 = CASES["p!=q"][0].shape[0]
    for i in range(3):  # row n0 + i is a copy of row i: the same distance to every other row, bit for bit
        others = [k for k in range(x.shape[0]) if k not in (i, n0 + i)]
        assert np.array_equal(full[i, others], full[n0 + i, others])
