"""``interlingua typology LANG...`` (URIEL distances) and ``interlingua contamination NAME=SOURCE...``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from interlingua.core.argtypes import float_in, int_in

__all__ = ["add_typology_parsers", "run_contamination", "run_typology"]


def add_typology_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``typology`` and ``contamination``."""
    from interlingua.analysis.typology import KINDS

    t = subparsers.add_parser(
        "typology",
        help="URIEL distances between languages (offline; pip install 'interlingua[typology]')",
        description="Cosine distances between URIEL vectors (lang2vec's data) for every pair of LANGs.",
    )
    t.add_argument("languages", nargs="+", metavar="LANG", help="FLORES-style or ISO 639-3 codes (eng_Latn, deu)")
    t.add_argument(
        "--kinds",
        nargs="+",
        default=list(KINDS),
        choices=list(KINDS),
        metavar="KIND",
        help=f"distances to compute (default: all of {', '.join(KINDS)})",
    )
    t.add_argument(
        "-o",
        "--output",
        metavar="CSV",
        help="also write the table to this new CSV file (a different file there is never replaced)",
    )
    c = subparsers.add_parser(
        "contamination",
        help="share of a training corpus's lines confidently in another language (py3langid)",
        description="Language identification over the lines of each corpus (offline; pip install "
        "'interlingua[langid]'). SOURCE: a text file (one line per line) or bible:LANG.",
    )
    c.add_argument("corpora", nargs="+", metavar="NAME=SOURCE")
    c.add_argument("--expected", help="the corpora's language (default: NAME when it is a code, or the bible side)")
    c.add_argument("--other", default="eng", help="the language to look for (default eng)")
    c.add_argument("--sample", type=int_in(1, 10**9), help="lines drawn per corpus (seeded; default all)")
    c.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0)
    c.add_argument("--threshold", type=float_in(0, 1), default=0.9, help="identifier probability to count a line (0.9)")
    c.add_argument("--min-chars", type=int_in(0, 10**6), default=20, help="shorter lines are skipped (20)")
    c.add_argument(
        "-o",
        "--output",
        metavar="CSV",
        help="also write the table to this new CSV file (a different file there is never replaced)",
    )


def _write(frame, output: str | None) -> None:
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.4g}".format):
        print(frame.to_string(index=False))
    if output:
        from interlingua.core.outputs import write_file

        write_file(Path(output).expanduser(), frame.to_csv(index=False).encode("utf-8"))  # never replaces a file
        print(f"wrote {output}", file=sys.stderr)


def run_typology(args: argparse.Namespace) -> int:
    from interlingua.analysis.typology import uriel_distances

    _write(uriel_distances(args.languages, kinds=args.kinds), args.output)
    return 0


def run_contamination(args: argparse.Namespace) -> int:
    from interlingua.audit.contamination import contamination_table
    from interlingua.core.errors import ConfigError

    corpora = {}
    for item in args.corpora:
        name, sep, source = item.partition("=")
        if not sep or not name or not source:
            raise ConfigError(f"{item!r} is not NAME=SOURCE (e.g. deu=bible:deu_Latn or mine=train.txt)")
        corpora[name] = source
    frame = contamination_table(
        corpora,
        expected=args.expected,
        other=args.other,
        sample=args.sample,
        seed=args.seed,
        min_chars=args.min_chars,
        threshold=args.threshold,
    )
    _write(frame, args.output)
    return 0
