"""The run-config reference, generated from the pydantic schema (``interlingua.pipeline.config.RunSpec``).

Every key a config accepts, with its type, default, allowed values, bounds and description, read from the
models' fields, so the reference cannot drift from what ``interlingua validate`` accepts. The documentation
build calls :func:`render` through ``tools/docs_hooks.py``; ``python tools/config_reference.py`` prints it.
``tests/test_config_reference.py`` checks it against pydantic's own JSON schema of ``RunSpec``.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["Row", "Section", "key_paths", "render", "sections"]


@dataclass(frozen=True)
class Row:
    """One key of one section: its name as written in YAML and what it takes."""

    key: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass
class Section:
    """One pydantic model (a mapping in the YAML) and every path at which it appears."""

    model: type[BaseModel]
    paths: list[str]
    rows: list[Row] = field(default_factory=list)


def _registry_values() -> dict[str, list[str]]:
    """Keys checked against a registry rather than a ``Literal``: their allowed names, from the registry."""
    from interlingua.analysis.measures import list_measures
    from interlingua.maps.estimators import list_maps

    return {
        "RunSpec.measures": list_measures(),
        "MapsSpec.estimators": list_maps(),
        "PatchingSpec.estimator": list_maps(),
        # a regular expression, not a Literal (``interlingua.data.models.spec._device_name``)
        "ModelSpec.device": ["cpu", "cuda", "cuda:N", "auto"],
    }


def _args(ann: Any) -> tuple[Any, ...]:
    return typing.get_args(ann)


def _is_union(ann: Any) -> bool:
    return typing.get_origin(ann) in (typing.Union, types.UnionType)


def _strip_annotated(ann: Any) -> Any:
    while typing.get_origin(ann) is typing.Annotated:
        ann = _args(ann)[0]
    return ann


def _models_in(ann: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (inside lists, unions, Optional)."""
    ann = _strip_annotated(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    out: list[type[BaseModel]] = []
    for a in _args(ann):
        for m in _models_in(a):
            if m not in out:
                out.append(m)
    return out


def _literals_in(ann: Any) -> list[Any]:
    ann = _strip_annotated(ann)
    if typing.get_origin(ann) is Literal:
        return list(_args(ann))
    out: list[Any] = []
    for a in _args(ann):
        out += [v for v in _literals_in(a) if v not in out]
    return out


def _type_name(ann: Any) -> str:
    """A short, YAML-minded name of a type: ``integer``, ``list of string``, ``one of ...``, ``mapping``."""
    ann = _strip_annotated(ann)
    if ann is type(None):
        return "null"
    if typing.get_origin(ann) is Literal:
        return "name"
    if _is_union(ann):
        names: list[str] = []
        for a in _args(ann):
            n = _type_name(a)
            if n not in names and n != "null":
                names.append(n)
        return " or ".join(names)
    origin = typing.get_origin(ann)
    if origin in (list, tuple):
        inner = _args(ann)
        return f"list of {_type_name(inner[0])}" if inner else "list"
    if origin is dict:
        k, v = _args(ann)
        return f"mapping of {_type_name(k)} to {_type_name(v)}"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "mapping"
    return {bool: "boolean", int: "integer", float: "number", str: "string"}.get(
        ann, getattr(ann, "__name__", str(ann))
    )


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, BaseModel):
        return "(its keys' defaults)"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        return _yaml_value(info.default_factory())  # type: ignore[call-arg]
    return _yaml_value(info.default)


def _bounds(info: FieldInfo) -> list[str]:
    out = []
    for m in info.metadata:
        for cls, attr, sign in (
            (annotated_types.Ge, "ge", ">="),
            (annotated_types.Gt, "gt", ">"),
            (annotated_types.Le, "le", "<="),
            (annotated_types.Lt, "lt", "<"),
        ):
            if isinstance(m, cls):
                out.append(f"{sign} {getattr(m, attr)}")
        if isinstance(m, annotated_types.MinLen):
            out.append(f"at least {m.min_length} item{'s' if m.min_length != 1 else ''}")
    return out


def _yaml_key(name: str, info: FieldInfo) -> str:
    return info.alias or name


def sections() -> list[Section]:
    """Every model reachable from ``RunSpec``, in first-seen order, each with its rows and paths."""
    from interlingua.pipeline.config import RunSpec

    registry = _registry_values()
    found: dict[type[BaseModel], Section] = {}
    order: list[type[BaseModel]] = []

    def visit(model: type[BaseModel], path: str) -> None:
        if model in found:
            if path not in found[model].paths:
                found[model].paths.append(path)
                for name, info in model.model_fields.items():
                    for sub in _models_in(info.annotation):
                        visit(sub, _child(path, _yaml_key(name, info), info.annotation))
            return
        section = found[model] = Section(model, [path])
        order.append(model)
        for name, info in model.model_fields.items():
            key = _yaml_key(name, info)
            allowed = [f"`{_yaml_value(v)}`" for v in _literals_in(info.annotation)]
            reg = registry.get(f"{model.__name__}.{name}")
            if reg:
                allowed += [f"`{v}`" for v in reg if f"`{v}`" not in allowed]
            extra = _bounds(info)
            desc = (info.description or "").strip()
            if extra:
                desc = (desc + "; " if desc else "") + ", ".join(extra)
            section.rows.append(Row(key, _type_name(info.annotation), _default(info), ", ".join(allowed), desc))
            for sub in _models_in(info.annotation):
                visit(sub, _child(path, key, info.annotation))

    visit(RunSpec, "")
    return [found[m] for m in order]


def _child(path: str, key: str, ann: Any) -> str:
    """The path of the mapping a key holds: ``maps.pairs[]`` for a list of mappings, ``corpus`` for one."""
    ann = _strip_annotated(ann)
    listy = any(
        typing.get_origin(_strip_annotated(a)) in (list, tuple) and _models_in(a)
        for a in (_args(ann) if _is_union(ann) else (ann,))
    )
    return f"{path + '.' if path else ''}{key}{'[]' if listy else ''}"


def key_paths() -> list[str]:
    """Every dotted key path a config accepts (``[]``: an item of a list), as the reference's index lists them."""
    out: list[str] = []
    for s in sections():
        for p in s.paths:
            out += [f"{p + '.' if p else ''}{r.key}" for r in s.rows]
    return sorted(set(out))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _doc(model: type[BaseModel]) -> str:
    doc = inspect.getdoc(model) or ""
    if model.__doc__ is None or doc == inspect.getdoc(BaseModel):
        return ""
    doc = re.sub(r":(?:class|func|mod|meth|attr):`~?([^`]+)`", r"`\1`", doc)  # reST roles to Markdown code
    return doc.replace("``", "`").replace("docs/protocol.md", "the protocol page")


def render() -> str:
    """The reference page's body (Markdown): one table per mapping, then an index of every key path."""
    out = []
    for s in sections():
        title = "Top level" if s.paths == [""] else f"`{s.paths[0]}`"
        out.append(f"## {title}\n")
        if len(s.paths) > 1 or s.paths != [""]:
            where = ", ".join(f"`{p}`" for p in s.paths)
            out.append(f"*Section `{s.model.__name__}`; found at {where}.*\n")
        doc = _doc(s.model)
        if doc:
            out.append(doc + "\n")
        out.append("| key | type | default | allowed values | description |\n|---|---|---|---|---|")
        for r in s.rows:
            out.append(
                f"| `{r.key}` | {_cell(r.type)} | `{_cell(r.default)}` | {_cell(r.allowed)} | {_cell(r.description)} |"
            )
        out.append("")
    out.append("## Every key\n")
    out.append("Each key path a config accepts (`[]`: an item of a list), for searching this page:\n")
    out += [f"- `{p}`" for p in key_paths()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
