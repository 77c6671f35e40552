"""extract() on Hugging Face model and tokenizer objects: the same bytes as through load_model, nothing of the
caller's changed, and clear errors for what it cannot read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import InterlinguaError, ModelError, UnsupportedArchitectureError
from interlingua.data.models import ModelSpec, load_model, prepare_tokenizer
from interlingua.data.representations import extract

POOLINGS = ["mean", "sgpt", "last"]
SENTENCES = parallel_sentences(12, seed=5)["eng"]


def _hf(path: Path, head: bool = True) -> tuple[torch.nn.Module, object]:
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    cls = AutoModelForCausalLM if head else AutoModel
    return cls.from_pretrained(str(path)), AutoTokenizer.from_pretrained(str(path))


def _same(a, b) -> None:
    assert a.pooled.keys() == b.pooled.keys()
    for name in a.pooled:
        assert a.pooled[name].dtype == b.pooled[name].dtype == np.float32
        assert a.pooled[name].shape == b.pooled[name].shape
        assert a.pooled[name].tobytes() == b.pooled[name].tobytes(), name
        assert a.special_share[name].tobytes() == b.special_share[name].tobytes(), name
    np.testing.assert_array_equal(a.n_tokens, b.n_tokens)
    np.testing.assert_array_equal(a.n_pooled, b.n_pooled)
    assert (a.truncated, a.max_length) == (b.truncated, b.max_length)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("special_tokens", ["exclude", "include"])
def test_hf_causal_lm_gives_the_bytes_of_load_model(family: str, special_tokens: str, tiny_model_paths) -> None:
    path = tiny_model_paths[family]
    reference = extract(
        load_model(ModelSpec(path=str(path))),
        SENTENCES,
        POOLINGS,
        batch_size=5,
        special_tokens=special_tokens,
        progress=False,
    )
    model, tok = _hf(path)
    assert type(model).__name__.endswith("ForCausalLM") or type(model).__name__.endswith("LMHeadModel")
    got = extract(
        model, SENTENCES, POOLINGS, tokenizer=tok, batch_size=5, special_tokens=special_tokens, progress=False
    )
    _same(got, reference)
    n_states = {"gpt2": 3, "llama": 4}[family]  # tiny GPT-2: 2 blocks, tiny Llama: 3 blocks, + embeddings
    assert got.pooled["mean"].shape == (n_states, len(SENTENCES), 32)


def test_hf_base_model_gives_the_same_bytes_as_its_causal_lm(tiny_llama_path) -> None:
    lm, tok = _hf(tiny_llama_path)
    base, tok2 = _hf(tiny_llama_path, head=False)
    _same(
        extract(base, SENTENCES, POOLINGS, tokenizer=tok2, progress=False),
        extract(lm, SENTENCES, POOLINGS, tokenizer=tok, progress=False),
    )


def test_callers_tokenizer_and_train_flags_are_left_as_they_were(tiny_gpt2_path) -> None:
    model, tok = _hf(tiny_gpt2_path)
    assert tok.pad_token is None  # the tiny GPT-2 has eos only
    side = tok.padding_side = "left"
    evaluated = extract(model, SENTENCES, ["mean"], tokenizer=tok, progress=False)
    model.train()  # GPT-2 has dropout 0.1: states read in train mode would differ
    model.transformer.h[0].eval()  # a mixed state, restored per module
    trained = extract(model, SENTENCES, ["mean"], tokenizer=tok, progress=False)
    assert trained.pooled["mean"].tobytes() == evaluated.pooled["mean"].tobytes()
    assert model.training and model.transformer.training and not model.transformer.h[0].training
    assert model.transformer.h[1].training
    assert tok.pad_token is None and tok.padding_side == side


def test_a_processor_like_object_gives_its_tokenizer(tiny_gpt2_path) -> None:
    from types import SimpleNamespace

    model, tok = _hf(tiny_gpt2_path)
    direct = extract(model, SENTENCES, ["last"], tokenizer=tok, progress=False)
    wrapped = extract(model, SENTENCES, ["last"], tokenizer=SimpleNamespace(tokenizer=tok), progress=False)
    assert direct.pooled["last"].tobytes() == wrapped.pooled["last"].tobytes()


def test_missing_tokenizer_says_what_to_pass(tiny_gpt2_path) -> None:
    model, _ = _hf(tiny_gpt2_path)
    with pytest.raises(ModelError, match=r"tokenizer=AutoTokenizer\.from_pretrained\(") as err:
        extract(model, SENTENCES, ["mean"], progress=False)
    assert str(tiny_gpt2_path) in str(err.value)
    with pytest.raises(ModelError, match=r"must be a Hugging Face tokenizer object, got str"):
        extract(model, SENTENCES, ["mean"], tokenizer=str(tiny_gpt2_path), progress=False)


@pytest.mark.parametrize("thing", ["a/folder", torch.nn.Linear(3, 3), 42])
def test_unsupported_objects_raise_the_packages_error(thing) -> None:
    with pytest.raises(ModelError, match=r"LoadedModel .*transformers model with tokenizer=.*HookedTransformer"):
        extract(thing, SENTENCES, ["mean"], progress=False)
    if isinstance(thing, str):
        with pytest.raises(ModelError, match=r"load_model\(ModelSpec\(path='a/folder'\)\)"):
            extract(thing, SENTENCES, ["mean"], progress=False)


def test_loaded_model_with_a_second_tokenizer_is_refused(tiny_gpt2_loaded) -> None:
    with pytest.raises(ModelError, match=r"carries its own tokenizer.*drop tokenizer="):
        extract(tiny_gpt2_loaded, SENTENCES, ["mean"], tokenizer=tiny_gpt2_loaded.tokenizer, progress=False)


def test_unsupported_architecture_is_the_packages_error(tiny_t5_path) -> None:
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(tiny_t5_path))
    with pytest.raises(UnsupportedArchitectureError, match=r"register_architecture"):
        extract(model, SENTENCES, ["mean"], tokenizer=AutoTokenizer.from_pretrained(str(tiny_t5_path)), progress=False)


def test_ids_beyond_the_embedding_are_refused_before_any_forward_pass(tiny_gpt2_path) -> None:
    model, tok = _hf(tiny_gpt2_path)
    eos = tok.eos_token_id
    rows = eos + 1
    ids = tok(SENTENCES)["input_ids"]
    assert max(max(x) for x in ids) >= rows  # some sentence uses an id past the cut
    model.resize_token_embeddings(rows)  # a tokenizer that is larger than these weights' vocabulary
    with pytest.raises(ModelError, match=rf"embedding has {rows} rows") as err:
        extract(model, SENTENCES, ["mean"], tokenizer=tok, progress=False)
    assert isinstance(err.value, InterlinguaError)


def test_prepare_tokenizer_needs_no_embedding_size(tiny_gpt2_path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_gpt2_path))
    assert prepare_tokenizer(tok) == "eos_token"
    assert tok.pad_token == tok.eos_token and tok.padding_side == "right"
    assert prepare_tokenizer(tok) == "tokenizer"  # now it has one


def test_peft_model_gives_the_bytes_of_load_model_with_the_adapter(tiny_gpt2_path, tiny_lora_adapter_path) -> None:
    from peft import PeftModel

    reference = extract(
        load_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_adapter_path))),
        SENTENCES,
        POOLINGS,
        progress=False,
    )
    model, tok = _hf(tiny_gpt2_path)
    plain = extract(model, SENTENCES, ["mean"], tokenizer=tok, progress=False)
    wrapped = PeftModel.from_pretrained(model, str(tiny_lora_adapter_path))
    got = extract(wrapped, SENTENCES, POOLINGS, tokenizer=tok, progress=False)
    _same(got, reference)
    assert got.pooled["mean"].tobytes() != plain.pooled["mean"].tobytes()  # the adapter's layers ran
