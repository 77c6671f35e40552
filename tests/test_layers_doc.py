"""docs/ARCHITECTURE.md's layers and named exceptions are those of pyproject.toml's import-linter contracts.

`lint-imports` (make lint, CI) checks the code against the contracts; this test checks the document against
them, so the document is true whenever the lint passes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 has no tomllib
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["importlinter"]["contracts"])


def _section(heading: str, end: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(heading)
    return text[start : text.index(end, start + len(heading))]


def _contract_layers() -> list[set[str]]:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    return [{name.strip() for name in re.split(r"[|:]", row)} for row in layers["layers"]]


def _doc_layers() -> list[set[str]]:
    table = _section("## Layers", "### Named exceptions")
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \|", table, flags=re.M)
    assert [int(n) for n, _ in rows] == list(range(1, len(rows) + 1)), "the table's layers are numbered 1, 2, ..."
    return [set(re.findall(r"`(interlingua[\w.]*)`", packages)) for _, packages in rows]


def test_the_documented_layers_are_the_contract_s() -> None:
    assert _doc_layers() == _contract_layers()


def test_packages_sharing_a_layer_are_independent_as_the_document_says() -> None:
    """The document says packages of one row import nothing of each other: the contract joins them with `|`."""
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    assert not [row for row in layers["layers"] if ":" in row]


def test_every_top_level_package_is_in_a_layer() -> None:
    """A new top-level package must be placed in the order (otherwise the contract would not constrain it)."""
    src = ROOT / "src" / "interlingua"
    packages = {f"interlingua.{p.name}" for p in src.iterdir() if (p / "__init__.py").is_file()}
    modules = {f"interlingua.{p.stem}" for p in src.glob("*.py") if p.stem != "__init__"}
    placed = set().union(*_contract_layers())
    assert packages | modules == placed


def test_the_documented_exceptions_are_the_contracts_ignored_imports() -> None:
    named = set(re.findall(r"`([\w.*]+ -> [\w.*]+)`", _section("### Named exceptions", "## Capabilities")))
    ignored = {line for c in _contracts() for line in c.get("ignore_imports", [])}
    assert named == ignored


def test_no_cycle_between_the_top_level_packages() -> None:
    """The layers contract forbids upward imports but lets its named exceptions through; none may close a loop.

    Run-time imports only (those under ``if TYPE_CHECKING:`` are never executed), as the contracts count them;
    ``from interlingua import __version__`` (the root package) is no edge.
    """
    grimp = pytest.importorskip("grimp")  # import-linter's graph builder (the lint extra)
    graph = grimp.build_graph("interlingua", exclude_type_checking_imports=True)
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = module.split(".")[1:2], imported.split(".")[1:2]
            if a and b and a != b:
                edges.setdefault(a[0], set()).add(b[0])
    # depth-first search for a back edge: a package reached again while it is still on the path
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = cycle_from(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state:
            found = cycle_from(start, [start])
            assert found is None, " -> ".join(found)
