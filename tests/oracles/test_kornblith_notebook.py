"""The values printed in Kornblith et al.'s reference notebook (google-research, representation_similarity/
Demo.ipynb), reproduced on its own data: ``np.random.seed(1337); X = randn(100, 10); Y = randn(100, 10) + X``
(numpy's legacy generator, whose stream numpy keeps fixed). The notebook prints 5 decimals, so each value
is checked to half a unit of the 5th decimal.

- linear CKA 0.55761 and debiased 0.51346: our defaults;
- RBF CKA 0.65483 (``gram_rbf(X, 0.5)``): its bandwidth is ``sigma^2 = 0.5^2 median(all n^2 squared
  distances)``, our ``cka_rbf_kornblith0.5``; our default ``cka_rbf_median0.5`` reads 0.65401;
- mean squared CCA 0.54312: CCA of the UNCENTRED columns (a QR of the raw features), our
  ``cca_mean_sq_uncentered``; our default ``cca_mean_sq`` centres and reads 0.54540.

ckatorch copies the notebook's RBF kernel with ``torch.median``, which for an even count returns the lower
of the two middle values instead of their mean: equal to ``cka_rbf_kornblith<t>`` when n is odd.
"""

from __future__ import annotations

import ckatorch
import numpy as np
import pytest
import torch

from interlingua.analysis.measures import get_measure, linear_cka
from interlingua.analysis.peers import TOL_FLOAT64, _rbf_cka_lower_median

HALF_ULP_5 = 5e-6


@pytest.fixture(scope="module")
def notebook_data() -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(1337)  # == np.random.seed(1337) followed by np.random.randn
    X = rs.randn(100, 10)
    Y = rs.randn(100, 10) + X
    return X, Y


def test_linear_cka_values(notebook_data) -> None:
    X, Y = notebook_data
    assert linear_cka(X, Y) == pytest.approx(0.55761, abs=HALF_ULP_5)
    assert linear_cka(X, Y, debiased=True) == pytest.approx(0.51346, abs=HALF_ULP_5)


def test_rbf_cka_value_needs_the_notebooks_bandwidth(notebook_data) -> None:
    X, Y = notebook_data
    assert get_measure("cka_rbf_kornblith0.5")(X, Y) == pytest.approx(0.65483, abs=HALF_ULP_5)
    assert abs(get_measure("cka_rbf_median0.5")(X, Y) - 0.65483) > 5e-4  # our default: a different bandwidth


def test_cca_value_needs_uncentred_columns(notebook_data) -> None:
    X, Y = notebook_data
    assert get_measure("cca_mean_sq_uncentered")(X, Y) == pytest.approx(0.54312, abs=HALF_ULP_5)
    assert abs(get_measure("cca_mean_sq")(X, Y) - 0.54312) > 1e-3  # our default centres


def test_notebook_invariances_hold_for_the_convention_ids(notebook_data) -> None:
    """The notebook's last cell: CCA is invariant to any invertible map, CKA only to orthogonal ones."""
    X, Y = notebook_data
    T = np.random.RandomState(0).randn(10, 10)
    _, Q = np.linalg.eigh(T.T @ T)
    cca = get_measure("cca_mean_sq_uncentered")
    assert cca(X @ T, Y) == pytest.approx(cca(X, Y), abs=1e-10)
    assert cca(X @ Q * 1.337, Y) == pytest.approx(cca(X, Y), abs=1e-10)
    rbf = get_measure("cka_rbf_kornblith0.5")
    assert rbf(X @ Q * 1.337, Y) == pytest.approx(rbf(X, Y), abs=1e-10)
    assert abs(rbf(X @ T, Y) - rbf(X, Y)) > 1e-3


@pytest.mark.parametrize("n", [31, 44])
@pytest.mark.parametrize("threshold", [0.5, 1.0, 2.0])
def test_ckatorch_rbf_is_the_notebooks_for_odd_n_and_the_lower_median_for_even_n(n: int, threshold: float) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 6))
    y = x @ rng.standard_normal((6, 4)) + rng.standard_normal((n, 4))
    theirs = float(ckatorch.cka_base(torch.from_numpy(x), torch.from_numpy(y), kernel="rbf", threshold=threshold))
    ours = get_measure(f"cka_rbf_kornblith{threshold}")(x, y)
    if n % 2:
        assert theirs == pytest.approx(ours, abs=TOL_FLOAT64)
    elif threshold == 1.0:
        assert theirs == pytest.approx(_rbf_cka_lower_median(x, y), abs=TOL_FLOAT64)
        assert abs(theirs - ours) > 1e-7
