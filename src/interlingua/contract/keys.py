"""Pieces of the keys a capability's planner writes, the same for the pipeline's own tasks."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from interlingua.core.numerics import resolve_threads
from interlingua.core.store import sha256_hex

if TYPE_CHECKING:
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.config import RunSpec

__all__ = ["ids_sha256", "threads_key", "versioned"]


def ids_sha256(corpus: ParallelCorpus, n: int | None = None) -> str:
    """sha256 of the corpus's sentence ids (the first ``n``; all: None), in the key of everything computed from
    its sentences (the text's fingerprint says what they say, this which sentences they are)."""
    return sha256_hex(json.dumps(list(corpus.ids)[:n], ensure_ascii=False).encode("utf-8"))


def versioned(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with the package's version (``"version"``): a task key holding it is recomputed after an
    upgrade."""
    from interlingua import __version__

    return {"version": __version__, **payload}


def threads_key(spec: RunSpec) -> str:
    """The thread count in the keys of entries a forward pass computes (its last bits depend on it)."""
    return str(resolve_threads(spec.threads))
