"""Per-layer diagnostics of pooled representations: dominant dimensions, standardisation.

Some layers are dominated by a handful of coordinates (outlier or "massive
activation" dimensions). Linear CKA is then mostly a statement about those few
coordinates. :func:`top_k_shares` makes that visible; :func:`standardize`
(``standardize: true`` in a run config) z-scores each coordinate first, which
makes measures invariant to per-dimension scale (and no longer to rotation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["standardize", "top_k_shares"]


def top_k_shares(x: np.ndarray, ks: Sequence[int] = (1, 3)) -> tuple[float, ...]:
    """Share of the total variance of ``x`` (n, d) held by its k largest-variance coordinates.

    k/d for isotropic data, 1.0 when one coordinate holds all the
    variance; NaN when ``x`` has no variance at all.
    """
    var = np.asarray(x, dtype=np.float64).var(axis=0)
    total = float(var.sum())
    if not total > 0:
        return tuple(np.nan for _ in ks)
    ordered = np.sort(var)[::-1]
    return tuple(float(ordered[:k].sum() / total) for k in ks)


def standardize(x: np.ndarray) -> np.ndarray:
    """Z-score each column of ``x`` (n, d) in float64; constant columns become exact zeros."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0)
    sd = centred.std(axis=0)
    out = np.zeros_like(centred)
    np.divide(centred, sd, out=out, where=sd > 0)
    return out
