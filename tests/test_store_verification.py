"""Every store namespace with files is verified on reuse: damage a stored build, reuse it, get it rebuilt.

Namespaces: ``models/gguf-converted/<sha>`` (converted GGUFs), ``models/merges/<key>`` (weight merges),
``transport/plans`` (store array entries); ``models/tokenwise/<key>`` in tests/mergeability/test_tokenwise_store.py
and zoo families in tests/zoo/test_zoo_reuse_verified.py (both need the zoo). Each is checked against the sha256
of every file recorded at write (the record written last); a changed tensor or a missing file is warned about
and rebuilt, and the rebuilt copy equals the undamaged one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from interlingua.core.builds import build_problem, discard_damaged_build, files_record, verify_files
from interlingua.core.store import Store
from interlingua.data.models.gguf_cache import MARKER, converted_folder, find_converted, save_converted
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.resolve import resolve_models

BASE = {"output": "x", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]}}


def _scale_one_tensor(path: Path, factor: float = 1.5) -> str:
    """Multiply the first floating tensor of a safetensors file by ``factor`` (same size on disk)."""
    tensors = load_file(str(path))
    name = next(k for k, v in sorted(tensors.items()) if v.is_floating_point() and v.abs().sum() > 0)
    tensors[name] = tensors[name] * factor
    save_file(tensors, str(path), metadata={"format": "pt"})
    return name


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_verify_files_names_what_is_wrong(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"abc")
    (tmp_path / "b.json").write_text("{}")
    files = files_record(tmp_path)
    assert verify_files(tmp_path, files) is None
    (tmp_path / "a.bin").write_bytes(b"abd")
    assert verify_files(tmp_path, files) == "a.bin fails its sha256 (changed on disk)"
    (tmp_path / "b.json").unlink()
    assert verify_files(tmp_path, files) in ("a.bin fails its sha256 (changed on disk)", "b.json is missing")
    assert verify_files(tmp_path, {}) == "its record lists no files"
    (tmp_path / "rec.json").write_text(json.dumps({"key": "k", "files": {"a.bin": files["a.bin"]}}))
    assert build_problem(tmp_path, "rec.json", "other")[1] == "rec.json records another build"
    assert build_problem(tmp_path, "missing.json")[1] == "missing.json is missing"


def test_discard_damaged_build_removes_only_that_folder(tmp_path: Path) -> None:
    out = tmp_path / "models" / "merges" / "abc"
    out.mkdir(parents=True)
    (out / "x").write_text("x")
    (tmp_path / "models" / "merges" / "keep").mkdir()
    discard_damaged_build(out)
    assert not out.exists() and [p.name for p in (tmp_path / "models" / "merges").iterdir()] == ["keep"]


@pytest.mark.parametrize("damage", ["scale_tensor", "delete_tokenizer", "delete_marker", "edit_marker"])
def test_a_damaged_converted_gguf_is_converted_again(tiny_gpt2_loaded, tmp_path: Path, damage: str) -> None:
    """Before: a tensor scaled by 1.5 was used (values off by 0.15), a missing tokenizer.json failed every run."""
    model, tok = tiny_gpt2_loaded.model, tiny_gpt2_loaded.tokenizer
    sha = "ab" * 32
    folder = save_converted(model, tok, sha, "x.gguf", tmp_path)
    assert folder == converted_folder(sha, tmp_path) and find_converted(sha, tmp_path) == folder
    record = json.loads((folder / MARKER).read_text())
    assert set(record["files"]) >= {"model.safetensors", "config.json", "tokenizer.json"}
    good = _contents(folder)
    if damage == "scale_tensor":
        _scale_one_tensor(folder / "model.safetensors")
    elif damage == "delete_tokenizer":
        (folder / "tokenizer.json").unlink()
    elif damage == "delete_marker":
        (folder / MARKER).unlink()
    else:
        (folder / MARKER).write_text(json.dumps({**record, "gguf_sha256": "cd" * 32}))
    with pytest.warns(UserWarning, match="damaged or incomplete.*converted again"):
        assert find_converted(sha, tmp_path) is None  # never served
    # what the loader does next: dequantise the GGUF again and save the copy (here: the same module)
    assert save_converted(model, tok, sha, "x.gguf", tmp_path) == folder
    assert find_converted(sha, tmp_path) == folder
    assert _contents(folder) == good  # the rebuilt copy equals the undamaged one, byte for byte
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]


def _merge_models(path: Path) -> list:
    return parse_spec(
        {
            **BASE,
            "models": [
                {"name": "mix", "merge": {"method": "linear", "models": [str(path)] * 2, "weights": [0.25, 0.75]}}
            ],
        }
    ).models


@pytest.mark.parametrize(
    "damage", [pytest.param("scale_tensor", marks=pytest.mark.slow), "delete_config", "delete_record"]
)
def test_a_damaged_stored_merge_is_rebuilt(tiny_gpt2_path: Path, tmp_path: Path, damage: str) -> None:
    store = Store(tmp_path / "store")
    models = _merge_models(tiny_gpt2_path)
    built: list[str] = []
    (resolved,) = resolve_models(models, store, log=built.append)
    out = Path(resolved.path)
    assert len(built) == 1 and out.parent == tmp_path / "store" / "models" / "merges"
    good = _contents(out)
    again: list[str] = []
    assert resolve_models(models, store, log=again.append)[0].path == str(out) and again == []  # intact: reused
    if damage == "scale_tensor":
        _scale_one_tensor(out / "model.safetensors")
    elif damage == "delete_config":
        (out / "config.json").unlink()
    else:
        (out / "merge.json").unlink()
    rebuilt: list[str] = []
    with pytest.warns(UserWarning, match="stored merge mix in .* is damaged or incomplete.*rebuilt"):
        assert resolve_models(models, store, log=rebuilt.append)[0].path == str(out)
    assert len(rebuilt) == 1
    now = _contents(out)
    record_now, record_good = json.loads(now.pop("merge.json")), json.loads(good.pop("merge.json"))
    assert now == good  # every model file equals the undamaged build's
    assert {k: v for k, v in record_now.items() if k != "built_at"} == {
        k: v for k, v in record_good.items() if k != "built_at"
    }


def test_a_damaged_stored_transport_plan_is_not_used(tmp_path: Path) -> None:
    """``transport/plans/``: the store's array entries carry each tensor's sha256; a scaled scaling vector makes
    the cached plans a miss (warned, then recomputed by the caller), never plans rebuilt from wrong numbers."""
    import numpy as np
    from safetensors.numpy import load_file as load_np
    from safetensors.numpy import save_file as save_np

    from interlingua.transport.plans import PLANS_FORMAT, _load_plans

    store = Store(tmp_path / "store")
    key = "ab" * 32
    path = store.arrays_path("transport", key, folder="plans", stem="plans")
    arrays = {"layer_cost": np.arange(6.0).reshape(2, 3), "pair/0/0/mlp/u": np.ones(3), "pair/0/0/mlp/v": np.ones(4)}
    store.put_arrays(path, key, arrays, {"format": PLANS_FORMAT, "record": "{}"})
    got = store.get_arrays("transport", path, key, {"format": PLANS_FORMAT})
    assert got is not None and np.array_equal(got[0]["layer_cost"], arrays["layer_cost"])
    from safetensors import safe_open

    with safe_open(str(path), "np") as fh:
        meta = fh.metadata()
    damaged = load_np(str(path))
    damaged["pair/0/0/mlp/u"] = damaged["pair/0/0/mlp/u"] * 1.5
    save_np(damaged, str(path), metadata=meta)
    with pytest.warns(UserWarning, match="ignored and rebuilt"):
        assert _load_plans(store, key, None, None) is None  # type: ignore[arg-type]
