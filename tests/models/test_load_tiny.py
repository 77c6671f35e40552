"""Every tiny family loads through load_model with the documented contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interlingua.models import ARCHITECTURES, LoadedModel, ModelSpec, load_model

FAMILIES = ["gpt2", "gpt_neox", "llama", "mistral", "gemma3_text", "gemma3", "bert", "goldfish"]
SENTENCES = ["Der alte Fischer trägt ein blaues Boot.", "老渔夫", "A quiet child paints seven apples every morning."]


@pytest.fixture(scope="module")
def loaded(tiny_model_paths: dict[str, Path]) -> dict[str, LoadedModel]:
    return {fam: load_model(ModelSpec(name=fam, path=str(p))) for fam, p in tiny_model_paths.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_hidden_states_count_is_layers_plus_one(loaded: dict[str, LoadedModel], family: str) -> None:
    lm = loaded[family]
    cfg = lm.model.config
    assert lm.arch.num_blocks == cfg.num_hidden_layers == lm.facts.num_layers
    batch = lm.tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = lm.model(**batch, output_hidden_states=True)
    assert len(out.hidden_states) == lm.n_hidden_states == cfg.num_hidden_layers + 1
    assert out.hidden_states[0].shape == (len(SENTENCES), batch["input_ids"].shape[1], lm.facts.hidden_size)


@pytest.mark.parametrize("family", FAMILIES)
def test_model_is_base_without_lm_head(loaded: dict[str, LoadedModel], family: str) -> None:
    lm = loaded[family]
    assert not hasattr(lm.model, "lm_head")
    assert not lm.model.training
    assert all(not p.requires_grad for p in lm.model.parameters())
