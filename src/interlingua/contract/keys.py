"""Pieces of the keys a capability's planner writes, the same for the pipeline's own tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlingua.core.numerics import resolve_threads

if TYPE_CHECKING:
    from interlingua.pipeline.config import RunSpec

__all__ = ["threads_key"]


def threads_key(spec: RunSpec) -> str:
    """The thread count in the keys of entries a forward pass computes (its last bits depend on it)."""
    return str(resolve_threads(spec.threads))
