"""Content-addressed cache of pooled representations, one safetensors file per entry.

An entry is one (model, corpus language, pooling) triple. Its key is the
sha256 of everything the values depend on: the model fingerprint, the corpus
ids and text fingerprint of that language (not the corpus name), the pooling, ``max_length``, the
model's compute dtype and :data:`CACHE_FORMAT_VERSION`. The file holds the
``(n_hidden_states, n, d)`` float32 tensor; its header metadata repeats the
key's inputs, ``n``, the shape and a sha256 of the tensor bytes, so that a
truncated, corrupted or mismatching file is detected, reported and rebuilt.

Writes are atomic (temporary file in the same directory, fsync, ``os.replace``):
a run killed mid-way leaves every finished entry valid and no partial file
under an entry's name, so rerunning resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save_file as st_save_file

from interlingua import __version__
from interlingua.corpora.languages import normalize_language
from interlingua.errors import CacheError, CorpusError, LanguageError
from interlingua.representations.extract import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_TOKENS,
    extract_representations,
)
from interlingua.representations.pooling import validate_poolings

__all__ = ["CACHE_FORMAT_VERSION", "RepresentationCache"]

CACHE_FORMAT_VERSION = 1
_TENSOR = "representations"
_TMP_PREFIX = ".tmp-"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _model_dtype(loaded: Any) -> str:
    """Dtype the model computes in (float32 vs bfloat16 give different vectors).

    A lazily loaded model declares it as ``loaded.dtype`` (a string such as
    ``"float32"``), so a fully cached model need not be loaded to be keyed.
    """
    declared = getattr(loaded, "dtype", None)
    if isinstance(declared, str):
        return declared.replace("torch.", "")
    for p in loaded.model.parameters():
        return str(p.dtype).replace("torch.", "")
    return "float32"


def _model_label(loaded: Any) -> str:
    """Readable folder name for a model: ``spec.name`` when present, else its fingerprint."""
    name = getattr(getattr(loaded, "spec", None), "name", None) or str(loaded.fingerprint)[:16]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._") or "model"


def _canonical_language(lang: str) -> str:
    """FLORES-style code (``eng_latn`` -> ``eng_Latn``) so spellings share entries."""
    try:
        return normalize_language(str(lang))
    except LanguageError:
        return str(lang)


def _ids_digest(ids: Sequence[str]) -> str:
    return _sha256(json.dumps(list(ids), ensure_ascii=False).encode("utf-8"))


def _read_header(data: bytes) -> dict[str, Any]:
    """Parse a safetensors header; raise ``ValueError`` when it is not one."""
    if len(data) < 8:
        raise ValueError(f"file has {len(data)} bytes, shorter than a safetensors header")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise ValueError(f"header claims {size} bytes but the file has {len(data) - 8}")
    header = json.loads(data[8 : 8 + size].decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header


class RepresentationCache:
    """Pooled representations on disk under ``root``, keyed by content.

    ``hits``, ``misses`` and ``rebuilt`` count entries (not calls): a hit is
    read from disk, a miss computed, a rebuilt entry was on disk but invalid.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        self.rebuilt = 0

    # -- inspection ---------------------------------------------------------------

    def key_inputs(
        self, loaded: Any, corpus: Any, lang: str, pooling: str, *, max_length: int = 512
    ) -> dict[str, str]:
        """Everything an entry's values depend on, as strings (also stored in the file)."""
        (pooling,) = validate_poolings(pooling)
        ids = list(corpus.ids)
        return {
            "format_version": str(CACHE_FORMAT_VERSION),
            "model_fingerprint": str(loaded.fingerprint),
            "corpus_fingerprint": str(corpus.fingerprint(lang)),
            "ids_sha256": _ids_digest(ids),
            "n": str(len(ids)),
            "lang": _canonical_language(lang),
            "pooling": pooling,
            "max_length": str(int(max_length)),
            "dtype": _model_dtype(loaded),
        }

    def key(
        self, loaded: Any, corpus: Any, lang: str, pooling: str, *, max_length: int = 512
    ) -> str:
        """sha256 hex key of one (model, corpus language, pooling, max_length, dtype) entry."""
        inputs = self.key_inputs(loaded, corpus, lang, pooling, max_length=max_length)
        return _sha256(json.dumps(inputs, sort_keys=True).encode("utf-8"))

    def path(
        self, loaded: Any, corpus: Any, lang: str, pooling: str, *, max_length: int = 512
    ) -> Path:
        """File of an entry: ``root/<model>/<lang>.<pooling>.<key[:32]>.safetensors``."""
        key = self.key(loaded, corpus, lang, pooling, max_length=max_length)
        safe_lang = re.sub(r"[^A-Za-z0-9_-]+", "_", _canonical_language(lang))
        return self.root / _model_label(loaded) / f"{safe_lang}.{pooling}.{key[:32]}.safetensors"

    @property
    def stats(self) -> dict[str, int]:
        """Entry counts for the run log: hits, misses, rebuilt."""
        return {"hits": self.hits, "misses": self.misses, "rebuilt": self.rebuilt}

    # -- reading and writing -----------------------------------------------------

    def read(self, path: Path, expected: dict[str, str], n_states: int) -> np.ndarray:
        """Load and verify one entry; raise :class:`CacheError` saying what is wrong."""
        try:
            data = path.read_bytes()
            header = _read_header(data)
            tensors = st_load(data)
        except Exception as exc:  # any parse failure means a damaged file
            raise CacheError(
                f"cache file {path} is unreadable ({type(exc).__name__}: {exc}); "
                "it will be rebuilt (delete it by hand if this repeats)"
            ) from exc
        meta = header.get("__metadata__") or {}
        for name, value in expected.items():
            if meta.get(name) != value:
                raise CacheError(
                    f"cache file {path} has {name}={meta.get(name)!r}, expected {value!r}; "
                    "it belongs to other inputs and will be rebuilt"
                )
        if set(tensors) != {_TENSOR}:
            raise CacheError(f"cache file {path} holds tensors {sorted(tensors)}, not {_TENSOR!r}")
        array = tensors[_TENSOR]
        if array.dtype != np.float32 or array.ndim != 3:
            raise CacheError(
                f"cache file {path} holds {array.dtype} of shape {array.shape}, "
                "expected float32 (n_hidden_states, n, d)"
            )
        n = int(expected["n"])
        if array.shape[:2] != (n_states, n) or meta.get("shape") != json.dumps(list(array.shape)):
            raise CacheError(
                f"cache file {path} has shape {array.shape} (metadata {meta.get('shape')}), "
                f"expected ({n_states}, {n}, d)"
            )
        if meta.get("sha256") != _sha256(np.ascontiguousarray(array).tobytes()):
            raise CacheError(f"cache file {path} fails its checksum (bytes changed on disk)")
        return array

    def write(
        self, path: Path, array: np.ndarray, inputs: dict[str, str], *, corpus_name: str = ""
    ) -> None:
        """Write one entry atomically: temp file in the same folder, fsync, ``os.replace``."""
        array = np.ascontiguousarray(array, dtype=np.float32)
        meta = dict(inputs)
        meta["corpus_name"] = corpus_name
        meta["interlingua_version"] = __version__
        meta["key"] = _sha256(json.dumps(inputs, sort_keys=True).encode("utf-8"))
        meta["shape"] = json.dumps(list(array.shape))
        meta["sha256"] = _sha256(array.tobytes())
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=".part", dir=path.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            st_save_file({_TENSOR: array}, str(tmp), metadata=meta)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        try:  # make the rename itself durable (POSIX); not available everywhere
            dir_fd = os.open(path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)

    # -- main entry point --------------------------------------------------------

    def get_or_compute(
        self,
        loaded: Any,
        corpus: Any,
        lang: str,
        poolings: str | Sequence[str],
        *,
        max_length: int = 512,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        progress: bool = True,
    ) -> dict[str, np.ndarray]:
        """Return ``{pooling: (n_hidden_states, n, d) float32}`` for one corpus language.

        Valid entries are read; missing or invalid ones (warned, naming the
        file) are computed together in ONE extraction pass and written.
        """
        names = validate_poolings(poolings)
        n_states = int(loaded.n_hidden_states)
        result: dict[str, np.ndarray] = {}
        missing: dict[str, tuple[Path, dict[str, str]]] = {}
        for name in names:
            inputs = self.key_inputs(loaded, corpus, lang, name, max_length=max_length)
            path = self.path(loaded, corpus, lang, name, max_length=max_length)
            if path.exists():
                try:
                    result[name] = self.read(path, inputs, n_states)
                    self.hits += 1
                    continue
                except CacheError as exc:
                    warnings.warn(str(exc), UserWarning, stacklevel=2)
                    self.rebuilt += 1
            self.misses += 1
            missing[name] = (path, inputs)
        if missing:
            sentences = list(corpus.sentences(lang))
            if len(sentences) != len(corpus.ids):
                raise CorpusError(
                    f"corpus {getattr(corpus, 'name', '?')!r} has {len(corpus.ids)} ids but "
                    f"{len(sentences)} {lang} sentences; rebuild the corpus so they align"
                )
            computed = extract_representations(
                loaded,
                sentences,
                list(missing),
                max_length=max_length,
                batch_size=batch_size,
                max_tokens=max_tokens,
                progress=progress,
            )
            for name, (path, inputs) in missing.items():
                self.write(path, computed[name], inputs, corpus_name=str(getattr(corpus, "name", "")))
                result[name] = computed[name]
        return {name: result[name] for name in names}
