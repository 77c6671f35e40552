"""The blockwise linear merge build_merge uses equals merge_tensors cast once, bit for bit."""

from __future__ import annotations

import pytest
import torch

from interlingua.weights import merge as merge_mod
from interlingua.weights.merge import merge_recipe, merge_tensors


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_blockwise_linear_equals_merge_tensors(monkeypatch, normalize, dtype):
    monkeypatch.setattr(merge_mod, "_LINEAR_BLOCK", 7)  # several blocks and a ragged last one
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(5, 9, generator=g).to(dtype) for _ in range(3)]
    xs[0][0, 0] = -0.0
    recipe = merge_recipe("linear", 3, has_base=False, weights=[0.3, -0.2, 1.1], normalize=normalize)
    want = merge_tensors(recipe, xs).to(dtype)
    got = merge_mod._linear_into(recipe, xs, dtype)
    assert got.dtype == dtype and torch.equal(got.view(torch.uint8 if dtype != torch.float32 else torch.int32),
                                              want.view(torch.uint8 if dtype != torch.float32 else torch.int32))
