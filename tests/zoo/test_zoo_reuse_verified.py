"""A run that names a zoo piece verifies the family first: a damaged checkpoint is rebuilt, never loaded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from interlingua.zoo import resolve_zoo, zoo_model_fields
from interlingua.zoo.errors import ZooError


def _files(folder: Path) -> dict[str, object]:
    """Every file's bytes; adapter configs without the base path they record (it names the store's folder),
    the manifest by the files it lists."""
    out: dict[str, object] = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            if p.name == "manifest.json":  # its sha256 of the adapter configs depend on that path too
                files = json.loads(p.read_text())["files"]
                out["manifest files"] = {k: v for k, v in files.items() if not k.endswith("adapter_config.json")}
            elif p.name == "adapter_config.json":
                cfg = json.loads(p.read_text())
                cfg.pop("base_model_name_or_path")
                out[str(p.relative_to(folder))] = cfg
            else:
                out[str(p.relative_to(folder))] = p.read_bytes()
    return out


@pytest.mark.parametrize("damage", ["flip_byte", "delete_file"])
def test_a_damaged_zoo_checkpoint_is_rebuilt_on_reuse(tiny_zoo, tmp_path: Path, damage: str) -> None:
    """Before: zoo:tiny:deu@step8 resolved to the damaged folder and the run loaded it."""
    root = tmp_path / "store"
    shutil.copytree(tiny_zoo.root, root)  # the fixture's store is read-only for tests
    folder = root / "zoo" / tiny_zoo.folder.name
    good = _files(folder)
    assert zoo_model_fields("tiny:deu@step8", root)["path"] == str(folder / "deu_Latn" / "step8")  # intact: as is
    victim = folder / "deu_Latn" / "step8" / ("model.safetensors" if damage == "flip_byte" else "config.json")
    if damage == "flip_byte":
        data = bytearray(victim.read_bytes())
        data[-3] ^= 0xFF
        victim.write_bytes(bytes(data))
    else:
        victim.unlink()
    with pytest.warns(UserWarning, match="zoo family .* is damaged .*step8.*; it is rebuilt"):
        fields = zoo_model_fields("tiny:deu@step8", root)
    assert fields["path"] == str(folder / "deu_Latn" / "step8")
    assert _files(folder) == good  # the rebuild is the undamaged family, byte for byte


def test_a_damaged_family_outside_a_store_is_refused(tiny_zoo, tmp_path: Path) -> None:
    folder = tmp_path / "family"
    shutil.copytree(tiny_zoo.folder, folder)
    (folder / "deu_Latn" / "step8" / "config.json").unlink()
    with pytest.raises(ZooError, match="is damaged .*config.json is missing.*interlingua zoo build"):
        resolve_zoo("tiny:deu@step8", folder)
