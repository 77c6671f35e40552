"""Every tiny family loads through load_model with the documented contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interlingua.data.models import ARCHITECTURES, LoadedModel, ModelSpec, load_model
from interlingua.data.models.architectures import text_config

FAMILIES = ["gpt2", "gpt_neox", "llama", "mistral", "gemma3_text", "gemma3", "bert", "goldfish"]
SENTENCES = [
    "Der alte Fischer trägt ein blaues Boot.",
    "老渔夫",
    "A quiet child paints seven apples every morning near the market.",
]


@pytest.fixture(scope="module")
def loaded(tiny_model_paths: dict[str, Path]) -> dict[str, LoadedModel]:
    return {fam: load_model(ModelSpec(name=fam, path=str(p))) for fam, p in tiny_model_paths.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_hidden_states_count_is_layers_plus_one(loaded: dict[str, LoadedModel], family: str) -> None:
    lm = loaded[family]
    n_layers = text_config(lm.model.config).num_hidden_layers
    assert lm.arch.num_blocks == n_layers == lm.facts.num_layers == lm.num_layers
    batch = lm.tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = lm.model(**batch, output_hidden_states=True)
    assert len(out.hidden_states) == lm.n_hidden_states == n_layers + 1
    assert out.hidden_states[0].shape == (len(SENTENCES), batch["input_ids"].shape[1], lm.facts.hidden_size)


@pytest.mark.parametrize("family", FAMILIES)
def test_model_is_the_base_transformer_in_eval_mode(loaded: dict[str, LoadedModel], family: str) -> None:
    lm = loaded[family]
    assert not hasattr(lm.model, "lm_head") and not hasattr(lm.model, "embed_out")
    assert not lm.model.training
    assert all(not p.requires_grad for p in lm.model.parameters())


@pytest.mark.parametrize("family", FAMILIES)
def test_table_resolves_embedding_blocks_and_norm(loaded: dict[str, LoadedModel], family: str) -> None:
    lm = loaded[family]
    model_type = "gpt2" if family == "goldfish" else family
    entry = ARCHITECTURES[model_type]
    assert lm.arch.source == "table" and lm.arch.model_type == model_type
    assert lm.arch.embedding is lm.model.get_input_embeddings()
    assert lm.arch.blocks is lm.model.get_submodule(entry.blocks)
    assert isinstance(lm.arch.blocks, torch.nn.ModuleList)
    if entry.final_norm is None:
        assert lm.arch.final_norm is None
    else:
        assert lm.arch.final_norm is lm.model.get_submodule(entry.final_norm)


@pytest.mark.parametrize("family", FAMILIES)
def test_last_hidden_state_convention_matches_the_table(loaded: dict[str, LoadedModel], family: str) -> None:
    """A hook on the last block sees the pre-norm residual; the table says if the last state differs."""
    lm = loaded[family]
    captured: dict[str, torch.Tensor] = {}

    def hook(_m, _i, out):
        captured["out"] = out[0] if isinstance(out, tuple) else out

    handle = lm.arch.blocks[-1].register_forward_hook(hook)
    try:
        with torch.no_grad():
            out = lm.model(**lm.tokenizer(SENTENCES[:1], return_tensors="pt"), output_hidden_states=True)
    finally:
        handle.remove()
    # Without a final norm the last state IS the last block's output (bit for bit); with one
    # it differs by far more than rounding. Exact equality needs no platform-dependent tolerance.
    same_as_block = torch.equal(out.hidden_states[-1], captured["out"])
    assert lm.facts.last_hidden_state_is_normed is (not same_as_block)
    if lm.arch.final_norm is not None:
        torch.testing.assert_close(out.hidden_states[-1], lm.arch.final_norm(captured["out"]))


@pytest.mark.parametrize("family", FAMILIES)
def test_pad_token_set_without_resizing(
    loaded: dict[str, LoadedModel], tiny_model_paths: dict[str, Path], family: str
) -> None:
    from safetensors import safe_open

    lm = loaded[family]
    tok = lm.tokenizer
    assert tok.pad_token is not None and tok.padding_side == "right"
    assert lm.facts.padding_side == "right"
    with safe_open(str(tiny_model_paths[family] / "model.safetensors"), "pt") as fh:
        names = fh.keys()  # a safe_open handle is not iterable
        saved_rows = next(fh.get_tensor(k).shape[0] for k in names if k.endswith(lm.arch.embedding_path + ".weight"))
    assert lm.arch.embedding.weight.shape[0] == saved_rows == lm.facts.embedding_rows
    assert lm.facts.vocab_size == lm.model.config.get_text_config().vocab_size
    assert 0 <= tok.pad_token_id < lm.facts.embedding_rows
    batch = tok(SENTENCES, return_tensors="pt", padding=True)
    mask = batch["attention_mask"]
    # right padding: every row is ones then zeros
    assert torch.equal(mask, torch.sort(mask, dim=1, descending=True).values)
    assert (mask[:, 0] == 1).all()


def test_causal_lms_without_pad_get_eos_as_pad(loaded: dict[str, LoadedModel]) -> None:
    for family in ("gpt2", "gpt_neox", "llama", "mistral"):
        lm = loaded[family]
        assert lm.facts.pad_token_source == "eos_token"
        assert lm.tokenizer.pad_token == lm.tokenizer.eos_token
        assert len(lm.tokenizer) == lm.facts.tokenizer_size == 400
    assert loaded["bert"].facts.pad_token == "[PAD]"
    assert loaded["gemma3_text"].facts.pad_token_source == "tokenizer"


def test_goldfish_tokenizer_prepends_cls_and_embedding_is_padded(loaded: dict[str, LoadedModel]) -> None:
    from fixtures.tiny_models import GOLDFISH_EMBEDDING_ROWS

    lm = loaded["goldfish"]
    assert lm.facts.tokenizer_class == "AlbertTokenizer"
    ids = lm.tokenizer("Der Bäcker verkauft das warme Brot.")["input_ids"]
    assert lm.tokenizer.convert_ids_to_tokens(ids[0]) == "[CLS]"
    assert ids[0] == lm.tokenizer.cls_token_id
    assert lm.facts.tokenizer_size == 200 < lm.facts.embedding_rows == GOLDFISH_EMBEDDING_ROWS
    assert lm.facts.vocab_size == GOLDFISH_EMBEDDING_ROWS
    assert lm.facts.pad_token == "<pad>"


@pytest.mark.parametrize("family", FAMILIES)
def test_facts_describe_the_model(loaded: dict[str, LoadedModel], family: str) -> None:
    lm = loaded[family]
    f = lm.facts
    cfg = text_config(lm.model.config)
    assert f.name == family
    assert f.hidden_size == cfg.hidden_size == lm.arch.embedding.weight.shape[1] == 32
    assert f.num_layers == cfg.num_hidden_layers
    assert f.num_heads == cfg.num_attention_heads == 4
    assert f.num_kv_heads == getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    assert f.parameter_count == sum(p.numel() for p in lm.model.parameters())
    assert f.dtype == "float32" and f.device == "cpu"
    assert f.revision is None  # local folder
    assert f.weights_sha256 is not None and len(f.weights_sha256) == 64
    # the multimodal Gemma 3 records its own type; its text model's config says gemma3_text
    expected_type = {"gemma3": "gemma3", "goldfish": "gpt2"}.get(family, family)
    assert f.model_type == expected_type
    assert lm.model.config.model_type == ("gemma3_text" if family == "gemma3" else expected_type)
    assert f.base_class == type(lm.model).__name__
    d = f.to_dict()
    assert d["hidden_size"] == 32 and d["tokenizer_class"] == f.tokenizer_class


def test_gqa_families_record_kv_heads(loaded: dict[str, LoadedModel]) -> None:
    assert loaded["llama"].facts.num_kv_heads == 2 and loaded["llama"].facts.num_heads == 4
    assert loaded["gemma3_text"].facts.num_kv_heads == 1
    assert loaded["gpt2"].facts.num_kv_heads == 4


def test_gemma3_multimodal_yields_its_text_model(loaded: dict[str, LoadedModel]) -> None:
    lm = loaded["gemma3"]
    assert type(lm.model).__name__ == "Gemma3TextModel"
    assert lm.facts.model_type == "gemma3"
    assert lm.facts.architecture == "Gemma3ForConditionalGeneration"
    assert not any("vision" in name for name, _ in lm.model.named_modules())


def test_weights_are_the_saved_ones(tiny_gpt2_path: Path, loaded: dict[str, LoadedModel]) -> None:
    from safetensors.torch import load_file

    saved = load_file(str(tiny_gpt2_path / "model.safetensors"))
    for name, tensor in loaded["gpt2"].model.state_dict().items():
        assert torch.equal(tensor, saved[f"transformer.{name}"]), name  # loading does not round
