"""extract() on a CUDA device agrees with the CPU (skipped where torch sees no GPU)."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch

from interlingua.core.errors import NonFiniteError
from interlingua.data.representations.extract import extract

from .conftest import SENTENCES, TinyLoaded, assert_float32_close

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
POOLINGS = ["mean", "sgpt", "last"]


def _on_cuda(loaded: TinyLoaded, dtype: torch.dtype = torch.float32) -> TinyLoaded:
    return replace(loaded, model=copy.deepcopy(loaded.model).to("cuda", dtype=dtype))


@pytest.mark.parametrize("fixture", ["gpt2_loaded", "llama_loaded", "goldfish_loaded"])
@pytest.mark.parametrize("special_tokens", ["include", "exclude"])
def test_cuda_matches_cpu(fixture: str, special_tokens: str, request: pytest.FixtureRequest) -> None:
    loaded: TinyLoaded = request.getfixturevalue(fixture)
    threads = torch.get_num_threads()
    cpu = extract(loaded, SENTENCES, POOLINGS, special_tokens=special_tokens, batch_size=4, progress=False)
    gpu = extract(_on_cuda(loaded), SENTENCES, POOLINGS, special_tokens=special_tokens, batch_size=4, progress=False)
    assert torch.get_num_threads() == threads  # no thread probing on a GPU
    for name in POOLINGS:
        assert gpu.pooled[name].dtype == np.float32
        assert_float32_close(gpu.pooled[name], cpu.pooled[name], rtol=1e-4)
        np.testing.assert_allclose(gpu.special_share[name], cpu.special_share[name], rtol=1e-3, atol=1e-6)
    np.testing.assert_array_equal(gpu.n_pooled, cpu.n_pooled)


def test_cuda_bfloat16_pools_in_float32(llama_loaded: TinyLoaded) -> None:
    got = extract(_on_cuda(llama_loaded, torch.bfloat16), SENTENCES, POOLINGS, progress=False)
    ref = extract(llama_loaded, SENTENCES, POOLINGS, progress=False)
    for name in POOLINGS:
        assert got.pooled[name].dtype == np.float32 and np.isfinite(got.pooled[name]).all()
        # bfloat16 keeps ~3 significant digits; the vectors still point the same way
        a, b = got.pooled[name].reshape(-1), ref.pooled[name].reshape(-1)
        assert float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) > 0.99


def test_cuda_non_finite_is_raised(gpt2_loaded: TinyLoaded) -> None:
    broken = _on_cuda(gpt2_loaded)
    with torch.no_grad():
        for p in broken.model.h[1].parameters():
            p.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match=r"of tiny on cuda: first bad layer 2 "):
        extract(broken, SENTENCES[:3], ["mean"], context="tiny on cuda", progress=False)
