"""The file names that make up a checkpoint, and the hashes of a checkpoint folder's files.

The one home of which files a model's hash covers (weights, tokenizer files, adapters); each file's own sha256
is :func:`interlingua.core.hashing.file_sha256` (cached in the store's ``hashes/``). Imports nothing heavy: no
torch, no transformers.
"""

from __future__ import annotations

from pathlib import Path

from interlingua.core.hashing import files_sha256

__all__ = [
    "ADAPTER_FILES",
    "ADAPTER_WEIGHT_FILES",
    "TOKENIZER_FILES",
    "WEIGHT_SUFFIXES",
    "folder_files_sha256",
    "folder_weights_sha256",
    "weight_files",
]

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
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
