"""``interlingua report OUTPUT``: re-render ``report.md``, ``report.html`` and the figures of a finished run.

Everything is read from the run folder (``results.parquet``, ``maps.parquet`` and the other tables,
``run.json``); nothing is recomputed and no model is loaded, so the report of an unchanged run comes out
byte for byte the same, and a report written by an older interlingua is redrawn with this one's renderer.
Writing goes through :func:`interlingua.core.outputs.write_outputs` (the folder must be a run's, unchanged since
it was written; files added next to it need ``--overwrite`` and are kept either way). Figures the report
draws from representations (``figures/map_clouds.png``) cannot be redrawn from the tables and are kept.

Before anything is drawn, every table the report reads is checked against the run's ``manifest.json`` (present,
of the recorded size and sha256) and read: a missing, changed or unreadable table is one error that names it.
A changed table is used only with ``--accept-edits``; it is then kept as it is, the manifest goes on recording
the run's version, and the report opens by naming the edited tables.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlingua.core.errors import OutputError

__all__ = ["TableCheck", "add_parser", "check_tables", "read_run", "rerender", "run"]

#: Tables that are not report sections of their own (the rest are passed to the report by name).
_NOT_SECTIONS = ("results", "maps")
_REPORT_FILES = ("report.md", "report.html")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="re-render report.md/.html and figures of a run folder from its tables",
        description="Redraw report.md, report.html and the figures of an existing run folder from "
        "its tables and run.json, without recomputing anything. Every table is checked against the run's "
        "manifest first (present, size, sha256): a missing, changed or damaged table is named and nothing is "
        "drawn, unless --accept-edits says the changes are yours.",
    )
    p.add_argument("output", metavar="OUTPUT", help="the run's output folder (holds run.json and results.parquet)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="also when files interlingua did not write were added to the folder (they are kept)",
    )
    p.add_argument(
        "--accept-edits",
        action="store_true",
        help="draw the report from tables edited since the run wrote them (they are kept as they are; the "
        "report names them and says it was drawn from edited tables)",
    )


#: The files a report is drawn from (besides the other tables, ``*.parquet``, the manifest lists).
_REQUIRED = ("run.json", "results.parquet")


@dataclass(frozen=True)
class TableCheck:
    """The tables of a run folder as its manifest records them: which are missing, changed, as written."""

    folder: Path
    tables: tuple[str, ...]  # what the report reads, in order: run.json, results.parquet, the other tables
    missing: tuple[str, ...]
    changed: tuple[tuple[str, str], ...]  # (name, how it differs from what the run wrote)


def check_tables(folder: Path) -> TableCheck:
    """Check each table the report reads against the run's manifest: present, of the recorded size and sha256.

    :class:`OutputError` when ``folder`` is not a finished run's folder (no manifest, or one that lists no
    ``run.json`` / ``results.parquet``).
    """
    from interlingua.core.outputs import MANIFEST, read_manifest, sha256_file

    if not folder.is_dir():
        what = "does not exist" if not folder.exists() else "is not a folder"
        raise OutputError(f"{folder} {what}; give the output folder of a finished `interlingua run`")
    manifest = read_manifest(folder)
    if manifest is None:
        raise OutputError(
            f"{folder} has no interlingua {MANIFEST}, so it is not a run folder (or its manifest was removed or "
            "damaged, and its tables cannot be vouched for); give the output folder of a finished `interlingua run`"
        )
    unlisted = [n for n in _REQUIRED if n not in manifest]
    if unlisted:
        raise OutputError(
            f"{folder} is not an interlingua run folder (its manifest lists no {' or '.join(unlisted)}); "
            "give the output folder of a finished `interlingua run`"
        )
    others = sorted(n for n in manifest if n.endswith(".parquet") and "/" not in n and n not in _REQUIRED)
    tables = (*_REQUIRED, *others)
    missing, changed = [], []
    for name in tables:
        path = folder / name
        versions = manifest[name]
        if not path.is_file():
            missing.append(name)
            continue
        size = path.stat().st_size
        if any(s is not None and s == size for _, s in versions) or all(s is None for _, s in versions):
            digest = sha256_file(path)
            if any(d == digest for d, _ in versions):
                continue
            recorded = sorted(versions, key=str)[0]
            changed.append((name, f"sha256 {digest[:12]}..., the run wrote {recorded[0][:12]}..."))
        else:
            written = "/".join(str(s) for _, s in sorted(versions, key=str) if s is not None)
            changed.append((name, f"{size} bytes, the run wrote {written}"))
    return TableCheck(folder, tables, tuple(missing), tuple(changed))


def _damaged(folder: Path, name: str, err: BaseException, edited: bool) -> OutputError:
    why = " ".join(f"{type(err).__name__}: {err}".split())[:300]
    when = (
        "it was edited since the run wrote it"
        if edited
        else "its size and sha256 are those the run's manifest records, so it was written damaged, not edited since"
    )
    return OutputError(
        f"{folder / name} is damaged: it cannot be read ({why}); {when}; rerun the config into a new folder "
        "(`interlingua run CONFIG -o NEW`: everything is cached, so only the tables are written)"
    )


def read_run(
    folder: Path, tables: tuple[str, ...] | None = None, edited: frozenset[str] = frozenset()
) -> tuple[Any, dict[str, Any], Any, dict[str, Any]]:
    """(results table, run info, maps table or None, the other tables by name) of the run in ``folder``.

    ``tables``: the tables to read (default: those the folder's manifest lists, checked by :func:`check_tables`).
    A table that cannot be read is an :class:`OutputError` naming it.
    """
    import pandas as pd

    from interlingua.core.schema import column_names
    from interlingua.maps.columns import MAP_COLUMNS

    if tables is None:
        tables = check_tables(folder).tables
    frames: dict[str, Any] = {}
    info: Any = None
    for name in tables:
        try:
            if name == "run.json":
                info = json.loads((folder / name).read_text(encoding="utf-8"))
            else:
                frames[name.removesuffix(".parquet")] = pd.read_parquet(folder / name)
        except Exception as err:  # pyarrow, json, decoding: any reader's error means the file is damaged
            raise _damaged(folder, name, err, name in edited) from None
    if not isinstance(info, dict) or not isinstance(info.get("spec"), dict) or "corpus" not in info:
        raise _damaged(folder, "run.json", ValueError("not a run record (no spec or corpus)"), "run.json" in edited)
    needs = {"results": column_names(), "maps": column_names(MAP_COLUMNS)}
    for stem, cols in needs.items():
        lacking = [c for c in cols if stem in frames and c not in frames[stem].columns]
        if lacking and f"{stem}.parquet" in edited:
            raise _damaged(folder, f"{stem}.parquet", ValueError(f"lacks the columns {', '.join(lacking)}"), True)
        if lacking:  # the file is the one the run wrote (its manifest says so): an older version's table
            wrote = info.get("interlingua_version") or info.get("versions", {}).get("interlingua", "an older version")
            raise OutputError(
                f"{folder / stem}.parquet was written by interlingua {wrote}, whose {stem} table lacks columns this "
                f"version's report reads ({', '.join(lacking[:6])}{', ...' if len(lacking) > 6 else ''}); the file "
                "is intact. Rerun the config into a new folder (`interlingua run CONFIG -o NEW`: what is still valid "
                "is read from the cache) to draw it with this version"
            )
    table = frames.pop("results")
    maps = frames.pop("maps", None)
    sections = {stem: frame for stem, frame in frames.items() if stem not in _NOT_SECTIONS}
    return table, info, maps, sections


def _edit_note(changed: tuple[tuple[str, str], ...]) -> list[str]:
    """The lines the report opens with when it was drawn from edited tables."""
    names = ", ".join(f"`{n}` ({how})" for n, how in changed)
    return [
        f"**Drawn from edited tables** (`interlingua report --accept-edits`): {names} changed since the run wrote "
        f"{'it' if len(changed) == 1 else 'them'}; the numbers below are the edited ones, not the run's. "
        "`manifest.json` still records what the run wrote.",
        "",
    ]


def rerender(output: str | Path, *, overwrite: bool = False, accept_edits: bool = False) -> list[str]:
    """Re-render the report of the run folder ``output`` in place; returns the names the folder now holds.

    The tables are checked against the run's manifest first: a missing one, a changed one (unless
    ``accept_edits``) or one that cannot be read is an :class:`OutputError` that names it.
    """
    from interlingua.core.outputs import prepare_output, write_outputs
    from interlingua.pipeline.report import write_report
    from interlingua.report.html import write_html

    checked = check_tables(Path(output).expanduser().resolve())
    folder = checked.folder
    if checked.missing:
        raise OutputError(
            f"{folder}: {', '.join(checked.missing)} {'is' if len(checked.missing) == 1 else 'are'} missing (the "
            f"run's manifest lists {'it' if len(checked.missing) == 1 else 'them'}), so the report cannot be drawn; "
            "rerun the config (`interlingua run CONFIG`: everything is cached, so only the tables are written)"
        )
    if checked.changed and not accept_edits:
        what = "; ".join(f"{n} ({how})" for n, how in checked.changed)
        raise OutputError(
            f"{folder}: {what} changed since the run wrote {'it' if len(checked.changed) == 1 else 'them'}; pass "
            "--accept-edits to draw the report from the edited tables (the report says so), or rerun the config "
            "into a new folder to get the run's own"
        )
    edited = frozenset(n for n, _ in checked.changed)
    table, info, maps, sections = read_run(folder, checked.tables, edited)
    target = prepare_output(folder, overwrite=overwrite, edited=tuple(sorted(edited)))

    kept = {str((info.get("map_figure") or {}).get("path", ""))}  # drawn from representations: not redrawable

    def build(tmp: Path) -> None:
        for name in target.owned:  # the run's other files, as they are (checked unchanged by prepare_output)
            if name in edited or name in _REPORT_FILES or (name.startswith("figures/") and name not in kept):
                continue  # the report's figures are redrawn; edited tables stay where they are, untouched
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, tmp / name)
        if not edited:
            write_report(tmp, table, info, maps=maps, sections=sections, previous=folder / "figures")
            return
        try:
            report = write_report(tmp, table, info, maps=maps, sections=sections, previous=folder / "figures")
        except Exception as err:  # edited tables are the user's data: what they broke is said, not a traceback
            why = " ".join(f"{type(err).__name__}: {err}".split())[:300]
            raise OutputError(
                f"the report cannot be drawn from the edited tables {', '.join(sorted(edited))} ({why}); "
                "undo the edit, or rerun the config into a new folder"
            ) from None
        lines = report.read_text(encoding="utf-8").split("\n")
        title = next((i for i, line in enumerate(lines) if line.startswith("# ")), -1)
        lines[title + 2 : title + 2] = _edit_note(checked.changed)
        report.write_text("\n".join(lines), encoding="utf-8")
        write_html(report)

    return write_outputs(target, build)


def run(args: argparse.Namespace) -> int:
    accept = getattr(args, "accept_edits", False)
    names = rerender(args.output, overwrite=args.overwrite, accept_edits=accept)
    figures = sum(1 for n in names if n.startswith("figures/"))
    print(f"re-rendered {Path(args.output)}/report.md and report.html ({figures} figures) from its tables")
    return 0
