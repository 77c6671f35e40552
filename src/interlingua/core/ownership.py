"""What under a store root is the store's own: the rule ``interlingua cache`` lists, sizes and clears by.

A store root is often a folder the user also keeps other things in (``cache_dir: .`` in a project that has
its own ``models/`` folder, a run's output placed under ``representations/``). The store therefore never
owns a folder because of its name: it owns only what it recognises as written by itself, and every entry
it writes says so in its own format (so caches written by any earlier version are recognised too, with no
migration):

- a JSON entry (any task kind's namespace, ``facts/``) is a ``*.json`` file that opens with the store's
  checksum envelope ``{"key": ..., "sha256": <64 hex>, "payload": ...``;
- an array entry is a ``*.safetensors`` file whose header metadata holds the store's ``key`` and
  ``checksums`` fields (representations, alignments, transport plans, fitted maps);
- a built model folder is a folder named by its key under ``models/gguf-converted/`` (64 hex),
  ``models/merges/`` or ``models/tokenwise/`` (32 hex) that holds its build record (``interlingua-gguf.json``,
  ``merge.json``, ``tokenwise_merge.json``); a zoo family is ``zoo/<32 hex>/`` with its ``manifest.json``,
  and ``zoo/refs/<name>.json`` a reference ``{"name", "key", "folder"}``;
- an assembled packaged GGUF is ``models/<packaged name>/<its file>`` whose sha256 is the package's (the
  caller says which: :func:`scan_namespace`'s ``packaged``);
- a file-hash record is ``hashes/<40 hex>.json`` holding ``{"key": [...], "sha256": <64 hex>}``;
- a temporary file or folder of the store's writers is named ``.tmp-<host>-<pid>-...`` (older versions:
  ``.tmp-<8 random letters or digits>.part``).

A folder inside a namespace belongs to the store only when everything in it does; a folder that holds
anything else (a user's checkpoint, a run's output folder, a note) is *foreign*: it is kept whole and
listed, never opened for removal. Symbolic links and empty folders are foreign too (the store writes
neither). Anything at the root that is not a namespace is never looked into.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from interlingua.core.safetensors_header import read_safetensors_header

__all__ = ["NamespaceScan", "PackagedCheck", "is_store_temp", "scan_namespace"]

#: ``(path, package name) -> bool``: whether ``models/<package name>/<file>`` is that packaged model's assembled
#: GGUF (given by the caller: the store does not know the packaged models).
PackagedCheck = Callable[[Path, str], bool]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
#: ``.tmp-<host>-<pid>-...``: the store's temporary files (``*.part``), probes and build folders; or
#: ``.tmp-<8 random>.part``, as ``tempfile.mkstemp`` named them before writers were tagged with host and pid.
_TEMP = re.compile(r"\.tmp-[A-Za-z0-9]*-\d+-.+|\.tmp-[a-z0-9_]{8}\.part")
_ENVELOPE = re.compile(rb'\{\s*"key":\s*"(?:[^"\\]|\\.)*",\s*"sha256":\s*"[0-9a-f]{64}",\s*"payload":')
#: The largest safetensors header read to recognise an entry (the store's are a few KiB).
_MAX_HEADER = 16 * 1024 * 1024

#: ``models/<group>/<name>/``: (name pattern, build record) of the store's built model folders.
_BUILDS: dict[str, tuple[re.Pattern[str], str]] = {
    "gguf-converted": (_HEX64, "interlingua-gguf.json"),
    "merges": (_HEX32, "merge.json"),
    "tokenwise": (_HEX32, "tokenwise_merge.json"),
}


@dataclass
class NamespaceScan:
    """One namespace folder: the store's items in it (files or whole folders) and the foreign ones kept.

    ``entries`` counts the regular files of the store's items and ``size`` their bytes (each inode once);
    ``link`` is set when the namespace itself is a symbolic link or not a folder (never looked into).
    """

    name: str
    path: Path
    owned: list[Path] = field(default_factory=list)
    foreign: list[Path] = field(default_factory=list)
    entries: int = 0
    size: int = 0
    link: bool = False


def is_store_temp(name: str) -> bool:
    """Whether ``name`` is one of the store's temporary names (``.tmp-<host>-<pid>-...``)."""
    return _TEMP.fullmatch(name) is not None


def _regular(path: Path) -> os.stat_result | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _json_entry(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError:
        return False
    return _ENVELOPE.match(head) is not None


def _small_json(path: Path) -> object:
    try:
        if path.lstat().st_size > 1 << 20:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _array_entry(path: Path) -> bool:
    try:
        header, _ = read_safetensors_header(path, limit=_MAX_HEADER)
    except (OSError, ValueError):
        return False
    meta = header.get("__metadata__")
    return isinstance(meta, dict) and isinstance(meta.get("key"), str) and isinstance(meta.get("checksums"), str)


def _hash_record(path: Path) -> bool:
    if not (_HEX40.fullmatch(path.stem) and path.suffix == ".json"):
        return False
    data = _small_json(path)
    return (
        isinstance(data, dict)
        and set(data) == {"key", "sha256"}
        and isinstance(data["key"], list)
        and isinstance(data["sha256"], str)
        and _HEX64.fullmatch(data["sha256"]) is not None
    )


def _zoo_ref(path: Path) -> bool:
    data = _small_json(path)
    return isinstance(data, dict) and set(data) == {"name", "key", "folder"} and path.stem == data.get("name")


def _owned_file(path: Path, rel: tuple[str, ...], namespace: str, packaged: PackagedCheck | None) -> bool:
    """Whether the regular file at ``namespace/*rel`` is one of the store's entries."""
    name = rel[-1]
    if is_store_temp(name):
        return True
    if namespace == "hashes":
        return len(rel) == 1 and _hash_record(path)
    if namespace == "zoo":
        return rel[:1] == ("refs",) and len(rel) == 2 and name.endswith(".json") and _zoo_ref(path)
    if namespace == "models":
        return len(rel) == 2 and packaged is not None and packaged(path, rel[0])
    if name.endswith(".json"):
        return _json_entry(path)
    if name.endswith(".safetensors"):
        return _array_entry(path)
    return False


def _built_folder(path: Path, rel: tuple[str, ...], namespace: str) -> bool:
    """A whole model folder the store built (recognised by its place, key-shaped name and build record)."""
    if namespace == "models" and len(rel) == 2 and rel[0] in _BUILDS:
        pattern, record = _BUILDS[rel[0]]
        return pattern.fullmatch(rel[1]) is not None and _regular(path / record) is not None
    if namespace == "zoo" and len(rel) == 1:
        return _HEX32.fullmatch(rel[0]) is not None and _regular(path / "manifest.json") is not None
    return False


def _usage(path: Path, seen: set[tuple[int, int]]) -> tuple[int, int]:
    """(regular files, new bytes) of a file or a folder, never following symbolic links."""
    st = _regular(path)
    if st is not None:
        if (st.st_dev, st.st_ino) in seen:
            return 1, 0
        seen.add((st.st_dev, st.st_ino))
        return 1, st.st_size
    files = size = 0
    for dirpath, _dirs, names in os.walk(path, followlinks=False):
        for n in names:
            f, s = _usage(Path(dirpath) / n, seen)
            files += f
            size += s
    return files, size


def _classify(path: Path, rel: tuple[str, ...], namespace: str, packaged: PackagedCheck | None) -> bool:
    """Whether ``path`` (a file or folder at ``namespace/*rel``) is wholly the store's."""
    try:
        st = path.lstat()
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return False
    if stat.S_ISREG(st.st_mode):
        return _owned_file(path, rel, namespace, packaged)
    if not stat.S_ISDIR(st.st_mode):
        return False
    if is_store_temp(rel[-1]) or _built_folder(path, rel, namespace):
        return True
    try:
        children = sorted(os.listdir(path))
    except OSError:
        return False
    return bool(children) and all(_classify(path / c, (*rel, c), namespace, packaged) for c in children)


def scan_namespace(root: Path, name: str, *, packaged: PackagedCheck | None = None) -> NamespaceScan | None:
    """The store's items and the foreign ones in namespace ``name`` under ``root`` (None: no such folder).

    Items directly in the namespace folder are judged one by one; a folder among them is the store's only
    when everything in it is (see the module docs), else it is foreign and kept whole. ``packaged(path,
    name)``: whether a file ``models/<name>/<file>`` is packaged model ``name``'s assembled GGUF (the models
    layer knows the packages: :func:`interlingua.data.models.packaged.is_packaged_gguf`); None: no such
    file is the store's.
    """
    path = root / name
    if not os.path.lexists(path):
        return None
    scan = NamespaceScan(name, path)
    if path.is_symlink() or not path.is_dir():
        scan.link = True
        return scan
    seen: set[tuple[int, int]] = set()
    for child in sorted(os.listdir(path)):
        item = path / child
        if _classify(item, (child,), name, packaged):
            scan.owned.append(item)
            files, size = _usage(item, seen)
            scan.entries += files
            scan.size += size
        else:
            scan.foreign.append(item)
    return scan
