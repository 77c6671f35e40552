"""Model loading: base transformer + tokenizer + architecture table + facts.

``from interlingua.models import ModelSpec, load_model, LoadedModel``
"""

from __future__ import annotations

from .architectures import (
    ARCHITECTURES,
    Architecture,
    ArchitectureEntry,
    register_architecture,
    resolve_architecture,
)
from .facts import ModelFacts, file_sha256
from .loading import LoadedModel, load_model, prepare_tokenizer
from .packaged import PACKAGED_MODELS, model_cache_dir, resolve_packaged
from .spec import ModelSpec

__all__ = [
    "ARCHITECTURES",
    "PACKAGED_MODELS",
    "Architecture",
    "ArchitectureEntry",
    "LoadedModel",
    "ModelFacts",
    "ModelSpec",
    "file_sha256",
    "load_model",
    "model_cache_dir",
    "prepare_tokenizer",
    "register_architecture",
    "resolve_architecture",
    "resolve_packaged",
]
