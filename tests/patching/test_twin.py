"""The rotated twin (SliceGPT's computational invariance): same function, residual stream times Q."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from interlingua.analysis.rotation import random_orthogonal
from interlingua.core.errors import ConfigError
from interlingua.patching.errors import InterventionError
from interlingua.patching.twin import (
    TWIN_FILE,
    build_twin,
    is_twinnable,
    load_twin_q,
    make_twin,
    twin_check,
)

#: float64 weights, but transformers' LlamaRMSNorm (rms(x)) and attention softmax compute in float32, so the twin
#: agrees with the original to float32 rounding of those (measured ~1e-7 on logits and
#: states of size ~1), not to float64's 1e-15; a fold left out differs by > 1e-3 (test below)
LOGIT_TOL = 1e-6
STATE_TOL = 1e-6


def _llama64(tied: bool = True, seed: int = 0):
    """A 3-layer Llama (d 32, GQA) in float64 with random RMSNorm gains (so folding them is not a no-op)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
    )
    lm = LlamaForCausalLM(cfg).double().eval()
    with torch.no_grad():
        for name, p in lm.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand_like(p) * 1.5)
    return lm


def _ids(n: int = 2, length: int = 9) -> torch.Tensor:
    return torch.randint(0, 97, (n, length), generator=torch.Generator().manual_seed(3))


def test_random_orthogonal_is_orthogonal_and_seeded() -> None:
    q = random_orthogonal(16, 5)
    np.testing.assert_allclose(q.T @ q, np.eye(16), atol=1e-12)
    assert np.array_equal(q, random_orthogonal(16, 5))
    assert not np.allclose(q, random_orthogonal(16, 6))
    with pytest.raises(ConfigError, match="seed"):
        random_orthogonal(4, -1)


@pytest.mark.parametrize("tied", [True, False])
def test_twin_logits_equal_and_states_rotate(tied: bool) -> None:
    lm = _llama64(tied)
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    twin, q = make_twin(lm, seed=1)
    ids = _ids()
    with torch.no_grad():
        a = lm(input_ids=ids, output_hidden_states=True)
        b = twin(input_ids=ids, output_hidden_states=True)
    assert float((a.logits - b.logits).abs().max()) <= LOGIT_TOL
    qt = torch.as_tensor(q)
    L = len(a.hidden_states) - 1
    # indices 0..L-1 (embedding output, block outputs): twin = original @ Q
    for k in range(L):
        assert float((b.hidden_states[k] - a.hidden_states[k] @ qt).abs().max()) <= STATE_TOL
    # index L is after the final norm, whose gain g the twin folded into its head: twin = (h / g) @ Q, not h @ Q
    g = lm.model.norm.weight.detach()
    assert float((b.hidden_states[L] - (a.hidden_states[L] / g) @ qt).abs().max()) <= STATE_TOL
    assert float((b.hidden_states[L] - a.hidden_states[L] @ qt).abs().max()) > 1e-3
    # the original is untouched, the twin untied with unit gains
    for k, v in lm.state_dict().items():
        assert torch.equal(v, before[k])
    assert twin.lm_head.weight.data_ptr() != twin.model.embed_tokens.weight.data_ptr()
    assert torch.equal(twin.model.norm.weight, torch.ones_like(twin.model.norm.weight))


def test_twin_without_folding_the_gains_would_differ() -> None:
    """The fold is necessary: rotating with the gains left in place changes the function (so the test can fail)."""
    lm = _llama64()
    twin, q = make_twin(lm, seed=1)
    g = lm.model.layers[0].input_layernorm.weight.detach().clone()
    with torch.no_grad():
        twin.model.layers[0].input_layernorm.weight.copy_(g)  # a gain put back: RMSNorm(xQ) g != RMSNorm(x) g Q
        ids = _ids()
        diff = (lm(input_ids=ids).logits - twin(input_ids=ids).logits).abs().max()
    assert float(diff) > 1e-3


def test_patch_site_states_rotate_at_every_index() -> None:
    """At the patching sites (hooks: block outputs before the final norm, 0..L) the twin's state is h @ Q."""
    from interlingua.patching.hooks import PatchModel, capture_residuals

    class _Tok:
        is_fast = True

    lm = _llama64()
    twin, q = make_twin(lm, seed=2)
    a, b = PatchModel.wrap(lm, _Tok(), "o"), PatchModel.wrap(twin, _Tok(), "t")
    ids = _ids(1)[0].tolist()
    sa, _ = capture_residuals(a, [ids], list(range(4)), batch_size=1)
    sb, _ = capture_residuals(b, [ids], list(range(4)), batch_size=1)
    for k in range(4):
        np.testing.assert_allclose(sb[0][k].double().numpy(), sa[0][k].double().numpy() @ q, atol=STATE_TOL)


def test_twin_refuses_non_llama(gemma3_patch) -> None:
    assert not is_twinnable(gemma3_patch.lm)
    with pytest.raises(InterventionError, match="Llama-family"):
        make_twin(gemma3_patch.lm)


def test_build_twin_stores_verifies_and_reuses(tmp_path, llama_patch) -> None:
    from transformers import AutoModelForCausalLM

    lm, tok = llama_patch.lm, llama_patch.tokenizer
    out = tmp_path / "twin"
    rec = build_twin(lm, tok, out, seed=7, source="llama-probe", source_key="k1")
    assert rec["seed"] == 7 and rec["check"]["top1_agree"]
    # float32 weights: one rounding per weight; the recorded difference is float32-sized, not zero and not large
    assert rec["check"]["max_logit_diff"] <= 1e-4 * max(1.0, rec["check"]["max_abs_logit"])
    q, stored = load_twin_q(out)
    assert stored["key"] == rec["key"]
    np.testing.assert_array_equal(q, random_orthogonal(32, 7))
    reloaded = AutoModelForCausalLM.from_pretrained(out).eval()
    assert not reloaded.config.tie_word_embeddings
    again = twin_check(lm, reloaded, tok, q)
    assert again["max_logit_diff"] == pytest.approx(rec["check"]["max_logit_diff"], rel=1e-6, abs=1e-7)
    # the same build again: the record, nothing rewritten; another seed into the same folder: refused
    mtime = (out / TWIN_FILE).stat().st_mtime_ns
    assert build_twin(lm, tok, out, seed=7, source="llama-probe", source_key="k1")["key"] == rec["key"]
    assert (out / TWIN_FILE).stat().st_mtime_ns == mtime
    with pytest.raises(InterventionError, match="identical twin"):
        build_twin(lm, tok, out, seed=8, source="llama-probe", source_key="k1")
    # a changed file makes the build damaged
    (out / "twin_q.npy").write_bytes(b"x")
    with pytest.raises(InterventionError, match="not an intact twin"):
        load_twin_q(out)
    assert json.loads((out / TWIN_FILE).read_text())["seed"] == 7
