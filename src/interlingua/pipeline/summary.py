"""The line a run ends with: wall time by phase, every file written, the cache hits of every namespace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["written_files", "summary"]


def written_files(folder: Path) -> list[str]:
    """Every file the run's manifest lists (and the manifest itself), sorted: what the run wrote."""
    from interlingua.core.outputs import MANIFEST

    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    files = data.get("files") if isinstance(data, dict) else None
    return sorted({*files, MANIFEST}) if isinstance(files, dict) else []


def summary(result: Any, wall: float | None = None) -> str:
    """``wrote OUT: files (wall W s: preflight, plan, execute, assemble[, startup]); cache: namespace hits/computed``.

    ``wall``: seconds since the command started (imports included); default the run's own total.
    """
    out = Path(result.output)
    phases = dict(getattr(result, "phases", {}) or {})
    total = phases.pop("total", None)
    wall = total if wall is None else wall
    kinds = {k.split(".", 1)[1]: v for k, v in phases.items() if k.startswith("execute.")}
    phases = {k: v for k, v in phases.items() if not k.startswith("execute.")}
    parts = [
        f"{k} {v:.1f} s"
        + (" [" + ", ".join(f"{kind} {s:.1f} s" for kind, s in kinds.items()) + "]" if k == "execute" and kinds else "")
        for k, v in phases.items()
    ]
    if wall is not None and total is not None and wall - total >= 0.05:
        parts.append(f"startup and imports {wall - total:.1f} s")
    files = written_files(out)
    cache = {k: v for k, v in result.info.get("cache", {}).items() if isinstance(v, dict)}
    hits = "; ".join(
        f"{ns} {c.get('hits', 0)} from the cache, {c.get('misses', 0)} computed"
        + (f" ({c['rebuilt']} rebuilt)" if c.get("rebuilt") else "")
        for ns, c in cache.items()
        if any(c.values())
    )
    timing = f"wall {wall:.1f} s" + (f": {', '.join(parts)}" if parts else "") if wall is not None else ""
    root = result.info.get("cache", {}).get("root", "")
    return (
        f"wrote {out}/ {len(files)} files: {', '.join(files)} ({timing}); cache {root}: "
        f"{hits or 'nothing read or written'}"
    )
