"""Content hashes of model files, and the file names that make up a checkpoint.

The one home of every hash the models subpackage computes (weights, tokenizer
files, adapters, canonical JSON). Imports nothing heavy: no torch, no
transformers.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

_HASH_CACHE: dict[tuple[str, int, int], str] = {}
_HASH_LOCK = threading.Lock()
_CHUNK = 1 << 20

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


def _key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, cached in memory by (path, size, mtime) for this process."""
    p = Path(path)
    key = _key(p)
    with _HASH_LOCK:
        cached = _HASH_CACHE.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _HASH_LOCK:
        _HASH_CACHE[key] = value
    return value


def remember_sha256(path: str | Path, value: str) -> None:
    """Record a sha256 already verified elsewhere (e.g. by a package's own check)."""
    with _HASH_LOCK:
        _HASH_CACHE[_key(Path(path))] = value


def files_sha256(paths: list[Path], root: Path | None = None) -> str:
    """One sha256 over several files: sorted (relative name, file sha256) pairs."""
    entries = sorted(
        (str(p.relative_to(root)) if root is not None else p.name, file_sha256(p)) for p in paths
    )
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def weight_files(folder: Path) -> list[Path]:
    """A checkpoint folder's weight files: its safetensors files, else other weight files."""
    safetensors = sorted(folder.glob("*.safetensors"))
    return safetensors or sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES
    )


def folder_weights_sha256(folder: Path) -> str | None:
    """Hash of a checkpoint folder's weights (see :func:`weight_files`); None if it has none."""
    files = weight_files(folder)
    return files_sha256(files, folder) if files else None


def folder_files_sha256(folder: Path, names: tuple[str, ...]) -> str | None:
    """Hash of the named files present in ``folder`` (None if none is)."""
    files = [folder / n for n in names if (folder / n).is_file()]
    return files_sha256(files, folder) if files else None


def json_sha256(payload: Any) -> str:
    """sha256 of a canonical JSON encoding."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
