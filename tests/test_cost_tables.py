"""The cost table of configs/studies/README.md is what tools/cost_tables.py writes from today's ``plan --offline``
(issue 36: the hand-written table said 36 h where plan said 27.8 h). Regenerated here; a stale file fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("cost_tables", ROOT / "tools" / "cost_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_study_readme_cost_table_is_current(tool):
    current = tool.README.read_text(encoding="utf-8")
    assert tool.render(current) == current, "configs/studies/README.md is stale: run python tools/cost_tables.py"
    assert tool.main(["--check"]) == 0


@pytest.mark.slow
def test_the_table_is_the_same_at_any_load_and_rate(tool, monkeypatch):
    """Priced on the nominal machine: a live calibration or a busy machine changes nothing in it."""
    import os

    from interlingua.pipeline import cost

    first = tool.table()
    monkeypatch.setattr(cost, "matmul_rate", lambda dtype="float64": 1e6)  # a machine 50,000x slower
    monkeypatch.setattr(os, "getloadavg", lambda: (40.0, 40.0, 40.0))
    assert tool.table() == first
    assert "nominal machine" in first and first.count("\n| `") == len(list(tool.STUDIES.glob("*.yaml")))


@pytest.mark.slow
def test_a_stale_table_is_caught(tool, tmp_path, monkeypatch):
    stale = tool.README.read_text(encoding="utf-8").replace(tool.END, "| `crossarch_1b` | ... | 36 h |\n" + tool.END)
    copy = tmp_path / "README.md"
    copy.write_text(stale, encoding="utf-8")
    monkeypatch.setattr(tool, "README", copy)
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0 and tool.main(["--check"]) == 0  # rewritten
