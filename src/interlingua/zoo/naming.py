"""Names of zoo pieces and the folders they resolve to.

A name is ``[FAMILY:]PIECE``. ``FAMILY`` is a family name (``default``,
``tiny``: the ref written by the last build of that name) or a prefix of a
family key (6+ hex digits). Without it: ``default`` when that family exists,
else the only family in the store. Languages are any code
:func:`interlingua.data.corpora.normalize_language` accepts (``eng``, ``eng_latn``,
``eng_Latn``). ``PIECE`` is one of:

============================  ==============================================  =========================
name                          what                                            folder in the family
============================  ==============================================  =========================
``eng``                       English model, final checkpoint                 ``eng_Latn/final``
``eng@step64``                English model after 64 steps                    ``eng_Latn/step64``
``eng@final``, ``eng@400``    final checkpoint (a number = that step)         ``eng_Latn/final``
``eng/tokenizer``             English-only tokenizer                          ``eng_Latn/tokenizer``
``eng-deu/tokenizer``         bilingual English+German tokenizer             ``eng_Latn-deu_Latn/tokenizer``
``eng+deu-lora``              LoRA over the English model, trained on both    ``eng_Latn-deu_Latn/lora``
``eng+deu-lora-identity``     the same LoRA before any step (lora_B == 0)     ``eng_Latn-deu_Latn/lora-identity``
============================  ==============================================  =========================

The folder forms work as names too (``eng_Latn/step64``, ``eng-deu/lora``),
and a pair may be written in either order. A model folder loads with
``load_model(ModelSpec(path=folder))``; an adapter with
``ModelSpec(path=<English final folder>, adapter=folder)``, which
:func:`zoo_model_fields` returns ready-made.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interlingua.core.store import default_cache_dir
from interlingua.zoo.errors import ZooError

__all__ = ["ZooName", "list_families", "parse_zoo_name", "resolve_family", "resolve_zoo", "zoo_model_fields"]

Kind = Literal["model", "tokenizer", "bilingual-tokenizer", "adapter"]
_LANG = r"[A-Za-z]{2,3}(?:_[A-Za-z]{4})?"
_PATTERNS: list[tuple[Kind, re.Pattern[str]]] = [
    ("model", re.compile(rf"^(?P<a>{_LANG})(?:@(?P<ckpt>[A-Za-z0-9]+))?$")),
    ("model", re.compile(rf"^(?P<a>{_LANG})/(?P<ckpt>step\d+|final)$")),
    ("tokenizer", re.compile(rf"^(?P<a>{_LANG})/tokenizer$")),
    ("bilingual-tokenizer", re.compile(rf"^(?P<a>{_LANG})[-+](?P<b>{_LANG})/tokenizer$")),
    ("adapter", re.compile(rf"^(?P<a>{_LANG})[-+](?P<b>{_LANG})[-/](?P<adapter>lora|lora-identity)$")),
]
_HELP = (
    "use LANG, LANG@stepN, LANG/tokenizer, LANG-L2/tokenizer, LANG+L2-lora or LANG+L2-lora-identity, "
    "optionally prefixed by a family (tiny:eng@step16)"
)


@dataclass(frozen=True)
class ZooName:
    """A parsed zoo name: ``family`` (None = default), ``kind``, languages, checkpoint or adapter."""

    family: str | None
    kind: Kind
    languages: tuple[str, ...]
    checkpoint: str | None = None
    adapter: str | None = None

    def __str__(self) -> str:
        prefix = f"{self.family}:" if self.family else ""
        if self.kind == "model":
            return f"{prefix}{self.languages[0]}@{self.checkpoint}"
        if self.kind == "tokenizer":
            return f"{prefix}{self.languages[0]}/tokenizer"
        if self.kind == "bilingual-tokenizer":
            return f"{prefix}{'-'.join(self.languages)}/tokenizer"
        return f"{prefix}{'+'.join(self.languages)}-{self.adapter}"


def _checkpoint(text: str | None) -> str:
    if text is None or text.lower() in ("final", "last"):
        return "final"
    if text.isdigit():
        return f"step{int(text)}"
    match = re.fullmatch(r"step(\d+)", text.lower())
    if match:
        return f"step{int(match.group(1))}"
    raise ZooError(f"checkpoint {text!r} is not stepN, N or final")


def parse_zoo_name(name: str) -> ZooName:
    """Parse ``[FAMILY:]PIECE`` (see the module docs); :class:`ZooError` for anything else."""
    from interlingua.data.corpora import normalize_language

    text = str(name).strip()
    if text.startswith("zoo:"):
        text = text[4:]
    family_text, _, piece = text.rpartition(":")
    family = family_text.strip() or None
    piece = piece.strip()
    for kind, pattern in _PATTERNS:
        match = pattern.match(piece)
        if match is None:
            continue
        groups = match.groupdict()
        try:
            langs = tuple(normalize_language(groups[k]) for k in ("a", "b") if groups.get(k))
        except Exception as exc:  # LanguageError
            raise ZooError(f"zoo name {name!r}: {exc}") from None
        if len(set(langs)) != len(langs):
            raise ZooError(f"zoo name {name!r} pairs a language with itself; {_HELP}")
        if kind == "model":
            try:
                ckpt = _checkpoint(groups.get("ckpt"))
            except ZooError as exc:
                raise ZooError(f"zoo name {name!r}: {exc}; {_HELP}") from None
            return ZooName(family, kind, langs, checkpoint=ckpt)
        return ZooName(family, kind, langs, adapter=groups.get("adapter"))
    raise ZooError(f"{name!r} is not a zoo name; {_HELP}")


def _zoo_dir(root: Path) -> Path:
    return root / "zoo" if (root / "zoo").is_dir() or not (root / "refs").is_dir() else root


def _refs(zdir: Path) -> dict[str, str]:
    refs: dict[str, str] = {}
    for path in sorted((zdir / "refs").glob("*.json")):
        try:
            refs[path.stem] = str(json.loads(path.read_text(encoding="utf-8"))["folder"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return refs


def resolve_family(family: str | None, root: str | os.PathLike[str] | None = None) -> Path:
    """The folder of a family: by name (its ref), by key prefix, or ``root`` itself when it is one."""
    base = Path(root).expanduser() if root is not None else default_cache_dir()
    if (base / "manifest.json").is_file():  # root is a family folder
        return base
    zdir = _zoo_dir(base)
    refs = _refs(zdir)
    how = "build one with `interlingua zoo build --preset tiny|default` (Python: interlingua.zoo.build_zoo)"
    if family is None:
        if "default" in refs:
            family = "default"
        elif len(refs) == 1:
            family = next(iter(refs))
        elif not refs:
            raise ZooError(f"there is no zoo family under {zdir}; {how}")
        else:
            raise ZooError(
                f"several zoo families under {zdir} ({', '.join(refs)}) and none is 'default'; name one, e.g. tiny:eng"
            )
    if family in refs:
        folder = zdir / refs[family]
    else:
        matches = (
            [p for p in zdir.iterdir() if p.is_dir() and p.name.startswith(family.lower())]
            if re.fullmatch(r"[0-9a-fA-F]{6,64}", family) and zdir.is_dir()
            else []
        )
        if len(matches) != 1:
            known = ", ".join(refs) or "none"
            raise ZooError(f"no zoo family {family!r} under {zdir} (families: {known}); {how}")
        folder = matches[0]
    if not (folder / "manifest.json").is_file():
        raise ZooError(f"the zoo family {family!r} ({folder}) is missing or incomplete; {how}")
    return folder


def _manifest(folder: Path) -> dict[str, Any]:
    from interlingua.zoo.build import load_manifest

    return load_manifest(folder)


def _pair(manifest: dict[str, Any], langs: tuple[str, ...], section: str, name: str) -> str:
    available = manifest.get(section) or {}
    for pair in ("-".join(langs), "-".join(reversed(langs))):
        if pair in available:
            return pair
    raise ZooError(
        f"zoo name {name!r}: this family has no {'-'.join(langs)} pair; its pairs: "
        f"{', '.join(available) or 'none (no English among its languages)'}"
    )


def verified_family(folder: Path) -> Path:
    """``folder`` after checking every file its manifest lists (size and sha256, hashes cached per process and in
    the store by path, size, mtime, inode and ctime); a damaged family is warned about and rebuilt from the
    config its manifest records (:func:`interlingua.zoo.build_zoo`: seeded, so the rebuild is bit-identical)."""
    import warnings

    from interlingua.zoo.build import build_zoo, load_manifest, verify_family
    from interlingua.zoo.config import ZooConfig

    manifest = load_manifest(folder)
    problem = verify_family(folder, manifest)
    if problem is None:
        return folder
    if folder.parent.name != "zoo":  # a family folder named directly, outside a store: not ours to rebuild
        raise ZooError(f"the zoo family {folder} is damaged ({problem}); build it again with `interlingua zoo build`")
    try:
        config = ZooConfig(**manifest["config"])
    except (KeyError, TypeError, ZooError) as exc:
        raise ZooError(
            f"the zoo family {folder} is damaged ({problem}) and its manifest records no usable config "
            f"({exc}); build it again with `interlingua zoo build`"
        ) from None
    warnings.warn(f"the zoo family {folder} is damaged ({problem}); it is rebuilt", UserWarning, stacklevel=3)
    rebuilt = Path(build_zoo(config, root=folder.parent.parent)["folder"])
    return rebuilt


def _resolve(name: str, root: str | os.PathLike[str] | None) -> tuple[ZooName, Path, Path, dict[str, Any]]:
    parsed = parse_zoo_name(name)
    family = verified_family(resolve_family(parsed.family, root))
    manifest = _manifest(family)
    models = manifest.get("models") or {}
    if parsed.kind in ("model", "tokenizer"):
        lang = parsed.languages[0]
        if lang not in models:
            raise ZooError(f"zoo name {name!r}: the family has no {lang} model; its languages: {', '.join(models)}")
        if parsed.kind == "tokenizer":
            return parsed, family, family / models[lang]["tokenizer"], manifest
        ckpts = models[lang]["checkpoints"]
        label = parsed.checkpoint or "final"
        if label not in ckpts:
            final_step = manifest["steps"]["final"]
            if label == f"step{final_step}":
                label = "final"
            else:
                raise ZooError(f"zoo name {name!r}: no checkpoint {label}; {lang} has {', '.join(ckpts)}")
        return parsed, family, family / ckpts[label]["folder"], manifest
    if parsed.kind == "bilingual-tokenizer":
        pair = _pair(manifest, parsed.languages, "tokenizers", name)
        return parsed, family, family / manifest["tokenizers"][pair]["folder"], manifest
    pair = _pair(manifest, parsed.languages, "adapters", name)
    return parsed, family, family / manifest["adapters"][pair][str(parsed.adapter)]["folder"], manifest


def resolve_zoo(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """The local folder of the zoo piece ``name`` (see the module docs) under the store ``root``.

    ``root`` is the store root (default ``$INTERLINGUA_CACHE`` or
    ~/.cache/interlingua), its ``zoo`` folder, or a family folder. Raises
    :class:`ZooError` for an unknown name, family, language, pair or
    checkpoint, naming what exists.
    """
    _, _, folder, _ = _resolve(name, root)
    if not folder.is_dir():
        raise ZooError(f"zoo piece {name!r} should be at {folder}, which is missing; rebuild the family")
    return folder


def zoo_model_fields(name: str, root: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """``ModelSpec`` fields loading the zoo piece ``name``: ``name``, ``path`` and, for an adapter, ``adapter``.

    ``name`` is the canonical zoo name (``eng_Latn@step64``; the folder's own
    name, ``step64`` or ``final``, would be a poor label in results). For an
    adapter, ``path`` is the English final model of the same family (the
    base the adapter records). Tokenizers are not models: ZooError.
    """
    parsed, family, folder, manifest = _resolve(name, root)
    if parsed.kind in ("tokenizer", "bilingual-tokenizer"):
        raise ZooError(f"zoo name {name!r} is a tokenizer, not a model; name a model (eng, eng@step64) or an adapter")
    if not folder.is_dir():
        raise ZooError(f"zoo piece {name!r} should be at {folder}, which is missing; rebuild the family")
    if parsed.kind == "model":
        return {"name": str(parsed), "path": str(folder)}
    pair = _pair(manifest, parsed.languages, "adapters", name)
    base = family / manifest["adapters"][pair][str(parsed.adapter)]["base_relative"]
    return {"name": str(parsed), "path": str(base), "adapter": str(folder)}


def list_families(root: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """One summary per complete family under the store ``root``: names, key, folder, languages, NLLs."""
    base = Path(root).expanduser() if root is not None else default_cache_dir()
    zdir = _zoo_dir(base)
    if not zdir.is_dir():
        return []
    names: dict[str, list[str]] = {}
    for ref, folder_name in _refs(zdir).items():
        names.setdefault(folder_name, []).append(ref)
    out = []
    for folder in sorted(p for p in zdir.iterdir() if p.is_dir() and (p / "manifest.json").is_file()):
        try:
            manifest = _manifest(folder)
        except ZooError:
            continue
        out.append(
            {
                "names": names.get(folder.name, []),
                "key": manifest["key"],
                "folder": str(folder),
                "languages": list(manifest["models"]),
                "steps": manifest["steps"]["final"],
                "heldout_nll": {lang: m["heldout_nll"] for lang, m in manifest["models"].items()},
                "ln_V": {lang: m["ln_V"] for lang, m in manifest["models"].items()},
                "seconds": manifest.get("seconds", {}).get("total"),
            }
        )
    return out
