"""File content hashes, cached: the store's ``hashes/`` namespace.

A file's sha256 is cached the way a build system caches it: keyed by the
file's path, size, mtime, inode and ctime, in memory for the process and on
disk under the store's ``hashes/`` folder (one small JSON entry per file), so
a rerun, a fingerprint or a merge's content key does not read gigabytes of
weights again. A file is hashed again whenever any of those changes (a
rewrite, a copy, ``touch``; setting the mtime back still moves the ctime). An
entry is written to disk only for a file left unmodified for
:data:`SETTLED_SECONDS` before it was hashed: a file changed twice within
the file system's timestamp granularity keeps its size and times ("racily
clean" in git's words), and such a hash is kept in memory only. Entries are
checked when read (the whole key, a sha256-shaped value); a damaged or
unreadable one is ignored and the file hashed again, and a cache folder that
cannot be written only costs the speed-up. Imports nothing heavy.

The store's own build records (:mod:`interlingua.core.builds`) and ownership rules read it, so it lives
beside them; which files make up a checkpoint is :mod:`interlingua.data.models.hashing`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["SETTLED_SECONDS", "file_sha256", "files_sha256", "json_sha256", "remember_sha256", "use_hash_cache"]


_StatKey = tuple[str, int, int, int, int]
_HASH_CACHE: dict[_StatKey, str] = {}
_HASH_LOCK = threading.Lock()
_CHUNK = 1 << 20
#: Seconds a file must have stood unmodified before its hash is kept on disk (see the module docstring).
SETTLED_SECONDS = 2.0
_DISK_FOLDER: Path | None = None
_DISK_WRITES = True  # False while ``validate`` runs: hashes are read from disk, never written


def use_hash_cache(folder: str | Path | None, *, write: bool = True) -> None:
    """Keep file hashes on disk in ``folder`` from now on (a run's store's ``hashes/``); None: the default store's.
    ``write=False``: read what is there, write nothing (``validate`` changes nothing on disk)."""
    global _DISK_FOLDER, _DISK_WRITES
    _DISK_FOLDER = Path(folder).expanduser() if folder is not None else None
    _DISK_WRITES = write


def _disk_folder() -> Path:
    if _DISK_FOLDER is not None:
        return _DISK_FOLDER
    from interlingua.core.store import default_cache_dir

    return default_cache_dir() / "hashes"


def _key(path: Path) -> _StatKey:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _entry_path(key: _StatKey) -> Path:
    # the entry's file name only (blake2b: sha256 stays the hash of file contents alone)
    return _disk_folder() / f"{hashlib.blake2b(json.dumps(key).encode(), digest_size=20).hexdigest()}.json"


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _read_entry(key: _StatKey) -> str | None:
    try:
        entry = json.loads(_entry_path(key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != list(key) or not _is_sha256(entry.get("sha256")):
        return None
    return entry["sha256"]


def _write_entry(key: _StatKey, value: str, hashed_at_ns: int) -> None:
    """Keep ``value`` on disk when the file had settled before it was hashed; never raises."""
    if not _DISK_WRITES or hashed_at_ns - max(key[2], key[4]) < SETTLED_SECONDS * 1e9:
        return
    from interlingua.core.store import tmp_prefix

    path = _entry_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=tmp_prefix(), suffix=".part", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": list(key), "sha256": value}, fh)
            os.replace(tmp, path)  # no fsync: a torn entry fails its check on reading and is hashed again
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, cached by (path, size, mtime, inode, ctime) in memory and in the store's ``hashes/``."""
    p = Path(path)
    key = _key(p)
    with _HASH_LOCK:
        cached = _HASH_CACHE.get(key)
    if cached is not None:
        return cached
    value = _read_entry(key)
    if value is None:
        started = time.time_ns()
        digest = hashlib.sha256()
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(block)
        value = digest.hexdigest()
        if _key(p) == key:  # unchanged while it was read
            _write_entry(key, value, started)
        else:
            return value
    with _HASH_LOCK:
        _HASH_CACHE[key] = value
    return value


def remember_sha256(path: str | Path, value: str) -> None:
    """Record a sha256 computed or verified elsewhere (a package's own check, bytes just written)."""
    key = _key(Path(path))
    with _HASH_LOCK:
        _HASH_CACHE[key] = value
    _write_entry(key, value, time.time_ns())


def files_sha256(paths: list[Path], root: Path | None = None) -> str:
    """One sha256 over several files: sorted (relative name, file sha256) pairs."""
    entries = sorted((str(p.relative_to(root)) if root is not None else p.name, file_sha256(p)) for p in paths)
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def json_sha256(payload: Any) -> str:
    """sha256 of a canonical JSON encoding."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
