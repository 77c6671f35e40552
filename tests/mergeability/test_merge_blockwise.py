"""The blockwise linear merge build_merge uses: mergekit's float32 arithmetic, independent of the block size,
equal to the float64 formula (merge_tensors) to float32 rounding."""

from __future__ import annotations

import pytest
import torch

from interlingua.mergeability import merge as merge_mod
from interlingua.mergeability.merge import linear_work_dtype, merge_recipe, merge_tensors

_BITS = {
    torch.float32: torch.int32,
    torch.float64: torch.int64,
    torch.bfloat16: torch.int16,
    torch.float16: torch.int16,
}


def _whole(recipe, xs, dtype):
    """The same operations on whole tensors: x_1 * w_1 + x_2 * w_2 + ... in order, / sum w, in the work dtype."""
    work = linear_work_dtype(dtype)
    acc = xs[0].to(work) * recipe["weights"][0]
    for wi, x in zip(recipe["weights"][1:], xs[1:]):
        acc.add_(x.to(work) * wi)
    if recipe["normalize"]:
        acc.div_(sum(recipe["weights"]))
    return acc.to(dtype)


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_blockwise_linear_is_the_whole_tensor_arithmetic_bit_for_bit(monkeypatch, normalize, dtype):
    monkeypatch.setattr(merge_mod, "_LINEAR_BLOCK", 7)  # several blocks and a ragged last one
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(5, 9, generator=g).to(dtype) for _ in range(3)]
    xs[0][0, 0] = -0.0
    recipe = merge_recipe("linear", 3, has_base=False, weights=[0.3, -0.2, 1.1], normalize=normalize)
    got = merge_mod._linear_into(recipe, xs, dtype)
    want = _whole(recipe, xs, dtype)
    assert got.dtype == dtype and torch.equal(got.view(_BITS[dtype]), want.view(_BITS[dtype]))
    # the float64 formula, to float32 rounding (16-bit outputs: to one step of their own, rounded twice)
    exact = merge_tensors(recipe, xs)
    tol = {torch.float64: 1e-12, torch.float32: 1e-6}.get(dtype, torch.finfo(dtype).eps)
    torch.testing.assert_close(got.double(), exact.to(dtype).double(), rtol=tol, atol=tol)


def test_float32_work_rounds_each_product_once():
    """0.1 * x rounded to float32, then summed: what mergekit's float32 linear gives, not the float64 value."""
    x = torch.full((4,), 1 / 3, dtype=torch.float32)
    recipe = merge_recipe("linear", 2, has_base=False, weights=[0.1, 0.7], normalize=False)
    got = merge_mod._linear_into(recipe, [x, x], torch.float32)
    assert torch.equal(got, (x * 0.1) + (x * 0.7))


def test_weights_summing_to_one_need_no_division():
    """x / 1.0 is x exactly: the skipped pass changes no bit."""
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(1000, generator=g) for _ in range(2)]
    recipe = merge_recipe("linear", 2, has_base=False, weights=[0.25, 0.75])
    got = merge_mod._linear_into(recipe, xs, torch.float32)
    assert torch.equal(got.view(torch.int32), ((xs[0] * 0.25 + xs[1] * 0.75) / 1.0).view(torch.int32))
