"""Every registered measure on degenerate inputs: constant sides, duplicated rows, rank-1 sides.

A measure may refuse (MeasureInputError, which a run records as nan with the
message) or return nan with a ``reason``; a finite value must lie in the
measure's declared ``metadata.bounds``. A constant side (every example the
same representation) never scores a finite similarity: nothing about how the
examples relate can be read from it, and its shuffled control would equal
the matched value.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from interlingua.analysis.measures import MeasureWarning, get_measure, list_measures, mutual_knn
from interlingua.analysis.measures.knn import tied_rows
from interlingua.comparison import _guarded
from interlingua.core.errors import MeasureInputError

MEASURES = list_measures() + ["mknn_k3", "svcca_var0.95_max4"]
N, P = 30, 8


def _evaluate(measure_id: str, x: np.ndarray, y: np.ndarray) -> tuple[float, str]:
    """(value, reason): nan with the refusal's message, nan with the measure's reason, or a finite value."""
    m = get_measure(measure_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        try:
            res = m.compute(x, y, same_model=True)
        except MeasureInputError as err:
            return math.nan, str(err)
    value = float(res.value)
    if math.isnan(value):
        assert res.details.get("reason"), f"{measure_id}: nan without a reason"
        return value, str(res.details["reason"])
    assert math.isfinite(value), f"{measure_id}: {value}"
    lo, hi = m.metadata.bounds
    assert lo - 1e-9 <= value <= hi + 1e-9, f"{measure_id}: {value} outside its declared bounds {m.metadata.bounds}"
    return value, ""


def _inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, P)) + 0.5
    dup = x.copy()
    dup[1], dup[7] = dup[0], dup[6]
    return {
        "random": x,
        "other": rng.standard_normal((N, P)) + 0.5,
        "constant": np.tile(rng.standard_normal(P) + 3.0, (N, 1)),
        "duplicated": dup,
        "rank1": np.outer(rng.uniform(0.5, 2.0, N), rng.standard_normal(P)),
    }


@pytest.mark.parametrize("measure_id", MEASURES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_constant_sides_are_never_a_number(measure_id: str, seed: int) -> None:
    d = _inputs(seed)
    for a, b in (("constant", "constant"), ("constant", "random"), ("random", "constant"), ("constant", "rank1")):
        value, reason = _evaluate(measure_id, d[a], d[b])
        assert math.isnan(value), f"{measure_id} on ({a}, {b}) gave {value}"
        assert reason


@pytest.mark.parametrize("measure_id", MEASURES)
def test_duplicated_and_rank1_inputs_are_nan_with_reason_or_in_bounds(measure_id: str) -> None:
    d = _inputs(3)
    for a, b in (
        ("duplicated", "duplicated"),
        ("duplicated", "other"),
        ("rank1", "rank1"),
        ("rank1", "other"),
        ("other", "rank1"),
    ):
        _evaluate(measure_id, d[a], d[b])  # asserts: a refusal, nan with a reason, or in bounds


@pytest.mark.parametrize("measure_id", MEASURES)
def test_the_run_records_a_reason_for_constant_sides(measure_id: str) -> None:
    d = _inputs(4)
    m = get_measure(measure_id)
    value, why = _guarded(lambda: float(m(d["constant"], d["constant"], same_model=True)))
    assert math.isnan(value) and why


def test_bounds_are_declared_ranges() -> None:
    for mid in MEASURES:
        lo, hi = get_measure(mid).metadata.bounds
        assert lo < hi
    assert get_measure("cka_linear_biased").metadata.bounds == (0.0, 1.0)
    assert get_measure("mknn_k10").metadata.bounds == (0.0, 1.0)


def test_mutual_knn_constant_side_is_nan_not_perfect() -> None:
    rng = np.random.default_rng(5)
    c = np.tile(rng.standard_normal(6), (40, 1))
    x = rng.standard_normal((40, 6))
    with pytest.warns(MeasureWarning, match="neighbour sets depend on an arbitrary tie-break"):
        assert math.isnan(mutual_knn(c, c, 10))  # was 1.0 by argpartition's index order
    with pytest.warns(MeasureWarning, match="40 of 40 rows of Y"):
        assert math.isnan(mutual_knn(x, c, 10))
    with pytest.warns(MeasureWarning):
        res = get_measure("mknn_k10").compute(c, c)
    assert res.details["tied_rows"] == {"X": 40, "Y": 40}


def test_mutual_knn_ties_are_located_at_the_kth_neighbour() -> None:
    # rows on a circle 0.3 rad apart on an arc: row i's neighbours are i-1 and i+1 at equal cosine
    ang = np.arange(12) * 0.3
    x = np.column_stack([np.cos(ang), np.sin(ang)])
    # k = 1: interior rows have two equally near neighbours (tied); the two end rows have one (not tied)
    t = tied_rows(x, 1)
    assert not t[0] and not t[-1] and t[1:-1].all()
    # k = 2: both neighbours one step away are in, the 3rd is farther: no tie anywhere
    assert not tied_rows(x, 2).any()
    # k = 3: the 3rd and 4th are two steps away on either side: tied, except where a side runs out
    assert tied_rows(x, 3).tolist() == [False, False] + [True] * 8 + [False, False]
    # distinct random rows have no ties
    rng = np.random.default_rng(6)
    y = rng.standard_normal((20, 5))
    assert not tied_rows(y, 3).any()
    assert math.isfinite(mutual_knn(y, y[:, ::-1], 3))


def test_mutual_knn_unchanged_without_ties() -> None:
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((50, 6)), rng.standard_normal((50, 9))
    sx = x / np.linalg.norm(x, axis=1, keepdims=True)
    sy = y / np.linalg.norm(y, axis=1, keepdims=True)
    k = 5
    ov = []
    for i in range(50):
        nx = set(np.argsort(-(sx @ sx[i]), kind="stable")[1 : k + 1])
        ny = set(np.argsort(-(sy @ sy[i]), kind="stable")[1 : k + 1])
        ov.append(len(nx & ny) / k)
    assert mutual_knn(x, y, k) == pytest.approx(np.mean(ov), abs=1e-12)
