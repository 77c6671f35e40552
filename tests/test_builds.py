"""interlingua.core.builds.build_folder / install_build: the one way a built model folder is staged and moved in.

Merges, tokenwise merges, OT fusions, zoo families and converted GGUF copies all stage their folder here:
a failed build leaves nothing, the folder gets the umask's mode (not mkdtemp's 0700), a killed build's
folder is recognised as a dead writer's and swept, and installing never replaces anything.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from interlingua.core.builds import build_folder, files_record, install_build
from interlingua.core.errors import StoreError
from interlingua.core.store import host_tag
from interlingua.data.models.cachefiles import sweep_stale


def _error(parent: Path, exc: OSError) -> StoreError:
    return StoreError(f"cannot build under {parent}: {exc.strerror}")


def _refuse(out: Path) -> StoreError:
    return StoreError(f"{out} holds something else")


def _fill(tmp: Path, key: str, text: str = "weights") -> None:
    (tmp / "model.bin").write_text(text)
    record = {"key": key, "files": files_record(tmp)}
    (tmp / "build.json").write_text(json.dumps(record))


def test_a_build_is_moved_in_whole_with_the_umask_s_mode(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "model"
    mask = os.umask(0o027)
    try:
        with build_folder(out, _error) as tmp:
            assert tmp.parent == out.parent and tmp.name.startswith(f".tmp-{host_tag()}-{os.getpid()}-model-")
            assert stat.S_IMODE(tmp.stat().st_mode) == 0o750
            _fill(tmp, "k1")
            assert install_build(tmp, out, "build.json", "k1", _refuse) is None
    finally:
        os.umask(mask)
    assert sorted(p.name for p in out.iterdir()) == ["build.json", "model.bin"]
    assert [p.name for p in out.parent.iterdir()] == ["model"]  # nothing left beside it


@pytest.mark.parametrize("error", [ValueError("bad input"), KeyboardInterrupt()], ids=["error", "interrupt"])
def test_a_failed_build_leaves_nothing(tmp_path: Path, error: BaseException) -> None:
    with pytest.raises(type(error)), build_folder(tmp_path / "model", _error) as tmp:
        _fill(tmp, "k1")
        raise error
    assert list(tmp_path.iterdir()) == []


def test_an_identical_earlier_build_is_kept_and_anything_else_refused(tmp_path: Path) -> None:
    out = tmp_path / "model"
    with build_folder(out, _error) as tmp:
        _fill(tmp, "k1")
        install_build(tmp, out, "build.json", "k1", _refuse)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with build_folder(out, _error) as tmp:  # another process built the same key: its folder is kept
        _fill(tmp, "k1")
        assert install_build(tmp, out, "build.json", "k1", _refuse) == json.loads(before["build.json"])
    with pytest.raises(StoreError, match="holds something else"), build_folder(out, _error) as tmp:
        _fill(tmp, "k2", "other weights")  # another recipe under the same name: refused, nothing replaced
        install_build(tmp, out, "build.json", "k2", _refuse)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_a_folder_that_cannot_be_made_raises_the_caller_s_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine")
    with pytest.raises(StoreError, match="cannot build under"), build_folder(tmp_path / "file" / "model", _error):
        pass
    assert (tmp_path / "file").read_text() == "mine"


def test_a_killed_build_s_folder_is_swept_and_a_live_one_kept(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:  # a build killed halfway: its folder stays behind
        try:
            with build_folder(tmp_path / "model", _error) as tmp:
                (tmp / "model.bin").write_text("half")
                os._exit(0)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    (left,) = list(tmp_path.iterdir())
    with build_folder(tmp_path / "model", _error) as live:  # this process's: a writer still running
        assert sweep_stale(tmp_path) == [left]
        assert [p for p in tmp_path.iterdir()] == [live]
