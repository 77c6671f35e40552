"""Shared pieces of the measures' prepared paths (``metadata.prepared``): batching and resample checks.

A prepared path does each side's expensive work once (centring, a thin SVD, an
RDM and its ranks) and pays per permutation or resample only the small step.
The helpers here split a batch of index rows into chunks that bound memory,
tell permutations (which commute with column centring) from resamples (which do
not), and take a batch of singular values in one LAPACK call.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["CHUNK_BYTES", "chunks", "is_permutation", "svdvals"]

CHUNK_BYTES = 64 * 2**20  # gathered rows held at once per side


def chunks(b: int, bytes_per_item: int, budget: int | None = None) -> Iterator[slice]:
    """Slices over ``range(b)`` so that one chunk holds at most ``budget`` bytes (default
    :data:`CHUNK_BYTES`, read at call time), at least one item."""
    budget = CHUNK_BYTES if budget is None else budget
    step = int(max(1, min(b, budget // max(int(bytes_per_item), 1))))
    for start in range(0, b, step):
        yield slice(start, min(b, start + step))


def is_permutation(rows: np.ndarray | None, n: int) -> np.ndarray:
    """Per index row: whether it is a permutation of ``0..n-1`` (None: all rows in order, a permutation)."""
    if rows is None:
        return np.ones(1, dtype=bool)
    if rows.shape[1] != n:
        return np.zeros(rows.shape[0], dtype=bool)
    return np.all(np.sort(rows, axis=1) == np.arange(n), axis=1)


def svdvals(m: np.ndarray) -> np.ndarray:
    """Singular values of a stack ``(b, r, s)`` of matrices, descending, in one batched LAPACK call.

    Singular values only (no vectors): the nuclear norm and canonical
    correlations need nothing else. Not the square roots of the eigenvalues of
    ``m^T m``: that squares the condition number and loses the small singular
    values to ~1e-8 of the largest, far above float64 rounding.
    """
    return np.linalg.svd(m, compute_uv=False)
