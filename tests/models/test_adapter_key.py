"""An adapter's key is what it computes: the same weights and settings saved against another base path (or by
another PEFT version) keep it; a different rank, scaling or weight changes it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from interlingua.audit.identity import spec_identity
from interlingua.data.models import ModelSpec
from interlingua.data.models.fingerprint import spec_fingerprint
from interlingua.data.models.hashing import adapter_sha256


def _copy(src: Path, dst: Path, **config: object) -> Path:
    shutil.copytree(src, dst)
    path = dst / "adapter_config.json"
    cfg = json.loads(path.read_text())
    cfg.update(config)
    path.write_text(json.dumps(cfg, indent=3))  # other formatting too: the JSON is compared, not its bytes
    return dst


def test_the_recorded_base_path_and_peft_version_do_not_change_the_key(
    tmp_path: Path, tiny_gpt2_path: Path, tiny_lora_adapter_path: Path
) -> None:
    moved = _copy(
        tiny_lora_adapter_path, tmp_path / "moved", base_model_name_or_path="/elsewhere/base", peft_version="0.0.1"
    )
    assert json.loads((moved / "adapter_config.json").read_text()) != json.loads(
        (tiny_lora_adapter_path / "adapter_config.json").read_text()
    )
    assert adapter_sha256(moved) == adapter_sha256(tiny_lora_adapter_path)
    here = ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_adapter_path))
    there = ModelSpec(path=str(tiny_gpt2_path), adapter=str(moved))
    assert spec_fingerprint(there) == spec_fingerprint(here)
    assert spec_identity(there).effective_key == spec_identity(here).effective_key


@pytest.mark.parametrize("change", [{"r": 8}, {"lora_alpha": 16}, {"target_modules": ["c_proj"]}])
def test_what_the_adapter_computes_changes_the_key(
    tmp_path: Path, tiny_lora_adapter_path: Path, change: dict[str, object]
) -> None:
    assert adapter_sha256(_copy(tiny_lora_adapter_path, tmp_path / "a", **change)) != adapter_sha256(
        tiny_lora_adapter_path
    )


def test_other_weights_change_the_key(tmp_path: Path, tiny_lora_adapter_path: Path) -> None:
    other = _copy(tiny_lora_adapter_path, tmp_path / "w")
    weights = next(p for p in other.iterdir() if p.name.startswith("adapter_model."))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert adapter_sha256(other) != adapter_sha256(tiny_lora_adapter_path)
    assert adapter_sha256(tmp_path) is None  # no adapter file at all
