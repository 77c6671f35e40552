"""Where a model's files come from: the one resolution of a :class:`ModelSpec`.

Loading (:mod:`.loading`), the cache identity (:mod:`.fingerprint`) and the
pre-flight checks (:mod:`.preflight`) all resolve a spec here, so they agree
on what is a local path, a Hub id or a packaged model. Imports nothing heavy
(no torch, no transformers).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from interlingua.core.errors import InterlinguaError, ModelError
from interlingua.data.models.packaged import check_packaged, resolve_packaged
from interlingua.data.models.spec import ModelSpec

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SNAPSHOT = re.compile(r"^models--(?P<id>.+)$")


@dataclass(frozen=True)
class Source:
    """Where the weights come from.

    ``kind`` is ``"local"`` (``location`` is a folder), ``"hub"``
    (``location`` is a Hub id) or ``"package"`` (``location`` is the folder
    holding the packaged GGUF). ``gguf_file`` names a GGUF file inside the
    folder or Hub repository.
    """

    location: str
    kind: str
    gguf_file: str | None


_Source = Source  # the name loading.py used before this module existed


def looks_like_local_path(path: str) -> bool:
    """Whether ``path`` names a local file or folder rather than a Hub id, even if absent.

    Local: starts with ``/``, ``./``, ``../`` or ``~``, contains a backslash or
    a drive letter, has more than one ``/`` or characters a Hub id cannot
    have, or is relative with a first component that is an existing folder
    (``models/my-model`` when ``models/`` exists). Everything else (``gpt2``,
    ``EleutherAI/pythia-160m``) is taken for a Hub id.
    """
    if path.startswith(("/", ".", "~")) or "\\" in path or re.match(r"^[A-Za-z]:", path):
        return True
    if path.count("/") > 1 or not _HUB_ID.match(path):
        return True
    first = path.split("/", 1)[0]
    return "/" in path and Path(first).is_dir()


def named(spec: ModelSpec, exc: InterlinguaError) -> InterlinguaError:
    """The same kind of error with the model's name in front (unless already there)."""
    text = str(exc)
    prefix = f"model {spec.label!r}: "
    if text.startswith(prefix):
        return exc
    new = type(exc)(prefix + text)
    new.__cause__ = exc.__cause__
    return new


def model_error(spec: ModelSpec, text: str) -> ModelError:
    """A :class:`ModelError` that names the model."""
    return ModelError(f"model {spec.label!r}: {text}")


def resolve_source(spec: ModelSpec, cache_dir: str | Path | None = None, *, assemble: bool = True) -> Source:
    """Resolve ``spec`` to a local folder, a Hub id or a packaged model's folder.

    Checks what can be checked without the network or weights: a local path
    exists, a local folder has ``config.json`` or the named GGUF file,
    ``revision`` is only given for Hub ids, a packaged model's package is
    installed. ``assemble=False`` never writes (a packaged GGUF that still has
    to be assembled is only located). Raises :class:`ModelError`.
    """
    if spec.package is not None:
        if spec.revision is not None:
            raise model_error(
                spec,
                f"`revision` applies to Hub ids; the packaged model {spec.package!r} is one "
                "fixed file: remove `revision`",
            )
        try:
            if assemble:
                folder, packaged_gguf = resolve_packaged(spec.package, cache_dir)
                return Source(str(folder), "package", packaged_gguf)
            info = check_packaged(spec.package, cache_dir)
        except InterlinguaError as exc:
            raise named(spec, exc) from exc.__cause__
        return Source(str(info["folder"]), "package", str(info["gguf_file"]))
    assert spec.path is not None  # guaranteed by ModelSpec validation
    local = Path(spec.path).expanduser()
    if local.exists():
        if spec.revision is not None:
            raise model_error(
                spec,
                f"`revision: {spec.revision}` applies to Hub ids, but {spec.path!r} is a local "
                "path (one fixed version): remove `revision` or give the Hub id",
            )
        gguf = spec.gguf_file
        if local.is_file():
            if local.suffix != ".gguf":
                raise model_error(
                    spec,
                    f"{local} is a file but not a .gguf; give the folder written by save_pretrained, or a .gguf file",
                )
            if gguf is not None and gguf != local.name:
                raise model_error(
                    spec,
                    f"`path` names the GGUF file {local.name!r} but `gguf_file` says {gguf!r}; keep one of them",
                )
            return Source(str(local.parent.resolve()), "local", local.name)
        if gguf is not None and not (local / gguf).is_file():
            found = sorted(p.name for p in local.glob("*.gguf"))
            raise model_error(
                spec,
                f"GGUF file {gguf!r} not found in {local}; .gguf files there: {found or 'none'}. Check `gguf_file`",
            )
        if gguf is None and not (local / "config.json").is_file():
            raise model_error(
                spec,
                f"{local} has no config.json; give a folder written by save_pretrained, "
                "or set `gguf_file` to a .gguf file inside it",
            )
        return Source(str(local.resolve()), "local", gguf)
    if looks_like_local_path(spec.path):
        raise model_error(
            spec,
            f"local model path {spec.path!r} does not exist (resolved to {local.resolve()}); "
            "check the path, or give a Hub id such as 'EleutherAI/pythia-160m', or use "
            "`package:` for an offline packaged model",
        )
    return Source(spec.path, "hub", spec.gguf_file)


# --------------------------------------------------------------------------- the Hub


def hub_offline() -> bool:
    """Whether Hugging Face Hub access is switched off (HF_HUB_OFFLINE)."""
    if os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        import huggingface_hub.constants as hf_constants
    except ImportError:  # pragma: no cover - a dependency
        return False
    return bool(getattr(hf_constants, "HF_HUB_OFFLINE", False))


def hub_cache_root() -> Path:
    """The local Hugging Face cache folder (``HF_HUB_CACHE``), read at call time."""
    import huggingface_hub.constants as hf_constants

    return Path(hf_constants.HF_HUB_CACHE)


def hub_cached_file(repo_id: str, filename: str, revision: str | None = None) -> Path | None:
    """A file of a Hub repository already in the local Hugging Face cache, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, filename, cache_dir=str(hub_cache_root()), revision=revision)
    except Exception:  # an id the cache cannot even name: not cached
        return None
    return Path(found) if isinstance(found, (str, os.PathLike)) else None


def hub_id_of_folder(folder: str | Path) -> str | None:
    """The Hub id of a folder inside the Hugging Face cache (``models--org--name/snapshots/<sha>``)."""
    parts = Path(folder).parts
    for i in range(1, len(parts)):
        m = _SNAPSHOT.match(parts[i - 1])
        if parts[i] == "snapshots" and m is not None:
            return m.group("id").replace("--", "/")
    return None


def resolve_hub_revision(repo_id: str, revision: str | None) -> str:
    """The commit a Hub revision points to (network when allowed, else the local HF cache).

    A branch such as ``main`` moves; the commit does not, so cache entries of
    an updated model are never confused with the old one. Falls back to the
    revision name when neither the Hub nor the local cache can say.
    """
    if revision and _COMMIT.match(revision):
        return revision
    name = revision or "main"
    if not hub_offline():
        try:
            from huggingface_hub import HfApi

            sha = HfApi().model_info(repo_id, revision=name, timeout=10).sha
            if sha:
                return str(sha)
        except Exception:  # offline, gated, or unknown: try the local cache below
            pass
    try:
        ref = hub_cache_root() / f"models--{repo_id.replace('/', '--')}" / "refs" / name
        if ref.is_file():
            return ref.read_text(encoding="utf-8").strip()
    except Exception:
        pass
    return name
