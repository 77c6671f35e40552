"""extract() on an nnsight model: the states of the Hugging Face model it wraps, byte for byte.

nnsight (the ``nnsight`` extra) wraps a loaded ``transformers`` model in an envoy tree; ``extract`` reads
through the module it wraps, so every pooled state must equal the plain Hugging Face path's exactly. The
layer convention is checked against nnsight's own trace: hidden state k + 1 is the output of decoder layer k.
Skipped where nnsight is not installed (``pip install "interlingua[nnsight]"``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import ModelError
from interlingua.data.representations import extract

from .conftest import assert_float32_close

nnsight = pytest.importorskip("nnsight", reason="nnsight is not installed: pip install 'interlingua[nnsight]'")

POOLINGS = ["mean", "sgpt", "last"]
SENTENCES = parallel_sentences(12, seed=11)["eng"]


def _hf(path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(str(path)), AutoTokenizer.from_pretrained(str(path))


def _language_model(*args, **kwargs):
    with warnings.catch_warnings():  # nnsight 0.8 deprecates the LanguageModel name (same class underneath)
        warnings.simplefilter("ignore")
        return nnsight.LanguageModel(*args, **kwargs)


def _same(a, b) -> None:
    assert a.pooled.keys() == b.pooled.keys()
    for name in a.pooled:
        assert a.pooled[name].shape == b.pooled[name].shape
        assert a.pooled[name].tobytes() == b.pooled[name].tobytes(), name
    np.testing.assert_array_equal(a.n_tokens, b.n_tokens)
    assert (a.truncated, a.max_length) == (b.truncated, b.max_length)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("special_tokens", ["exclude", "include"])
def test_language_model_gives_the_bytes_of_the_hf_model(family: str, special_tokens: str, tiny_model_paths) -> None:
    path = tiny_model_paths[family]
    model, tok = _hf(path)
    reference = extract(
        model, SENTENCES, POOLINGS, tokenizer=tok, batch_size=5, special_tokens=special_tokens, progress=False
    )
    wrapped, own_tok = _hf(path)
    lm = _language_model(wrapped, tokenizer=own_tok)
    assert own_tok.padding_side == "left"  # nnsight left-pads causal models; extract pads its copy on the right
    got = extract(lm, SENTENCES, POOLINGS, batch_size=5, special_tokens=special_tokens, progress=False)
    _same(got, reference)
    assert own_tok.padding_side == "left"  # the envoy's tokenizer was copied, not changed
    n_states = {"gpt2": 3, "llama": 4}[family]
    assert got.pooled["mean"].shape == (n_states, len(SENTENCES), 32)


def test_an_undispatched_model_is_dispatched_and_gives_the_same_bytes(tiny_gpt2_path) -> None:
    model, tok = _hf(tiny_gpt2_path)
    reference = extract(model, SENTENCES, POOLINGS, tokenizer=tok, progress=False)
    lm = _language_model(str(tiny_gpt2_path), tokenizer=tok)  # built on the meta device
    assert next(lm._module.parameters()).is_meta
    got = extract(lm, SENTENCES, POOLINGS, progress=False)
    _same(got, reference)
    assert lm.dispatched


def test_transformers_model_and_an_explicit_tokenizer(tiny_llama_path) -> None:
    model, tok = _hf(tiny_llama_path)
    reference = extract(model, SENTENCES, ["sgpt"], tokenizer=tok, progress=False)
    wrapped, _ = _hf(tiny_llama_path)
    tm = nnsight.TransformersModel(wrapped, tokenizer=_hf(tiny_llama_path)[1], task="text-generation")
    _same(extract(tm, SENTENCES, ["sgpt"], tokenizer=tok, progress=False), reference)


def test_layer_k_plus_one_is_the_output_of_decoder_layer_k_in_nnsights_trace(tiny_llama_path) -> None:
    """An independent reading: nnsight's own trace of each decoder layer's output at the last token."""
    model, tok = _hf(tiny_llama_path)
    lm = _language_model(model, tokenizer=tok)
    got = extract(lm, SENTENCES[:4], ["last"], batch_size=1, special_tokens="include", progress=False)
    n_layers = model.config.num_hidden_layers
    for i, sentence in enumerate(SENTENCES[:4]):
        saved = []
        with lm.trace(sentence):
            for k in range(n_layers - 1):  # the last state is after the final norm (the HF convention)
                out = lm.model.layers[k].output
                saved.append((out[0] if isinstance(out, tuple) else out).save())
        for k, state in enumerate(saved):
            value = torch.as_tensor(state)[0, -1].detach().numpy()[None]
            assert_float32_close(got.pooled["last"][k + 1, i][None], value, rtol=1e-5)


def test_an_envoy_around_another_module_is_refused() -> None:
    envoy = nnsight.NNsight(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    with pytest.raises(ModelError, match=r"nnsight model that wraps a Hugging Face transformers model.*Sequential"):
        extract(envoy, SENTENCES, ["mean"], progress=False)
