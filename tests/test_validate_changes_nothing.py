"""``interlingua validate`` changes nothing: no merge built, no zoo family trained, nothing written to the store
(issue 36: it rebuilt merged models and trained a stand-in family); its task counts agree with ``plan``."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from interlingua.cli import main

STUDIES = Path(__file__).resolve().parents[1] / "configs" / "studies"


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content hash (folders as 'dir'): what 'byte-identical' compares."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def _totals(text: str, line_start: str) -> dict[str, int]:
    """Task totals by kind from validate's ``plan: 2 extract, 1 compare task(s)`` line."""
    line = next(x for x in text.splitlines() if x.startswith(line_start))
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", line)}


def _plan_totals(text: str) -> dict[str, int]:
    """Task totals by kind from plan's table (``kind total stored to-run``)."""
    rows = re.findall(r"^(\w+)\s+(\d+)\s+(\d+|-)\s+(\d+)$", text, flags=re.M)
    return {kind: int(total) for kind, total, _, _ in rows}


def _merge_config(tmp_path: Path, gpt2: Path) -> Path:
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "n": 8},
        "models": [
            {"name": "plain", "path": str(gpt2)},
            {"name": "mix", "merge": {"method": "linear", "models": [str(gpt2)] * 2, "weights": [0.25, 0.75]}},
        ],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
    }
    cfg = tmp_path / "merge.yaml"
    cfg.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return cfg


@pytest.mark.slow
def test_validate_builds_no_merge_and_writes_nothing(tmp_path, tiny_gpt2_path, capsys):
    cfg = _merge_config(tmp_path, tiny_gpt2_path)
    cache = tmp_path / "cache"
    assert main(["validate", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert not cache.exists()  # not even the store's folder was made
    assert not (tmp_path / "out").exists()
    assert "not built yet (1;" in out and "merge mix (linear of 2 models)" in out
    assert "validate built, loaded and wrote nothing" in out

    assert main(["plan", str(cfg)]) == 0  # plan builds the merge (and keeps hashes): the store has content now
    planned = capsys.readouterr().out
    assert (cache / "models" / "merges").is_dir()
    before = _snapshot(cache)
    assert before
    assert main(["validate", str(cfg)]) == 0
    again = capsys.readouterr().out
    assert _snapshot(cache) == before  # byte-identical
    assert "not built yet" not in again  # the merge plan built is seen as built
    assert _totals(again, "plan: ") == _plan_totals(planned) != {}


@pytest.mark.slow
def test_validate_agrees_with_plan_on_a_stored_run(tmp_path, tiny_gpt2_path, capsys):
    """After a run, plan says everything is stored; validate says nothing about the store (it cannot know without
    hashing) and points to plan, instead of an estimate that assumes nothing is stored."""
    cfg = _merge_config(tmp_path, tiny_gpt2_path)
    assert main(["run", str(cfg)]) == 0
    capsys.readouterr()
    assert main(["plan", str(cfg)]) == 0
    planned = capsys.readouterr().out
    before = _snapshot(tmp_path / "cache")
    assert main(["validate", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert _snapshot(tmp_path / "cache") == before
    assert "estimated" not in out and f"`interlingua plan {cfg}`" in out
    assert _totals(out, "plan: ") == _plan_totals(planned)
    rows = re.findall(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)$", planned, flags=re.M)
    assert rows and all(total == stored and to_run == "0" for _, total, stored, to_run in rows)


def test_validate_stand_in_trains_no_family(tmp_path, capsys):
    cache = tmp_path / "cache"
    config = STUDIES / "goldfish_bilingual_audit.yaml"
    assert main(["validate", str(config), "--stand-in", "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert not cache.exists()  # no zoo family trained, no store made
    assert "stand-in zoo families not built yet (study-bilingual" in out
    assert f"`interlingua plan {config} --stand-in`" in out and "valid offline" in out
