"""Every ``from interlingua... import name`` in benchmarks/ and tools/ resolves: a moved name breaks a benchmark
only at its next run (minutes into it), so it is caught here instead."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for folder in ("benchmarks", "tools") for p in (ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("interlingua"):
            out += [(node.lineno, str(node.module), a.name) for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.startswith("interlingua")]
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_interlingua_import_resolves(path: Path) -> None:
    missing = []
    for line, module, name in _imports(path):
        mod = importlib.import_module(module)
        if name is not None and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ModuleNotFoundError:
                missing.append(f"line {line}: from {module} import {name}")
    assert not missing, f"{path.name}: " + "; ".join(missing)
