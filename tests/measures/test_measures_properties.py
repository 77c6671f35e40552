"""Properties derived from each measure's declared metadata, so the metadata itself is checked.

For every registered measure and every invariance class:
- declared invariances must hold for random data and random maps (hypothesis);
- undeclared ones must visibly fail on at least one of a few random draws
  (a non-invariance is an existence claim, so it is tested as one).
Likewise symmetry, direction (larger_is_more_similar), min_n, equal width and
same-model requirements.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from measures_helpers import call, pair_for, related_pair, transform

from interlingua.analysis.measures import INVARIANCES, MeasureWarning, get_measure, list_measures
from interlingua.core.errors import MeasureInputError

MEASURES = list_measures()
CASES = [(m, kind) for m in MEASURES for kind in sorted(INVARIANCES)]
DECLARED = [c for c in CASES if c[1] in get_measure(c[0]).metadata.invariances]
UNDECLARED = [c for c in CASES if c[1] not in get_measure(c[0]).metadata.invariances]
# rounding grows with the condition number of the map (<= 100) for the CCA family
TOL = 1e-8


@pytest.mark.parametrize("measure_id,kind", DECLARED)
@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(20, 60), p=st.integers(3, 8), q=st.integers(3, 8))
def test_declared_invariance_holds(measure_id: str, kind: str, seed: int, n: int, p: int, q: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = pair_for(measure_id, rng, n=n, p=p, q=q)  # n > p + q: CCA needs no reduction
    base = call(measure_id, x, y)
    moved = call(measure_id, transform(kind, x, rng), transform(kind, y, rng))
    assert np.isfinite(base)
    assert moved == pytest.approx(base, abs=TOL), f"{measure_id} declares {kind} invariance"


@pytest.mark.parametrize("measure_id,kind", UNDECLARED)
def test_undeclared_invariance_fails_somewhere(measure_id: str, kind: str) -> None:
    changes = []
    for seed in range(5):
        rng = np.random.default_rng(1000 + seed)
        x, y = pair_for(measure_id, rng)
        base = call(measure_id, x, y)
        moved = call(measure_id, transform(kind, x, rng), transform(kind, y, rng))
        changes.append(abs(moved - base))
    assert max(changes) > 1e-3, f"{measure_id} is invariant to {kind} on every draw: declare it"


@pytest.mark.parametrize("measure_id", [m for m in MEASURES if get_measure(m).metadata.symmetric])
@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), p=st.integers(3, 8), q=st.integers(3, 8))
def test_declared_symmetry_holds(measure_id: str, seed: int, p: int, q: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = pair_for(measure_id, rng, p=p, q=q)
    assert call(measure_id, x, y) == pytest.approx(call(measure_id, y, x), abs=1e-10)


@pytest.mark.parametrize("measure_id", [m for m in MEASURES if not get_measure(m).metadata.symmetric])
def test_asymmetric_measures_are_asymmetric_somewhere(measure_id: str) -> None:
    rng = np.random.default_rng(7)
    x, y = related_pair(rng, n=60, p=6, q=6)  # equal widths: "narrower" falls back to X, so it is asymmetric too
    assert abs(call(measure_id, x, y) - call(measure_id, y, x)) > 1e-3


@pytest.mark.parametrize("measure_id", MEASURES)
def test_identical_inputs_score_highest(measure_id: str) -> None:
    meta = get_measure(measure_id).metadata
    rng = np.random.default_rng(3)
    x, y = pair_for(measure_id, rng, n=60)
    unrelated = rng.standard_normal(y.shape)
    self_score = call(measure_id, x, x)
    other = call(measure_id, x, unrelated)
    related = call(measure_id, x, y)
    if meta.larger_is_more_similar:
        assert self_score == pytest.approx(1.0, abs=1e-9)
        assert self_score > related > other
    else:
        assert self_score < related < other


@pytest.mark.parametrize("measure_id", MEASURES)
def test_min_n_is_enforced(measure_id: str) -> None:
    meta = get_measure(measure_id).metadata
    rng = np.random.default_rng(0)
    width = 3
    x = rng.standard_normal((meta.min_n - 1, width))
    with pytest.raises(MeasureInputError, match="at least"):
        call(measure_id, x, x.copy())
    x = rng.standard_normal((meta.min_n, width))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)  # tiny n may reduce CCA inputs, with a warning
        warnings.simplefilter("error", RuntimeWarning)  # but never a numpy division / sqrt warning
        value = call(measure_id, x, rng.standard_normal((meta.min_n, width)))
    assert isinstance(value, float)


@pytest.mark.parametrize("measure_id", MEASURES)
def test_equal_width_requirement(measure_id: str) -> None:
    meta = get_measure(measure_id).metadata
    rng = np.random.default_rng(1)
    x, y = related_pair(rng, n=40, p=6, q=4)
    if meta.requires_equal_width:
        with pytest.raises(MeasureInputError, match="same width"):
            call(measure_id, x, y)
    else:
        assert np.isfinite(call(measure_id, x, y))


@pytest.mark.parametrize("measure_id", MEASURES)
def test_same_model_requirement(measure_id: str) -> None:
    m = get_measure(measure_id)
    rng = np.random.default_rng(2)
    x, y = related_pair(rng, n=40, p=5, q=5)
    if m.metadata.requires_same_model:
        with pytest.raises(MeasureInputError, match="shared neuron basis"):
            m(x, y, same_model=False)
        with pytest.raises(MeasureInputError, match="same_model=True"):
            m(x, y)
        assert np.isfinite(m(x, y, same_model=True))
    else:  # the flag is accepted and irrelevant (equal to rounding: BLAS need not repeat bit for bit)
        assert m(x, y, same_model=False) == pytest.approx(m(x, y), rel=0, abs=1e-14)


@pytest.mark.parametrize("measure_id", MEASURES)
def test_results_name_measure_and_estimator(measure_id: str) -> None:
    m = get_measure(measure_id)
    rng = np.random.default_rng(4)
    x, y = pair_for(measure_id, rng)
    kw = {"same_model": True} if m.metadata.requires_same_model else {}
    res = m.compute(x, y, **kw)
    assert res.measure_id == measure_id
    assert res.estimator and res.n == x.shape[0]
    assert float(res) == pytest.approx(m(x, y, **kw), rel=0, abs=1e-14)


@pytest.mark.parametrize("measure_id", MEASURES)
def test_float32_inputs_give_float64_results(measure_id: str) -> None:
    rng = np.random.default_rng(5)
    x, y = pair_for(measure_id, rng)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    got = call(measure_id, x32, y32)
    want = call(measure_id, x32.astype(np.float64), y32.astype(np.float64))
    assert got == pytest.approx(want, abs=1e-12)
