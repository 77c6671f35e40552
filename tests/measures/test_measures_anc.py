"""ANC: definition, signed vs absolute, refusal across models, constant neurons."""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.analysis.measures import MeasureWarning, anc, get_measure, neuron_correlations
from interlingua.core.errors import MeasureInputError


def test_identical_and_sign_flipped_sides() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 10))
    assert anc(x, x, same_model=True) == pytest.approx(1.0)
    assert anc(x, x, absolute=False, same_model=True) == pytest.approx(1.0)
    assert anc(x, -2 * x + 3, same_model=True) == pytest.approx(1.0)
    assert anc(x, -2 * x + 3, absolute=False, same_model=True) == pytest.approx(-1.0)


def test_matches_per_neuron_pearson() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((80, 12))
    y = 0.6 * x * rng.choice([-1, 1], 12) + rng.standard_normal((80, 12))
    r = np.array([np.corrcoef(x[:, j], y[:, j])[0, 1] for j in range(12)])
    np.testing.assert_allclose(neuron_correlations(x, y, same_model=True), r, atol=1e-12)
    assert anc(x, y, same_model=True) == pytest.approx(np.abs(r).mean(), abs=1e-12)
    assert anc(x, y, absolute=False, same_model=True) == pytest.approx(r.mean(), abs=1e-12)


def test_refused_across_models() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((30, 4)), rng.standard_normal((30, 4))
    with pytest.raises(MeasureInputError, match="undefined across different models.*shared neuron basis"):
        anc(x, y, same_model=False)
    with pytest.raises(MeasureInputError, match="needs same_model=True"):
        anc(x, y)
    m = get_measure("anc_abs")
    assert m.metadata.requires_same_model and m.metadata.requires_equal_width
    with pytest.raises(MeasureInputError, match="shared neuron basis"):
        m(x, y, same_model=False)


def test_same_neuron_permutation_on_both_sides_is_harmless() -> None:
    """Permuting both sides identically keeps the neuron correspondence (one side only does not)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 8))
    y = x + rng.standard_normal((40, 8))
    perm = rng.permutation(8)
    assert anc(x[:, perm], y[:, perm], same_model=True) == pytest.approx(anc(x, y, same_model=True), abs=1e-14)


def test_constant_neurons_are_excluded_and_counted() -> None:
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((30, 5)), rng.standard_normal((30, 5))
    x[:, 1] = 2.0
    y[:, 3] = 0.0
    with pytest.warns(MeasureWarning, match="excluded 2 of 5 neurons"):
        value = anc(x, y, same_model=True)
    keep = [0, 2, 4]
    assert value == pytest.approx(anc(x[:, keep], y[:, keep], same_model=True), abs=1e-14)
    with pytest.warns(MeasureWarning, match="every neuron is constant"):
        assert math.isnan(anc(np.ones((30, 2)), y[:, :2], same_model=True))
