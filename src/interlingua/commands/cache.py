"""``interlingua cache list|size|clear``: what the content-addressed store holds, and emptying its namespaces.

Only the store's own entries are counted or cleared: inside the store's top-level namespaces
(``registry.store_namespaces()``: representations, comparisons, models, zoo, ...), only what the store recognises
as written by itself (:mod:`interlingua.core.ownership`: its checksummed JSON and safetensors entries, its
built model folders with their records, its temporary files). Anything else under the root (a user's own
``models/my-model/``, a run's output folder placed under a namespace, a note) is listed as not the
store's and kept byte for byte; a folder holding anything foreign is kept whole. A namespace that is a
symbolic link is reported and never followed; symbolic links inside a namespace are foreign and kept.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import sys
from pathlib import Path

from interlingua.core.errors import StoreError
from interlingua.core.ownership import NamespaceScan, scan_namespace

__all__ = ["NamespaceUsage", "add_parser", "clear_namespaces", "human_size", "run", "usage"]

#: One namespace's scan (kept under its old name: the store's entries, foreign items, sizes).
NamespaceUsage = NamespaceScan

_OWNERSHIP = (
    "Only the store's own entries are counted and cleared: what it recognises as written by itself (its "
    "checksummed JSON and safetensors entries, its built model folders with their records, its temporary "
    "files) inside its namespaces. Anything else under the root (your own models/ or zoo/ files, a run's "
    "output folder placed inside the cache, a folder holding any such file) is listed as 'not the "
    "store's' and never touched."
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="list, size or clear the cache (representations, converted models, ...)",
        description="The content-addressed store under --cache-dir, $INTERLINGUA_CACHE or "
        "~/.cache/interlingua. " + _OWNERSHIP + " A rerun recomputes what a clear removed.",
    )
    cs = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    ls = cs.add_parser(
        "list", aliases=["ls"], help="namespaces with their entry counts and sizes, and what is not the store's"
    )
    du = cs.add_parser("size", aliases=["du"], help="the total size of the store's entries")
    c = cs.add_parser(
        "clear",
        help="remove the store's entries (all namespaces, or --namespace NS); your own files are kept",
        description="Remove the store's entries. " + _OWNERSHIP,
    )
    for sp in (ls, du, c):
        sp.add_argument("--cache-dir", help="cache folder (default: $INTERLINGUA_CACHE or ~/.cache/interlingua)")
    ls.add_argument("--json", action="store_true", help="print the namespaces as one JSON object")
    c.add_argument(
        "--namespace",
        action="append",
        metavar="NS",
        help="only this namespace (repeatable), e.g. models, representations",
    )
    c.add_argument("--yes", action="store_true", help="do not ask (required when not interactive)")


def human_size(n: int) -> str:
    """Bytes as B, KiB, MiB, GiB or TiB with one decimal."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover


def _root(cache_dir: str | None) -> Path:
    from interlingua.core.store import default_cache_dir

    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return root.resolve()


def usage(root: Path, names: tuple[str, ...] | None = None) -> list[NamespaceScan]:
    """The store's namespaces present under ``root`` (all, or ``names``), in ``registry.store_namespaces()`` order."""
    from interlingua.data.models.packaged import is_packaged_gguf
    from interlingua.pipeline.registry import store_namespaces as namespaces

    scans = (scan_namespace(root, n, packaged=is_packaged_gguf) for n in names or namespaces())
    return [s for s in scans if s is not None]


def _check_names(names: list[str] | None) -> tuple[str, ...] | None:
    from interlingua.pipeline.registry import store_namespaces as namespaces

    if not names:
        return None
    unknown = [n for n in names if n not in namespaces()]
    if unknown:
        raise StoreError(
            f"cache: unknown namespace(s) {', '.join(unknown)}; the store's namespaces are "
            f"{', '.join(namespaces())} (see `interlingua cache list`)"
        )
    return tuple(dict.fromkeys(names))


def _cannot_remove(root: Path, path: Path, exc: OSError) -> StoreError:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return StoreError(
            f"cache: cannot remove {path} ({reason}): the store {root} is read-only for you, so nothing more "
            "was cleared; clear it where it is writable (or ask its owner), or point --cache-dir at your own store"
        )
    return StoreError(f"cache: cannot remove {path} ({reason}); what was removed before it stays removed")


def clear_namespaces(root: Path, names: tuple[str, ...] | None = None) -> list[NamespaceScan]:
    """Remove the store's entries from its namespaces under ``root`` (all, or ``names``); returns the scans.

    Only the items :func:`interlingua.core.ownership.scan_namespace` recognises as the store's are removed;
    foreign items stay byte for byte, and a namespace folder is removed only when nothing is left in it.
    A namespace that is a symbolic link or not a folder is refused (nothing removed), so the removal never
    leaves the store root. A folder that cannot be written (read-only store) raises :class:`StoreError`.
    """
    present = usage(root, names)
    linked = [u for u in present if u.link]
    if linked:
        raise StoreError(
            f"cache: {', '.join(str(u.path) for u in linked)} is a symbolic link or not a folder, so it "
            "is not the store's to clear; remove or replace it yourself, or clear other namespaces "
            "with --namespace"
        )
    for u in present:
        # the folder is checked again just before it is emptied: a real folder directly under the resolved root
        if u.path.is_symlink() or u.path.resolve().parent != root:
            raise StoreError(f"cache: {u.path} changed into a link while clearing; it is kept")
        for item in u.owned:
            try:
                if item.is_dir() and not item.is_symlink():
                    shutil.rmtree(item)
                else:
                    item.unlink()
            except FileNotFoundError:
                continue  # removed meanwhile (a concurrent clear or sweep)
            except OSError as exc:
                raise _cannot_remove(root, item, exc) from None
        if u.owned and not u.foreign:
            with contextlib.suppress(OSError):
                u.path.rmdir()  # only when empty: something written meanwhile stays
    return present


def _foreign_lines(root: Path, rows: list[NamespaceScan], limit: int = 20) -> list[str]:
    from interlingua.pipeline.registry import store_namespaces as namespaces

    items = [f for u in rows for f in u.foreign]
    try:
        top = sorted(n for n in os.listdir(root) if n not in namespaces())
    except OSError:
        top = []
    items += [root / n for n in top]
    if not items:
        return []
    shown = [f"  {p.relative_to(root)}{'/' if p.is_dir() and not p.is_symlink() else ''}" for p in items[:limit]]
    more = [f"  ... and {len(items) - limit} more"] if len(items) > limit else []
    return [f"not the store's, kept ({len(items)}):", *shown, *more]


def _table(rows: list[NamespaceScan]) -> str:
    cells = [["namespace", "entries", "size", "not the store's"]] + [
        [
            u.name,
            "-" if u.link else str(u.entries),
            "symbolic link (not counted)" if u.link else human_size(u.size),
            "-" if u.link else str(len(u.foreign)),
        ]
        for u in rows
    ]
    w = [max(len(c[i]) for c in cells) for i in range(4)]
    return "\n".join(f"{c[0]:<{w[0]}}  {c[1]:>{w[1]}}  {c[2]:>{w[2]}}  {c[3]:>{w[3]}}".rstrip() for c in cells)


def run(args: argparse.Namespace) -> int:
    root = _root(args.cache_dir)
    action = {"ls": "list", "du": "size"}.get(args.cache_command, args.cache_command)
    if root.exists() and not root.is_dir():
        raise StoreError(f"cache: {root} is not a folder; point --cache-dir (or $INTERLINGUA_CACHE) at the cache")
    if action == "list" and getattr(args, "json", False):
        rows = usage(root) if root.exists() else []
        listed = [
            {
                "namespace": u.name,
                "entries": None if u.link else u.entries,
                "bytes": None if u.link else u.size,
                "not_the_stores": [str(f.relative_to(root)) for f in u.foreign],
            }
            | ({"link": True} if u.link else {})
            for u in rows
        ]
        total = {"entries": sum(u.entries for u in rows), "bytes": sum(u.size for u in rows)}
        print(json.dumps({"cache": str(root), "exists": root.exists(), "namespaces": listed, "total": total}, indent=2))
        return 0
    if not root.exists():
        print(f"cache {root}: empty (the folder does not exist yet)")
        return 0
    if action == "list":
        rows = usage(root)
        print(f"cache {root}")
        print(_table(rows) if rows else "(no namespaces yet)")
        print(f"total {human_size(sum(u.size for u in rows))} in {sum(u.entries for u in rows)} entries")
        for line in _foreign_lines(root, rows):
            print(line)
        return 0
    if action == "size":
        rows = usage(root)
        print(f"{human_size(sum(u.size for u in rows))}\t{root}")
        return 0
    names = _check_names(args.namespace)
    rows = usage(root, names)
    if not any(u.owned or u.link for u in rows):
        print(f"cache {root}: nothing of the store's to clear")
        for line in _foreign_lines(root, rows):
            print(line)
        return 0
    what = ", ".join(f"{u.name} ({human_size(u.size)})" for u in rows if u.owned or u.link)
    if not args.yes:
        if not sys.stdin.isatty():
            raise StoreError(
                f"cache clear would remove the store's entries in {what} from {root}; not interactive, so "
                "pass --yes to confirm (a rerun recomputes what it needs; files that are not the store's are kept)"
            )
        answer = input(f"remove the store's entries in {what} from {root}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("nothing removed")
            return 0
    removed = clear_namespaces(root, names)
    cleared = [u for u in removed if u.owned]
    print(
        f"removed the store's entries in {', '.join(u.name for u in cleared)} from {root} "
        f"({human_size(sum(u.size for u in cleared))} freed)"
    )
    kept = [f for u in removed for f in u.foreign]
    if kept:
        shown = ", ".join(str(p.relative_to(root)) for p in kept[:10]) + (" ..." if len(kept) > 10 else "")
        print(f"kept {len(kept)} item(s) that are not the store's: {shown}")
    return 0
