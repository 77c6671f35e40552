"""hoggorm 0.13 against interlingua: the RV coefficient is linear CKA (float64 numpy: tolerance 1e-9).

hoggorm's ``RVcoeff`` and ``RV2coeff`` use the arrays as given; its documentation asks the caller to
centre first. Centred, ``RVcoeff`` is our ``cka_linear_biased``; as given, our ``cka_linear_uncentered``;
``RV2coeff`` (the modified RV of Smilde et al. 2009) of centred arrays is our ``rv_modified``.
(The values in hoggorm's docstrings come from unseeded ``np.random.rand`` data: not reproducible.)
"""

from __future__ import annotations

import hoggorm
import numpy as np
import pytest
from oracle_arrays import CASES, IDS

from interlingua.analysis.measures import get_measure, linear_cka
from interlingua.analysis.peers import TOL_FLOAT64


def _centred(a: np.ndarray) -> np.ndarray:
    return a - a.mean(axis=0)


@pytest.mark.parametrize("case", IDS)
def test_rv_of_centred_arrays_is_linear_cka(case: str) -> None:
    x, y = CASES[case]
    theirs = hoggorm.RVcoeff([_centred(x), _centred(y)])
    assert theirs[0, 1] == pytest.approx(linear_cka(x, y), abs=TOL_FLOAT64)
    assert theirs[1, 0] == pytest.approx(theirs[0, 1], abs=1e-15)


@pytest.mark.parametrize("case", IDS)
def test_rv_of_raw_arrays_is_uncentred_cka(case: str) -> None:
    x, y = CASES[case]
    assert hoggorm.RVcoeff([x, y])[0, 1] == pytest.approx(get_measure("cka_linear_uncentered")(x, y), abs=TOL_FLOAT64)


def test_uncentred_rv_is_a_different_number_on_data_with_a_mean() -> None:
    x, y = CASES["offset"]
    assert hoggorm.RVcoeff([x, y])[0, 1] > 0.9 > linear_cka(x, y) + 0.2  # the means dominate XX^T


@pytest.mark.parametrize("case", IDS)
def test_rv2_of_centred_arrays_is_our_modified_rv(case: str) -> None:
    x, y = CASES[case]
    theirs = hoggorm.RV2coeff([_centred(x), _centred(y)])[0, 1]
    assert theirs == pytest.approx(get_measure("rv_modified")(x, y), abs=TOL_FLOAT64)


def test_rv_matrix_of_several_arrays_is_our_pairwise_cka() -> None:
    arrays = [CASES["n>d"][0], CASES["n>d"][1], CASES["n>d"][0][:, :3] ** 2]
    theirs = hoggorm.RVcoeff([_centred(a) for a in arrays])
    ours = get_measure("cka_linear_biased").grid(arrays, arrays)
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=TOL_FLOAT64)
