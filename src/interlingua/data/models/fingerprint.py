"""A model's cache identity, computed from its files without loading weights.

The representation cache is keyed by this fingerprint, so a rerun whose
representations are all cached never loads a model. It covers everything a
hidden state depends on: the weight bytes (or the Hub commit), the tokenizer
files, the adapter, the GGUF file and the compute dtype.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from interlingua.core.hashing import file_sha256, json_sha256
from interlingua.data.models.hashing import TOKENIZER_FILES, adapter_sha256, folder_files_sha256, folder_weights_sha256
from interlingua.data.models.source import resolve_hub_revision, resolve_source
from interlingua.data.models.spec import ModelSpec

__all__ = ["resolve_hub_revision", "spec_fingerprint"]


def _source_identity(spec: ModelSpec, cache_dir: str | Path | None) -> dict[str, Any]:
    source = resolve_source(spec, cache_dir)
    if source.kind == "hub":
        return {
            "hub": source.location,
            "commit": resolve_hub_revision(source.location, spec.revision),
            "gguf_file": source.gguf_file,
        }
    folder = Path(source.location)
    if source.gguf_file is not None:  # the GGUF file holds weights and tokenizer
        return {"gguf_sha256": file_sha256(folder / source.gguf_file), "gguf_file": source.gguf_file}
    return {
        "weights_sha256": folder_weights_sha256(folder),
        "tokenizer_sha256": folder_files_sha256(folder, TOKENIZER_FILES),
    }


def _adapter_identity(spec: ModelSpec) -> dict[str, Any] | None:
    if spec.adapter is None:
        return None
    folder = Path(spec.adapter).expanduser()
    if folder.is_dir():
        return {"adapter_sha256": adapter_sha256(folder)}
    return {"adapter_hub": spec.adapter, "commit": resolve_hub_revision(spec.adapter, spec.adapter_revision)}


def spec_fingerprint(spec: ModelSpec, *, cache_dir: str | Path | None = None) -> str:
    """sha256 identifying what a model computes, from its spec and files alone."""
    payload: dict[str, Any] = {
        "source": _source_identity(spec, cache_dir),
        "adapter": _adapter_identity(spec),
        "dtype": spec.dtype,
    }
    if spec.tokenizer is not None:  # a foreign tokenizer changes every id the model reads
        payload["tokenizer_override"] = folder_files_sha256(Path(spec.tokenizer).expanduser(), TOKENIZER_FILES)
    return json_sha256(payload)
