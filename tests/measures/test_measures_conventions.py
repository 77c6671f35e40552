"""The peers' convention ids (interlingua.analysis.measures.conventions): their declared metadata holds.

Each id is checked against its peer in tests/oracles/; here, as for the listed measures in
test_measures_properties.py, the declared invariances hold, the undeclared ones fail on some draw,
symmetry and direction are what the metadata says, and the values stay within the declared bounds.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
from measures_helpers import related_pair, transform

from interlingua.analysis.measures import INVARIANCES, MeasureWarning, get_measure
from interlingua.core.errors import MeasureInputError

IDS = [
    "cka_linear_minibatch10",
    "cka_rbf_kornblith0.5",
    "cka_rbf_debiased_kornblith1.0",
    "cka_linear_uncentered",
    "rv_modified",
    "cca_mean_uncentered",
    "cca_mean_sq_uncentered",
    "procrustes_angular",
    "procrustes_angular_raw",
    "procrustes_euclidean",
    *[f"rsa_{c}_{r}" for c in ("pearson", "cosine", "kendalltaua", "rhoa") for r in ("corr", "cosine", "sqeuclidean")],
]
CASES = [(m, k) for m in IDS for k in sorted(INVARIANCES)]


def _pair(seed: int) -> tuple[np.ndarray, np.ndarray]:
    return related_pair(np.random.default_rng(seed), n=40, p=6, q=6)


@pytest.mark.parametrize("mid,kind", [c for c in CASES if c[1] in get_measure(c[0]).metadata.invariances])
def test_declared_invariance_holds(mid: str, kind: str) -> None:
    m = get_measure(mid)
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        x, y = _pair(seed)
        base = m(x, y)
        assert np.isfinite(base)
        assert m(transform(kind, x, rng), transform(kind, y, rng)) == pytest.approx(base, abs=1e-8)


@pytest.mark.parametrize("mid,kind", [c for c in CASES if c[1] not in get_measure(c[0]).metadata.invariances])
def test_undeclared_invariance_fails_somewhere(mid: str, kind: str) -> None:
    m = get_measure(mid)
    changes = []
    for seed in range(5):
        rng = np.random.default_rng(1000 + seed)
        x, y = _pair(seed)
        changes.append(abs(m(transform(kind, x, rng), transform(kind, y, rng)) - m(x, y)))
    assert max(changes) > 1e-3


@pytest.mark.parametrize("mid", IDS)
def test_symmetry_direction_and_bounds(mid: str) -> None:
    m = get_measure(mid)
    meta = m.metadata
    x, y = _pair(7)
    assert meta.symmetric
    assert m(x, y) == pytest.approx(m(y, x), abs=1e-10)
    unrelated = np.random.default_rng(8).standard_normal(y.shape)
    related, other, itself = m(x, y), m(x, unrelated), m(x, x)
    assert (itself > other) == meta.larger_is_more_similar  # a copy is the most similar
    lo, hi = meta.bounds
    for v in (related, other, itself):
        assert lo - 1e-12 <= v <= hi + 1e-12


@pytest.mark.parametrize("mid", IDS)
def test_constant_side_is_nan_or_refused(mid: str) -> None:
    x, _ = _pair(9)
    const = np.ones_like(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        with contextlib.suppress(MeasureInputError):  # refusing is as good as nan
            assert math.isnan(get_measure(mid)(x, const))


def test_unknown_parameters_are_refused() -> None:
    with pytest.raises(MeasureInputError):
        get_measure("cka_linear_minibatch2")
    with pytest.raises(MeasureInputError):
        get_measure("rsa_pearson_mahalanobis")
    with pytest.raises(MeasureInputError):
        get_measure("cka_rbf_kornblith0")
