"""Exact ties in Euclidean RDMs: rank-based comparisons (Spearman, Kendall) need equal distances to be equal.

The fast squared distance ``|x_i|^2 + |x_j|^2 - 2 x_i.x_j`` (one matrix product) rounds each entry
differently, so two distances that are exactly equal (duplicated rows, data on a grid) come out a few
ulps apart and their ranks are no longer tied: Spearman then differs from the exact value (and from
rsatoolbox, which computes integer data exactly). Pairs whose fast squared distances lie within that
rounding bound of a neighbour in sorted order are recomputed directly from ``x_i - x_j``, summed in the
same order for every pair, so equal difference vectors give bit-equal distances; all other pairs keep
the fast value.
"""

from __future__ import annotations

import numpy as np

__all__ = ["exact_near_ties"]


def exact_near_ties(x: np.ndarray, d: np.ndarray, iu: tuple[np.ndarray, np.ndarray], max_sq: float) -> np.ndarray:
    """``d`` (condensed Euclidean distances of the rows of ``x`` at pairs ``iu``) with near-ties recomputed.

    ``max_sq``: the largest squared row norm the fast formula used; its rounding error is at most
    ``(p + 2) eps max_sq`` per squared entry (a length-p dot product plus two additions), twice that between
    two entries. A recomputed difference is scaled by an exact power of two (its largest entry's), so tiny
    distances neither underflow when squared nor lose their ties.
    """
    if d.size < 2:
        return d
    tol = 2.0 * (x.shape[1] + 2) * float(np.finfo(np.float64).eps) * max_sq
    d2 = d * d
    order = np.argsort(d2, kind="stable")
    near = np.flatnonzero(np.diff(d2[order]) <= tol)
    if near.size == 0:
        return d
    idx = np.unique(np.concatenate([order[near], order[near + 1]]))
    out = d.copy()
    step = max(1, (1 << 22) // max(1, x.shape[1]))  # ~32 MB of differences at a time
    for s in range(0, idx.size, step):
        k = idx[s : s + step]
        diff = x[iu[0][k]] - x[iu[1][k]]
        peak = np.max(np.abs(diff), axis=1)
        f = np.ones_like(peak)
        nz = peak > 0
        f[nz] = np.ldexp(1.0, -np.frexp(peak[nz])[1])
        scaled = diff * f[:, None]
        out[k] = np.sqrt(np.einsum("ij,ij->i", scaled, scaled)) / f
    return out
