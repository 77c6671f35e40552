"""The output folder: never delete or overwrite anything interlingua did not write.

Every run writes ``manifest.json``: the sha256 of each file it wrote. A run may
write into

- a folder that does not exist yet, or an empty one;
- a folder a manifest proves interlingua wrote, whose files are unchanged and
  which holds nothing else (a rerun replaces it);
- with ``--overwrite`` (``overwrite: true``): an earlier run's folder whose files
  were edited or next to which the user added files; then only the files the
  manifest lists are replaced or removed, and everything else stays.

Anything else is refused before any work, with a message that says what to
do. Outputs are built in a temporary sibling folder and moved into place at
the end, so a failed run changes nothing; what a killed run leaves next to the
folder is tidied (or, for an earlier run moved aside, put back) by the next
run. With ``--overwrite`` next to files of the user's, outputs are moved in one
by one and the manifest last: a run killed in between leaves a folder whose
manifest no longer matches, which the next run reports and ``--overwrite``
replaces; the user's files are never touched.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from interlingua import __version__
from interlingua.errors import OutputError
from interlingua.store import host_tag, pid_alive

__all__ = ["MANIFEST", "OutputTarget", "prepare_output", "write_outputs"]

MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink())


@dataclass(frozen=True)
class OutputTarget:
    """Where a run will write, decided (and checked writable) before any work."""

    path: Path
    owned: tuple[str, ...]  # files an earlier run wrote (from its manifest)
    foreign: tuple[str, ...]  # files interlingua did not write: kept untouched


def _probe(folder: Path) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".interlingua-probe-", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise OutputError(
            f"cannot write into {folder} ({exc.strerror or exc}); choose a writable output folder with -o/--output"
        ) from None


def _read_manifest(folder: Path) -> dict[str, str] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = data["files"]
        if data.get("tool") != "interlingua" or not isinstance(files, dict):
            return None
        return {str(k): str(v) for k, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _writer_gone(name: str, marker: str) -> bool:
    """True when ``name`` (``.<out>.<marker>-<host>-<pid>-...``) belongs to a dead process of this host."""
    tail = name.split(f".{marker}-", 1)[-1]
    host, _, rest = tail.partition("-")
    pid = rest.split("-", 1)[0]
    if host != host_tag() or not pid.isdigit():
        return False
    return not pid_alive(int(pid))


def recover_interrupted(out: Path) -> None:
    """Undo what a run killed while writing ``out`` left behind.

    A killed build leaves ``.<out>.partial-<host>-<pid>-*`` (removed); a kill
    between moving the earlier run aside and moving the new one in leaves
    only ``.<out>.old-<host>-<pid>`` (moved back, so the earlier results are
    where they were). Only folders of dead processes on this host are touched.
    """
    if not out.parent.is_dir():
        return
    for leftover in out.parent.glob(f".{glob.escape(out.name)}.partial-*"):
        if leftover.is_dir() and _writer_gone(leftover.name, "partial"):
            shutil.rmtree(leftover, ignore_errors=True)
    for old in out.parent.glob(f".{glob.escape(out.name)}.old-*"):
        if not (old.is_dir() and _writer_gone(old.name, "old")):
            continue
        if out.exists():  # the new run made it into place: the old copy is garbage
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(old, out)


def prepare_output(output: str | os.PathLike[str], *, overwrite: bool = False) -> OutputTarget:
    """Decide whether ``output`` may be written and check it is writable; raise :class:`OutputError` if not."""
    out = Path(output).expanduser().resolve()
    try:
        recover_interrupted(out)
    except OSError as exc:
        raise OutputError(f"could not tidy what an interrupted run left next to {out} ({exc})") from None
    if out.exists() and not out.is_dir():
        raise OutputError(f"output {out} exists and is a file; choose a folder path with -o/--output")
    parent = out.parent
    existing = parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"output {out} cannot be created: {existing} is a file")
    _probe(existing)  # the temporary build folder is a sibling of the output
    if not out.exists():
        return OutputTarget(out, (), ())
    _probe(out)
    present = [f for f in _files(out) if f != MANIFEST]
    if not present and not (out / MANIFEST).exists():
        return OutputTarget(out, (), ())
    manifest = _read_manifest(out)
    if manifest is None:
        raise OutputError(
            f"output folder {out} is not empty and has no interlingua {MANIFEST}, so its files are not "
            "interlingua's to replace; choose a new output folder with -o/--output"
        )
    foreign = tuple(f for f in present if f not in manifest)
    changed = tuple(f for f, digest in manifest.items() if not (out / f).is_file() or _sha256(out / f) != digest)
    if (foreign or changed) and not overwrite:
        what = []
        if foreign:
            what.append(f"{len(foreign)} file(s) interlingua did not write ({', '.join(foreign[:5])})")
        if changed:
            what.append(f"{len(changed)} of its own file(s) changed since it wrote them ({', '.join(changed[:5])})")
        raise OutputError(
            f"output folder {out} holds an earlier run plus " + " and ".join(what) + "; choose a new output "
            "folder with -o, or pass --overwrite (overwrite: true) to replace only the earlier run's files "
            "(files interlingua did not write are never touched)"
        )
    return OutputTarget(out, tuple(manifest), foreign)


def write_outputs(target: OutputTarget, build: Callable[[Path], None]) -> list[str]:
    """Build the outputs with ``build(tmp_folder)``, then move them into place with a manifest."""
    out = target.path
    tag = f"{host_tag()}-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-{tag}-"))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700; the output is an ordinary folder
    except OSError as exc:
        raise OutputError(f"could not create the output next to {out} ({exc.strerror or exc})") from None
    try:
        build(tmp)
        written = [f for f in _files(tmp) if f != MANIFEST]
        manifest = {
            "tool": "interlingua",
            "version": __version__,
            "files": {f: _sha256(tmp / f) for f in written},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        if not target.foreign:
            if out.exists():  # only interlingua's own files are in it (checked by prepare_output)
                old = out.with_name(f".{out.name}.old-{tag}")
                os.replace(out, old)
                os.replace(tmp, out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, out)
            return written
        for f in written:  # the user's files stay: move ours in one by one, the manifest last
            (out / f).parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / f, out / f)
        for f in set(target.owned) - set(written):
            (out / f).unlink(missing_ok=True)
        os.replace(tmp / MANIFEST, out / MANIFEST)
        shutil.rmtree(tmp, ignore_errors=True)
        return written
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OutputError(f"could not write the outputs into {out} ({exc.strerror or exc})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
