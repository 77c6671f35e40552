"""Writing into folders the user chose: the one module that replaces or removes anything there.

The rule: nothing in a user's folder is removed or replaced unless, *at that
moment*, it is a file interlingua wrote: an entry of the folder's
``manifest.json``, inside the folder once the path is resolved (no ``..``, no
absolute path, no symbolic link on the way), a regular file of the recorded
size and sha256. Everything else is the user's: files the manifest does not
list, files edited since interlingua wrote them, and every folder, symbolic
link, named pipe or socket the tool did not create.

"At that moment" is literal: a file is first moved aside under a hidden name
(``.<name>.aside-<host>-<pid>-<n>``, an atomic rename, so what is checked is
exactly what will go), then checked, then dropped; one that fails the check is
put back where it was. New files are moved in with a rename that never
replaces (``renameat2(RENAME_NOREPLACE)``, else a hard link), so a file the
user creates under an output's name while a run works is never overwritten:
the run stops with a message instead, everything it computed still cached.

What callers get:

- :func:`prepare_output` (before any work) decides whether a run folder may
  be written: a new or empty folder; an earlier run's folder whose files are
  unchanged and which holds nothing else; with ``--overwrite`` an earlier
  run's folder next to which the user added things (kept). A folder with no
  interlingua manifest, a manifest listing paths outside the folder, or (even
  with ``--overwrite``) an output edited since it was written is refused with
  a message that says what to do.
- :func:`write_outputs` builds the outputs in a temporary sibling folder
  (a failed build changes nothing), then renames it into place when the
  folder does not exist, or otherwise moves the files in one by one under the
  rule above: a manifest accepting both the earlier and the new version of
  each file goes first and the final one last, so a run killed in between
  leaves a folder the next run recognises as its own. Whatever appeared in
  the folder while the run worked stays.
- :func:`install_folder` moves a finished build folder (merges, fused models)
  to a path that is free or an empty folder, never replacing anything else;
  :func:`discard_build` removes the tool's own temporary build folder;
  :func:`write_file` writes one new file (``typology -o CSV``) and never
  replaces a different one.

What a killed run leaves next to or inside the folder (its build folder, a
file it had moved aside) is tidied by the next run, under the same rule.
The content-addressed store under the cache folder is not a user folder
(:mod:`interlingua.core.store` manages it).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import hashlib
import itertools
import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlingua import __version__
from interlingua.core.errors import OutputError
from interlingua.core.store import host_tag, pid_alive

__all__ = [
    "MANIFEST",
    "OutputTarget",
    "discard_build",
    "install_folder",
    "prepare_output",
    "read_manifest",
    "write_file",
    "write_outputs",
]

MANIFEST = "manifest.json"
_SHA = re.compile(r"[0-9a-f]{64}")
_ASIDE = re.compile(r"^\.(?P<name>.+)\.aside-(?P<host>[A-Za-z0-9]+)-(?P<pid>\d+)-\d+$")
_counter = itertools.count()

Version = tuple[str, "int | None"]  # (sha256, size); size None in manifests written before sizes were recorded


def sha256_file(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _tag() -> str:
    return f"{host_tag()}-{os.getpid()}"


# --------------------------------------------------------------------------- renames that never replace

_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_renameat2: Any = None  # resolved on first use: a ctypes function, or False where libc has none


def _libc_renameat2(src: Path, dst: Path) -> bool:
    """``renameat2(..., RENAME_NOREPLACE)``; False where the system or file system lacks it."""
    global _renameat2
    if _renameat2 is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError, TypeError):  # no such call (not Linux, old glibc)
            _renameat2 = False
    if _renameat2 is False:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _move_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``; FileExistsError when anything is at ``dst``, which is never replaced."""
    if _libc_renameat2(src, dst):
        return
    if not src.is_dir() or src.is_symlink():
        try:
            os.link(src, dst, follow_symlinks=False)  # fails with FileExistsError: the check and the act are one
        except FileExistsError:
            raise
        except OSError:
            pass  # no hard links here (some network / FUSE file systems): the checked rename below
        else:
            os.unlink(src)
            return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, "exists", str(dst))
    os.rename(src, dst)


# --------------------------------------------------------------------------- manifests


@dataclass(frozen=True)
class _Manifest:
    files: dict[str, frozenset[Version]]  # name -> the versions interlingua wrote under it
    raw: bytes  # the manifest's bytes as read: replacing it checks they are still the same
    replaces: str | None = None  # sha256 of the manifest this one replaced (a killed run may leave it aside)


def _hostile(folder: Path, entry: object, why: str) -> OutputError:
    return OutputError(
        f"{folder / MANIFEST} lists {entry!r}, {why}; interlingua never follows such an entry (the manifest was "
        f"edited or is not its own): choose a new output folder with -o/--output, or remove {MANIFEST} yourself "
        "once you have checked that every file in the folder is one you may lose"
    )


def _check_name(folder: Path, name: object) -> str:
    if not isinstance(name, str) or not name or "\x00" in name or "\\" in name:
        raise _hostile(folder, name, "which is not a file name")
    if name.startswith("/") or os.path.isabs(name):
        raise _hostile(folder, name, "an absolute path outside the output folder")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise _hostile(folder, name, "a path that leads outside the output folder or is not normalised")
    if name == MANIFEST:
        raise _hostile(folder, name, "the manifest itself")
    return name


def _version(folder: Path, name: str, value: object) -> Version:
    if isinstance(value, str):
        digest, size = value, None
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        digest, size = value
    else:
        raise _hostile(folder, name, f"with {value!r}, which is not a sha256")
    if not isinstance(digest, str) or not _SHA.fullmatch(digest):
        raise _hostile(folder, name, f"with {digest!r}, which is not a sha256")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise _hostile(folder, name, f"with size {size!r}")
    return digest, size


def _read_manifest(folder: Path) -> _Manifest | None:
    """The folder's manifest; None when there is no interlingua manifest; OutputError when it is hostile."""
    path = folder / MANIFEST
    try:
        if not stat.S_ISREG(path.lstat().st_mode):  # a link or a folder named manifest.json is the user's
            return None
        raw = path.read_bytes()
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "interlingua" or not isinstance(data.get("files"), dict):
        return None
    sizes = data["sizes"] if isinstance(data.get("sizes"), dict) else {}
    also = data["also"] if isinstance(data.get("also"), dict) else {}
    files: dict[str, set[Version]] = {}
    for name, digest in data["files"].items():
        _check_name(folder, name)
        files.setdefault(name, set()).add(_version(folder, name, [digest, sizes.get(name)]))
    for name, versions in also.items():
        _check_name(folder, name)
        if not isinstance(versions, list):
            raise _hostile(folder, name, f"with {versions!r} as its earlier versions")
        files.setdefault(name, set()).update(_version(folder, name, v) for v in versions)
    replaces = data.get("replaces")
    return _Manifest(
        {k: frozenset(v) for k, v in files.items()},
        raw,
        replaces if isinstance(replaces, str) and _SHA.fullmatch(replaces) else None,
    )


def read_manifest(folder: Path) -> dict[str, frozenset[Version]] | None:
    """What the folder's manifest says interlingua wrote there: name -> its (sha256, size) versions; None: no manifest.

    :class:`OutputError` when the manifest lists a path outside the folder (it is then not followed).
    """
    manifest = _read_manifest(folder)
    return None if manifest is None else dict(manifest.files)


def _manifest_bytes(
    files: dict[str, Version], also: dict[str, set[Version]] | None = None, replaces: bytes | None = None
) -> bytes:
    data: dict[str, object] = {
        "tool": "interlingua",
        "version": __version__,
        "files": {f: v[0] for f, v in sorted(files.items())},
        "sizes": {f: v[1] for f, v in sorted(files.items())},
    }
    if also:
        data["also"] = {f: sorted([list(v) for v in vs], key=str) for f, vs in sorted(also.items())}
    if replaces is not None:
        data["replaces"] = hashlib.sha256(replaces).hexdigest()
    return json.dumps(data, indent=1).encode("utf-8")


# --------------------------------------------------------------------------- what is in a folder


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISREG(mode):
        return "file"
    return "pipe" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "special file"


def _scan(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (relative name -> kind), links never followed."""
    found: dict[str, str] = {}

    def walk(path: Path, prefix: str) -> None:
        with os.scandir(path) as it:
            for e in it:
                rel = prefix + e.name
                kind = _kind(e.stat(follow_symlinks=False).st_mode)
                found[rel] = kind
                if kind == "folder":
                    walk(Path(e.path), rel + "/")

    walk(folder, "")
    return found


def _within(folder: Path, name: str) -> Path | None:
    """``folder/name`` when every folder on the way is a real folder (no link, nothing else); None otherwise.

    A missing folder on the way is fine (the path is free). The name is checked by :func:`_check_name`.
    """
    path = folder
    for part in name.split("/")[:-1]:
        path = path / part
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return folder / name
        if not stat.S_ISDIR(mode):
            return None
    return folder / name


def _is_version(path: Path, versions: frozenset[Version]) -> bool:
    """Whether ``path`` is, now, a regular file with one of ``versions`` (size, then sha256)."""
    try:
        st = path.lstat()
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    sizes = {s for _, s in versions}
    if None not in sizes and st.st_size not in sizes:
        return False
    try:
        digest = sha256_file(path)
    except OSError:
        return False
    return any(digest == d and (s is None or s == st.st_size) for d, s in versions)


def _ancestors(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _top_level(names: list[str]) -> list[str]:
    """Drop the names under another one of ``names`` (a foreign folder is shown, not each of its files)."""
    chosen = set(names)
    return [n for n in names if not any(a in chosen for a in _ancestors(n))]


class _Taken:
    """A file moved aside by :func:`_take`: drop it once replaced, or put it back."""

    def __init__(self, original: Path, aside: Path) -> None:
        self.original, self.aside = original, aside

    def drop(self) -> None:
        self.aside.unlink(missing_ok=True)


def _take(path: Path, versions: frozenset[Version]) -> _Taken | None:
    """Move ``path`` aside and check it is one of ``versions``: a :class:`_Taken`, or None when nothing was there.

    What fails the check is left (or put back) where it was and reported as an :class:`OutputError`: it
    is the user's. A file that fails the check in place is not even moved.
    """
    if not os.path.lexists(path):
        return None
    where = f"{path} is"
    if _is_version(path, versions):
        aside = path.with_name(f".{path.name}.aside-{_tag()}-{next(_counter)}")
        try:
            _move_noreplace(path, aside)
        except FileNotFoundError:
            return None
        if _is_version(aside, versions):  # what was taken is what goes
            return _Taken(path, aside)
        try:
            _move_noreplace(aside, path)
        except FileExistsError:  # something else took its name meanwhile: both stay
            where = f"{path} changed while interlingua worked; it is kept as {aside.name}, and"
    raise OutputError(
        f"{where} not a file interlingua wrote (it was changed, replaced or added by someone else), so it is "
        "not replaced; move or rename it, or choose a new output folder with -o/--output, and run again "
        "(everything computed is cached: a rerun only writes the outputs)"
    )


# --------------------------------------------------------------------------- leftovers of killed runs


def _writer_gone(name: str, marker: str) -> bool:
    """True when ``name`` (``.<out>.<marker>-<host>-<pid>-...``) belongs to a dead process of this host."""
    tail = name.split(f".{marker}-", 1)[-1]
    host, _, rest = tail.partition("-")
    pid = rest.split("-", 1)[0]
    if host != host_tag() or not pid.isdigit():
        return False
    return not pid_alive(int(pid))


def _remove_owned(folder: Path) -> None:
    """Remove from ``folder`` what its own manifest proves interlingua wrote, then the folder if that empties it."""
    try:
        manifest = _read_manifest(folder)
    except OutputError:
        return  # a hostile manifest is never followed
    if manifest is None:
        return
    for name, versions in manifest.files.items():
        path = _within(folder, name)
        if path is not None:
            taken = _take_quietly(path, versions)
            if taken is not None:
                taken.drop()
    _drop_manifest(folder, manifest)
    _prune(folder, [f for n in manifest.files for f in _ancestors(n)])
    with contextlib.suppress(OSError):
        folder.rmdir()


def _take_quietly(path: Path, versions: frozenset[Version]) -> _Taken | None:
    try:
        return _take(path, versions)
    except OutputError:
        return None


def _drop_manifest(folder: Path, manifest: _Manifest) -> None:
    aside = folder / f".{MANIFEST}.aside-{_tag()}-{next(_counter)}"
    try:
        _move_noreplace(folder / MANIFEST, aside)
    except FileNotFoundError:
        return
    try:
        same = aside.read_bytes() == manifest.raw and stat.S_ISREG(aside.lstat().st_mode)
    except OSError:
        same = False
    if same:
        aside.unlink()
    else:
        with contextlib.suppress(FileExistsError):
            _move_noreplace(aside, folder / MANIFEST)


def _prune(folder: Path, dirs: list[str]) -> None:
    """Remove the folders ``dirs`` (interlingua's, from a manifest) that are empty now, deepest first."""
    for d in sorted(set(dirs), key=lambda d: d.count("/"), reverse=True):
        path = _within(folder, d + "/x")
        if path is None:
            continue
        try:
            if stat.S_ISDIR(path.parent.lstat().st_mode):
                path.parent.rmdir()  # fails unless empty at this moment: something of the user's keeps it
        except OSError:
            pass


def _restore_asides(out: Path) -> None:
    """Files a killed run had moved aside in ``out``: put back, or dropped when already replaced and ours."""
    if not out.is_dir() or out.is_symlink():
        return
    manifest = None
    try:
        found = _scan(out)
    except OSError:
        return  # an unreadable folder of the user's: prepare_output says so
    for name, kind in sorted(found.items()):
        base = name.rsplit("/", 1)[-1]
        m = _ASIDE.match(base)
        if not m or m["host"] != host_tag() or pid_alive(int(m["pid"])):
            continue
        aside = out / name
        original = aside.with_name(m["name"])
        try:
            _move_noreplace(aside, original)
            continue
        except FileExistsError:
            pass
        if kind != "file":
            continue
        if manifest is None:
            try:
                manifest = _read_manifest(out) or _Manifest({}, b"")
            except OutputError:
                return
        rel = str(original.relative_to(out))
        if rel == MANIFEST:  # the manifest the present one replaced: ours, and recorded by its sha256
            if manifest.replaces is not None and _is_version(aside, frozenset({(manifest.replaces, None)})):
                aside.unlink(missing_ok=True)
        elif rel in manifest.files and _is_version(aside, manifest.files[rel]):
            aside.unlink(missing_ok=True)


def recover_interrupted(out: Path) -> None:
    """Undo what a run killed while writing ``out`` left behind.

    A killed build leaves ``.<out>.partial-<host>-<pid>-*`` (removed: the tool's own temporary folder; it
    never holds a user's file); a file it had moved aside inside ``out`` is put back. An earlier version's
    ``.<out>.old-<host>-<pid>`` is moved back when ``out`` is missing, else its verified files are removed
    and anything else in it stays. Only leftovers of dead processes on this host are touched.
    """
    if not out.parent.is_dir():
        return
    for leftover in out.parent.glob(f".{glob.escape(out.name)}.partial-*"):
        if leftover.is_dir() and not leftover.is_symlink() and _writer_gone(leftover.name, "partial"):
            discard_build(leftover)
    for old in out.parent.glob(f".{glob.escape(out.name)}.old-*"):
        if not (old.is_dir() and not old.is_symlink() and _writer_gone(old.name, "old")):
            continue
        if os.path.lexists(out):
            _remove_owned(old)
        else:
            _move_noreplace(old, out)
    _restore_asides(out)


# --------------------------------------------------------------------------- run folders


@dataclass(frozen=True)
class OutputTarget:
    """Where a run will write, decided (and checked writable) before any work."""

    path: Path
    owned: tuple[str, ...]  # files an earlier run wrote (from its manifest), unchanged when checked
    foreign: tuple[str, ...]  # things interlingua did not write: kept untouched
    #: files the user edited since the run wrote them and asked to keep using (``report --accept-edits``): never
    #: replaced nor removed; the manifest goes on recording the version the run wrote, so the edit stays visible
    edited: tuple[tuple[str, Version], ...] = ()


def _probe(folder: Path) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".interlingua-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise OutputError(
            f"cannot write into {folder} ({exc.strerror or exc}); choose a writable output folder with -o/--output"
        ) from None


def _survey(out: Path, manifest: _Manifest) -> tuple[list[str], list[str]]:
    """(foreign, changed): things the manifest does not account for, and its files that are not as written."""
    present = _scan(out)
    implied = {a for name in manifest.files for a in _ancestors(name)}
    foreign = [
        n
        for n, kind in present.items()
        if n != MANIFEST and n not in manifest.files and not (kind == "folder" and n in implied)
    ]
    changed = []
    for name, versions in manifest.files.items():
        path = _within(out, name)
        if path is None:
            changed.append(name)  # a link or a file where one of its folders was: the user's
        elif os.path.lexists(path) and not _is_version(path, versions):
            changed.append(name)
    return sorted(_top_level(sorted(foreign))), sorted(changed)


def prepare_output(
    output: str | os.PathLike[str], *, overwrite: bool = False, edited: tuple[str, ...] = ()
) -> OutputTarget:
    """Decide whether ``output`` may be written and check it is writable; raise :class:`OutputError` if not.

    ``edited``: files of the earlier run that may have been edited since and are kept as they are (neither
    refused nor replaced): ``report --accept-edits`` draws the report from them.
    """
    out = Path(output).expanduser().resolve()
    try:
        recover_interrupted(out)
    except OSError as exc:
        raise OutputError(f"could not tidy what an interrupted run left next to {out} ({exc})") from None
    if out.exists() and not out.is_dir():
        raise OutputError(f"output {out} exists and is a file; choose a folder path with -o/--output")
    existing = out.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"output {out} cannot be created: {existing} is a file")
    _probe(existing)  # the temporary build folder is a sibling of the output
    if not out.exists():
        return OutputTarget(out, (), ())
    _probe(out)
    try:
        present = _scan(out)
    except OSError as exc:
        raise OutputError(
            f"cannot read the output folder {out} ({exc.strerror or exc}); choose another with -o"
        ) from None
    if not present:
        return OutputTarget(out, (), ())
    manifest = _read_manifest(out)
    if manifest is None:
        raise OutputError(
            f"output folder {out} is not empty and has no interlingua {MANIFEST}, so its files are not "
            "interlingua's to replace; choose a new output folder with -o/--output"
        )
    foreign, changed = _survey(out, manifest)
    kept = tuple((n, sorted(manifest.files[n], key=str)[0]) for n in changed if n in edited)
    changed = [n for n in changed if n not in edited]
    if changed:
        raise OutputError(
            f"output folder {out} holds an earlier run, {len(changed)} of whose file(s) changed since it wrote them "
            f"({', '.join(changed[:5])}); changed files are yours now and are never replaced, not even with "
            "--overwrite: move or rename them, or choose a new output folder with -o/--output"
        )
    if foreign and not overwrite:
        raise OutputError(
            f"output folder {out} holds an earlier run plus {len(foreign)} thing(s) interlingua did not write "
            f"({', '.join(foreign[:5])}); choose a new output folder with -o, or pass --overwrite "
            "(overwrite: true) to replace only the earlier run's files (what interlingua did not write is "
            "never touched)"
        )
    return OutputTarget(out, tuple(sorted(manifest.files)), tuple(foreign), kept)


def discard_build(tmp: Path) -> None:
    """Remove a temporary build folder the tool created (``.<out>.partial-*``, ``.tmp-*``): all of it is ours."""
    shutil.rmtree(tmp, ignore_errors=True)


def _new_build_folder(out: Path) -> Path:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-{_tag()}-"))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700; the output is an ordinary folder
    except OSError as exc:
        raise OutputError(f"could not create the output next to {out} ({exc.strerror or exc})") from None
    return tmp


def write_outputs(target: OutputTarget, build: Callable[[Path], None]) -> list[str]:
    """Build the outputs with ``build(tmp_folder)``, then move them into ``target`` with a manifest.

    Returns the names written. Raises :class:`OutputError`, changing nothing of the user's, when a name
    the run writes is taken (now) by something interlingua did not write.
    """
    out = target.path
    tmp = _new_build_folder(out)
    try:
        build(tmp)
        found = _scan(tmp)
        odd = [n for n, kind in found.items() if kind not in ("file", "folder")]
        if odd:
            raise OutputError(f"internal: the outputs hold {', '.join(odd)}, which is not a file")
        new: dict[str, Version] = {
            n: (sha256_file(tmp / n), (tmp / n).stat().st_size)
            for n, kind in found.items()
            if kind == "file" and n != MANIFEST
        }
        keep = dict(target.edited)
        (tmp / MANIFEST).write_bytes(_manifest_bytes({**new, **keep}))
        if not os.path.lexists(out) and not keep:
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                _move_noreplace(tmp, out)
                return sorted(new)
            except FileExistsError:
                pass  # the folder appeared while the run worked: move the files in one by one
        _install_keeping(out, tmp, new, keep)
        return sorted(new)
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        if _disk_full(exc):
            raise _full_output(out, tmp, exc) from None
        raise OutputError(f"could not write the outputs into {out} ({exc.strerror or exc})") from None
    except Exception as exc:  # a writer (pyarrow, matplotlib, safetensors) that reports a full disk its own way
        if _disk_full(exc):
            raise _full_output(out, tmp, exc) from None
        raise
    finally:
        discard_build(tmp)


def _disk_full(exc: BaseException) -> bool:
    from interlingua.core.store import is_disk_full

    return is_disk_full(exc)


def _full_output(out: Path, tmp: Path, exc: BaseException) -> OutputError:
    """The output disk is full: say where, how much was written before it filled, and that nothing was installed."""
    from interlingua.core.store import free_bytes, human_bytes

    written = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file() and not p.is_symlink())
    free = free_bytes(out.parent)
    there = f", {human_bytes(free)} free there" if free is not None else ""
    return OutputError(
        f"the disk holding the output folder {out.parent} is full ({getattr(exc, 'strerror', None) or exc}): "
        f"{human_bytes(written)} of the outputs were written before it filled{there}; the run needs more than "
        f"{human_bytes(written)} there. Free some space or choose another folder with -o; nothing was installed "
        "and the computed results stay in the cache, so a rerun only writes the outputs"
    )


def _install(out: Path, tmp: Path, new: dict[str, Version]) -> None:
    """Move the files of ``tmp`` into the existing folder ``out``, checking every replacement as it happens."""
    _install_keeping(out, tmp, new, {})


def _install_keeping(out: Path, tmp: Path, new: dict[str, Version], keep: dict[str, Version]) -> None:
    """:func:`_install`, keeping the files ``keep`` as they are, their manifest entries carried over.

    ``keep``: edited files left as they are (``report --accept-edits``), recorded as the versions the run wrote.
    """
    keep = {n: v for n, v in keep.items() if n not in new}
    if not out.is_dir() or out.is_symlink():
        raise OutputError(
            f"{out} is no longer a folder (something replaced it while the run worked); "
            "choose a new output folder with -o/--output and run again"
        )
    manifest = _read_manifest(out)  # read now, not at the start: what counts is the folder as it is
    if manifest is None and os.path.lexists(out / MANIFEST):
        raise OutputError(
            f"{out / MANIFEST} is not interlingua's (it appeared while the run worked), so it is not "
            "replaced; move it, or choose a new output folder with -o/--output, and run again"
        )
    old = manifest.files if manifest is not None else {}
    # 1. before changing anything: every name we write must be free or, now, one of our files
    clashes = []
    for name in new:
        path = _within(out, name)
        if path is None or os.path.lexists(path) and (name not in old or not _is_version(path, old[name])):
            clashes.append(name)
    if clashes:
        raise OutputError(
            f"output folder {out} holds {len(clashes)} thing(s) interlingua did not write under the names of its "
            f"outputs ({', '.join(sorted(clashes)[:5])}); they are never replaced, not even with --overwrite: "
            "move or rename them, or choose a new output folder with -o, and run again (everything computed is "
            "cached: a rerun only writes the outputs)"
        )
    # 2. a manifest accepting the earlier and the new version of each file: a kill from here on leaves a
    #    folder the next run recognises as its own
    also = {n: set(v) for n, v in old.items()}
    interim = _manifest_bytes({**new, **keep}, also, manifest.raw if manifest is not None else None)
    _replace_manifest(out, tmp, interim, manifest)
    # 3. our files in, each earlier version checked at the moment it is replaced
    for name in sorted(new):
        path = _within(out, name)
        if path is None:
            raise OutputError(
                f"{out / name}: a folder on its way was replaced by something else while the run "
                "worked; it is kept; choose a new output folder with -o/--output and run again"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        taken = _take(path, old[name]) if name in old else None
        try:
            _move_noreplace(tmp / name, path)
        except FileExistsError:
            if taken is not None:
                taken.drop()  # our earlier version, checked; the newcomer keeps the name
            raise OutputError(
                f"{path} appeared while the outputs were being written; it is kept and not replaced: "
                "move it, or choose a new output folder with -o/--output, and run again"
            ) from None
        if taken is not None:
            taken.drop()
    # 4. the earlier run's files this one does not write: removed when still ours, else kept
    for name in sorted(set(old) - set(new) - set(keep)):
        path = _within(out, name)
        if path is not None:
            taken = _take_quietly(path, old[name])
            if taken is not None:
                taken.drop()
    _prune(out, [a for n in set(old) - set(new) - set(keep) for a in _ancestors(n)])
    # 5. the final manifest, replacing the interim one only if it is still the one written above
    _replace_manifest(out, tmp, _manifest_bytes({**new, **keep}, replaces=interim), _Manifest({}, interim))


def _replace_manifest(out: Path, tmp: Path, data: bytes, current: _Manifest | None) -> None:
    """Put ``data`` at ``out/manifest.json``, replacing only ``current`` (checked byte for byte as it goes)."""
    staged = tmp / f".{MANIFEST}.staged-{next(_counter)}"
    staged.write_bytes(data)
    taken = None
    if current is not None:
        aside = out / f".{MANIFEST}.aside-{_tag()}-{next(_counter)}"
        try:
            _move_noreplace(out / MANIFEST, aside)
            taken = _Taken(out / MANIFEST, aside)
        except FileNotFoundError:
            pass
        if taken is not None:
            try:
                same = stat.S_ISREG(aside.lstat().st_mode) and aside.read_bytes() == current.raw
            except OSError:
                same = False
            if not same:
                _move_noreplace(aside, out / MANIFEST)
                raise OutputError(
                    f"{out / MANIFEST} was changed while the run worked, so it is not replaced; "
                    "choose a new output folder with -o/--output and run again"
                )
    try:
        _move_noreplace(staged, out / MANIFEST)
    except FileExistsError:
        if taken is not None:
            taken.drop()  # ours, checked; the newcomer stays
        raise OutputError(
            f"{out / MANIFEST} appeared while the outputs were being written; it is kept: move it, "
            "or choose a new output folder with -o/--output, and run again"
        ) from None
    if taken is not None:
        taken.drop()


# --------------------------------------------------------------------------- single builds and files


def install_folder(tmp: Path, out: Path) -> bool:
    """Rename the finished build folder ``tmp`` to ``out`` if ``out`` is free or an empty folder; False otherwise.

    Nothing at ``out`` is ever replaced but an empty folder the user named as the output (``rename(2)``
    refuses a non-empty one at that moment); the caller decides what False means (an identical earlier
    build, or a refusal).
    """
    try:
        _move_noreplace(tmp, out)
        return True
    except FileExistsError:
        pass
    if not out.is_dir() or out.is_symlink():
        return False
    try:
        os.rename(tmp, out)  # replaces the folder only if it is empty now
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            return False
        raise


def write_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to the new file ``path``; a file already there with other bytes is never replaced.

    A file with exactly these bytes is left as it is. Raises :class:`OutputError` with what to do.
    """
    path = Path(path).expanduser()
    if os.path.lexists(path):
        try:
            same = stat.S_ISREG(path.lstat().st_mode) and path.read_bytes() == data
        except OSError:
            same = False
        if same:
            return path
        raise OutputError(
            f"{path} exists and interlingua does not replace files it cannot prove it wrote; "
            "give a new file name with -o, or move the old file away"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.partial-{_tag()}-", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({exc.strerror or exc}); choose a writable place with -o") from None
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        _move_noreplace(tmp, path)
    except FileExistsError:
        raise OutputError(
            f"{path} appeared while interlingua was writing it; it is kept: give a new file name with -o"
        ) from None
    except OSError as exc:
        raise OutputError(f"could not write {path} ({exc.strerror or exc}); check free space and permissions") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path
