"""``interlingua report OUTPUT`` checks every table it reads against the run's manifest (present, size, sha256)
and names a missing, changed or damaged table in one error line (exit 2); it draws from an edited table only with
``--accept-edits``, keeps that table as it is, and says so at the top of the report."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from fixtures.runs import run_cli, spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.cli import main

pytestmark = pytest.mark.pipeline  # one whole run, shared by the module


@pytest.fixture(scope="module")
def finished(tmp_path_factory, tiny_gpt2_path) -> Path:
    """A finished run folder (tiny GPT-2, two languages, 16 sentences); tests copy it before changing it."""
    root = tmp_path_factory.mktemp("report_manifest")
    sents = parallel_sentences(24, seed=4)
    corpus = root / "c.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(24)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        corpus, sep="\t", index=False
    )
    assert run_cli(root, spec_for(root, corpus, tiny_gpt2_path), "run") == 0
    return root / "out"


@pytest.fixture
def folder(tmp_path, finished) -> Path:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


def _report(capsys, *args: str) -> tuple[int, list[str]]:
    code = main(["report", *args])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return code, err


def _one_error(code: int, err: list[str]) -> str:
    assert code == 2 and len(err) == 1 and err[0].startswith("interlingua: error: "), (code, err)
    assert "Traceback" not in err[0]
    return err[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["results.parquet", "run.json"])
def test_a_deleted_table_is_named_as_missing(capsys, folder, name) -> None:
    (folder / name).unlink()
    before = _snapshot(folder)
    line = _one_error(*_report(capsys, str(folder)))
    assert f"{name} is missing" in line and "manifest" in line
    assert _snapshot(folder) == before  # nothing written


def test_a_truncated_table_is_named_as_changed_and_then_as_damaged(capsys, folder) -> None:
    path = folder / "results.parquet"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:1000])
    line = _one_error(*_report(capsys, str(folder)))
    assert "results.parquet (1000 bytes, the run wrote" in line and f"{size})" in line and "changed" in line
    assert "--accept-edits" in line
    line = _one_error(*_report(capsys, str(folder), "--accept-edits"))
    assert "results.parquet is damaged: it cannot be read" in line and "edited since" in line


def test_a_damaged_table_the_manifest_vouches_for_is_named(capsys, folder) -> None:
    path = folder / "results.parquet"
    path.write_bytes(path.read_bytes()[:1000])
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["results.parquet"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest["sizes"]["results.parquet"] = 1000
    (folder / "manifest.json").write_text(json.dumps(manifest))
    line = _one_error(*_report(capsys, str(folder)))
    assert "results.parquet is damaged" in line and "written damaged, not edited since" in line


def test_an_edited_table_is_refused_then_drawn_only_when_accepted(capsys, folder) -> None:
    table = pd.read_parquet(folder / "results.parquet")
    recorded = json.loads((folder / "manifest.json").read_text())["files"]["results.parquet"]
    table.loc[:, "matched"] = 0.123456
    table.to_parquet(folder / "results.parquet")
    edited = (folder / "results.parquet").read_bytes()
    before = _snapshot(folder)

    line = _one_error(*_report(capsys, str(folder)))
    assert "results.parquet (" in line and "changed since the run wrote it" in line and "--accept-edits" in line
    assert _snapshot(folder) == before

    code, err = _report(capsys, str(folder), "--accept-edits")
    assert code == 0, err
    report = (folder / "report.md").read_text()
    assert report.splitlines()[2].startswith("**Drawn from edited tables**") and "`results.parquet`" in report
    assert "0.123" in report  # the edited numbers are the ones shown
    assert "Drawn from edited tables" in (folder / "report.html").read_text()
    assert (folder / "results.parquet").read_bytes() == edited  # the user's edit is kept, untouched
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["files"]["results.parquet"] == recorded  # still the run's version: the edit stays visible
    assert _one_error(*_report(capsys, str(folder)))  # so a plain re-render still refuses it
    assert _report(capsys, str(folder), "--accept-edits")[0] == 0  # and accepting again works


def test_an_unchanged_run_renders_as_before(capsys, folder) -> None:
    before = _snapshot(folder)
    code, err = _report(capsys, str(folder))
    assert code == 0, err
    after = _snapshot(folder)
    assert {k: v for k, v in after.items() if k != "manifest.json"} == {  # the same bytes, from checked tables
        k: v for k, v in before.items() if k != "manifest.json"
    }


def test_a_parquet_the_run_did_not_write_is_not_read(capsys, folder) -> None:
    (folder / "patching.parquet").write_bytes(b"not a table")
    code, err = _report(capsys, str(folder), "--overwrite")
    assert code == 0, err
    assert (folder / "patching.parquet").read_bytes() == b"not a table"


@pytest.mark.parametrize("what", ["nothing", "file", "no manifest"])
def test_not_a_run_folder_is_one_error(capsys, tmp_path, what) -> None:
    target = tmp_path / "x"
    if what == "file":
        target.write_text("x")
    elif what == "no manifest":
        target.mkdir()
        (target / "results.parquet").write_text("x")
    _one_error(*_report(capsys, str(target)))


def test_a_table_an_older_version_wrote_is_not_called_edited(capsys, folder) -> None:
    """A table the manifest vouches for but that lacks columns this version declares was written by an older
    version: the error says so (and that the file is intact), not that it was edited or damaged."""
    path = folder / "results.parquet"
    pd.read_parquet(path).drop(columns=["tau", "calibrated"]).to_parquet(path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["results.parquet"] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest["sizes"]["results.parquet"] = path.stat().st_size
    (folder / "manifest.json").write_text(json.dumps(manifest))
    line = _one_error(*_report(capsys, str(folder)))
    assert (
        "was written by interlingua" in line and "lacks columns this version's report reads (tau, calibrated)" in line
    )
    assert "edited" not in line and "damaged" not in line and "the file is intact" in line
