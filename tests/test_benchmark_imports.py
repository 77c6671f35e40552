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


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_call_of_an_interlingua_function_passes_keywords_it_takes(path: Path) -> None:
    """A keyword a function no longer takes (its options moved into an object) fails the benchmark at its call."""
    import inspect

    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {}
    for _line, module, name in _imports(path):
        if name is not None and hasattr(mod := importlib.import_module(module), name):
            imported[name] = getattr(mod, name)
    for node in ast.walk(tree):  # ``from m import f as g`` binds g
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("interlingua"):
            for a in node.names:
                if a.asname and a.name in imported:
                    imported[a.asname] = imported[a.name]
    wrong = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and callable(imported.get(node.func.id))
        ):
            continue
        try:
            params = inspect.signature(imported[node.func.id]).parameters
        except (TypeError, ValueError):
            continue
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            continue
        wrong += [
            f"line {node.lineno}: {node.func.id}({kw.arg}=)" for kw in node.keywords if kw.arg and kw.arg not in params
        ]
    assert not wrong, f"{path.name}: " + "; ".join(wrong)
