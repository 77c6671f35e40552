"""The generated config reference (tools/config_reference.py) lists every key RunSpec accepts, and no other.

The reference walks the pydantic models' fields; this test walks pydantic's own JSON schema of ``RunSpec``
(an independent reading of the same schema, through ``$ref`` / ``anyOf`` / ``items``) and compares the key
paths, the allowed values of every enumerated key, and the defaults of the sections a bare config gets.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlingua.pipeline.config import RunSpec, parse_spec

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "tools" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


ref = _load_tool()


def _schema_paths() -> tuple[set[str], dict[str, set[Any]]]:
    """Every key path in RunSpec's JSON schema, and the enum values found at each."""
    schema = RunSpec.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    paths: set[str] = set()
    enums: dict[str, set[Any]] = {}

    def resolve(node: dict) -> dict:
        while "$ref" in node:
            node = defs[node["$ref"].split("/")[-1]]
        return node

    def leaf_enums(node: dict, path: str) -> None:
        node = resolve(node)
        if "enum" in node:
            enums.setdefault(path, set()).update(node["enum"])
        if "const" in node:
            enums.setdefault(path, set()).add(node["const"])
        for alt in node.get("anyOf", []) + node.get("oneOf", []):
            leaf_enums(alt, path)
        if node.get("type") == "array" and "items" in node:
            leaf_enums(node["items"], path)

    def objects(node: dict, path: str, seen: tuple[str, ...]) -> None:
        """Walk into every object a value at ``path`` can be: directly, in a union, or as list items."""
        if "$ref" in node:
            name = node["$ref"].split("/")[-1]
            if name in seen:
                return
            seen = (*seen, name)
        node = resolve(node)
        for alt in node.get("anyOf", []) + node.get("oneOf", []):
            objects(alt, path, seen)
        if node.get("type") == "array" and "items" in node:
            item = resolve(node["items"])
            if "properties" in item or any("$ref" in a or "properties" in resolve(a) for a in item.get("anyOf", [])):
                objects(node["items"], path + "[]", seen)
            else:
                objects(node["items"], path, seen)
        for key, sub in node.get("properties", {}).items():
            child = f"{path}.{key}" if path else key
            paths.add(child)
            leaf_enums(sub, child)
            objects(sub, child, seen)

    objects(schema, "", ())
    return paths, enums


def test_the_reference_lists_every_key_runspec_accepts_and_no_other() -> None:
    expected, _ = _schema_paths()
    listed = set(ref.key_paths())
    assert listed == expected, (sorted(expected - listed), sorted(listed - expected))
    body = ref.render()
    index = body.split("## Every key", 1)[1]
    assert set(re.findall(r"^- `([^`]+)`$", index, flags=re.MULTILINE)) == expected
    # nested sections reached through several paths are all found (a list of mappings, a union with a model)
    for path in (
        "models[].merge.lambda",
        "pairs.explicit[].a.model",
        "maps.pairs[].b.language",
        "alignment.encoder.gguf_file",
        "mergeability.checkpoints.steps",
        "patching.experiments[].layers",
    ):
        assert path in expected and path in listed


def test_allowed_values_are_the_schemas_enums() -> None:
    _, enums = _schema_paths()
    rows = {(f"{p + '.' if p else ''}{r.key}"): r for s in ref.sections() for p in s.paths for r in s.rows}
    for path, values in enums.items():
        allowed = set(re.findall(r"`([^`]+)`", rows[path].allowed))
        shown = {v if isinstance(v, str) else yaml.safe_dump(v).strip() for v in values}
        assert shown <= allowed, (path, shown - allowed)


def test_defaults_are_what_a_bare_config_gets() -> None:
    """The defaults the reference prints, read back as YAML, equal what RunSpec fills into a minimal config."""
    spec = parse_spec(
        {"output": "o", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]}, "models": [{"path": "m"}]}
    )
    by_section = {s.paths[0]: s for s in ref.sections()}
    checked = 0
    for section, obj in (
        ("", spec),
        ("pairs", spec.pairs),
        ("inference", spec.inference),
        ("seeds", spec.seeds),
        ("models[]", spec.models[0]),
    ):
        for row in by_section[section].rows:
            if row.default in ("required", "(its keys' defaults)"):
                continue
            if (section, row.key) in (("models[]", "name"), ("models[]", "path")):  # given, or filled in from it
                continue
            value = getattr(obj, next(n for n, f in type(obj).model_fields.items() if (f.alias or n) == row.key))
            assert yaml.safe_load(row.default) == value, (section, row.key, row.default, value)
            checked += 1
    assert checked > 30


@pytest.mark.parametrize("path", ["corpus.source", "models[].dtype", "maps.directions"])
def test_enumerated_keys_show_their_values(path: str) -> None:
    _, enums = _schema_paths()
    body = ref.render()
    for value in enums[path]:
        assert f"`{value}`" in body
