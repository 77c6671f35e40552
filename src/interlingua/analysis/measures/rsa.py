"""Representational similarity analysis (Kriegeskorte et al. 2008).

Each side gives a representational dissimilarity matrix (RDM) over the n
examples; the score is the Spearman rank correlation of the two RDMs' upper
triangles (i < j, diagonal excluded). RDM metrics:

- ``"correlation"`` (default): ``1 - Pearson(x_i, x_j)`` between example rows
  (each row centred over its features);
- ``"cosine"``: ``1 - cos(x_i, x_j)``;
- ``"euclidean"``: ``||x_i - x_j||`` (squared Euclidean ranks the same).

Spearman uses average ranks for ties (as :func:`scipy.stats.spearmanr`).

Prepared path (``metadata.prepared``): each side's RDM and the centred ranks of
its upper triangle are computed once and kept as symmetric ``(n, n)`` matrices.
Permuting the rows of Y permutes its RDM entries (``D[p][:, p]``) and therefore
its ranks, whose mean and norm do not change, so a permutation costs one
``O(n^2)`` gather and inner product instead of an ``O(n^2 p)`` RDM and an
``O(n^2 log n)`` ranking (the null is then the permutation distribution of the
statistic with each side's dissimilarities held fixed). Resampled rows
(jackknife, bootstrap) are computed directly: the direct call recomputes the
subset's RDM, whose rounding differs from the full RDM's, and where two
dissimilarities nearly tie (duplicated or near-duplicate examples) Spearman's
ranks can turn that rounding into changes far above it (one swapped rank moves
rho by ~1 / (number of pairs)), so a gathered block need not reproduce the
direct value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.analysis.measures._ties import exact_near_ties
from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register
from interlingua.analysis.measures.validation import (
    as_matrix,
    centre_columns,
    check_pair,
    constant_columns,
    pairwise_distances,
    rescale,
    rescale_rows,
    warn,
)
from interlingua.core.errors import MeasureInputError

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
    """Condensed RDM: the ``n (n-1) / 2`` dissimilarities ``d(x_i, x_j)``, i < j, row-major (as scipy's pdist).

    Duplicated rows (repeated examples, every bootstrap resample) are computed once: the RDM of the
    distinct rows is expanded back, so a copy's dissimilarities equal the original's exactly and two copies
    are at dissimilarity exactly 0. Spearman then averages their ranks as ties, as
    :func:`scipy.stats.spearmanr` does on exact ties, instead of ranking the rounding differences a matrix
    product leaves between equal entries at different positions.
    """
    if metric not in RDM_METRICS:
        raise MeasureInputError(f"RDM metric must be one of {RDM_METRICS}; got {metric!r}.")
    x = as_matrix(X, side)
    n = x.shape[0]
    uniq, inverse = np.unique(x, axis=0, return_inverse=True)
    if uniq.shape[0] == n:
        return _rdm_distinct(x, metric, side)
    if metric != "euclidean":  # rows the distance is undefined for, counted among ALL rows (copies included)
        _row_checks(rescale_rows(x), metric, side)
    m = uniq.shape[0]
    square = np.zeros((m, m))
    if m > 1:
        square[np.triu_indices(m, k=1)] = _rdm_distinct(uniq, metric, side)
        square += square.T
    inverse = inverse.reshape(-1)
    return square[np.ix_(inverse, inverse)][np.triu_indices(n, k=1)]


def _rdm_distinct(x: np.ndarray, metric: str, side: str) -> np.ndarray:
    """:func:`rdm` of rows that are all distinct (checked float64 input)."""
    iu = np.triu_indices(x.shape[0], k=1)
    if metric == "euclidean":
        # ranks ignore a common scale: an exact power-of-two rescale, then centring (distances are shift
        # invariant; centring shrinks the terms that cancel); pairs where the Gram identity cancels are
        # recomputed from row differences
        xs = rescale(x)
        xc = centre_columns(xs)
        d = np.asarray(pairwise_distances(xc, xs))[iu]
        # equal distances (duplicated rows, data on a grid) must tie exactly for the rank comparisons
        d = exact_near_ties(xs, d, iu, float(np.einsum("ij,ij->i", xc, xc).max()))
        _check_span(d, side)
        return d
    z = _row_checks(rescale_rows(x), metric, side)  # row-wise Pearson and cosine ignore each row's scale
    return 1.0 - (z @ z.T)[iu]


def _row_checks(x: np.ndarray, metric: str, side: str) -> np.ndarray:
    """Unit rows for the cosine / correlation distance (rows centred for correlation), or the error that
    names how many rows the distance is undefined for."""
    if metric == "correlation":
        flat = int(constant_columns(x.T).sum())  # rows without variance over features
        if flat:
            raise MeasureInputError(
                f"RSA (correlation distance): {side} has {flat} row(s) with zero variance; the distance is "
                "undefined for them (use metric='euclidean', or remove those examples)."
            )
        x = x - x.mean(axis=1, keepdims=True)
    return _unit_rows(x, side, metric)


#: Euclidean RDMs whose smallest non-zero distance is below this fraction of the largest are refused:
#: float64 rounds the large distances by more than the small structure that orders them.
_SPAN = 2.0**10 * float(np.finfo(np.float64).eps)


def _check_span(d: np.ndarray, side: str) -> None:
    nz = d[d > 0]
    if nz.size and nz.min() < _SPAN * nz.max():
        raise MeasureInputError(
            f"RSA (euclidean distance): the distances between rows of {side} span {nz.min() / nz.max():.1e} to 1 "
            "(e.g. one outlier row far from the rest), beyond what float64 can rank: the large distances are "
            f"rounded by ~{float(np.finfo(np.float64).eps):.0e} of their size, more than the differences that "
            "order them, so ties and order among them would come from rounding; remove or clip the outlier, "
            "or use metric='correlation' or 'cosine'."
        )


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import rankdata  # here, not at import: scipy.stats costs seconds of every command's start

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


@dataclass(frozen=True, eq=False)
class RSASide:
    """One side prepared for :func:`rsa_prepared`: the centred ranks of its RDM's upper triangle."""

    n: int
    x: np.ndarray = field(repr=False)  # float64 input, for the direct fallback
    ranks: np.ndarray = field(repr=False)  # (n, n) symmetric centred ranks of the upper triangle, zero diagonal
    norm: float  # sqrt(sum over i < j of the centred ranks squared)


def _square(condensed: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, n))
    out[np.triu_indices(n, k=1)] = condensed
    return out + out.T


def rsa_prepare(X: Any, *, metric: str = "correlation") -> RSASide:
    """One side's RDM and centred upper-triangle ranks (errors as in the direct call)."""
    x = as_matrix(X, "X")
    if x.shape[0] < 3:
        raise MeasureInputError(f"RSA needs at least 3 rows; got {x.shape[0]}.")
    d = rdm(x, metric, side="X")
    from scipy.stats import rankdata

    r = rankdata(d)
    r -= r.mean()
    return RSASide(x.shape[0], x, _square(r, x.shape[0]), math.sqrt(float(r @ r)))


def rsa_prepared(
    sx: RSASide, sy: RSASide, rows_x: np.ndarray | None, rows_y: np.ndarray | None, *, metric: str
) -> np.ndarray:
    """RSA of ``X[rows_x[i]], Y[rows_y[i]]`` from prepared sides (see the module docstring)."""
    from interlingua.analysis.measures._prepared import is_permutation

    n = sx.n
    given = rows_x if rows_x is not None else rows_y
    b = 1 if given is None else given.shape[0]
    px = np.ones(b, dtype=bool) if rows_x is None else is_permutation(rows_x, n)
    py = np.ones(b, dtype=bool) if rows_y is None else is_permutation(rows_y, n)
    den = sx.norm * sy.norm
    out = np.empty(b)
    for i in range(b):
        ix = None if rows_x is None else rows_x[i]
        iy = None if rows_y is None else rows_y[i]
        if px[i] and py[i]:  # ranks move with the entries; mean and norm are unchanged
            rx = sx.ranks if ix is None else sx.ranks[np.ix_(ix, ix)]
            ry = sy.ranks if iy is None else sy.ranks[np.ix_(iy, iy)]
            out[i] = 0.5 * float(np.vdot(rx, ry)) / den if den > 0 else math.nan
            continue
        # a resample: the direct call (see the module docstring)
        out[i] = _quiet_direct(sx.x if ix is None else sx.x[ix], sy.x if iy is None else sy.x[iy], metric)
    return out


def _quiet_direct(x: np.ndarray, y: np.ndarray, metric: str) -> float:
    import warnings

    from interlingua.analysis.measures.validation import MeasureWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return rsa_result(x, y, metric).value


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
                cost_model="rsa",
                larger_is_more_similar=True,
                symmetric=True,
                invariances=frozenset(_INV[_metric]),
                min_n=3,
                bounds=(-1.0, 1.0),
                estimator=f"Spearman correlation of {_metric}-distance RDMs",
                reference="Kriegeskorte et al. 2008",
                prepared=True,
            ),
            fn=_fn,
            params={"metric": _metric},
            prepare_fn=rsa_prepare,
            prepared_fn=rsa_prepared,
        )
    )
