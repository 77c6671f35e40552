"""The configs and commands the README and the docs show are real: every YAML run config in a page validates
against the schema, and every packaged example a page names exists.

Whole runs of these configs need the packaged pretrained models (minutes); the schema check is what keeps a
page from drifting when a key is renamed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from interlingua.commands.init import example_names
from interlingua.pipeline.config import parse_spec

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def _yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def _configs() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for i, block in enumerate(_yaml_blocks(page.read_text(encoding="utf-8"))):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and "output" in data and "models" in data:  # a whole run config
                out.append((f"{page.relative_to(ROOT)}[{i}]", block))
    return out


def test_the_tutorials_show_whole_configs() -> None:
    names = {n.split("[")[0] for n, _ in _configs()}
    tutorials = {str(p.relative_to(ROOT)) for p in (ROOT / "docs" / "tutorials").glob("*.md")}
    # every tutorial but the audit (a packaged example and a command) shows a config of its own
    assert tutorials - names <= {"docs/tutorials/checkpoints.md"}, sorted(tutorials - names)


@pytest.mark.parametrize(("where", "block"), _configs(), ids=[n for n, _ in _configs()])
def test_every_config_in_the_docs_validates(where: str, block: str) -> None:
    spec = parse_spec(yaml.safe_load(block), source=where)
    assert spec.output and spec.models


def test_every_named_example_is_packaged() -> None:
    known = set(example_names())
    named = set()
    for page in PAGES:
        named |= set(re.findall(r"--example\s+([a-z_]+)", page.read_text(encoding="utf-8")))
    assert named, "the pages name no packaged example"
    assert named <= known, sorted(named - known)


def test_the_quickstart_example_is_offline_and_small() -> None:
    """The README's quick start: packaged models and Bible text only, two languages, last-layer inference."""
    from interlingua.commands.init import example_text

    spec = parse_spec(yaml.safe_load(example_text("quickstart")), source="quickstart")
    assert spec.corpus.source == "bible"
    assert all(m.package for m in spec.models) and len(spec.models) == 2
    assert spec.corpus.n is not None and spec.corpus.n <= 100 and len(spec.corpus.languages) == 2
    assert spec.inference.layers == "last" and spec.maps is None and not spec.layer_grid
