"""Representational similarity analysis (Kriegeskorte et al. 2008).

Each side gives a representational dissimilarity matrix (RDM) over the n
examples; the score is the Spearman rank correlation of the two RDMs' upper
triangles (i < j, diagonal excluded). RDM metrics:

- ``"correlation"`` (default): ``1 - Pearson(x_i, x_j)`` between example rows
  (each row centred over its features);
- ``"cosine"``: ``1 - cos(x_i, x_j)``;
- ``"euclidean"``: ``||x_i - x_j||`` (squared Euclidean ranks the same).

Spearman uses average ranks for ties (as :func:`scipy.stats.spearmanr`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import rankdata

from interlingua.errors import MeasureInputError
from interlingua.measures.base import Measure, MeasureMetadata, MeasureResult, register
from interlingua.measures.validation import as_matrix, centre_columns, check_pair, constant_columns, warn

__all__ = ["rdm", "rsa", "rsa_result", "RDM_METRICS"]

RDM_METRICS = ("correlation", "cosine", "euclidean")
_SHORT = {"correlation": "corr", "cosine": "cosine", "euclidean": "euclidean"}


def _unit_rows(x: np.ndarray, side: str, metric: str) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1)
    zero = int(np.count_nonzero(norms == 0))
    if zero:
        raise MeasureInputError(
            f"RSA ({metric} distance): {side} has {zero} all-zero row(s); the distance is undefined for them "
            "(use metric='euclidean', or remove those examples)."
        )
    return x / norms[:, None]


def rdm(X: Any, metric: str = "correlation", *, side: str = "X") -> np.ndarray:
    """Condensed RDM: the ``n (n-1) / 2`` dissimilarities ``d(x_i, x_j)``, i < j, row-major (as scipy's pdist)."""
    if metric not in RDM_METRICS:
        raise MeasureInputError(f"RDM metric must be one of {RDM_METRICS}; got {metric!r}.")
    x = as_matrix(X, side)
    n = x.shape[0]
    iu = np.triu_indices(n, k=1)
    if metric == "euclidean":
        xc = centre_columns(x)  # distances are shift invariant; centring shrinks the terms that cancel
        sq = np.einsum("ij,ij->i", xc, xc)
        d2 = sq[:, None] + sq[None, :] - 2.0 * (xc @ xc.T)
        return np.sqrt(np.clip(d2[iu], 0.0, None))
    if metric == "correlation":
        flat = int(constant_columns(x.T).sum())  # rows without variance over features
        if flat:
            raise MeasureInputError(
                f"RSA (correlation distance): {side} has {flat} row(s) with zero variance; the distance is "
                "undefined for them (use metric='euclidean', or remove those examples)."
            )
        x = x - x.mean(axis=1, keepdims=True)
    z = _unit_rows(x, side, metric)
    return 1.0 - (z @ z.T)[iu]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = rankdata(a), rankdata(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = math.sqrt(float(ra @ ra) * float(rb @ rb))
    return float(ra @ rb) / den if den > 0 else math.nan


def rsa_result(X: Any, Y: Any, metric: str = "correlation") -> MeasureResult:
    """RSA with the metric recorded (see :func:`rsa`)."""
    x, y = check_pair(X, Y, min_n=3, what="RSA")
    dx, dy = rdm(x, metric, side="X"), rdm(y, metric, side="Y")
    value = _spearman(dx, dy)
    details: dict[str, Any] = {"metric": metric, "pairs": dx.size}
    if math.isnan(value):
        reason = "RSA is undefined: one RDM has all dissimilarities equal (no ranks to correlate); returned nan."
        warn(reason)
        details["reason"] = reason
    est = f"Spearman correlation of {metric}-distance RDM upper triangles"
    return MeasureResult(value, f"rsa_spearman_{_SHORT[metric]}", est, x.shape[0], details)


def rsa(X: Any, Y: Any, metric: str = "correlation") -> float:
    """Spearman correlation of the upper triangles of the two RDMs (metric: "correlation" (1 - Pearson
    between example rows, default), "cosine" or "euclidean")."""
    return rsa_result(X, Y, metric).value


def _fn(X: Any, Y: Any, *, metric: str, **kw: Any) -> MeasureResult:
    return rsa_result(X, Y, metric, **kw)


_INV = {
    # row-wise Pearson: per-row centring is not a column operation, so rotations and column shifts change it
    "correlation": {"isotropic_scale", "permutation"},
    "cosine": {"orthogonal", "isotropic_scale", "permutation"},
    "euclidean": {"orthogonal", "isotropic_scale", "translation", "permutation"},
}

for _metric in RDM_METRICS:
    register(
        Measure(
            id=f"rsa_spearman_{_SHORT[_metric]}",
            metadata=MeasureMetadata(
                larger_is_more_similar=True,
                symmetric=True,
                invariances=frozenset(_INV[_metric]),
                min_n=3,
                bounds=(-1.0, 1.0),
                estimator=f"Spearman correlation of {_metric}-distance RDMs",
                reference="Kriegeskorte et al. 2008",
            ),
            fn=_fn,
            params={"metric": _metric},
        )
    )
