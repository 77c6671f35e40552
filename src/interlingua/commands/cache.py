"""``interlingua cache list|size|clear``: what the content-addressed store holds, and emptying its namespaces.

Only the store's own top-level namespaces (``store.namespaces()``: representations, comparisons, models with
its converted copies, zoo, ...) are counted or cleared, and only as real folders directly under the
resolved store root: a namespace that is a symbolic link is reported and never followed, and anything else
under the root (a user's own files) is never touched. Removal walks with ``shutil.rmtree``, which unlinks
symbolic links inside a namespace instead of following them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from interlingua.core.errors import StoreError

__all__ = ["NamespaceUsage", "add_parser", "clear_namespaces", "human_size", "run", "usage"]


@dataclass(frozen=True)
class NamespaceUsage:
    """One namespace folder: its path, regular files (entries), their bytes (each inode once), whether a link."""

    name: str
    path: Path
    entries: int
    size: int
    link: bool = False


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="list, size or clear the cache (representations, converted models, ...)",
        description="The content-addressed store under --cache-dir, $INTERLINGUA_CACHE or "
        "~/.cache/interlingua. Clearing only removes the store's own namespaces; a rerun "
        "recomputes what it needs.",
    )
    cs = p.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    ls = cs.add_parser("list", aliases=["ls"], help="namespaces with their entry counts and sizes")
    du = cs.add_parser("size", aliases=["du"], help="the total size of the cache")
    c = cs.add_parser("clear", help="remove the cache's namespaces (all, or --namespace NS)")
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


def _walk_usage(folder: Path) -> tuple[int, int]:
    """(regular files, bytes) under ``folder``, never following symbolic links, each inode counted once."""
    entries, size, seen = 0, 0, set()
    for dirpath, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue  # removed while we looked
            if not stat.S_ISREG(st.st_mode):
                continue
            entries += 1
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                size += st.st_size
    return entries, size


def usage(root: Path, names: tuple[str, ...] | None = None) -> list[NamespaceUsage]:
    """The store's namespaces present under ``root`` (all, or ``names``), in ``store.namespaces()`` order."""
    from interlingua.core.store import namespaces

    out = []
    for name in names or namespaces():
        path = root / name
        if not os.path.lexists(path):
            continue
        if path.is_symlink() or not path.is_dir():
            out.append(NamespaceUsage(name, path, 0, 0, link=True))
            continue
        entries, size = _walk_usage(path)
        out.append(NamespaceUsage(name, path, entries, size))
    return out


def _check_names(names: list[str] | None) -> tuple[str, ...] | None:
    from interlingua.core.store import namespaces

    if not names:
        return None
    unknown = [n for n in names if n not in namespaces()]
    if unknown:
        raise StoreError(
            f"cache: unknown namespace(s) {', '.join(unknown)}; the store's namespaces are "
            f"{', '.join(namespaces())} (see `interlingua cache list`)"
        )
    return tuple(dict.fromkeys(names))


def clear_namespaces(root: Path, names: tuple[str, ...] | None = None) -> list[NamespaceUsage]:
    """Remove the store's namespace folders under ``root`` (all, or ``names``); returns what was removed.

    A namespace that is a symbolic link or not a folder is refused (nothing removed), so the removal
    never leaves the store root.
    """
    present = usage(root, names)
    linked = [u for u in present if u.link]
    if linked:
        raise StoreError(
            f"cache: {', '.join(str(u.path) for u in linked)} is a symbolic link or not a folder, so it "
            "is not the store's to clear; remove or replace it yourself, or clear other namespaces "
            "with --namespace"
        )
    removed = []
    for u in present:
        # the folder is checked again just before it goes: a real folder directly under the resolved root
        if u.path.is_symlink() or u.path.resolve().parent != root:
            raise StoreError(f"cache: {u.path} changed into a link while clearing; it is kept")
        shutil.rmtree(u.path)
        removed.append(u)
    return removed


def _table(rows: list[NamespaceUsage]) -> str:
    cells = [["namespace", "entries", "size"]] + [
        [u.name, "-" if u.link else str(u.entries), "symbolic link (not counted)" if u.link else human_size(u.size)]
        for u in rows
    ]
    w = [max(len(c[i]) for c in cells) for i in range(3)]
    return "\n".join(f"{c[0]:<{w[0]}}  {c[1]:>{w[1]}}  {c[2]:>{w[2]}}".rstrip() for c in cells)


def run(args: argparse.Namespace) -> int:
    root = _root(args.cache_dir)
    action = {"ls": "list", "du": "size"}.get(args.cache_command, args.cache_command)
    if root.exists() and not root.is_dir():
        raise StoreError(f"cache: {root} is not a folder; point --cache-dir (or $INTERLINGUA_CACHE) at the cache")
    if action == "list" and getattr(args, "json", False):
        rows = usage(root) if root.exists() else []
        listed = [
            {"namespace": u.name, "entries": None if u.link else u.entries, "bytes": None if u.link else u.size}
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
        return 0
    if action == "size":
        rows = usage(root)
        print(f"{human_size(sum(u.size for u in rows))}\t{root}")
        return 0
    names = _check_names(args.namespace)
    rows = usage(root, names)
    if not rows:
        print(f"cache {root}: nothing to clear")
        return 0
    what = ", ".join(f"{u.name} ({human_size(u.size)})" for u in rows)
    if not args.yes:
        if not sys.stdin.isatty():
            raise StoreError(
                f"cache clear would remove {what} from {root}; not interactive, so pass --yes to "
                "confirm (a rerun recomputes what it needs)"
            )
        answer = input(f"remove {what} from {root}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("nothing removed")
            return 0
    removed = clear_namespaces(root, names)
    print(
        f"removed {', '.join(u.name for u in removed)} from {root} ({human_size(sum(u.size for u in removed))} freed)"
    )
    return 0
