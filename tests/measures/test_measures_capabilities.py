"""Declared capabilities (metadata.gram, metadata.grid) agree with the measure's own call.

For every registered measure that declares a Gram form, ``from_grams(unit_gram(X), unit_gram(Y))``
is the measure, for matched and for permuted rows; for every measure that declares a grid,
``grid(A, B)`` is the loop over layer pairs. Measures that declare neither refuse both.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from measures_helpers import call, related_pair

from interlingua.analysis.measures import (
    Measure,
    MeasureMetadata,
    MeasureResult,
    MeasureWarning,
    cka_grid,
    get_measure,
    list_measures,
    unit_centred_gram,
)
from interlingua.core.errors import MeasureInputError

MEASURES = list_measures()
GRAM = [m for m in MEASURES if get_measure(m).metadata.gram]
GRID = [m for m in MEASURES if get_measure(m).metadata.grid]
SHAPES = [(40, 6, 9), (25, 60, 3), (12, 2, 2), (200, 30, 30)]


def test_linear_cka_declares_both() -> None:
    assert {"cka_linear_biased", "cka_linear_debiased"} <= set(GRAM) & set(GRID)


@pytest.mark.parametrize("measure_id", GRAM)
@pytest.mark.parametrize("shape", SHAPES)
def test_from_grams_is_the_measure(measure_id: str, shape: tuple[int, int, int]) -> None:
    m = get_measure(measure_id)
    n, p, q = shape
    rng = np.random.default_rng(n * 1000 + p * 10 + q)
    x, y = related_pair(rng, n=n, p=p, q=q)
    gx, gy = m.unit_gram(x), m.unit_gram(y)
    assert gx.shape == (n, n) and gx.dtype == np.float64
    assert m.from_grams(gx, gy) == pytest.approx(call(measure_id, x, y), abs=1e-12)
    # the shuffled control and every permutation of a test: a gather of the same Gram
    perm = rng.permutation(n)
    assert m.from_grams(gx, gy[np.ix_(perm, perm)]) == pytest.approx(call(measure_id, x, y[perm]), abs=1e-12)
    np.testing.assert_allclose(m.unit_gram(y[perm]), gy[np.ix_(perm, perm)], rtol=0, atol=1e-14)
    # unit Frobenius norm, symmetric: the self value is 1
    assert m.from_grams(gx, gx) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(gx, gx.T, rtol=0, atol=1e-15)


def test_biased_unit_gram_is_the_normalised_hkh() -> None:
    """An independent construction: H (X X^T) H with H formed explicitly, scaled to unit norm."""
    rng = np.random.default_rng(1)
    x, _ = related_pair(rng, n=30, p=7, q=3)
    n = x.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K = H @ (x @ x.T) @ H
    np.testing.assert_allclose(get_measure("cka_linear_biased").unit_gram(x), K / np.linalg.norm(K), rtol=0, atol=1e-14)
    np.testing.assert_allclose(unit_centred_gram(x), K / np.linalg.norm(K), rtol=0, atol=1e-14)


def test_debiased_unit_gram_has_a_zero_diagonal_and_zero_row_sums() -> None:
    """U-centred Grams have a zero diagonal and every row sums to 0 (Szekely & Rizzo 2014, Lemma)."""
    rng = np.random.default_rng(2)
    x, _ = related_pair(rng, n=30, p=7, q=3)
    g = get_measure("cka_linear_debiased").unit_gram(x)
    assert np.all(np.diag(g) == 0.0)
    np.testing.assert_allclose(g.sum(1), 0.0, atol=1e-14)


@pytest.mark.parametrize("measure_id", GRID)
@pytest.mark.parametrize("method", [None, "gram", "feature"])
def test_grid_is_the_loop_over_layers(measure_id: str, method: str | None) -> None:
    m = get_measure(measure_id)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 30, 12))
    b = [rng.standard_normal((30, w)) + a[k][:, :1] for k, w in enumerate((3, 50, 12))]
    kw = {} if method is None else {"method": method}
    grid = m.grid(a, b, **kw)
    loop = np.array([[call(measure_id, x, y) for y in b] for x in a])
    assert grid.shape == (4, 3)
    np.testing.assert_allclose(grid, loop, rtol=0, atol=1e-12)
    self_grid = m.grid(a, **kw)
    np.testing.assert_allclose(self_grid, [[call(measure_id, x, y) for y in a] for x in a], rtol=0, atol=1e-12)


def test_grid_stacks_the_same_unit_grams() -> None:
    """cka_grid's Gram path and unit_gram are one implementation: the grid is the matrix of vdots."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 40, 50)), rng.standard_normal((2, 40, 60))
    for mid in ("cka_linear_biased", "cka_linear_debiased"):
        m = get_measure(mid)
        vdots = np.array([[m.from_grams(m.unit_gram(x), m.unit_gram(y)) for y in b] for x in a])
        np.testing.assert_allclose(m.grid(a, b, method="gram"), vdots, rtol=0, atol=1e-14)


@pytest.mark.parametrize("measure_id", [m for m in MEASURES if m not in GRAM])
def test_measures_without_a_gram_form_refuse(measure_id: str) -> None:
    m = get_measure(measure_id)
    x = np.random.default_rng(5).standard_normal((20, 3))
    with pytest.raises(MeasureInputError, match="has no Gram form"):
        m.unit_gram(x)
    with pytest.raises(MeasureInputError, match="has no Gram form"):
        m.from_grams(np.eye(3), np.eye(3))


@pytest.mark.parametrize("measure_id", [m for m in MEASURES if m not in GRID])
def test_measures_without_a_grid_refuse(measure_id: str) -> None:
    x = np.random.default_rng(6).standard_normal((2, 20, 3))
    with pytest.raises(MeasureInputError, match="has no layer grid"):
        get_measure(measure_id).grid(x, x)


def test_side_without_variance_and_bad_shapes() -> None:
    m = get_measure("cka_linear_debiased")
    y = np.random.default_rng(7).standard_normal((20, 3))
    with pytest.warns(MeasureWarning, match="centred Gram is 0"):
        g = m.unit_gram(np.full((20, 3), 0.1))
    assert np.all(np.isnan(g))
    assert math.isnan(m.from_grams(g, m.unit_gram(y)))
    with pytest.raises(MeasureInputError, match="square and of equal shape"):
        m.from_grams(m.unit_gram(y), m.unit_gram(y[:10]))
    with pytest.raises(MeasureInputError, match="at least 4"):
        m.unit_gram(y[:3])
    with pytest.raises(MeasureInputError, match="fixed by the measure id"):
        m.grid([y], [y], debiased=False)
    assert cka_grid([y], [y], debiased=True)[0, 0] == pytest.approx(1.0, abs=1e-12)


def test_declared_capability_needs_its_function() -> None:
    def fn(X, Y):  # noqa: ANN001, ANN202
        return MeasureResult(0.0, "", "", X.shape[0])

    with pytest.raises(ValueError, match="metadata.gram=True but unit_gram_fn is missing"):
        Measure("toy", MeasureMetadata(True, True, frozenset(), gram=True), fn)
    with pytest.raises(ValueError, match="metadata.grid=False but grid_fn is given"):
        Measure("toy", MeasureMetadata(True, True, frozenset()), fn, grid_fn=lambda a, b: np.zeros((1, 1)))
