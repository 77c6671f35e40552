"""extract() on a TransformerLens HookedTransformer: its residual-stream hooks give the Hugging Face states.

Skipped where TransformerLens (with ``HookedTransformer``, i.e. before 4.0, which replaced it by
``TransformerBridge``) is not installed. ``HookedTransformer.from_pretrained*`` accepts only official model
names, so the tiny GPT-2 is converted the way it converts a named GPT-2: the config by hand,
``convert_gpt2_weights`` and ``load_and_process_state_dict`` with every processing step off (the weights of
``from_pretrained_no_processing``).
"""

from __future__ import annotations

import pytest

from fixtures.tiny_models import parallel_sentences
from interlingua.data.representations import extract

from .conftest import assert_float32_close

tl = pytest.importorskip("transformer_lens")
try:
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights
except ImportError:  # TransformerLens >= 4.0 has no HookedTransformer
    pytest.skip("this TransformerLens has no HookedTransformer", allow_module_level=True)

POOLINGS = ["mean", "sgpt", "last"]
SENTENCES = parallel_sentences(12, seed=7)["deu"]


def _hooked(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(str(path))
    tok = AutoTokenizer.from_pretrained(str(path))
    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.n_layer,
        d_model=c.n_embd,
        n_ctx=c.n_positions,
        n_heads=c.n_head,
        d_head=c.n_embd // c.n_head,
        d_mlp=c.n_inner or 4 * c.n_embd,
        d_vocab=c.vocab_size,
        act_fn=c.activation_function,
        normalization_type="LN",
        eps=c.layer_norm_epsilon,
        original_architecture="GPT2LMHeadModel",
        default_prepend_bos=False,
    )
    hooked = HookedTransformer(cfg, tokenizer=tok)
    hooked.load_and_process_state_dict(
        convert_gpt2_weights(hf, cfg),
        fold_ln=False,
        center_writing_weights=False,
        center_unembed=False,
        fold_value_biases=False,
        refactor_factored_attn_matrices=False,
    )
    return hooked.eval(), hf, tok


@pytest.mark.parametrize("special_tokens", ["exclude", "include"])
def test_hooked_transformer_agrees_with_the_hf_path(tiny_gpt2_path, special_tokens: str) -> None:
    hooked, hf, tok = _hooked(tiny_gpt2_path)
    reference = extract(
        hf, SENTENCES, POOLINGS, tokenizer=tok, batch_size=5, special_tokens=special_tokens, progress=False
    )
    hooked.tokenizer.padding_side = "left"
    got = extract(hooked, SENTENCES, POOLINGS, batch_size=5, special_tokens=special_tokens, progress=False)
    for name in POOLINGS:
        assert got.pooled[name].shape == reference.pooled[name].shape == (3, len(SENTENCES), 32)
        # The same float32 operations in another order (einsum vs Conv1D): agreement to float32 rounding,
        # about 1e-7 per operation over 2 blocks, far below 1e-5 of each layer's scale.
        assert_float32_close(got.pooled[name], reference.pooled[name], rtol=1e-5)
    assert (got.n_tokens == reference.n_tokens).all() and got.max_length == reference.max_length
    # layer 0 is the embedding sum, the same numbers in both (no arithmetic reordered)
    assert (got.pooled["last"][0] == reference.pooled["last"][0]).all()
    assert hooked.tokenizer.padding_side == "left"  # the model's own tokenizer was copied, not changed
