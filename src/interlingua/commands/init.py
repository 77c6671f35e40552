"""``interlingua init``: write a packaged example config (commented, and for ``demo`` valid offline) to start from."""

from __future__ import annotations

import argparse
import os
from importlib import resources
from pathlib import Path

from interlingua.core.errors import ConfigError, OutputError

__all__ = ["add_parser", "example_names", "example_text", "run"]

DEFAULT_EXAMPLE = "demo"
DEFAULT_FILE = "interlingua.yaml"


def example_names() -> list[str]:
    """The packaged example configs (``src/interlingua/configs/*.yaml``), by name."""
    folder = resources.files("interlingua").joinpath("configs")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def example_text(name: str) -> str:
    """The packaged example ``name`` as written (comments kept); ConfigError naming the valid ones if unknown."""
    names = example_names()
    if name not in names:
        raise ConfigError(
            f"init: no example {name!r}; the packaged examples are {', '.join(names)} "
            f"(`{DEFAULT_EXAMPLE}` runs offline; `example` documents every key)"
        )
    return resources.files("interlingua").joinpath(f"configs/{name}.yaml").read_text(encoding="utf-8")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="write an example config to start from",
        description="Write a packaged, commented example config. `demo` (the default) runs "
        "offline: packaged models and Bible text; `example` documents every key.",
    )
    p.add_argument(
        "--example",
        default=DEFAULT_EXAMPLE,
        metavar="NAME",
        help=f"which example (default {DEFAULT_EXAMPLE}; one of: {', '.join(example_names())})",
    )
    p.add_argument(
        "-o",
        "--output",
        default=DEFAULT_FILE,
        metavar="FILE",
        help=f"the config file to write (default {DEFAULT_FILE}); an existing file is never replaced",
    )


def run(args: argparse.Namespace) -> int:
    from interlingua.core.outputs import write_file

    text = example_text(args.example)
    path = Path(args.output).expanduser()
    if os.path.lexists(path):
        raise OutputError(
            f"init: {path} exists and is never replaced; give a new file name with -o, or move the old file away"
        )
    header = (
        f"# Written by `interlingua init --example {args.example}`. Check it with\n"
        f"#   interlingua validate {path}\n# and run it with\n#   interlingua run {path}\n"
    )
    write_file(path, (header + text).encode("utf-8"))
    print(f"wrote {path} (example {args.example}); next: interlingua validate {path}")
    return 0
