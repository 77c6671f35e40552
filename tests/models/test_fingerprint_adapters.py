"""Fingerprints identify weights+adapter+tokenizer+dtype; LoRA adapters stay active, unmerged."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import torch

from interlingua.core import hashing as hashing_module
from interlingua.core.hashing import file_sha256
from interlingua.data.models import LoadedModel, ModelSpec, load_model

TEXT = ["Mi hermana pinta siete manzanas cada mañana.", "Старый рыбак несёт синюю лодку."]


def _states(lm: LoadedModel) -> tuple[torch.Tensor, ...]:
    batch = lm.tokenizer(TEXT, return_tensors="pt", padding=True)
    with torch.no_grad():
        return lm.model(**batch, output_hidden_states=True).hidden_states


@pytest.fixture(scope="module")
def base(tiny_gpt2_path: Path) -> LoadedModel:
    return load_model(ModelSpec(path=str(tiny_gpt2_path)))


@pytest.fixture(scope="module")
def with_lora(tiny_gpt2_path: Path, tiny_lora_adapter_path: Path) -> LoadedModel:
    return load_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_adapter_path)))


@pytest.fixture(scope="module")
def with_identity_lora(tiny_gpt2_path: Path, tiny_lora_identity_adapter_path: Path) -> LoadedModel:
    return load_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_identity_adapter_path)))


def test_fingerprint_is_stable_across_loads(base: LoadedModel, tiny_gpt2_path: Path) -> None:
    again = load_model(ModelSpec(name="other label", path=str(tiny_gpt2_path)))
    assert again.fingerprint == base.fingerprint
    assert len(base.fingerprint) == 64
    assert again.facts.weights_sha256 == base.facts.weights_sha256
    assert again.facts.tokenizer_sha256 == base.facts.tokenizer_sha256


def test_loaded_fingerprint_equals_spec_fingerprint(base: LoadedModel, with_lora: LoadedModel) -> None:
    from interlingua.data.models.fingerprint import spec_fingerprint

    assert base.fingerprint == spec_fingerprint(base.spec)
    assert with_lora.fingerprint == spec_fingerprint(with_lora.spec)


def test_fingerprint_changes_with_dtype(base: LoadedModel, tiny_gpt2_path: Path) -> None:
    bf16 = load_model(ModelSpec(path=str(tiny_gpt2_path), dtype="bfloat16"))
    assert bf16.facts.dtype == "bfloat16"
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert bf16.fingerprint != base.fingerprint


def test_fingerprint_changes_with_adapter(
    base: LoadedModel, with_lora: LoadedModel, with_identity_lora: LoadedModel
) -> None:
    prints = {base.fingerprint, with_lora.fingerprint, with_identity_lora.fingerprint}
    assert len(prints) == 3
    assert with_lora.facts.adapter_sha256 != with_identity_lora.facts.adapter_sha256
    assert base.facts.adapter is None and base.facts.adapter_sha256 is None


def test_fingerprint_differs_between_models(base: LoadedModel, tiny_goldfish_path: Path) -> None:
    other = load_model(ModelSpec(path=str(tiny_goldfish_path)))
    assert other.fingerprint != base.fingerprint


def test_nonzero_lora_changes_hidden_states_after_embeddings(base: LoadedModel, with_lora: LoadedModel) -> None:
    plain, adapted = _states(base), _states(with_lora)
    assert torch.equal(plain[0], adapted[0])  # LoRA sits in attention, not the embedding: same bits
    for k in range(1, len(plain)):
        assert (plain[k] - adapted[k]).abs().max() > 1e-3


def test_identity_lora_leaves_hidden_states_unchanged(base: LoadedModel, with_identity_lora: LoadedModel) -> None:
    for plain, adapted in zip(_states(base), _states(with_identity_lora)):
        # lora_B == 0 adds exactly zero; the tolerance only covers BLAS rounding of two
        # separately allocated copies of the base (scaled to the states' magnitude).
        torch.testing.assert_close(plain, adapted, rtol=1e-5, atol=1e-6)


def test_adapter_stays_active_and_unmerged(with_lora: LoadedModel, base: LoadedModel) -> None:
    from peft import PeftModel

    assert isinstance(with_lora.owner, PeftModel)
    lora_params = [n for n, _ in with_lora.model.named_parameters() if "lora_" in n]
    assert lora_params, "LoRA layers must be injected in the extracted base module"
    assert with_lora.facts.parameter_count == base.facts.parameter_count + sum(
        p.numel() for n, p in with_lora.model.named_parameters() if "lora_" in n
    )
    # the frozen base weights are untouched (not merged)
    name = next(n for n in lora_params if "lora_A" in n).split(".lora_A")[0] + ".base_layer.weight"
    base_name = name.replace(".base_layer", "")
    assert torch.equal(with_lora.model.get_parameter(name), base.model.get_parameter(base_name))
    assert with_lora.arch.num_blocks == base.arch.num_blocks
    assert with_lora.n_hidden_states == base.n_hidden_states == 3


def test_file_hash_is_sha256_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"abc" * 1000)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    expected = hashlib.sha256(b"abc" * 1000).hexdigest()
    expected_new = hashlib.sha256(b"abd" * 1000).hexdigest()
    assert file_sha256(path) == expected
    calls = []
    real_sha = hashing_module.hashlib.sha256
    monkeypatch.setattr(hashing_module.hashlib, "sha256", lambda *a: calls.append(1) or real_sha(*a))
    assert file_sha256(path) == expected
    assert calls == []  # served from the in-memory cache
    # Same size, new content: only the modification time tells the cache the file changed.
    path.write_bytes(b"abd" * 1000)
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert file_sha256(path) == expected_new
    assert calls == [1]
