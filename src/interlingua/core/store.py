"""The one content-addressed store: every cached thing, one root, one atomic writer.

Layout under the root (``--cache-dir``, ``cache_dir:``, ``$INTERLINGUA_CACHE`` or
``~/.cache/interlingua``)::

    representations/<model>/<lang>.<pooling>.<key[:32]>.safetensors
    comparisons/<key>.json        rows of one pair x pooling comparison
    <namespace>/<key>.json        every other task kind's output (interlingua.kinds: alignments, maps, ...)
    facts/<fingerprint>.json      model facts recorded at the last load
    models/                       packaged models and converted GGUF copies
    hashes/                       file sha256s by path, size, mtime, inode, ctime (core/hashing.py)

Every entry is verified when read: safetensors entries carry the sha256 of
their tensor bytes, each tensor's dtype and shape and the inputs of their key
in the header, and a sha256 of that header metadata; JSON entries are
wrapped in an envelope ``{"key", "sha256", "payload"}`` whose checksum covers
the canonical payload. A damaged or mismatching entry is reported (a warning
naming the file), counted as rebuilt and recomputed; it is never served.

Writes go to a temporary file in the destination folder, are fsynced and
renamed into place, so a run killed at any point leaves only whole entries.
A temporary file is named after the host and process that writes it
(``.tmp-<host>-<pid>-*.part``); :meth:`Store.check_writable` removes those of
processes that no longer run (and any older than a day), so a killed run
leaves nothing behind once the next run starts.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import socket
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.core.errors import InterlinguaError, StoreError
from interlingua.core.ownership import is_store_temp
from interlingua.core.safetensors_header import read_safetensors_header

__all__ = [
    "OWN_NAMESPACES",
    "DiskFullError",
    "Store",
    "atomic_write",
    "canonical_json",
    "content_key",
    "default_cache_dir",
    "is_disk_full",
    "json_safe",
    "sha256_hex",
]

CACHE_ENV = "INTERLINGUA_CACHE"
_TMP_PREFIX = ".tmp-"
_TMP_SUFFIX = ".part"
#: The store's own top-level folders beside the entry namespaces, which the pipeline gives
#: (:func:`interlingua.pipeline.registry.entry_namespaces`: every task kind's, and the models' facts).
OWN_NAMESPACES = ("models", "hashes", "zoo")


#: A temporary file older than this is stale whoever wrote it (another host, an old name).
STALE_TMP_SECONDS = 24 * 3600


def host_tag() -> str:
    """This machine's name, letters and digits only: tags temporary files and folders with their writer."""
    return re.sub(r"[^A-Za-z0-9]+", "", socket.gethostname())[:32] or "host"


def tmp_prefix() -> str:
    """``.tmp-<host>-<pid>-``: lets a later run tell a dead writer's leftovers from live writes."""
    return f"{_TMP_PREFIX}{host_tag()}-{os.getpid()}-"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (a writer whose leftovers must not be swept)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. EPERM: it exists, under another user
        return True
    return True


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: Entries are readable as any file this user creates (mkstemp alone would make them 0600,
#: which breaks a cache shared by a group).
_FILE_MODE = 0o666 & ~_current_umask()


def default_cache_dir() -> Path:
    """``$INTERLINGUA_CACHE`` or ``~/.cache/interlingua``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "interlingua"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_key(payload: dict[str, Any]) -> str:
    """A task's or entry's key: the SHA-256 of its inputs' canonical JSON (same inputs, same key, anywhere)."""
    return sha256_hex(canonical_json(payload))


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no spaces); numpy scalars become Python numbers."""

    def default(o: Any) -> Any:
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return str(o)
        raise TypeError(f"cannot store {type(o).__name__} as JSON")

    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=default, allow_nan=True).encode("utf-8")


def json_safe(value: Any, *, infinite: bool = False) -> Any:
    """``value`` as plain JSON data: numpy scalars become Python numbers, tuples lists, keys strings, NaN None.

    A stored row then reads back equal to the one computed (NaN != NaN). ``infinite``: keep +-inf (JSON
    entries allow it; the run's rows keep an infinite value), else it becomes None too (build records).
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v, infinite=infinite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, infinite=infinite) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and (value != value or not (infinite or math.isfinite(value))):
        return None
    return value


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: What a full disk or quota says, in an OSError's errno or in another library's message (safetensors
#: raises ``SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, ... })``).
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXT = ("No space left on device", "StorageFull", "Disk quota exceeded", "QuotaExceeded", "code: 28,")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota) is full, whichever library raised it."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return True
    return any(t in str(exc) for t in _FULL_TEXT)


def full_reason(exc: BaseException) -> str:
    """The OS's words for a full disk or quota, whichever library reported it."""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return os.strerror(exc.errno)
    return os.strerror(errno.EDQUOT if "uota" in str(exc) else errno.ENOSPC)


def human_bytes(n: float) -> str:
    """Bytes as B, KiB, MiB or GiB with one decimal."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def free_bytes(folder: Path) -> int | None:
    """Bytes free to this user on the filesystem holding ``folder`` (its nearest existing parent), or None."""
    for p in (folder, *folder.parents):
        try:
            st = os.statvfs(p)
        except OSError:
            continue
        return st.f_bavail * st.f_frsize
    return None


class DiskFullError(StoreError):
    """A write failed because the disk holding ``folder`` is full; nothing partial was left behind.

    ``writing`` is the size of what was being written (bytes, when known) and ``still_needed`` what the
    run still has to write, when the pipeline could estimate it (:meth:`with_need`).
    """

    def __init__(
        self,
        folder: Path,
        path: Path,
        writing: int | None,
        reason: str = os.strerror(errno.ENOSPC),
        what: str = "cache",
        still_needed: str | None = None,
    ) -> None:
        self.folder, self.path, self.writing, self.reason = folder, path, writing, reason
        self.what, self.still_needed = what, still_needed
        free = free_bytes(folder)
        size = f" ({human_bytes(writing)})" if writing else ""
        need = (
            f"; the run still needs {still_needed}"
            if still_needed
            else (f"; free at least {human_bytes(writing)}" if writing else "")
        )
        where = "--cache-dir" if what == "cache" else "-o"
        super().__init__(
            f"the disk holding the {what} folder {folder} is full ({reason}): could not write {path.name}{size}"
            f"{f', {human_bytes(free)} free there' if free is not None else ''}{need}. Free some space there "
            f"or choose another folder with {where}; nothing partial was kept, and a rerun resumes from what "
            "is already stored"
        )

    def with_need(self, still_needed: str) -> DiskFullError:
        """The same error, saying how much the run still needs (the pipeline knows, the writer does not)."""
        return DiskFullError(self.folder, self.path, self.writing, self.reason, self.what, still_needed)


def atomic_write(
    path: str | os.PathLike[str], write: bytes | Callable[[Path], None], *, size: int | None = None
) -> None:
    """Write ``path`` atomically: bytes, or a callable filling a temporary path.

    The temporary file lives in the destination folder (same file system), is
    fsynced, then renamed over ``path``; on any failure it is removed and
    ``path`` is untouched. Raises :class:`StoreError` when the folder cannot be
    created or written, :class:`DiskFullError` (naming the folder and ``size``,
    the bytes being written when the caller knows them) when its disk is full,
    whatever library reported it.
    """
    path = Path(path)
    if isinstance(write, (bytes, bytearray)):
        size = len(write)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=tmp_prefix(), suffix=_TMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFullError(path.parent, path, size, full_reason(exc)) from None
        raise StoreError(
            f"cannot write under {path.parent} ({exc.strerror or exc}); make it a writable folder "
            "or choose another one with --cache-dir / -o"
        ) from None
    tmp = Path(tmp_name)
    try:
        if isinstance(write, (bytes, bytearray)):
            with os.fdopen(fd, "wb") as fh:
                fh.write(write)
                fh.flush()
                os.fsync(fh.fileno())
        else:
            os.close(fd)
            write(tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, Exception) and is_disk_full(exc):
            raise DiskFullError(path.parent, path, size, full_reason(exc)) from None
        if isinstance(exc, OSError) and not isinstance(exc, InterlinguaError):
            raise StoreError(
                f"could not write {path} ({exc.strerror or exc}); check free space and permissions"
            ) from None
        raise
    _fsync_dir(path.parent)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("._") or "x"


_RESERVED_META = ("key", "checksums", "layout", "header_sha256")


def _layout(arrays: Mapping[str, np.ndarray]) -> dict[str, list[Any]]:
    """Each tensor's dtype and shape: the bytes' checksum alone would accept a reshaped tensor."""
    return {n: [str(a.dtype), list(a.shape)] for n, a in sorted(arrays.items())}


def _header_digest(meta: Mapping[str, Any]) -> str:
    """sha256 of every metadata field but the digest itself (the inputs, truncation, layout)."""
    return sha256_hex(canonical_json({k: v for k, v in meta.items() if k != "header_sha256"}))


_TALLY_LOCK = threading.Lock()


class Store:
    """Content-addressed entries under one root, verified on read, written atomically.

    ``counts[namespace]`` holds ``hits``, ``misses`` and ``rebuilt``: entries
    read, absent or invalid (an invalid entry is warned about, counted as a
    miss and recomputed by the caller).
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_cache_dir()
        self.counts: dict[str, dict[str, int]] = {}

    def _tally(self, namespace: str, what: str) -> None:
        with _TALLY_LOCK:  # concurrent extractions (pipeline.workers) read and write one store
            bucket = self.counts.setdefault(namespace, {"hits": 0, "misses": 0, "rebuilt": 0})
            bucket[what] += 1

    # -- places ----------------------------------------------------------------------------
    def folder(self, namespace: str) -> Path:
        """The folder of one namespace (``representations``, ``comparisons``, ``facts``, ``models``)."""
        return self.root / namespace

    def check_writable(self, sweep: Iterable[str] = ()) -> None:
        """Raise :class:`StoreError` unless the root can hold new entries (checked before any work).

        Then :meth:`sweep` the entry namespaces ``sweep`` (the pipeline's: the store knows no task kind)."""
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(
                f"cache folder {self.root} exists and is a file; give a folder with --cache-dir "
                f"(or cache_dir: / ${CACHE_ENV})"
            )
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".probe", dir=self.root)
            os.close(fd)
            os.unlink(name)
        except OSError as exc:
            raise StoreError(
                f"cache folder {self.root} is not writable ({exc.strerror or exc}); give a writable "
                f"folder with --cache-dir (or cache_dir: / ${CACHE_ENV})"
            ) from None
        self.sweep(sweep)

    def sweep(self, namespaces: Iterable[str]) -> list[Path]:
        """Remove temporary files that no running writer owns from the entry ``namespaces``; return them.

        A temporary file of this host whose process is gone (a run killed
        mid-write) is removed, and so is any temporary file older than
        :data:`STALE_TMP_SECONDS`; a live writer's file is kept. Only the
        given entry namespaces are swept (the pipeline's registry names them:
        :func:`interlingua.pipeline.registry.entry_namespaces`), and only files named as the store's
        writers name them (``.tmp-<host>-<pid>-*.part``), never a user's own files.
        """
        removed: list[Path] = []
        own = f"{_TMP_PREFIX}{host_tag()}-"
        now = time.time()
        for namespace in namespaces:
            folder = self.folder(namespace)
            if not folder.is_dir():
                continue
            for tmp in folder.rglob(f"{_TMP_PREFIX}*{_TMP_SUFFIX}"):
                if not is_store_temp(tmp.name):  # a user's file named like one (.tmp-notes.part) is theirs
                    continue
                try:
                    st = tmp.lstat()
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                stale = now - st.st_mtime > STALE_TMP_SECONDS
                if not stale and tmp.name.startswith(own):
                    pid = tmp.name[len(own) :].split("-", 1)[0]
                    stale = pid.isdigit() and not pid_alive(int(pid))
                if stale:
                    try:
                        tmp.unlink()
                    except OSError:
                        continue
                    removed.append(tmp)
        return removed

    def stats(self) -> dict[str, dict[str, int]]:
        """Per namespace: entries read (hits), absent or invalid (misses), invalid (rebuilt)."""
        return {ns: dict(c) for ns, c in self.counts.items()}

    def _rebuild(self, namespace: str, path: Path, why: str) -> None:
        warnings.warn(f"cache entry {path} {why}; it is ignored and rebuilt", UserWarning, stacklevel=3)
        self._tally(namespace, "rebuilt")
        self._tally(namespace, "misses")

    # -- JSON entries ----------------------------------------------------------------------
    def json_path(self, namespace: str, key: str) -> Path:
        return self.folder(namespace) / f"{_safe_name(key)}.json"

    def put_json(self, namespace: str, key: str, payload: Any) -> Path:
        """Store ``payload`` under ``key`` with a checksum envelope."""
        body = canonical_json(payload)
        envelope = {"key": key, "sha256": sha256_hex(body), "payload": json.loads(body)}
        path = self.json_path(namespace, key)
        atomic_write(path, json.dumps(envelope, indent=1, allow_nan=True).encode("utf-8"))
        return path

    def get_json(self, namespace: str, key: str) -> Any | None:
        """The verified payload, or None when absent or invalid (then counted as rebuilt)."""
        path = self.json_path(namespace, key)
        if not path.exists():
            self._tally(namespace, "misses")
            return None
        try:
            envelope = json.loads(path.read_text(encoding="utf-8"))
            body = canonical_json(envelope["payload"])
            ok = envelope.get("key") == key and envelope.get("sha256") == sha256_hex(body)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self._rebuild(namespace, path, f"is unreadable ({type(exc).__name__})")
            return None
        if not ok:
            self._rebuild(namespace, path, "fails its checksum (edited or damaged on disk)")
            return None
        self._tally(namespace, "hits")
        return envelope["payload"]

    # -- array entries ---------------------------------------------------------------------
    def arrays_path(self, namespace: str, key: str, *, folder: str = "", stem: str = "") -> Path:
        name = f"{_safe_name(stem)}.{key[:32]}" if stem else key
        base = self.folder(namespace) / _safe_name(folder) if folder else self.folder(namespace)
        return base / f"{name}.safetensors"

    def put_arrays(self, path: Path, key: str, arrays: Mapping[str, np.ndarray], meta: Mapping[str, str]) -> None:
        """Write named arrays and string metadata; each tensor's sha256, dtype and shape go in the
        header, with a sha256 over the whole metadata."""
        from safetensors.numpy import save_file

        arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
        header = {str(k): str(v) for k, v in meta.items() if str(k) not in _RESERVED_META}
        header["key"] = key
        header["checksums"] = json.dumps({n: sha256_hex(a.tobytes()) for n, a in sorted(arrays.items())})
        header["layout"] = json.dumps(_layout(arrays))
        header["header_sha256"] = _header_digest(header)
        size = sum(a.nbytes for a in arrays.values()) + len(canonical_json(header)) + 1024  # + the tensors' index
        atomic_write(path, lambda tmp: save_file(arrays, str(tmp), metadata=header), size=size)

    def get_arrays(
        self, namespace: str, path: Path, key: str, expected: Mapping[str, str]
    ) -> tuple[dict[str, np.ndarray], dict[str, str]] | None:
        """Verified ``(arrays, header metadata)``, or None when absent or invalid (then counted as rebuilt)."""
        from safetensors.numpy import load

        if not path.exists():
            self._tally(namespace, "misses")
            return None
        try:
            data = path.read_bytes()
            meta = read_safetensors_header(data)[0].get("__metadata__") or {}
            arrays = load(data)
            checksums = json.loads(meta.get("checksums", "{}"))
            if not isinstance(checksums, dict):
                raise ValueError("checksums is not a JSON object")
        except Exception as exc:  # any parse failure means a damaged file
            self._rebuild(namespace, path, f"is unreadable ({type(exc).__name__}: {exc})")
            return None
        problem = None
        if "header_sha256" not in meta:
            problem = "has no header checksum (written by an older interlingua)"
        elif meta["header_sha256"] != _header_digest(meta):
            problem = "fails its header checksum (metadata edited or damaged on disk)"
        elif meta.get("key") != key:
            problem = "belongs to another key"
        elif meta.get("layout") != json.dumps(_layout(arrays)):
            problem = f"holds tensors of layout {_layout(arrays)}, not the {meta.get('layout')} it was written with"
        else:
            for name, value in expected.items():
                if meta.get(name) != str(value):
                    problem = f"has {name}={meta.get(name)!r}, expected {value!r}"
                    break
        if problem is None and set(checksums) != set(arrays):
            problem = f"holds tensors {sorted(arrays)} but checksums for {sorted(checksums)}"
        if problem is None:
            for name, arr in arrays.items():
                if checksums[name] != sha256_hex(np.ascontiguousarray(arr).tobytes()):
                    problem = f"fails the checksum of {name!r} (bytes changed on disk)"
                    break
        if problem is not None:
            self._rebuild(namespace, path, problem)
            return None
        self._tally(namespace, "hits")
        return arrays, dict(meta)
