"""A read-only store: `cache clear` and a run say so in one `interlingua: error:` line (exit 2), no traceback.

Issue 40: `interlingua cache clear` on a read-only store ended in an `OSError` traceback. The store here
is a tmpfs remounted read-only (root, which this suite often runs as, ignores file modes, so `chmod` would
not stop it); where mounting is not allowed those tests skip, and the monkeypatched ones still check the
error path.
"""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.mounts import read_only, read_write, tmpfs
from fixtures.runs import run_cli, spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.cli import main
from interlingua.core.store import Store


def fill(root: Path) -> list[Path]:
    """Two real entries of the store under ``root``."""
    store = Store(root)
    path = store.arrays_path("representations", "e" * 64, folder="m", stem="eng.mean")
    store.put_arrays(path, "e" * 64, {"x": np.ones((2, 3), np.float32)}, {})
    return [path, store.put_json("comparisons", "k" * 64, {"rows": [1]})]


def one_error_line(err: str, *words: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("interlingua: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_cache_clear_on_a_read_only_store_is_one_clear_error(tmp_path, capsys):
    with tmpfs(tmp_path / "ro") as root:
        entries = fill(root)
        read_only(root)
        try:
            assert main(["cache", "list", "--cache-dir", str(root)]) == 0  # reading still works
            capsys.readouterr()
            assert main(["cache", "clear", "--yes", "--cache-dir", str(root)]) == 2
            one_error_line(capsys.readouterr().err, "read-only", str(root))
            assert all(p.is_file() for p in entries)
        finally:
            read_write(root)


def test_a_run_on_a_read_only_cache_is_one_clear_error(tmp_path, tiny_gpt2_path, capsys):
    sents = parallel_sentences(16, seed=1)
    corpus = tmp_path / "c.tsv"
    pd.DataFrame({"id": range(16), "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        corpus, sep="\t", index=False
    )
    with tmpfs(tmp_path / "ro") as root:
        fill(root)
        read_only(root)
        try:
            spec = spec_for(tmp_path, corpus, tiny_gpt2_path, cache_dir=str(root))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert run_cli(tmp_path, spec, "run") == 2
            one_error_line(capsys.readouterr().err, str(root), "Read-only file system")
            assert not (tmp_path / "out").exists()
        finally:
            read_write(root)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_cache_clear_that_cannot_remove_is_one_clear_error(tmp_path, capsys, monkeypatch, code):
    """The same error path without a mount: the OS refuses each removal."""
    root = tmp_path / "cache"
    entries = fill(root)

    def refuse(path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr("os.unlink", refuse)
    monkeypatch.setattr("shutil.rmtree", refuse)
    assert main(["cache", "clear", "--yes", "--cache-dir", str(root)]) == 2
    one_error_line(capsys.readouterr().err, "read-only", "cannot remove")
    assert all(p.is_file() for p in entries)
