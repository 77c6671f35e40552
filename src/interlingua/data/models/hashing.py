"""The file names that make up a checkpoint, and the hashes of a checkpoint folder's files.

The one home of which files a model's hash covers (weights, tokenizer files, adapters); each file's own sha256
is :func:`interlingua.core.hashing.file_sha256` (cached in the store's ``hashes/``). Imports nothing heavy: no
torch, no transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

from interlingua.core.hashing import file_sha256, files_sha256, json_sha256

__all__ = [
    "ADAPTER_FILES",
    "ADAPTER_PROVENANCE_KEYS",
    "ADAPTER_WEIGHT_FILES",
    "TOKENIZER_FILES",
    "WEIGHT_SUFFIXES",
    "adapter_sha256",
    "folder_files_sha256",
    "folder_weights_sha256",
    "weight_files",
]

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
#: ``adapter_config.json`` keys that record where and by what an adapter was saved, not what it computes
ADAPTER_PROVENANCE_KEYS = ("base_model_name_or_path", "revision", "peft_version", "inference_mode")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "tokenizer.model",
    "sentencepiece.bpe.model",
)


def weight_files(folder: Path) -> list[Path]:
    """A checkpoint folder's weight files: its safetensors files, else other weight files."""
    safetensors = sorted(folder.glob("*.safetensors"))
    return safetensors or sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)


def folder_weights_sha256(folder: Path) -> str | None:
    """Hash of a checkpoint folder's weights (see :func:`weight_files`); None if it has none."""
    files = weight_files(folder)
    return files_sha256(files, folder) if files else None


def folder_files_sha256(folder: Path, names: tuple[str, ...]) -> str | None:
    """Hash of the named files present in ``folder`` (None if none is)."""
    files = [folder / n for n in names if (folder / n).is_file()]
    return files_sha256(files, folder) if files else None


def adapter_sha256(folder: Path) -> str | None:
    """Hash of what a PEFT adapter folder computes: its weight files and its ``adapter_config.json`` without
    :data:`ADAPTER_PROVENANCE_KEYS` (None if it has none of these files).

    PEFT writes the base's path into the config (``base_model_name_or_path``), so hashing the file as it is gave
    one adapter a different key in every folder its base was saved in, and across PEFT versions; its rank,
    scaling, target modules and weights are what make two adapters the same. A config that is not a JSON object
    is hashed as its bytes.
    """
    weights = [folder / n for n in ADAPTER_WEIGHT_FILES if (folder / n).is_file()]
    config = folder / "adapter_config.json"
    if not weights and not config.is_file():
        return None
    parts: dict[str, object] = {"weights": files_sha256(weights, folder) if weights else None}
    if config.is_file():
        try:
            read = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            read = None
        if isinstance(read, dict):
            parts["config"] = {k: v for k, v in read.items() if k not in ADAPTER_PROVENANCE_KEYS}
        else:
            parts["config_sha256"] = file_sha256(config)
    return json_sha256(parts)
