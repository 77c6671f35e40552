"""Model loading: base transformer + tokenizer + architecture table + facts.

``from interlingua.data.models import ModelSpec, load_model, LoadedModel``

Only :class:`ModelSpec` is imported eagerly. Everything else is imported on
first use (PEP 562), so validating a config (``from interlingua.data.models import
ModelSpec``) or running :func:`preflight_model` never imports torch or
transformers' modeling code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from interlingua.data.models.spec import ModelSpec

# public name -> submodule that defines it
_LAZY: dict[str, str] = {
    "ARCHITECTURES": "table",
    "ArchitectureEntry": "table",
    "Sublayers": "table",
    "register_architecture": "table",
    "Architecture": "architectures",
    "resolve_architecture": "architectures",
    "ModelFacts": "facts",
    "LoadedModel": "loading",
    "load_model": "loading",
    "prepare_tokenizer": "loading",
    "PACKAGED_MODELS": "packaged",
    "model_cache_dir": "packaged",
    "resolve_packaged": "packaged",
    "preflight_model": "preflight",
    "Source": "source",
    "resolve_source": "source",
    "looks_like_local_path": "source",
    "spec_fingerprint": "fingerprint",
}

__all__ = sorted([*_LAZY, "ModelSpec"])

if TYPE_CHECKING:  # for type checkers and IDEs; at runtime these load lazily
    from interlingua.data.models.architectures import Architecture, resolve_architecture
    from interlingua.data.models.facts import ModelFacts
    from interlingua.data.models.fingerprint import spec_fingerprint
    from interlingua.data.models.loading import LoadedModel, load_model, prepare_tokenizer
    from interlingua.data.models.packaged import PACKAGED_MODELS, model_cache_dir, resolve_packaged
    from interlingua.data.models.preflight import preflight_model
    from interlingua.data.models.source import Source, looks_like_local_path, resolve_source
    from interlingua.data.models.table import ARCHITECTURES, ArchitectureEntry, Sublayers, register_architecture


_SUBMODULES = frozenset(
    {
        "architectures",
        "cachefiles",
        "facts",
        "fingerprint",
        "gguf_cache",
        "hashing",
        "keymap",
        "loading",
        "packaged",
        "preflight",
        "source",
        "spec",
        "table",
    }
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `interlingua.data.models.loading` without importing it first
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
