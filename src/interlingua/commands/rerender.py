"""``interlingua report OUTPUT``: re-render ``report.md``, ``report.html`` and the figures of a finished run.

Everything is read from the run folder (``results.parquet``, ``maps.parquet`` and the other tables,
``run.json``); nothing is recomputed and no model is loaded, so the report of an unchanged run comes out
byte for byte the same, and a report written by an older interlingua is redrawn with this one's renderer.
Writing goes through :func:`interlingua.core.outputs.write_outputs` (the folder must be a run's, unchanged since
it was written; files added next to it need ``--overwrite`` and are kept either way). Figures the report
draws from representations (``figures/map_clouds.png``) cannot be redrawn from the tables and are kept.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from interlingua.core.errors import OutputError

__all__ = ["add_parser", "read_run", "rerender", "run"]

#: Tables that are not report sections of their own (the rest are passed to the report by name).
_NOT_SECTIONS = ("results", "maps")
_REPORT_FILES = ("report.md", "report.html")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="re-render report.md/.html and figures of a run folder from its tables",
        description="Redraw report.md, report.html and the figures of an existing run folder from "
        "its tables and run.json, without recomputing anything.",
    )
    p.add_argument("output", metavar="OUTPUT", help="the run's output folder (holds run.json and results.parquet)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="also when files interlingua did not write were added to the folder (they are kept)",
    )


def read_run(folder: Path) -> tuple[Any, dict[str, Any], Any, dict[str, Any]]:
    """(results table, run info, maps table or None, the other tables by name) of the run in ``folder``."""
    import pandas as pd

    table = pd.read_parquet(folder / "results.parquet")
    info = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    maps = pd.read_parquet(folder / "maps.parquet") if (folder / "maps.parquet").is_file() else None
    sections = {p.stem: pd.read_parquet(p) for p in sorted(folder.glob("*.parquet")) if p.stem not in _NOT_SECTIONS}
    return table, info, maps, sections


def rerender(output: str | Path, *, overwrite: bool = False) -> list[str]:
    """Re-render the report of the run folder ``output`` in place; returns the names the folder now holds."""
    from interlingua.core.outputs import prepare_output, write_outputs
    from interlingua.report.markdown import write_report

    target = prepare_output(output, overwrite=overwrite)
    folder = target.path
    missing = [n for n in ("run.json", "results.parquet") if n not in target.owned]
    if missing:
        raise OutputError(
            f"{folder} is not an interlingua run folder (its manifest lists no "
            f"{' or '.join(missing)}); give the output folder of a finished `interlingua run`"
        )
    table, info, maps, sections = read_run(folder)

    kept = {str((info.get("map_figure") or {}).get("path", ""))}  # drawn from representations: not redrawable

    def build(tmp: Path) -> None:
        for name in target.owned:  # the run's other files, as they are (checked unchanged by prepare_output)
            if name in _REPORT_FILES or (name.startswith("figures/") and name not in kept):
                continue  # the report's figures are redrawn: one the new report does not show is not kept
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, tmp / name)
        write_report(tmp, table, info, maps=maps, sections=sections, previous=folder / "figures")

    return write_outputs(target, build)


def run(args: argparse.Namespace) -> int:
    names = rerender(args.output, overwrite=args.overwrite)
    figures = sum(1 for n in names if n.startswith("figures/"))
    print(f"re-rendered {Path(args.output)}/report.md and report.html ({figures} figures) from its tables")
    return 0
