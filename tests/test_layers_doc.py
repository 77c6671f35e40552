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
