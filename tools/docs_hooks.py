"""mkdocs hook: pages whose body comes from the code, at every build, so they cannot drift.

``docs/reference/config.md`` holds the marker ``<!-- config-reference -->``, replaced by
``tools/config_reference.py``'s ``render()`` (every key ``RunSpec`` accepts); ``docs/cli.md`` holds
``<!-- cli-help -->``, replaced by the ``--help`` of every ``interlingua`` command.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- config-reference -->"
CLI_MARKER = "<!-- cli-help -->"
TOOL = Path(__file__).resolve().parent / "config_reference.py"


def _render() -> str:
    spec = importlib.util.spec_from_file_location("config_reference", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.render()


def _cli_help() -> str:
    """``interlingua --help`` and each command's ``--help``, as argparse prints them (80 columns)."""
    import argparse
    import os

    from interlingua.cli import _parser

    os.environ["COLUMNS"] = "100"
    parser = _parser()
    out = ["## `interlingua --help`\n", "```text", parser.format_help().rstrip(), "```\n"]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    seen: set[int] = set()
    for name, command in sub.choices.items():
        if id(command) in seen:  # an alias (`cache ls`) shares its command's parser
            continue
        seen.add(id(command))
        out += [f"## `interlingua {name}`\n", "```text", command.format_help().rstrip(), "```\n"]
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri == "cli.md":
        if CLI_MARKER not in markdown:
            raise ValueError(f"docs/cli.md lost its {CLI_MARKER} marker")
        return markdown.replace(CLI_MARKER, _cli_help())
    if page.file.src_uri == "reference/config.md":
        if MARKER not in markdown:
            raise ValueError(f"docs/reference/config.md lost its {MARKER} marker")
        return markdown.replace(MARKER, _render())
    return markdown


def on_page_content(html: str, **_: Any) -> str:
    """The docstrings' reST roles (:class:`X`) reach the page as ``:class:<code>X</code>``: keep the code."""
    import re

    return re.sub(r":(?:class|func|mod|meth|attr|data|exc|obj):(<code>)", r"\1", html)
