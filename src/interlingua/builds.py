"""Built model folders (tokenwise merges, weight merges, OT fusions): what they have in common.

Each build writes a model folder plus a JSON record (its recipe, content key
and the sha256 of every file it wrote) into a temporary sibling folder and
renames it into place. A later build of the same key finds the folder intact
and returns its record instead of writing anything.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterable

from interlingua.models.hashing import file_sha256

__all__ = ["library_versions", "previous_build"]


def previous_build(out: Path, record_file: str, key: str) -> dict[str, Any] | None:
    """The record of an identical, intact previous build in ``out`` (same key, every file's sha256); else None."""
    try:
        record = json.loads((out / record_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("files"), dict):
        return None
    for name, digest in record["files"].items():
        path = out / name
        if not path.is_file() or file_sha256(path) != digest:
            return None
    return record


def library_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed version of each package (``"absent"`` when it is not installed), for build records."""
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out
