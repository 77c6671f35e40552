"""spec_fingerprint: the cache identity of a model, computed without loading it."""

from __future__ import annotations

import shutil

import pytest

from interlingua.core.errors import ModelError
from interlingua.data.models import ModelSpec
from interlingua.data.models.fingerprint import resolve_hub_revision, spec_fingerprint


def test_fingerprint_is_stable_and_ignores_the_label(tiny_gpt2_path):
    a = spec_fingerprint(ModelSpec(name="x", path=str(tiny_gpt2_path)))
    b = spec_fingerprint(ModelSpec(name="y", path=str(tiny_gpt2_path)))
    assert a == b and len(a) == 64


def test_fingerprint_changes_with_dtype_adapter_weights_and_tokenizer(
    tiny_gpt2_path, tiny_lora_adapter_path, tiny_lora_identity_adapter_path, tmp_path
):
    base = spec_fingerprint(ModelSpec(path=str(tiny_gpt2_path)))
    assert spec_fingerprint(ModelSpec(path=str(tiny_gpt2_path), dtype="bfloat16")) != base
    with_a = spec_fingerprint(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_adapter_path)))
    with_b = spec_fingerprint(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_identity_adapter_path)))
    assert len({base, with_a, with_b}) == 3
    copy = tmp_path / "copy"
    shutil.copytree(tiny_gpt2_path, copy)
    assert spec_fingerprint(ModelSpec(path=str(copy))) == base  # content, not location
    cfg = copy / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace("{", '{"model_max_length": 7, ', 1))
    tok_changed = spec_fingerprint(ModelSpec(path=str(copy)))
    assert tok_changed != base
    weights = next(copy.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert spec_fingerprint(ModelSpec(path=str(copy))) not in (base, tok_changed)


def test_hub_revision_resolution_offline_keeps_commits_and_falls_back_to_the_name(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert resolve_hub_revision("org/model", commit) == commit
    assert resolve_hub_revision("org/never-downloaded", None) == "main"


def test_missing_local_path_is_a_clear_error():
    with pytest.raises(ModelError, match="does not exist"):
        spec_fingerprint(ModelSpec(path="/no/such/folder"))
