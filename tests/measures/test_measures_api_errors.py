"""API misuse gets the package's own error naming the fix (issue 40, item 3: measures, maps, compare, extract)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import interlingua
from interlingua.analysis.measures import get_measure, rbf_cka
from interlingua.core.errors import CorpusError, InterlinguaError, MeasureInputError


@pytest.fixture
def pair() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((20, 4)), rng.standard_normal((20, 4))


@pytest.mark.parametrize(
    "options, fix",
    [
        ({"measures": None}, "pass a measure id or a list of ids"),
        ({"measures": [1, 2]}, "not an id string"),
        ({"measures": 3}, "pass a measure id"),
        ({"measures": []}, "empty"),
        ({"seed": None}, "seed is an integer"),
        ({"seed": -1}, "seed is an integer"),
        ({"control_seed": 1.5}, "seed is an integer"),
        ({"control": "yes"}, "True or False"),
        ({"inference": {"permutations": None}}, "counts >= 0"),
    ],
)
def test_compare_argument_errors(pair, options: dict, fix: str) -> None:
    with pytest.raises(MeasureInputError, match=fix):
        interlingua.compare(*pair, **options)


@pytest.mark.parametrize(
    "mid",
    [
        "cka_rbf_median1e-300",
        "cka_rbf_debiased_median1e-300",
        "cka_rbf_median1e400",
        "cka_rbf_median1e300",
        "svcca_var0.99_max0",
        "mknn_k0",
        "svcca_var0",
    ],
)
def test_degenerate_measure_parameters_are_refused(mid: str) -> None:
    with pytest.raises(MeasureInputError):
        get_measure(mid)


def test_rbf_factor_and_sigma_are_checked_in_the_functions_too(pair) -> None:
    with pytest.raises(MeasureInputError, match="factor must lie in"):
        rbf_cka(*pair, factor=1e-300)
    from interlingua.analysis.measures import gram_rbf

    with pytest.raises(MeasureInputError, match="sigma"):
        gram_rbf(pair[0], sigma=float("inf"))
    K, _ = gram_rbf(pair[0], sigma=1e-300)  # a tiny explicit bandwidth: the identity kernel, finite
    assert np.array_equal(K, np.eye(20))


def test_map_score_below_float64_range_is_nan_with_a_reason() -> None:
    from interlingua.maps import MapWarning, get_map

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 4))
    Y = X @ rng.standard_normal((4, 3)) + 0.1 * rng.standard_normal((50, 3))
    m = get_map("affine").fit(X, Y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert m.score(X * 1e100, Y) < -1e190  # finite: huge and negative, as it truly is
    with pytest.warns(MapWarning, match="below -1e308"):
        assert math.isnan(m.score(X * 1e160, Y))


def test_extract_refuses_a_single_string() -> None:
    with pytest.raises(CorpusError, match="one sentence per character"):
        interlingua.extract(object(), "a sentence", "mean")
    with pytest.raises(CorpusError, match="list of strings"):
        interlingua.extract(object(), 42, "mean")
    assert issubclass(CorpusError, InterlinguaError)
