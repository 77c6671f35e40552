"""Writes under the model cache folder: checked up front, atomic, and clear when they fail.

Everything the models subpackage writes (an assembled packaged GGUF, the
converted copy of a GGUF) goes through here, through the store's
:func:`interlingua.core.store.atomic_write` (single files) or through
:func:`interlingua.core.builds.build_folder` (folders): the folder is created
and probed before any expensive work, files and folders are written under a
temporary name in the same folder and renamed into place (readers see the
old state or the new one, never half a file), and a folder that cannot be
written (read-only, a file in the way, disk full) raises
:class:`~interlingua.core.errors.StoreError` naming the folder and what to do
instead of an ``OSError`` traceback. Temporary names follow the store's
convention (``.tmp-<host>-<pid>-...``), so :func:`sweep_stale` can remove
what a killed process left behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from pathlib import Path

from interlingua.core.errors import StoreError
from interlingua.core.ownership import is_store_temp
from interlingua.core.store import host_tag, pid_alive, tmp_prefix

STALE_SECONDS = 24 * 3600
ADVICE = (
    "make it writable, or choose another model cache folder: the run's `cache_dir` "
    "(--cache-dir; models go under its models/ folder) or $INTERLINGUA_MODEL_CACHE"
)


def _file_in_the_way(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate if not candidate.is_dir() else None
    return None


def store_error(folder: Path, what: str, exc: BaseException) -> StoreError:
    """A :class:`StoreError` for ``folder`` that says why and what to do."""
    blocker = _file_in_the_way(folder)
    if blocker is not None:
        return StoreError(
            f"cannot write the {what} under {folder}: {blocker} is a file, not a folder. "
            f"Remove or rename that file, or choose another model cache folder: the run's "
            "`cache_dir` (--cache-dir) or $INTERLINGUA_MODEL_CACHE"
        )
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(
            f"cannot write the {what} under {folder}: the disk is full ({reason}). Free some space "
            "or choose another model cache folder: the run's `cache_dir` (--cache-dir) or "
            "$INTERLINGUA_MODEL_CACHE"
        )
    return StoreError(f"cannot write the {what} under {folder}: {reason}; {ADVICE}")


def writable_dir(folder: Path, what: str) -> Path:
    """Create ``folder`` (with parents) and check that files can be created in it.

    Raises :class:`StoreError` naming the folder (read-only, a file in the
    way, no permission) before any expensive work starts.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f"{tmp_prefix()}probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise store_error(folder, what, exc) from exc
    return folder


def sweep_stale(folder: Path) -> list[Path]:
    """Remove temporary files and folders in ``folder`` that no running writer owns.

    One of this host whose process is gone (killed mid-write), or any older
    than a day. Returns what was removed; never raises.
    """
    removed: list[Path] = []
    own = f".tmp-{host_tag()}-"
    now = time.time()
    try:
        candidates = list(folder.glob(".tmp-*"))
    except OSError:
        return removed
    for tmp in candidates:
        if not is_store_temp(tmp.name):  # named like ours but not by our writers (.tmp-notes): the user's
            continue
        try:
            stale = now - tmp.lstat().st_mtime > STALE_SECONDS
        except OSError:
            continue
        if not stale and tmp.name.startswith(own):
            pid = tmp.name[len(own) :].split("-", 1)[0]
            stale = pid.isdigit() and not pid_alive(int(pid))
        if stale:
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                try:
                    tmp.unlink()
                except OSError:
                    continue
            removed.append(tmp)
    return removed


def publish_dir(tmp: Path, final: Path, what: str) -> Path:
    """Atomically move the finished folder ``tmp`` to ``final``.

    A stale ``final`` (incomplete or of another content) is moved aside first
    and deleted after the rename. When another process publishes the same
    folder at the same moment, its copy is kept (both are the same content).
    """
    aside: Path | None = None
    try:
        if final.exists() or final.is_symlink():
            aside = final.with_name(f"{tmp_prefix()}old-{final.name}")
            os.replace(final, aside)
        try:
            os.replace(tmp, final)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and final.is_dir():
                return final  # published concurrently by another process
            raise
    except OSError as exc:
        raise store_error(final.parent, what, exc) from exc
    finally:
        if aside is not None:
            if aside.is_dir() and not aside.is_symlink():
                shutil.rmtree(aside, ignore_errors=True)
            else:
                aside.unlink(missing_ok=True)
    return final


def check_writable(folder: Path, what: str) -> Path:
    """Check, without writing anything, that ``folder`` could be created and written.

    For pre-flight checks: the nearest existing ancestor must be a folder this
    process may write to. Raises :class:`StoreError` otherwise.
    """
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return folder
    if not existing.is_dir():
        raise store_error(folder, what, NotADirectoryError(errno.ENOTDIR, "not a folder"))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise store_error(folder, what, PermissionError(errno.EACCES, f"{existing} is not writable"))
    return folder
