"""The output folder: nothing interlingua did not write is ever deleted or overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlingua.core.errors import OutputError
from interlingua.core.outputs import MANIFEST, prepare_output, write_outputs


def _build(text: str):
    def build(tmp: Path) -> None:
        (tmp / "results.csv").write_text(text)
        (tmp / "figures").mkdir()
        (tmp / "figures" / "a.png").write_bytes(b"png")

    return build


def test_fresh_folder_gets_outputs_and_a_manifest(tmp_path):
    out = tmp_path / "run"
    written = write_outputs(prepare_output(out), _build("v1"))
    assert sorted(written) == ["figures/a.png", "results.csv"]
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["files"]) == {"figures/a.png", "results.csv"}
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_unchanged_earlier_run_is_replaced(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    write_outputs(prepare_output(out), _build("v2"))
    assert (out / "results.csv").read_text() == "v2"


def test_foreign_files_next_to_a_run_json_survive(tmp_path):
    """The old guard only asked 'is there a run.json?' and replaced the whole folder (thesis gone)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    (out / "thesis.tex").write_text("precious")
    (out / "data").mkdir()
    (out / "data" / "good.tsv").write_text("mine")
    with pytest.raises(OutputError, match="no interlingua manifest.json"):
        prepare_output(out)
    with pytest.raises(OutputError, match="no interlingua manifest.json"):
        prepare_output(out, overwrite=True)
    assert (out / "thesis.tex").read_text() == "precious" and (out / "data" / "good.tsv").read_text() == "mine"


def test_user_notes_added_to_an_earlier_run_need_overwrite_and_survive_it(tmp_path):
    """A rerun into an earlier run's folder used to delete the notes a user had added there."""
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    (out / "notes.md").write_text("my notes")
    with pytest.raises(OutputError, match="--overwrite"):
        prepare_output(out)
    write_outputs(prepare_output(out, overwrite=True), _build("v2"))
    assert (out / "notes.md").read_text() == "my notes"
    assert (out / "results.csv").read_text() == "v2"
    manifest = json.loads((out / MANIFEST).read_text())
    assert "notes.md" not in manifest["files"]


def test_an_edited_output_is_not_replaced_without_overwrite(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    (out / "results.csv").write_text("edited by hand")
    with pytest.raises(OutputError, match="changed since it wrote them"):
        prepare_output(out)
    assert (out / "results.csv").read_text() == "edited by hand"


def test_files_of_the_earlier_run_that_the_new_one_does_not_write_are_removed_only_if_ours(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    (out / "notes.md").write_text("mine")

    def smaller(tmp: Path) -> None:
        (tmp / "results.csv").write_text("v2")

    write_outputs(prepare_output(out, overwrite=True), smaller)
    assert not (out / "figures" / "a.png").exists()  # ours, no longer produced
    assert (out / "notes.md").exists()


def test_output_path_that_is_a_file_or_under_a_file_is_refused_before_work(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        prepare_output(f)
    with pytest.raises(OutputError, match="is a file"):
        prepare_output(f / "sub" / "run")


def test_dot_as_output_in_a_non_empty_folder_is_a_clear_error(tmp_path, monkeypatch):
    """`-o .` used to fail with ValueError("PosixPath('.') has an empty name") after all the work."""
    (tmp_path / "something.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match="no interlingua manifest.json"):
        prepare_output(".")


def test_a_failing_build_changes_nothing(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))

    def broken(tmp: Path) -> None:
        (tmp / "results.csv").write_text("half")
        raise RuntimeError("report crashed")

    with pytest.raises(RuntimeError):
        write_outputs(prepare_output(out), broken)
    assert (out / "results.csv").read_text() == "v1"
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_an_earlier_run_moved_aside_by_a_killed_run_is_put_back(tmp_path):
    """A kill between moving the earlier run aside and moving the new one in used to lose the folder."""
    from interlingua.core.store import host_tag as _host

    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    aside = tmp_path / f".run.old-{_host()}-{_dead_pid()}"
    out.rename(aside)
    target = prepare_output(out)
    assert (out / "results.csv").read_text() == "v1" and not aside.exists()
    assert target.owned  # it is recognised as an earlier run again


def test_a_killed_runs_build_folder_is_removed_but_a_live_ones_is_kept(tmp_path):
    import os

    from interlingua.core.store import host_tag as _host

    dead = tmp_path / f".run.partial-{_host()}-{_dead_pid()}-abc"
    live = tmp_path / f".run.partial-{_host()}-{os.getpid()}-def"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "results.csv").write_text("half")
    prepare_output(tmp_path / "run")
    assert not dead.exists() and live.exists()
