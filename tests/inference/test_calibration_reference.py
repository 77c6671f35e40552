"""Calibrated scores agree with the reference implementation, ``calibrated-similarity`` (Groeger, Wen & Brbic 2026).

Both sides get the same arrays and the same permutations (the reference's ``perm_fn`` hands out
interlingua's seeded draws in order), so tau, the calibrated score and the add-one p-value must agree to
float32 rounding (the reference computes in float32): the scalar case (``calibrate``, Algorithm 1) for a
bounded and an unbounded measure, and the aggregation-aware case (``calibrate_layers``, Algorithm 2) for the
grid's maximum, its mean and each layer's best match in the other model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from interlingua.analysis.inference import (
    calibrate_grid_result,
    calibrate_result,
    grid_permutation_test,
    permutation_test,
)
from interlingua.analysis.inference._gram import permutation_batches
from interlingua.analysis.measures import get_measure

torch = pytest.importorskip("torch")
cs = pytest.importorskip("calibrated_similarity")

F32 = dict(rel=2e-6, abs=2e-6)  # float32 rounding of values in [0, 1]


def _perm_fn(n: int, k: int, seed: int) -> Callable[[int, object], object]:
    """The reference's permutation hook, handing out interlingua's K seeded permutations in order."""
    draws: Iterator[np.ndarray] = iter(np.concatenate(list(permutation_batches(n, k, seed, 64))))
    return lambda n_, device: torch.from_numpy(next(draws))


def _sim(measure_id: str) -> Callable[[object, object], float]:
    m = get_measure(measure_id)
    return lambda a, b: float(m(a.numpy(), b.numpy()))


def _pair(rng: np.random.Generator, n: int, signal: float) -> tuple[np.ndarray, np.ndarray]:
    z = rng.standard_normal((n, 4))
    x = np.hstack([z, rng.standard_normal((n, 12))]) * (np.arange(1, 17) ** -0.5)
    y = np.hstack([signal * z @ rng.standard_normal((4, 4)) + rng.standard_normal((n, 4)), rng.standard_normal((n, 8))])
    return x, y


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.01])
@pytest.mark.parametrize("signal", [0.0, 0.5])
@pytest.mark.parametrize("measure_id", ["cka_linear_biased", "cka_linear_debiased", "mknn_k10", "cca_mean"])
def test_scalar_calibration_matches_reference(measure_id: str, signal: float, alpha: float) -> None:
    rng = np.random.default_rng(7)
    x, y = _pair(rng, 48, signal)
    k, seed = 99, 11
    ours = calibrate_result(permutation_test(measure_id, x, y, n_permutations=k, seed=seed), alpha=alpha)
    hi = get_measure(measure_id).metadata.bounds[1]
    score, p, tau = cs.calibrate(
        torch.from_numpy(x),
        torch.from_numpy(y),
        _sim(measure_id),
        K=k,
        alpha=alpha,
        smax=hi if math.isfinite(hi) else None,
        perm_fn=_perm_fn(48, k, seed),
    )
    assert ours.tau == pytest.approx(float(tau), **F32)
    assert ours.calibrated == pytest.approx(float(score), **F32)
    assert ours.p_value == pytest.approx(float(p), **F32)
    assert ours.bounded == math.isfinite(hi)
    assert (ours.calibrated > 0) == (signal > 0)  # both branches of the clipping are compared


def _layers(rng: np.random.Generator, n: int, depth: int, signal: float) -> list[np.ndarray]:
    z = rng.standard_normal((n, 3))
    return [np.hstack([signal * (i + 1) / depth * z, rng.standard_normal((n, 10))]) for i in range(depth)]


@pytest.mark.parametrize(
    ("measure_id", "signal"),
    [  # fast: one cell; the full suite: both estimators at both signals
        ("cka_linear_biased", 0.0),
        *(
            pytest.param(m, s, marks=pytest.mark.slow)
            for m, s in (("cka_linear_biased", 0.8), ("cka_linear_debiased", 0.0), ("cka_linear_debiased", 0.8))
        ),
    ],
)
def test_grid_calibration_matches_reference(measure_id: str, signal: float) -> None:
    rng = np.random.default_rng(3)
    n, k, seed, alpha = 40, 49, 5, 0.05
    a = _layers(rng, n, 3, signal)
    # side B: its own noise plus (signal > 0) side A's last layer mixed into every layer
    b = [rng.standard_normal((n, 10)) + signal * a[-1] @ rng.standard_normal((13, 10)) / 4 for _ in range(4)]
    res = grid_permutation_test(a, b, measure=measure_id, n_permutations=k, seed=seed)
    ours = calibrate_grid_result(res, alpha=alpha)
    hi = get_measure(measure_id).metadata.bounds[1]
    smax = hi if math.isfinite(hi) else None
    ta, tb = [torch.from_numpy(v) for v in a], [torch.from_numpy(v) for v in b]

    def reference(agg: object) -> tuple[float, float, float]:
        score, p, tau = cs.calibrate_layers(
            ta, tb, _sim(measure_id), agg=agg, K=k, alpha=alpha, smax=smax, perm_fn=_perm_fn(n, k, seed)
        )
        return float(score), float(p), float(tau)

    cases = [("max", ours.maximum), ("mean", ours.mean)]
    cases += [((lambda S, i=i: S[i].max()), ours.best_b[i]) for i in range(len(a))]
    cases += [((lambda S, j=j: S[:, j].max()), ours.best_a[j]) for j in range(len(b))]
    for agg, cal in cases:
        score, p, tau = reference(agg)
        assert cal.tau == pytest.approx(tau, **F32)
        assert cal.calibrated == pytest.approx(score, **F32)
        assert cal.p_value == pytest.approx(p, **F32)
    assert (ours.maximum.calibrated > 0) == (signal > 0)
    # the grid test's own max null and p-value are the calibrated maximum's
    assert ours.maximum.p_value == pytest.approx(res.p_value)
    assert ours.maximum.observed == pytest.approx(res.observed)
