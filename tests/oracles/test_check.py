"""``interlingua check X.npy Y.npy`` and ``interlingua.check(X, Y)``: every installed peer next to interlingua."""

from __future__ import annotations

import json

import numpy as np
import pytest
from oracle_arrays import CASES, IDS

import interlingua
from interlingua.analysis.peers import PEERS, RUNNERS, check, check_table, peers_of
from interlingua.cli import main
from interlingua.commands.measures import measure_rows
from interlingua.core.errors import MeasureInputError


@pytest.mark.parametrize("case", IDS)
def test_every_peer_agrees_or_differs_by_a_named_convention(case: str) -> None:
    x, y = CASES[case]
    report = interlingua.check(x, y)
    assert report.missing == [] and report.notes == []  # the test extra installs every peer
    assert {r.peer for r in report.rows} == set(RUNNERS)
    for r in report.rows:
        assert r.verdict == "agrees" or r.verdict.startswith("differs by convention"), (r.call, r.verdict)
        if r.verdict.startswith("differs by convention") and r.convention:
            assert r.convention in r.verdict  # names the id that reproduces the peer


def test_minibatch_rows_name_their_convention_id() -> None:
    x, y = CASES["n>d"]  # 90 rows, batches of 10
    rows = [r for r in check(x, y, batch_size=10, peers=["pytorch-cka"]).rows if "DataLoader" in r.call]
    assert len(rows) == 1
    assert rows[0].verdict.startswith("differs by convention") and "cka_linear_minibatch10" in rows[0].verdict
    assert rows[0].tolerance == 1e-5  # float32 accumulation in the peer


def test_a_real_disagreement_reads_differs() -> None:
    """The verdict can fail: a peer value that matches neither ours nor the convention is 'differs'."""
    from interlingua.analysis.peers import _verdict

    x, y = CASES["n>d"]
    row = _verdict("fake", "f(X, Y)", "cka_linear_biased", 0.123, x, y, tol=1e-9, convention="cka_linear_uncentered")
    assert row.verdict == "differs"


def test_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    x, y = CASES["p!=q"]
    report = check(x, y, peers=["hoggorm"])
    table = check_table(report)
    assert "RVcoeff([X, Y])" in table and "cka_linear_uncentered" in table and "agrees" in table
    d = report.as_dict()
    assert d["n"] == 60 and d["p"] == 11 and d["q"] == 4 and len(d["rows"]) == 3
    json.dumps(d)  # JSON-safe


def test_cli_on_two_npy_files_offline(tmp_path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    x, y = CASES["offset"]
    np.save(tmp_path / "x.npy", x.astype(np.float32))  # float32 activations, as a user saves them
    np.save(tmp_path / "y.npy", y.astype(np.float32))
    assert main(["check", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--json", "--batch-size", "11"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 44 and out["missing"] == []
    verdicts = {(r["peer"], r["call"]): r["verdict"] for r in out["rows"]}
    assert all(v == "agrees" or v.startswith("differs by convention") for v in verdicts.values()), verdicts
    assert any("DataLoader(batch_size=11)" in c for _, c in verdicts)
    assert main(["check", str(tmp_path / "x.npy"), str(tmp_path / "y.npy")]) == 0
    assert "verdict" in capsys.readouterr().out


def _bad(tmp_path, name: str, a) -> str:
    np.save(tmp_path / name, a)
    return str(tmp_path / name)


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing", "no file"),
        ("rows", "rows"),
        ("nonfinite", "NaN"),
        ("1d", "2-D"),
        ("3d", "2-D"),
        ("text", "real numbers"),
    ],
)
def test_cli_bad_input_is_one_error_line_exit_2(tmp_path, capsys, case: str, message: str) -> None:
    x = _bad(tmp_path, "x.npy", np.random.default_rng(0).standard_normal((20, 3)))
    arrays = {
        "rows": np.ones((19, 3)),
        "nonfinite": np.full((20, 3), np.nan),
        "1d": np.ones(20),
        "3d": np.ones((20, 3, 2)),
        "text": np.array([["a"] * 3] * 20),
    }
    y = str(tmp_path / "absent.npy") if case == "missing" else _bad(tmp_path, "y.npy", arrays[case])
    assert main(["check", x, y]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interlingua: error:") and message in err[0], err


def test_python_check_refuses_bad_input() -> None:
    with pytest.raises(MeasureInputError):
        check(np.ones((3, 2)), np.ones((3, 2)))  # fewer than 4 rows
    with pytest.raises(MeasureInputError, match="batch_size"):
        check(*CASES["n>d"], batch_size=2)
    with pytest.raises(MeasureInputError, match="unknown peer"):
        check(*CASES["n>d"], peers=["netrep"])


def test_measures_json_lists_the_peers_of_each_measure() -> None:
    rows = {r["id"]: r for r in measure_rows()}
    assert all("peers" in r for r in rows.values())
    assert {p["peer"] for p in rows["cka_linear_debiased"]["peers"]} >= {"pytorch-cka", "ckatorch"}
    minibatch = [p for p in rows["cka_linear_debiased"]["peers"] if "minibatch" in p["convention"]]
    assert minibatch and minibatch[0]["reproduce"] == "cka_linear_minibatch<b>"
    assert rows["mknn_k10"]["peers"] == []  # not checked against any peer: an empty list, not a claim
    assert set(PEERS) <= set(rows)
    assert peers_of("no_such_measure") == []


def test_a_batch_size_leaving_a_short_last_batch_is_refused_up_front() -> None:
    x, y = CASES["n>d"]  # 90 rows: batches of 11 leave 2
    with pytest.raises(MeasureInputError, match="last batch of 2"):
        check(x, y, batch_size=11)
