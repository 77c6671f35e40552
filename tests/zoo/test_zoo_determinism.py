"""Two independent tiny builds are bit-identical; a damaged family is rebuilt the same."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from safetensors import safe_open

from interlingua.zoo import build_zoo

pytestmark = pytest.mark.zoo  # trains a second family


@pytest.fixture(scope="module")
def second_build(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return build_zoo("tiny", root=tmp_path_factory.mktemp("zoo_store_again"))


def _tensors(path: Path) -> dict[str, bytes]:
    with safe_open(str(path), framework="pt") as fh:
        return {k: fh.get_tensor(k).numpy().tobytes() for k in fh.keys()}  # noqa: SIM118 (a safe_open handle is not iterable)


def test_two_builds_are_bit_identical(tiny_zoo, second_build: dict) -> None:
    first, second = tiny_zoo.manifest, second_build
    assert first["key"] == second["key"]
    assert first["data"] == second["data"] and first["seeds"] == second["seeds"]
    a, b = Path(first["folder"]), Path(second["folder"])
    assert a != b
    weights = [rel for rel in first["files"] if rel.endswith(".safetensors")]
    assert len(weights) == 2 * (len(first["steps"]["checkpoints"]) + 1) + 2
    for rel in weights:
        assert _tensors(a / rel) == _tensors(b / rel), rel
    # tokenizers and weight files are byte-identical too (only the adapters' recorded base path differs)
    for rel, entry in first["files"].items():
        if not rel.endswith("adapter_config.json"):
            assert entry == second["files"][rel], rel
    for name in ("lora", "lora-identity"):
        cfg_a = json.loads((a / "eng_Latn-deu_Latn" / name / "adapter_config.json").read_text())
        cfg_b = json.loads((b / "eng_Latn-deu_Latn" / name / "adapter_config.json").read_text())
        assert cfg_a.pop("base_model_name_or_path") != cfg_b.pop("base_model_name_or_path")
        assert cfg_a == cfg_b
    for lang, model in first["models"].items():
        assert model["checkpoints"] == second["models"][lang]["checkpoints"]  # NLLs to the last bit


def test_damaged_family_is_rebuilt(second_build: dict) -> None:
    folder = Path(second_build["folder"])
    root = folder.parent.parent
    victim = folder / "deu_Latn" / "step8" / "model.safetensors"
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF
    victim.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = build_zoo("tiny", root=root)
    assert any("damaged" in str(w.message) and "step8" in str(w.message) for w in caught)
    assert rebuilt["files"] == second_build["files"]
    assert not [p for p in (root / "zoo").iterdir() if p.name.startswith(".tmp-")]
    shutil.rmtree(folder)  # leave nothing big behind
