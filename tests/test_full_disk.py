"""A full disk under the cache or the output: one clear error (exit 2), nothing partial, a resume once freed.

Issue 40: a cache disk filling during a run ended in ``SafetensorError ... No space left on device`` as a
traceback. The error must name the folder that is full and what the run still needs (at least the entry
it was writing), leave no partial entry, and the next run after space is freed must reuse every entry
that was stored. The real tests run on a small tmpfs (root only; skipped with the reason elsewhere); the
monkeypatched ones always run.
"""

from __future__ import annotations

import errno
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.mounts import tmpfs
from fixtures.runs import run_cli, spec_for
from fixtures.tables import assert_same_table
from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import StoreError
from interlingua.core.store import DiskFullError, Store, human_bytes
from interlingua.pipeline.runs import run

ENTRY_NAMESPACES = ("facts", "representations", "comparisons")
FULL = 'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(16, seed=11)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(16)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        path, sep="\t", index=False
    )
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus_tsv, tiny_gpt2_path) -> bytes:
    """results.csv of the same run on an ample disk."""
    root = tmp_path_factory.mktemp("reference")
    spec = spec_for(root, corpus_tsv, tiny_gpt2_path)
    quiet(spec)
    return (root / "out" / "results.csv").read_bytes()


def quiet(spec: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run(spec)


def fill(folder: Path, leave_pages: int) -> Path:
    """A file that takes all but ``leave_pages`` pages of the filesystem holding ``folder``."""
    st = os.statvfs(folder)
    filler = folder / "filler"
    filler.write_bytes(b"\0" * (st.f_bavail * st.f_frsize - leave_pages * 4096))
    return filler


def entries(cache: Path) -> list[Path]:
    return sorted(p for ns in ENTRY_NAMESPACES if (cache / ns).is_dir() for p in (cache / ns).rglob("*") if p.is_file())


def leftovers(*folders: Path) -> list[Path]:
    return [p for f in folders if f.exists() for p in f.rglob("*") if ".tmp-" in p.name or ".partial-" in p.name]


def one_error_line(err: str, *words: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning")]
    errors = [line for line in lines if line.startswith("interlingua: error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in errors[0], errors[0]
    return errors[0]


@pytest.mark.pipeline
def test_a_full_cache_disk_is_one_error_and_the_run_resumes_once_freed(
    tmp_path, corpus_tsv, tiny_gpt2_path, reference, capsys
):
    with tmpfs(tmp_path / "small", "2m") as disk:
        cache = disk / "cache"
        spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, cache_dir=str(cache))
        filler = fill(disk, leave_pages=5)  # facts and one representation fit, not the whole run
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert run_cli(tmp_path, spec, "run") == 2
        line = one_error_line(capsys.readouterr().err, "is full", str(cache), "still needs", "--cache-dir")
        assert "KiB" in line.split("still needs", 1)[1]  # how much, in bytes
        assert not leftovers(cache) and not (tmp_path / "out").exists()
        stored = entries(cache)
        assert stored  # something was stored before the disk filled ...
        store = Store(cache)
        for p in stored:  # ... and every stored entry is whole (verified as it would be read)
            if p.suffix == ".json":
                assert store.get_json(p.parent.name, json.loads(p.read_text())["key"]) is not None
        filler.unlink()
        res = quiet(spec)
        counts = [res.info["cache"][ns] for ns in ENTRY_NAMESPACES]
        hits, rebuilt = sum(c["hits"] for c in counts), sum(c["rebuilt"] for c in counts)
        assert hits == len(stored) and rebuilt == 0  # nothing stored was computed again
        assert_same_table(tmp_path / "out" / "results.csv", reference)


@pytest.mark.pipeline
def test_a_full_output_disk_is_one_error_and_the_rerun_only_writes_the_outputs(
    tmp_path, corpus_tsv, tiny_gpt2_path, reference, capsys
):
    with tmpfs(tmp_path / "small", "2m") as disk:
        spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, output=str(disk / "out"))
        filler = fill(disk, leave_pages=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert run_cli(tmp_path, spec, "run") == 2
        line = one_error_line(capsys.readouterr().err, "output folder", str(disk), "is full", "-o")
        assert "the run needs more than" in line
        assert not (disk / "out").exists() and not leftovers(disk)
        filler.unlink()
        res = quiet(spec)
        assert all(res.info["cache"][ns]["misses"] == 0 for ns in ENTRY_NAMESPACES)  # every result came from the cache
        assert_same_table(disk / "out" / "results.csv", reference)


# ------------------------------------------------------------------------- no mount: the OS call fails


def test_safetensors_full_disk_leaves_no_partial_entry_and_names_the_folder(tmp_path, monkeypatch):
    from safetensors import SafetensorError

    store = Store(tmp_path / "cache")
    path = store.arrays_path("representations", "a" * 64, folder="gpt2", stem="eng.mean")
    arrays = {"x": np.zeros((100, 50), np.float32)}

    def half_then_full(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half an entry")
        raise SafetensorError(FULL)

    monkeypatch.setattr("safetensors.numpy.save_file", half_then_full)
    with pytest.raises(DiskFullError) as caught:
        store.put_arrays(path, "a" * 64, arrays, {})
    assert isinstance(caught.value, StoreError)
    text = str(caught.value)
    assert caught.value.writing is not None and caught.value.writing >= 100 * 50 * 4  # the tensor and its header
    assert str(path.parent) in text and "is full" in text and f"({human_bytes(caught.value.writing)})" in text
    assert list(path.parent.iterdir()) == []  # no partial entry, no temporary file


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_json_entry_on_a_full_disk_leaves_nothing(tmp_path, monkeypatch, code):
    store = Store(tmp_path / "cache")
    real = os.fsync

    def full(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr("os.fsync", full)
    with pytest.raises(DiskFullError) as caught:
        store.put_json("comparisons", "k" * 64, {"rows": list(range(100))})
    monkeypatch.setattr("os.fsync", real)
    assert "comparisons" in str(caught.value) and "free at least" in str(caught.value)
    assert list((tmp_path / "cache" / "comparisons").iterdir()) == []


@pytest.mark.pipeline
def test_a_run_whose_store_fills_says_how_much_it_still_needs_and_resumes(
    tmp_path, corpus_tsv, tiny_gpt2_path, reference, monkeypatch, capsys
):
    """The second representation entry meets a full disk (safetensors' own error): one line, exit 2, resume."""
    from safetensors import SafetensorError
    from safetensors.numpy import save_file

    calls = []

    def full_on_second(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:
            Path(filename).write_bytes(b"\0" * 100)
            raise SafetensorError(FULL)
        return save_file(tensors, filename, metadata=metadata)

    monkeypatch.setattr("safetensors.numpy.save_file", full_on_second)
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run_cli(tmp_path, spec, "run") == 2
    line = one_error_line(capsys.readouterr().err, "is full", "representations", "still needs about")
    # the entry that failed (judged by the one stored) and the comparison (no entry of its kind yet)
    assert "for 1 more entry and 1 more of a kind whose size is not known yet" in line
    cache = tmp_path / "cache"
    assert len(list((cache / "representations").rglob("*.safetensors"))) == 1 and not leftovers(cache)
    monkeypatch.undo()
    res = quiet(spec)
    assert res.info["cache"]["representations"] == {"hits": 1, "misses": 1, "rebuilt": 0}
    assert_same_table(tmp_path / "out" / "results.csv", reference)


@pytest.mark.pipeline
def test_a_merge_build_that_fills_the_store_is_one_error_naming_it(
    tmp_path, corpus_tsv, tiny_gpt2_path, monkeypatch, capsys
):
    """A merge is built into the store's models/merges/ before any task: a full disk there is one line too."""
    from fixtures.tiny_models import build_tiny_gpt2_sibling
    from interlingua.mergeability import merge as merge_module

    sibling = build_tiny_gpt2_sibling(tmp_path / "sibling")

    class FullDisk:
        def update(self, chunk) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        def hexdigest(self) -> str:
            raise AssertionError("the build went on after the failure")

    class FakeHashlib:  # the merge's streamed writer hashes each chunk as it writes it: the write "fails" there
        sha256 = FullDisk

    monkeypatch.setattr(merge_module, "hashlib", FakeHashlib)
    merged = {"name": "mix", "merge": {"method": "linear", "models": [str(tiny_gpt2_path), str(sibling)]}}
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, models=[merged])
    assert run_cli(tmp_path, spec, "run") == 2
    line = one_error_line(capsys.readouterr().err, "is full (No space left on device)", "models/merges", "--cache-dir")
    weights = (tiny_gpt2_path / "model.safetensors").stat().st_size
    assert f"({human_bytes(weights)})" in line  # about what the merge writes: the size of one input's weights
    merges = tmp_path / "cache" / "models" / "merges"
    assert not merges.exists() or list(merges.iterdir()) == []  # no partial build
