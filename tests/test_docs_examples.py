"""The ```python blocks of docs/python-api.md run, in order, as one notebook, offline on the tiny checkpoints.

The page reads its two models from the environment variables MODEL_A and MODEL_B (documented there); this
test points them at the tiny GPT-2 and Llama folders, and the run's cache at a temporary folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.pipeline  # the page ends with a whole (tiny) run

PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def python_blocks(text: str) -> list[str]:
    """The fenced ```python blocks of a Markdown page, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_python_blocks_are_found() -> None:
    blocks = python_blocks("intro\n```python\na = 1\n```\ntext\n```bash\nls\n```\n```python\nb = 2\n```\n")
    assert blocks == ["a = 1\n", "b = 2\n"]


def test_python_api_page_runs(tmp_path, monkeypatch, tiny_gpt2_path, tiny_llama_path) -> None:
    monkeypatch.setenv("MODEL_A", str(tiny_gpt2_path))
    monkeypatch.setenv("MODEL_B", str(tiny_llama_path))
    monkeypatch.setenv("INTERLINGUA_CACHE", str(tmp_path / "cache"))
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    namespace: dict = {"__name__": "docs_python_api"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{PAGE.name}[block {i}]", "exec"), namespace)  # noqa: S102 - our own docs
    # what the page shows, checked: layers x n x d of the tiny GPT-2, one row per measure and layer,
    # a cross-model row with its interval, and an in-memory run that wrote nothing
    assert namespace["a_en"].shape == (3, 16, 32)
    assert len(namespace["by_layer"]) == 2 * 3
    cross = namespace["cross"]
    low, matched, high = (cross[c].iat[0] for c in ("jackknife_low", "matched", "jackknife_high"))
    assert len(cross) == 1 and low <= matched <= high
    assert np.isfinite(namespace["fitted"].score(namespace["x"], namespace["y"]))
    result = namespace["result"]
    assert result.output is None and len(result.table) == 2 and not result.maps.empty
    assert (tmp_path / "cache").is_dir()  # the run used the cache


# -- the README's Python block -----------------------------------------------------------------------------------

README = Path(__file__).resolve().parents[1] / "README.md"


def _undefined_names(code: str) -> set[str]:
    """Names a block reads that it never binds (assignment, import, loop, comprehension) and are not builtins."""
    import ast
    import builtins

    tree = ast.parse(code)
    bound: set[str] = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return read - bound


def test_readme_python_block_defines_everything_it_uses() -> None:
    (block,) = python_blocks(README.read_text(encoding="utf-8"))
    assert _undefined_names(block) == set()
    assert _undefined_names("y = x + 1") == {"x"}  # the check can fail


@pytest.mark.demo
@pytest.mark.skipif(os.environ.get("INTERLINGUA_DEMO_TESTS") != "1", reason="set INTERLINGUA_DEMO_TESTS=1 (minutes)")
def test_readme_python_block_runs_as_written(tmp_path, monkeypatch) -> None:
    """Offline, on the packaged models, after the quick start's `interlingua init` (as the README says)."""
    from interlingua.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["init", "--example", "quickstart", "-o", "quick.yaml"]) == 0
    (block,) = python_blocks(README.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "readme"}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own docs
    table, result = namespace["table"], namespace["result"]
    assert namespace["x_en"].shape[1:] == (12, 640)  # Gemma 3 270M: 12 sentences, width 640
    assert {"matched", "shuffled", "p_value"} <= set(table.columns) and table["p_value"].notna().all()
    assert result.output is None and not result.table.empty and not (tmp_path / "interlingua-quickstart").exists()
