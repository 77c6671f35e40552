"""The front door: ``--help``/``--version`` without the heavy libraries, ``--json`` on plan, validate, run and
cache list, ``--quiet``."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from fixtures.tiny_models import parallel_sentences
from interlingua.cli import main

HEAVY = ("scipy", "torch", "matplotlib", "pandas", "transformers", "sklearn")


@pytest.mark.slow  # a fresh interpreter
def test_building_the_parser_imports_no_heavy_library():
    """What ``interlingua --help`` and ``--version`` pay for: a fresh interpreter, the parser built."""
    code = (
        "import sys, interlingua.cli as c; p = c._parser(); p.format_help(); "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "", f"building the parser imported {out.strip()}"
    # and the check can fail: importing the intervals does pull scipy in (scipy.stats)
    code = (
        "import sys, interlingua.analysis.inference.intervals; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "scipy" in out


@pytest.mark.slow  # a fresh interpreter
def test_the_capability_registry_imports_no_scipy_stats():
    """What a cached ``interlingua report`` pays before it reads a table: every capability's declaration, without
    scipy.stats (seconds of imports; the measures and the intervals import it when they run)."""
    code = (
        "import sys; from interlingua.pipeline import registry; registry.capabilities(); "
        "print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    code = (
        "import sys; from interlingua.analysis.inference import jackknife_interval; print('scipy.stats' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"  # the check can fail: the intervals need it


def test_lazy_packages_still_give_their_names():
    from interlingua.analysis.typology import KINDS, TypologyError
    from interlingua.audit import audit_adapter, identity_groups

    assert "syntactic" in KINDS and issubclass(TypologyError, ValueError)
    assert callable(audit_adapter) and callable(identity_groups)
    import interlingua.audit

    with pytest.raises(AttributeError):
        interlingua.audit.no_such_name  # noqa: B018


def test_cache_list_json_counts_what_the_text_counts(tmp_path, capsys):
    from interlingua.core.store import Store

    Store(tmp_path).put_json("comparisons", "k" * 64, {"rows": list(range(40))})
    (tmp_path / "representations" / "mine").mkdir(parents=True)  # not the store's: listed, not counted
    (tmp_path / "representations" / "mine" / "x.npy").write_bytes(b"0" * 100)
    assert main(["cache", "list", "--json", "--cache-dir", str(tmp_path)]) == 0
    got = json.loads(capsys.readouterr().out)
    by_name = {n["namespace"]: n for n in got["namespaces"]}
    assert got["cache"] == str(tmp_path.resolve()) or got["cache"] == str(tmp_path)
    assert by_name["comparisons"]["entries"] == 1 and by_name["comparisons"]["bytes"] >= 100
    assert by_name["representations"]["entries"] == 0
    assert by_name["representations"]["not_the_stores"] == ["representations/mine"]
    assert got["total"]["bytes"] == sum(n["bytes"] for n in got["namespaces"])
    assert main(["cache", "list", "--json", "--cache-dir", str(tmp_path / "none")]) == 0
    assert json.loads(capsys.readouterr().out)["exists"] is False


@pytest.fixture
def tiny_config(tmp_path, tiny_gpt2_path):
    sents = parallel_sentences(12, seed=3)
    corpus = tmp_path / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(12)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        corpus, sep="\t", index=False
    )
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "output": str(tmp_path / "out"),
                "cache_dir": str(tmp_path / "cache"),
                "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}],
                "measures": ["cka_linear_biased"],
                "inference": {"permutations": 0},
            }
        )
    )
    return config


def test_validate_and_plan_json_agree(tiny_config, capsys):
    assert main(["validate", str(tiny_config), "--json"]) == 0
    valid = json.loads(capsys.readouterr().out)
    assert valid["valid"] is True and valid["sentences"] == 12 and valid["languages"] == ["eng_Latn", "deu_Latn"]
    assert main(["plan", str(tiny_config), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["output"] == valid["output"] and plan["models"] == 1
    assert plan["estimate"]["seconds"] == pytest.approx(sum(p["seconds"] for p in plan["estimate"]["phases"]))
    assert {k: v["total"] for k, v in plan["estimate"]["tasks"].items()} == valid["tasks"]
    assert main(["plan", str(tiny_config), "--quiet"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.pipeline  # a whole (tiny) run, twice
def test_run_json_is_the_summary_and_quiet_prints_nothing(tiny_config, capfd):
    assert main(["run", str(tiny_config), "--json"]) == 0
    out, _ = capfd.readouterr()
    got = json.loads(out)
    assert "report.html" in got["files"] and "results.csv" in got["files"] and got["wall_seconds"] > 0
    assert got["cache"]["root"] and "total" in got["phases"]
    assert main(["run", str(tiny_config), "--quiet", "--overwrite"]) == 0
    out, err = capfd.readouterr()
    assert out == "" and "it/s" not in err  # no summary, no bars
