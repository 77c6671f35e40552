"""Front-door subcommands of ``interlingua`` (``measures``, ``report``, ``cache``, ``init``), each in its own module.

:func:`add_parsers` registers them on the main parser and :func:`dispatch` runs the one asked for, so
``cli.py`` needs two lines for all of them.
"""

from __future__ import annotations

import argparse

__all__ = ["COMMANDS", "add_parsers", "dispatch"]

COMMANDS = ("measures", "report", "cache", "init")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``measures``, ``report``, ``cache`` and ``init`` to the ``interlingua`` subparsers."""
    from interlingua.commands import cache, init, measures, rerender

    measures.add_parser(sub)
    rerender.add_parser(sub)
    cache.add_parser(sub)
    init.add_parser(sub)


def dispatch(args: argparse.Namespace) -> int | None:
    """Run the front-door command ``args`` names; None when it names another command."""
    if args.command not in COMMANDS:
        return None
    from interlingua.commands import cache, init, measures, rerender

    handler = {"measures": measures.run, "report": rerender.run, "cache": cache.run, "init": init.run}
    return handler[args.command](args)
