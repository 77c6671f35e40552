"""A damaged tokenwise rebuild in the store (``models/tokenwise/<key>``) is warned about and rebuilt on reuse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from interlingua.core.store import Store
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.resolve import resolve_models

BASE = {"output": "x", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]}}


def _scale_one_tensor(path: Path, factor: float = 1.5) -> None:
    tensors = load_file(str(path))
    name = next(k for k, v in sorted(tensors.items()) if v.is_floating_point() and v.abs().sum() > 0)
    tensors[name] = tensors[name] * factor
    save_file(tensors, str(path), metadata={"format": "pt"})


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


MERGE = {"english": "zoo:tiny:eng", "l2": "zoo:tiny:deu", "tokenizer": "zoo:tiny:eng-deu/tokenizer"}


@pytest.mark.parametrize("damage", ["scale_tensor", "delete_tokenizer"])
def test_a_damaged_stored_tokenwise_merge_is_rebuilt(tiny_zoo, tmp_path: Path, damage: str) -> None:
    root = tmp_path / "store"
    shutil.copytree(tiny_zoo.root, root)  # the zoo fixture's store is read-only for tests
    store = Store(root)
    models = parse_spec(
        {**BASE, "models": [{"name": "tw", "tokenwise_merge": {**MERGE, "alpha": 1.0, "top_k": 1.0}}]}
    ).models
    (resolved,) = resolve_models(models, store)
    out = Path(resolved.path)
    assert out.parent == root / "models" / "tokenwise"
    good = _contents(out)
    if damage == "scale_tensor":
        _scale_one_tensor(next(out.glob("*.safetensors")))
    else:
        (out / "tokenizer.json").unlink()
    rebuilt: list[str] = []
    with pytest.warns(UserWarning, match="stored tokenwise merge tw in .* is damaged or incomplete.*rebuilt"):
        assert resolve_models(models, store, log=rebuilt.append)[0].path == str(out)
    assert len(rebuilt) == 1
    now = _contents(out)
    record_now = json.loads(now.pop("tokenwise_merge.json"))
    record_good = json.loads(good.pop("tokenwise_merge.json"))
    assert now == good
    assert record_now["files"] == record_good["files"] and record_now["key"] == record_good["key"]
