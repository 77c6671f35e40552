"""pytorch-cka 1.1.3 (``import cka``) against interlingua: full batch and its minibatch HSIC estimator.

pytorch-cka computes the unbiased HSIC of Song et al. (2012) and clips CKA to [0, 1]. Its full-batch
``cka_from_features`` keeps the input dtype, so float64 inputs give float64 values: tolerance 1e-9.
On data with a large mean (the "offset" case) it loses digits to the uncentred Gram
(:func:`~interlingua.analysis.peers.raw_gram_tolerance`); fed the centred data it agrees to 1e-12.
Its minibatch path (``compute_cka`` over a DataLoader) sums each batch's HSIC into float32 tensors
(``torch.zeros`` default dtype): relative rounding ~6e-8 per addition over at most a few dozen
batches, so tolerance 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cka import cka_from_features, compute_cka
from oracle_arrays import CASES, IDS

from interlingua.analysis.measures import get_measure, linear_cka
from interlingua.analysis.peers import TOL_FLOAT32, TOL_FLOAT64, pytorch_cka_minibatch, raw_gram_tolerance
from interlingua.core.errors import MeasureInputError


def _full(x: np.ndarray, y: np.ndarray) -> float:
    return float(cka_from_features(torch.from_numpy(x), torch.from_numpy(y)))


@pytest.mark.parametrize("case", IDS)
def test_full_batch_equals_debiased_cka(case: str) -> None:
    x, y = CASES[case]
    ours = linear_cka(x, y, debiased=True)
    assert 0.0 < ours < 1.0  # inside pytorch-cka's clipping range, so the definitions agree
    assert _full(x, y) == pytest.approx(ours, abs=raw_gram_tolerance(x, y))
    # centring is exact in the estimator (U-centring removes it), so fed centred data the peer meets ours closely
    assert _full(x - x.mean(0), y - y.mean(0)) == pytest.approx(ours, abs=1e-12)


def test_the_offset_case_costs_the_peer_digits_not_us() -> None:
    """A mean 100 x the spread: pytorch-cka's uncentred Gram loses up to log10(r_x r_y n) digits; ours is its
    value on the centred data (the estimator is translation invariant)."""
    x, y = CASES["offset"]
    ours = linear_cka(x, y, debiased=True)
    centred = _full(x - x.mean(0), y - y.mean(0))
    assert abs(ours - centred) < 1e-12
    assert abs(_full(x, y) - centred) <= raw_gram_tolerance(x, y)


def test_full_batch_clips_a_negative_debiased_cka_to_zero() -> None:
    """The one convention difference of the full batch: a debiased CKA below 0 reads 0 in pytorch-cka."""
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((12, 30)), rng.standard_normal((12, 30))
    ours = linear_cka(x, y, debiased=True)
    assert ours < -0.01
    assert _full(x, y) == 0.0 == min(max(ours, 0.0), 1.0)


def test_full_batch_on_a_layer_stack_is_our_grid() -> None:
    x, y = CASES["p!=q"]
    layers_x = [x, x[:, :5], np.tanh(x)]
    layers_y = [y, y**2, y[:, :2]]
    theirs = cka_from_features([torch.from_numpy(a) for a in layers_x], [torch.from_numpy(b) for b in layers_y])
    ours = get_measure("cka_linear_debiased").grid(layers_x, layers_y)
    np.testing.assert_allclose(theirs.numpy(), np.clip(ours, 0, 1), rtol=0, atol=TOL_FLOAT64)


@pytest.mark.parametrize("case", [c for c in IDS if c != "offset"])
def test_float32_inputs_agree_to_float32_precision(case: str) -> None:
    """pytorch-cka keeps float32 inputs in float32: the tolerance is raw_gram_tolerance's bound with
    float32's eps (eps32 r_x r_y n, about 1e-5 here). On the offset case that bound exceeds 1: in float32
    the uncentred Gram of data whose mean is 100 x its spread keeps no correct digit of CKA, so it is left out."""
    x, y = (a.astype(np.float32) for a in CASES[case])

    def ratio(a: np.ndarray) -> float:
        a = a.astype(np.float64)
        return float((a**2).sum() / ((a - a.mean(0)) ** 2).sum())

    tol = float(np.finfo(np.float32).eps) * ratio(x) * ratio(y) * x.shape[0]
    assert tol < 1e-4
    theirs = float(cka_from_features(torch.from_numpy(x), torch.from_numpy(y)))
    assert theirs == pytest.approx(linear_cka(x, y, debiased=True), abs=tol)  # ours: float64 from float32 input


# batch sizes whose last batch is empty or holds >= 4 rows (pytorch-cka raises on a shorter one)
GRID = [(c, b) for c in IDS for b in (4, 8, 10, 16, 32) if (r := CASES[c][0].shape[0] % b) == 0 or r >= 4]


@pytest.mark.parametrize("case,b", GRID)
def test_minibatch_estimator_equals_our_minibatch_id(case: str, b: int) -> None:
    x, y = CASES[case]
    ours = get_measure(f"cka_linear_minibatch{b}")(x, y)
    theirs = pytorch_cka_minibatch(x, y, b, compute_cka)
    assert theirs == pytest.approx(min(max(ours, 0.0), 1.0), abs=TOL_FLOAT32)


@pytest.mark.parametrize("case", IDS)
def test_one_batch_of_all_rows_is_the_full_batch_estimator(case: str) -> None:
    x, y = CASES[case]
    n = x.shape[0]
    assert get_measure(f"cka_linear_minibatch{n}")(x, y) == pytest.approx(linear_cka(x, y, debiased=True), abs=1e-12)
    assert pytorch_cka_minibatch(x, y, n, compute_cka) == pytest.approx(_full(x, y), abs=TOL_FLOAT32)


def test_minibatch_differs_from_full_batch_and_depends_on_row_order() -> None:
    """Not an estimator of the same number: the sum of per-batch HSICs weighs within-batch pairs only."""
    x, y = CASES["n>d"]
    m = get_measure("cka_linear_minibatch10")
    full = linear_cka(x, y, debiased=True)
    assert abs(m(x, y) - full) > 1e-3
    perm = np.random.default_rng(0).permutation(x.shape[0])
    assert abs(m(x[perm], y[perm]) - m(x, y)) > 1e-4


def test_a_last_batch_under_four_rows_is_refused_like_pytorch_cka() -> None:
    x, y = CASES["n>d"]  # n = 90: batches of 11 leave 2 rows
    with pytest.raises(MeasureInputError, match="last batch of 2"):
        get_measure("cka_linear_minibatch11")(x, y)
    with pytest.raises(ValueError, match="batch size > 3"):
        pytorch_cka_minibatch(x, y, 11, compute_cka)
    with pytest.raises(MeasureInputError, match="at least 4"):
        get_measure("cka_linear_minibatch3")
