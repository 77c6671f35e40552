"""The guard on user folders (interlingua.core.outputs): nothing is removed or replaced unless, at that moment,
it is a file interlingua wrote. One test (at least) per way issue 23 found to lose a user's data:

1. a file added to the output folder while a run works (also a rerun into an earlier run's folder);
2. ``--overwrite`` and a user's file whose name is an output's;
3. ``interlingua audit`` writing into any folder;
4. a manifest trusted as a list of paths (``../victim.txt``, absolute paths, links);
5. empty folders, named pipes, sockets and links treated as nothing.
"""

from __future__ import annotations

import json
import os
import random
import socket
import stat
from pathlib import Path

import pandas as pd
import pytest

import interlingua.core.outputs as outputs
from interlingua.core.errors import OutputError
from interlingua.core.outputs import MANIFEST, install_folder, prepare_output, write_file, write_outputs

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

ROOT = Path(outputs.__file__).parents[1]  # the interlingua package (outputs.py is in core/)


def _build(text: str, *, maps: bool = False, figure: bool = True, during=None):
    """A build writing results.csv (and maps.csv, figures/a.png); ``during(tmp)`` runs halfway through."""

    def build(tmp: Path) -> None:
        (tmp / "results.csv").write_text(text)
        if during is not None:
            during(tmp)
        if maps:
            (tmp / "maps.csv").write_text("maps " + text)
        if figure:
            (tmp / "figures").mkdir()
            (tmp / "figures" / "a.png").write_bytes(b"png " + text.encode())

    return build


def _snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder``: a file's bytes, a link's target, or the kind of anything else."""
    found: dict[str, object] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            mode = p.lstat().st_mode
            rel = str(p.relative_to(folder))
            if stat.S_ISLNK(mode):
                found[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(mode):
                found[rel] = p.read_bytes()
            else:
                found[rel] = stat.S_IFMT(mode)
    return found


def _no_leftovers(parent: Path) -> bool:
    return not [p for p in parent.rglob("*") if ".partial-" in p.name or ".aside-" in p.name]


# --------------------------------------------------------------------------- 1. a file added while a run works


def test_a_file_added_to_an_earlier_runs_folder_while_the_outputs_are_built_survives(tmp_path):
    """The old code checked foreign files at the start, then renamed the folder aside and removed it whole."""
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    target = prepare_output(out)  # an unchanged earlier run, nothing else: a plain rerun

    def user_writes(tmp: Path) -> None:
        (out / "notes.md").write_text("written while the run worked")
        (out / "mine").mkdir()
        (out / "mine" / "data.tsv").write_text("mine")

    write_outputs(target, _build("v2", during=user_writes))
    assert (out / "notes.md").read_text() == "written while the run worked"
    assert (out / "mine" / "data.tsv").read_text() == "mine"
    assert (out / "results.csv").read_text() == "v2"
    manifest = json.loads((out / MANIFEST).read_text())
    assert sorted(manifest["files"]) == ["figures/a.png", "results.csv"]
    assert _no_leftovers(tmp_path)


def test_a_folder_the_user_creates_while_a_fresh_run_works_is_written_into_and_kept(tmp_path):
    """The folder did not exist at the start; the user made it (with a file) during the run."""
    out = tmp_path / "run"
    target = prepare_output(out)
    inode = {}

    def user_writes(tmp: Path) -> None:
        out.mkdir()
        (out / "notes.md").write_text("mine")
        inode["ino"] = out.stat().st_ino

    write_outputs(target, _build("v1", during=user_writes))
    assert (out / "notes.md").read_text() == "mine"
    assert out.stat().st_ino == inode["ino"]  # the user's folder itself, not a replacement
    assert (out / "results.csv").read_text() == "v1"
    assert "notes.md" not in json.loads((out / MANIFEST).read_text())["files"]


# The moments of a run at which a file is injected: calls of functions that run throughout it (prepare,
# cached reads while the tasks run, the outputs' checksums, every rename of the install).
_MOMENTS = [
    ("interlingua.core.store.Store", "get_json"),
    ("interlingua.core.store.Store", "get_arrays"),
    ("interlingua.core.store.Store", "put_json"),
    ("interlingua.core.store.Store", "put_arrays"),
    ("interlingua.core.outputs", "_sha256"),
    ("interlingua.core.outputs", "_move_noreplace"),
    ("interlingua.core.outputs", "_take"),
]


def _instrument(monkeypatch, at_call: int | None, inject) -> list[int]:
    """Wrap the moment functions; before call number ``at_call`` (1-based) run ``inject()``. Returns the counter."""
    import importlib

    calls = [0]
    for owner, name in _MOMENTS:
        module, _, cls = owner.rpartition(".") if owner.endswith("Store") else (owner, "", "")
        obj = getattr(importlib.import_module(module), cls) if cls else importlib.import_module(owner)
        original = getattr(obj, name, None)
        if original is None:
            continue

        def wrapped(*args, _original=original, **kwargs):
            calls[0] += 1
            if calls[0] == at_call:
                inject()
            return _original(*args, **kwargs)

        monkeypatch.setattr(obj, name, wrapped)
    return calls


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    from fixtures.tiny_models import parallel_sentences

    sents = parallel_sentences(8, seed=2)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(8)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        path, sep="\t", index=False
    )
    return path


def test_a_file_created_at_a_random_moment_of_a_rerun_is_found_intact(
    tmp_path, monkeypatch, corpus_tsv, tiny_gpt2_path
):
    """Fault injection: a user's file appears at a random moment of a pipeline run into an earlier run's folder."""
    from interlingua.pipeline.runs import run

    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus_tsv), "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 9, "jackknife_groups": 4},
    }
    again = {**spec, "overwrite": True}  # the injected files are the user's: kept next to the outputs
    out = Path(spec["output"])
    run(spec)
    with monkeypatch.context() as m:
        counter = _instrument(m, None, lambda: None)
        reference = run(again)  # a plain rerun: how many moments a rerun has
    moments = counter[0]
    assert moments > 10
    expected = (out / "results.csv").read_bytes()
    draw = random.SystemRandom().randint(2, moments - 1)
    for at in (1, draw, moments):  # the first moment, a random one, the last (the final manifest's move)
        name = f"user-{at}.txt"

        def inject(name=name) -> None:
            (out / name).write_text(f"written at moment {name}")

        with monkeypatch.context() as m:
            _instrument(m, at, inject)
            res = run(again)
        assert (out / name).read_text() == f"written at moment {name}", f"moment {at} of {moments}"
        assert (out / "results.csv").read_bytes() == expected, f"moment {at} of {moments}"
        listed = json.loads((out / MANIFEST).read_text())["files"]
        assert name not in listed and "results.csv" in listed
        assert res.info["computed"] == reference.info["computed"]
    assert sorted(p.name for p in out.glob("user-*.txt")) == sorted(f"user-{a}.txt" for a in {1, draw, moments})
    assert _no_leftovers(tmp_path)


# --------------------------------------------------------------------------- 2. a user's file named like an output


def test_overwrite_never_replaces_a_users_file_named_like_an_output(tmp_path):
    """The old --overwrite moved the new maps.csv over the user's own maps.csv."""
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    (out / "maps.csv").write_text("my own maps")
    with pytest.raises(OutputError, match="--overwrite"):
        prepare_output(out)
    before = _snapshot(out)
    with pytest.raises(OutputError, match=r"maps\.csv.*never replaced.*move or rename"):
        write_outputs(prepare_output(out, overwrite=True), _build("v2", maps=True))
    assert _snapshot(out) == before  # nothing changed: not even the earlier run's own files
    assert _no_leftovers(tmp_path)


def test_an_edited_output_is_the_users_and_overwrite_refuses_before_work(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    (out / "results.csv").write_text("edited by hand")
    for overwrite in (False, True):
        with pytest.raises(OutputError, match="changed since it wrote them.*never replaced"):
            prepare_output(out, overwrite=overwrite)
    assert (out / "results.csv").read_text() == "edited by hand"


def test_a_file_named_like_an_output_appearing_during_the_run_is_kept_and_the_run_stops(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    target = prepare_output(out)

    def user_writes(tmp: Path) -> None:
        (out / "maps.csv").write_text("my maps, written during the run")

    with pytest.raises(OutputError, match=r"maps\.csv"):
        write_outputs(target, _build("v2", maps=True, during=user_writes))
    assert (out / "maps.csv").read_text() == "my maps, written during the run"
    assert (out / "results.csv").read_text() == "v1"  # refused before anything changed
    assert prepare_output(out, overwrite=True).foreign == ("maps.csv",)  # still an earlier run's folder


def test_an_own_file_edited_at_the_moment_it_is_replaced_is_put_back(tmp_path, monkeypatch):
    """The check is made on exactly what is taken away: a file edited after the survey is not lost."""
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    target = prepare_output(out)
    real_take = outputs._take

    def edit_then_take(path, versions):
        if path.name == "results.csv":
            path.write_text("edited just now")
        return real_take(path, versions)

    monkeypatch.setattr(outputs, "_take", edit_then_take)
    with pytest.raises(OutputError, match="not a file interlingua wrote"):
        write_outputs(target, _build("v2"))
    assert (out / "results.csv").read_text() == "edited just now"
    assert _no_leftovers(tmp_path)


def test_an_own_file_written_to_while_it_is_being_taken_away_is_put_back(tmp_path, monkeypatch):
    """An editor holding the file open writes to it between the check in place and the move: the taken
    file is checked again, fails, and goes back."""
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    target = prepare_output(out)
    real_move = outputs._move_noreplace

    def move_then_edit(src: Path, dst: Path) -> None:
        real_move(src, dst)
        if src.name == "results.csv" and ".aside-" in dst.name:
            with dst.open("a") as fh:  # the same inode, as an open editor would
                fh.write(" and more")

    monkeypatch.setattr(outputs, "_move_noreplace", move_then_edit)
    with pytest.raises(OutputError, match="not a file interlingua wrote"):
        write_outputs(target, _build("v2"))
    assert (out / "results.csv").read_text() == "v1 and more"
    assert _no_leftovers(tmp_path)


# --------------------------------------------------------------------------- 3. audit goes through the guard


def _audit(argv: list[str]) -> int:
    import argparse

    from interlingua.commands.audit import add_audit_parser, run_audit

    parser = argparse.ArgumentParser(prog="interlingua")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    return run_audit(parser.parse_args(["audit", *argv]))


def test_audit_into_a_folder_holding_a_users_audit_csv_is_refused(tmp_path, tiny_gpt2_path, capsys):
    """The old audit wrote audit.csv / audit.parquet into any folder (the current one by default)."""
    mine = tmp_path / "project"
    mine.mkdir()
    (mine / "audit.csv").write_text("my audit notes")
    assert _audit([str(tiny_gpt2_path), "-o", str(mine), "--cache-dir", str(tmp_path / "cache")]) == 2
    assert "no interlingua manifest.json" in capsys.readouterr().err
    assert _snapshot(mine) == {"audit.csv": b"my audit notes"}
    assert _audit([str(tiny_gpt2_path), "-o", str(mine), "--overwrite", "--cache-dir", str(tmp_path / "cache")]) == 2
    assert _snapshot(mine) == {"audit.csv": b"my audit notes"}


def test_audit_writes_a_manifest_and_reruns_into_its_own_folder(tmp_path, tiny_gpt2_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert _audit([str(tiny_gpt2_path), *cache]) == 0  # the default output: a new folder, not "."
    out = tmp_path / "interlingua-audit"
    assert sorted(json.loads((out / MANIFEST).read_text())["files"]) == ["audit.csv", "audit.parquet"]
    (out / "audit.parquet").unlink()  # a missing own file is not the user's: nothing to lose
    assert _audit([str(tiny_gpt2_path), *cache]) == 0
    assert len(pd.read_parquet(out / "audit.parquet")) == 1


# --------------------------------------------------------------------------- 4. the manifest is not a list of paths


def _forge(out: Path, files: dict[str, str]) -> None:
    (out / MANIFEST).write_text(json.dumps({"tool": "interlingua", "files": files}))


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("entry", ["../victim.txt", "ABSOLUTE", "figures/../../victim.txt", "./results.csv"])
def test_a_manifest_listing_paths_outside_the_folder_is_refused(tmp_path, entry):
    """The old code unlinked out/'../victim.txt' under --overwrite: a file outside the output folder."""
    victim = tmp_path / "victim.txt"
    victim.write_text("outside")
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1", figure=False))
    (out / "notes.md").write_text("mine")
    name = str(victim) if entry == "ABSOLUTE" else entry
    _forge(out, {"results.csv": _sha(out / "results.csv"), name: _sha(victim)})
    for overwrite in (True, False):  # the old --overwrite unlinked out/../victim.txt
        with pytest.raises(OutputError, match="never follows such an entry"):
            prepare_output(out, overwrite=overwrite)
    assert victim.read_text() == "outside" and (out / "results.csv").read_text() == "v1"


def test_a_manifest_entry_through_a_link_is_never_followed(tmp_path):
    """figures/ replaced by a link to the user's pictures: the old code deleted pictures/a.png through it."""
    elsewhere = tmp_path / "pictures"
    elsewhere.mkdir()
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    (elsewhere / "a.png").write_bytes((out / "figures" / "a.png").read_bytes())
    for p in (out / "figures").iterdir():
        p.unlink()
    (out / "figures").rmdir()
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)
    (out / "link.csv").symlink_to(tmp_path / "pictures" / "a.png")
    (out / "notes.md").write_text("mine")
    before = _snapshot(out)
    with pytest.raises(OutputError, match="changed since it wrote them"):
        prepare_output(out, overwrite=True)
    target = outputs.OutputTarget(out, ("figures/a.png", "results.csv"), ("notes.md",))  # as the old guard saw it
    write_outputs(target, _build("v2", figure=False))
    assert (elsewhere / "a.png").exists() and (out / "figures").is_symlink() and (out / "link.csv").is_symlink()
    assert (out / "results.csv").read_text() == "v2" and (out / "notes.md").read_text() == "mine"
    assert {k: v for k, v in _snapshot(out).items() if k != MANIFEST and k != "results.csv"} == {
        k: v for k, v in before.items() if k != MANIFEST and k != "results.csv"
    }


def test_a_link_where_an_output_was_is_kept_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1", figure=False))
    victim.write_bytes((out / "results.csv").read_bytes())
    (out / "results.csv").unlink()
    (out / "results.csv").symlink_to(victim)  # same bytes behind the link: still not interlingua's file
    target = outputs.OutputTarget(out, ("results.csv",), ())
    with pytest.raises(OutputError, match=r"results\.csv"):
        write_outputs(target, _build("v2", figure=False))
    assert (out / "results.csv").is_symlink() and victim.read_text() == "v1"


def test_a_manifest_of_an_earlier_version_without_sizes_still_proves_its_files(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1", figure=False))
    _forge(out, {"results.csv": _sha(out / "results.csv")})  # the format before sizes were recorded
    write_outputs(prepare_output(out), _build("v2", figure=False))
    assert (out / "results.csv").read_text() == "v2"
    assert json.loads((out / MANIFEST).read_text())["sizes"] == {"results.csv": 2}


def test_a_recorded_size_that_differs_disowns_the_file(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1", figure=False))
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["sizes"]["results.csv"] += 1
    (out / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(OutputError, match="changed since it wrote them"):
        prepare_output(out, overwrite=True)


# --------------------------------------------------------------------------- 5. folders, pipes, sockets, links


def _odd_things(folder: Path) -> None:
    (folder / "empty").mkdir()
    os.mkfifo(folder / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "sock"))
    finally:
        sock.close()


def test_empty_folders_pipes_sockets_and_links_count_as_the_users(tmp_path):
    """The old guard saw only files: an earlier run's folder with these looked untouched and was replaced whole."""
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    _odd_things(out)
    (out / "figures" / "mine").mkdir()  # an empty folder of the user's inside one of interlingua's
    with pytest.raises(OutputError, match="did not write"):
        prepare_output(out)
    (out / "link").symlink_to("results.csv")
    write_outputs(prepare_output(out, overwrite=True), _build("v2", figure=False))
    kinds = {n: stat.S_IFMT((out / n).lstat().st_mode) for n in ("empty", "pipe", "sock", "link", "figures/mine")}
    assert kinds == {
        "empty": stat.S_IFDIR,
        "pipe": stat.S_IFIFO,
        "sock": stat.S_IFSOCK,
        "link": stat.S_IFLNK,
        "figures/mine": stat.S_IFDIR,
    }
    assert not (out / "figures" / "a.png").exists()  # ours, no longer produced, removed
    assert (out / "results.csv").read_text() == "v2"


def test_a_folder_with_only_an_empty_folder_or_a_pipe_is_not_empty(tmp_path):
    for odd in ("folder", "pipe"):
        out = tmp_path / odd
        out.mkdir()
        (out / "x").mkdir() if odd == "folder" else os.mkfifo(out / "x")
        with pytest.raises(OutputError, match="no interlingua manifest.json"):
            prepare_output(out)
        assert (out / "x").exists()


def test_interlinguas_own_folders_go_once_empty(tmp_path):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    write_outputs(prepare_output(out), _build("v2", figure=False))
    assert not (out / "figures").exists()  # created by the tool, emptied, removed
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "results.csv"]


# --------------------------------------------------------------------------- a run killed while installing


def test_a_run_stopped_halfway_through_the_install_leaves_a_folder_the_next_run_accepts(tmp_path, monkeypatch):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1", maps=True))
    target = prepare_output(out)
    real_move = outputs._move_noreplace

    def dies(src: Path, dst: Path) -> None:
        if dst.name == "maps.csv":
            raise KeyboardInterrupt  # as if killed: figures/a.png new, maps.csv taken aside, results.csv old
        real_move(src, dst)

    monkeypatch.setattr(outputs, "_move_noreplace", dies)
    with pytest.raises(KeyboardInterrupt):
        write_outputs(target, _build("v2", maps=True))
    monkeypatch.setattr(outputs, "_move_noreplace", real_move)
    assert (out / "figures" / "a.png").read_bytes() == b"png v2" and (out / "results.csv").read_text() == "v1"
    assert not (out / "maps.csv").exists()
    monkeypatch.setattr(outputs, "pid_alive", lambda pid: False)  # this process stands in for the dead one
    again = prepare_output(out)  # no --overwrite needed: the interim manifest knows both versions
    assert (out / "maps.csv").read_text() == "maps v1" and not again.foreign  # the taken file was put back
    write_outputs(again, _build("v3", maps=True))
    assert (out / "maps.csv").read_text() == "maps v3" and _no_leftovers(tmp_path)
    assert "also" not in json.loads((out / MANIFEST).read_text())


def test_a_manifest_a_killed_run_left_aside_is_recognised_by_the_one_replacing_it(tmp_path, monkeypatch):
    out = tmp_path / "run"
    write_outputs(prepare_output(out), _build("v1"))
    real_drop, drops = outputs._Taken.drop, []

    def dies_on_the_final_manifest(self) -> None:
        if self.aside.name.startswith(f".{MANIFEST}.aside-"):
            drops.append(self.aside.name)
            if len(drops) == 2:  # the interim manifest, replaced by the final one, about to be dropped
                raise KeyboardInterrupt
        real_drop(self)

    monkeypatch.setattr(outputs._Taken, "drop", dies_on_the_final_manifest)
    with pytest.raises(KeyboardInterrupt):
        write_outputs(prepare_output(out), _build("v2"))
    monkeypatch.setattr(outputs._Taken, "drop", real_drop)
    assert (out / drops[1]).exists()
    monkeypatch.setattr(outputs, "pid_alive", lambda pid: False)
    target = prepare_output(out)
    assert not (out / drops[1]).exists() and not target.foreign and _no_leftovers(tmp_path)
    assert (out / "results.csv").read_text() == "v2"


# --------------------------------------------------------------------------- other writers into user paths


@pytest.mark.parametrize("renameat2", [True, False])
def test_moves_never_replace_with_or_without_renameat2(tmp_path, monkeypatch, renameat2):
    if not renameat2:
        monkeypatch.setattr(outputs, "_renameat2", False)  # the hard-link / checked-rename fallback
    (tmp_path / "src").write_text("new")
    (tmp_path / "dst").write_text("mine")
    (tmp_path / "srcdir").mkdir()
    (tmp_path / "dstdir").mkdir()  # even an empty folder is not replaced
    for src, dst in (("src", "dst"), ("srcdir", "dstdir"), ("src", "dstdir"), ("srcdir", "dst")):
        with pytest.raises(FileExistsError):
            outputs._move_noreplace(tmp_path / src, tmp_path / dst)
    assert (tmp_path / "dst").read_text() == "mine" and (tmp_path / "src").read_text() == "new"
    outputs._move_noreplace(tmp_path / "src", tmp_path / "free")
    outputs._move_noreplace(tmp_path / "srcdir", tmp_path / "freedir")
    assert (tmp_path / "free").read_text() == "new" and (tmp_path / "freedir").is_dir()
    assert not (tmp_path / "src").exists() and not (tmp_path / "srcdir").exists()


def test_write_file_never_replaces_a_different_file(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("mine")
    with pytest.raises(OutputError, match="give a new file name"):
        write_file(path, b"table")
    assert path.read_text() == "mine"
    fresh = tmp_path / "sub" / "e.csv"
    write_file(fresh, b"table")
    write_file(fresh, b"table")  # the same bytes: nothing to replace
    assert fresh.read_bytes() == b"table" and sorted(p.name for p in fresh.parent.iterdir()) == ["e.csv"]


def test_typology_output_onto_a_users_file_exits_2(tmp_path, capsys):
    pytest.importorskip("numpy")
    from interlingua.cli import main

    path = tmp_path / "d.csv"
    path.write_text("mine")
    assert main(["typology", "eng_Latn", "nld_Latn", "--kinds", "syntactic", "-o", str(path)]) == 2
    assert path.read_text() == "mine" and "give a new file name" in capsys.readouterr().err


def test_install_folder_takes_a_free_path_or_an_empty_folder_only(tmp_path):
    def built(name: str) -> Path:
        tmp = tmp_path / f".build-{name}"
        tmp.mkdir()
        (tmp / "model.safetensors").write_bytes(b"w")
        return tmp

    assert install_folder(built("a"), tmp_path / "free") and (tmp_path / "free" / "model.safetensors").exists()
    (tmp_path / "empty").mkdir()
    assert install_folder(built("b"), tmp_path / "empty")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "sub").mkdir()  # only an empty folder inside: still not empty
    assert not install_folder(built("c"), busy) and _snapshot(busy) == {"sub": stat.S_IFDIR}
    (tmp_path / "file").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "empty2", target_is_directory=True)
    (tmp_path / "empty2").mkdir()
    assert not install_folder(built("d"), tmp_path / "file") and (tmp_path / "file").read_text() == "mine"
    assert not install_folder(built("e"), tmp_path / "link") and (tmp_path / "link").is_symlink()


def test_one_module_removes_or_replaces_inside_user_folders():
    """The writers into user folders hold no deleting or replacing call of their own: they use the guard."""
    import re

    banned = re.compile(r"shutil\.rmtree|\.unlink\(|os\.remove\(|os\.replace\(|os\.rename\(|atomic_write\(|\.rmdir\(")
    for rel in (
        "pipeline/assemble.py",
        "commands/audit.py",
        "commands/typology.py",
        "cli.py",
        "report/markdown.py",
        "report/html.py",
        "mergeability/merge.py",
        "mergeability/tokenwise.py",
        "transport/fuse.py",
        "core/builds.py",
    ):
        text = (ROOT / rel).read_text(encoding="utf-8")
        if rel in ("mergeability/merge.py", "mergeability/tokenwise.py", "transport/fuse.py"):
            text = text[text.index("with build_folder(") :]  # their build-and-install step (store reads before it)
            end = text.find("\ndef ", text.index("install_build("))
            text = text[: end if end >= 0 else None]
        if rel == "core/builds.py":  # the one build-folder writer and installer they use (the rest is the store's)
            text = text[text.index("def build_folder(") : text.index("def files_record(")]
        assert not banned.findall(text.replace("atomic_write(tmp /", "")), rel
