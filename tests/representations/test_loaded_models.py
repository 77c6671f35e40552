"""Extraction through ``load_model`` on every supported tiny architecture (shared fixtures)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from interlingua.data.models import ModelSpec, load_model
from interlingua.data.representations import extract, pool, tokenize_for_extraction

FAMILIES = ["gpt2", "gpt_neox", "llama", "mistral", "gemma3_text", "gemma3", "bert", "goldfish"]
SHORT = "My sister paints."
LONG = "The old fisher carries a blue boat before the rain."


@pytest.fixture(scope="module")
def loaded_models(tiny_model_paths: dict[str, Path]) -> dict[str, object]:
    return {name: load_model(ModelSpec(name=f"tiny-{name}", path=str(path))) for name, path in tiny_model_paths.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_layer_k_is_pooled_hidden_state_k(family: str, loaded_models: dict[str, object]) -> None:
    loaded = loaded_models[family]
    got = extract(loaded, [LONG, SHORT], ["mean", "sgpt", "last"], progress=False, special_tokens="include").pooled
    ids = tokenize_for_extraction(loaded.tokenizer, [SHORT], 512).input_ids[0]
    device = next(loaded.model.parameters()).device
    with torch.no_grad():
        out = loaded.model(input_ids=torch.tensor([ids], device=device), output_hidden_states=True)
    hidden = torch.stack(out.hidden_states).float().cpu()
    assert hidden.shape[0] == loaded.n_hidden_states
    mask = torch.ones(1, len(ids), dtype=torch.long)
    for name, array in got.items():
        assert array.shape == (loaded.n_hidden_states, 2, hidden.shape[-1])
        expected = pool(hidden, mask, name)[:, 0].numpy()
        # SHORT shares its batch with a much longer sentence: padding must not matter
        np.testing.assert_allclose(array[:, 1], expected, atol=1e-5, rtol=1e-4)


def test_goldfish_cls_prefix_reaches_the_model(loaded_models: dict[str, object]) -> None:
    loaded = loaded_models["goldfish"]
    ids = tokenize_for_extraction(loaded.tokenizer, [SHORT], 64).input_ids[0]
    assert loaded.tokenizer.convert_ids_to_tokens(ids[0]) == "[CLS]"
