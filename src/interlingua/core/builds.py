"""Built model folders (tokenwise merges, weight merges, OT fusions, converted GGUFs): what they have in common.

Each build writes a model folder plus a JSON record (its recipe, content key
and the sha256 of every file it wrote, the record itself written last) into a
temporary sibling folder and renames it into place. Every reuse checks the
record against the files (:func:`build_problem`; hashes come from
:func:`interlingua.core.hashing.file_sha256`, cached per process and in the
store by path, size, mtime, inode and ctime, so an unchanged folder is read
once): a missing or changed file makes the folder damaged, and the caller
rebuilds it (:func:`discard_damaged_build` moves the store's own folder out of the way
first). A later build of the same key finds the folder intact and returns its
record instead of writing anything.

:func:`build_folder` is the one place a build folder is staged: a fresh
temporary sibling of its destination (same file system; named like the
store's temporary files, ``.tmp-<host>-<pid>-<name>-*``, so a sweep knows a
dead writer's; the umask's mode, not ``mkdtemp``'s 0700), removed when the
build fails or is not needed. The finished folder is then moved in by
:func:`install_build` (never replacing anything: a free path or an empty
folder, through :func:`interlingua.core.outputs.install_folder`, for merges,
fusions and the zoo) or by :func:`interlingua.data.models.cachefiles.publish_dir`
(the store's converted GGUF copies, which replaces a stale copy).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from interlingua.core.hashing import file_sha256

__all__ = [
    "build_folder",
    "build_problem",
    "discard_damaged_build",
    "files_record",
    "install_build",
    "library_versions",
    "previous_build",
    "verify_files",
]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def build_folder(out: Path, error: Callable[[Path, OSError], Exception]) -> Iterator[Path]:
    """A fresh temporary folder beside ``out`` to build it in; removed on leaving unless it was moved into place.

    ``error(parent, exc)`` is raised (from None) when the folder cannot be created: the caller's own error
    class, naming the folder and what to do.
    """
    from interlingua.core.outputs import discard_build
    from interlingua.core.store import tmp_prefix

    out = Path(out)
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{tmp_prefix()}{out.name}-", dir=parent))
        tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would make the build private once moved in
    except OSError as exc:
        raise error(parent, exc) from None
    try:
        yield tmp
    finally:
        discard_build(tmp)  # a build moved into place is no longer there


def install_build(
    tmp: Path, out: Path, record_file: str, key: str, refuse: Callable[[Path], Exception]
) -> dict[str, Any] | None:
    """Move the finished build ``tmp`` (its record written last) to ``out``; None when it was moved in.

    Nothing at ``out`` is replaced (:func:`interlingua.core.outputs.install_folder`): when ``out`` already holds an
    intact build of the same ``key`` (another process finished it first), its record is returned; anything
    else there raises ``refuse(out)``.
    """
    from interlingua.core.outputs import install_folder

    if install_folder(tmp, out):
        return None
    if previous_build(out, record_file, key) is None:
        raise refuse(out)
    return json.loads((Path(out) / record_file).read_text(encoding="utf-8"))


def files_record(folder: Path) -> dict[str, str]:
    """sha256 of every file directly in ``folder`` (the ``files`` entry of a build record), by name."""
    return {p.name: file_sha256(p) for p in sorted(Path(folder).iterdir()) if p.is_file()}


def verify_files(folder: Path, files: Any) -> str | None:
    """None when every file ``files`` lists (name -> sha256) is in ``folder`` with that sha256; else what is wrong."""
    if not isinstance(files, Mapping) or not files:
        return "its record lists no files"
    for name, digest in sorted(files.items()):
        path = Path(folder) / str(name)
        if not path.is_file():
            return f"{name} is missing"
        if file_sha256(path) != digest:
            return f"{name} fails its sha256 (changed on disk)"
    return None


def build_problem(out: Path, record_file: str, key: str | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None) for an intact build in ``out`` (the same ``key`` when given, every file's sha256); else
    (None, what is wrong)."""
    try:
        record = json.loads((Path(out) / record_file).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"{record_file} is missing"
    except (OSError, ValueError) as exc:
        return None, f"{record_file} is unreadable ({exc})"
    if not isinstance(record, dict):
        return None, f"{record_file} is not a record"
    if key is not None and record.get("key") != key:
        return None, f"{record_file} records another build"
    problem = verify_files(Path(out), record.get("files"))
    return (record, None) if problem is None else (None, problem)


def previous_build(out: Path, record_file: str, key: str) -> dict[str, Any] | None:
    """The record of an identical, intact previous build in ``out`` (same key, every file's sha256); else None."""
    return build_problem(out, record_file, key)[0]


def discard_damaged_build(out: Path) -> None:
    """Move the store's own damaged build folder ``out`` aside (one rename) and delete it, so it can be rebuilt.

    Only for folders in the store's namespaces (``models/merges``, ``models/tokenwise``,
    ``models/gguf-converted``), never for a user's folder.
    """
    from interlingua.core.store import tmp_prefix

    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return
    aside = Path(tempfile.mkdtemp(prefix=f"{tmp_prefix()}damaged-", dir=out.parent))
    os.replace(out, aside / out.name)
    shutil.rmtree(aside, ignore_errors=True)


def library_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed version of each package (``"absent"`` when it is not installed), for build records."""
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out
