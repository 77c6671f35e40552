"""``interlingua measures``: the registered similarity measures and what each declares, as a table or JSON."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

__all__ = ["add_parser", "measure_rows", "measures_table", "run"]

#: (column header, row key) of the printed table, in order.
COLUMNS = (
    ("measure", "id"),
    ("direction", "direction"),
    ("symmetric", "symmetric"),
    ("invariances", "invariances"),
    ("equal width", "requires_equal_width"),
    ("same model", "requires_same_model"),
    ("min n", "min_n"),
    ("estimator", "estimator"),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "measures",
        help="list similarity measures and their declared properties",
        description="Every registered similarity measure: whether larger means more similar, "
        "symmetry, the transformations it is invariant to, whether it needs equal widths or the "
        "same model (a shared neuron basis), the smallest n (for the measure, a jackknife and a bootstrap), "
        "and its estimator.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list (one object per measure) instead")


def measure_rows() -> list[dict[str, Any]]:
    """One plain mapping per registered measure, from its ``MeasureMetadata`` (JSON-safe)."""
    from interlingua.analysis.inference.intervals import bootstrap_min_n, jackknife_min_n
    from interlingua.analysis.measures import get_measure, list_measures

    rows = []
    for mid in list_measures():
        meta = get_measure(mid).metadata
        lo, hi = meta.bounds
        rows.append(
            {
                "id": mid,
                "direction": "higher = more similar" if meta.larger_is_more_similar else "lower = more similar",
                "larger_is_more_similar": meta.larger_is_more_similar,
                "symmetric": meta.symmetric,
                "invariances": sorted(meta.invariances),
                "requires_equal_width": meta.requires_equal_width,
                "requires_same_model": meta.requires_same_model,
                "min_n": meta.min_n,
                "min_n_jackknife": jackknife_min_n(meta.min_n),
                "min_n_bootstrap": bootstrap_min_n(meta.min_n),
                "bootstrap_rows": "leave-one-out pseudo-values" if meta.resample_distinct else "with replacement",
                "bounds": [None if math.isinf(lo) else lo, None if math.isinf(hi) else hi],
                "estimator": meta.estimator,
                "reference": meta.reference,
                "peers": _peers(mid),
            }
        )
    return rows


def _peers(measure_id: str) -> list[dict[str, str]]:
    """The peer libraries ``measure_id`` was checked against and each one's convention (tests/oracles/)."""
    from interlingua.analysis.peers import peers_of

    return peers_of(measure_id)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(value) if value else "-"
    return str(value)


def measures_table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned plain-text table (the estimator column last, unpadded)."""
    cells = [[h for h, _ in COLUMNS]] + [[_cell(r[k]) for _, k in COLUMNS] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    lines = []
    for i, c in enumerate(cells):
        lines.append("  ".join([v.ljust(w) for v, w in zip(c, widths)] + [c[-1]]).rstrip())
        if i == 0:
            lines.append("  ".join(["-" * w for w in widths] + ["-" * len(c[-1])]))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    rows = measure_rows()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(measures_table(rows))
        print(
            "\ninvariances: the transformations of one side that leave the value unchanged; min n: the fewest "
            "rows with a value that depends on the data; `--json` adds bounds, references and the fewest rows "
            "for a jackknife (min_n_jackknife) and a bootstrap (min_n_bootstrap)"
        )
    return 0
