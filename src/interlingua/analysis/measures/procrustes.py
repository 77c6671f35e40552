"""Orthogonal Procrustes alignability.

Score convention (id ``procrustes_resid2_centered_unitnorm``):

1. centre the columns of X and Y (``center=False`` skips this; the id then reads
   ``procrustes_resid2_raw_unitnorm``) and scale each side to unit Frobenius norm;
2. fit the best orthogonal map from the narrower side into the wider one:
   for ``p <= q``, ``R = U V^T`` from the thin SVD ``X^T Y = U S V^T`` is
   ``p x q`` with orthonormal rows (semi-orthogonal; square and orthogonal when
   ``p == q``); for ``p > q`` the roles swap (Y is mapped into X's space);
3. compute the residual ``r = ||X R - Y||_F`` DIRECTLY, in float64 (when n < min(p, q) the fit
   and the residual are computed in each side's n-column score space ``U S`` instead, which
   gives the same numbers from an n x n SVD; ``method="width"`` forces the p x q one);
4. score ``= 1 - r^2 / (||X||^2 + ||Y||^2) = 1 - r^2 / 2``.

The score lies in [0, 1]; 1 means one side is an exact rotation (or, for
p != q, an isometric embedding) of the other. Mathematically it equals the
nuclear norm ``||X^T Y||_*`` of the normalised sides, which is why it is
symmetric, but the expansion ``2 - 2 ||X^T Y||_*`` cancels catastrophically
near perfect alignment (worst in float32); the direct residual does not.

Prepared path (``metadata.prepared``, used by permutation tests, jackknife and
bootstrap). With the thin SVD ``Xc = U_x S_x V_x^T`` of one centred side and its
scores ``A_x = U_x S_x`` (n x r, r <= min(n, p)), ``X^T P Y = V_x A_x^T P A_y V_y^T``
and the V's have orthonormal columns, so ``||Xc^T P Yc||_* = ||A_x^T P A_y||_*``:
each permutation costs an ``(r_x, r_y)`` cross-product and its singular values
(batched), not a ``p x q`` product and its full SVD. Resampled rows
``Xc[idx]`` centre to ``(A_x[idx] - mean) V_x^T`` (the norms also live in score
space), so resamples take the same step. The score is then the nuclear norm
itself: its float64 rounding is ~1e-16 absolute on a score in [0, 1]; the
cancellation above concerns the RESIDUAL ``1 - score``, which is why the
observed value of a test keeps the direct residual (:func:`procrustes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.analysis.measures import _backend as bk
from interlingua.analysis.measures._prepared import chunks, is_permutation, svdvals
from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register
from interlingua.analysis.measures.validation import (
    as_matrix,
    centre_columns,
    check_min_n,
    check_pair,
    check_rows,
    constant_columns,
    rescale,
    warn,
)
from interlingua.core.errors import MeasureInputError

__all__ = ["procrustes", "procrustes_result", "procrustes_map"]


def _normalise(x: Any, center: bool) -> tuple[Any, float]:
    if center:
        x = centre_columns(x)
    norm = float(bk.namespace(x).sqrt((x * x).sum()))
    return (x / norm if norm > 0 else x), norm


def _svd(m: Any) -> tuple[Any, Any, Any]:
    if bk.is_torch(m):
        import torch

        return torch.linalg.svd(m, full_matrices=False)
    return np.linalg.svd(m, full_matrices=False)


def procrustes_map(X: Any, Y: Any) -> np.ndarray:
    """The orthogonal (p == q) or semi-orthogonal (p != q) ``R`` (p x q) maximising ``tr(R^T X^T Y)``.

    Used as given: no centring or scaling. For ``p <= q`` it minimises
    ``||X R - Y||_F`` over maps with orthonormal rows; for ``p > q`` its columns
    are orthonormal and ``R^T`` maps Y into X's space with minimal residual.
    """
    x, y = check_pair(X, Y, min_n=1, what="Procrustes")
    U, _, Vt = np.linalg.svd(x.T @ y, full_matrices=False)
    return U @ Vt


_METHODS = ("auto", "width", "score")


def procrustes_result(
    X: Any, Y: Any, *, center: bool = True, backend: str = "numpy", device: Any = None, method: str = "auto"
) -> MeasureResult:
    """Procrustes alignability with the residual, map direction and nuclear norm recorded (see :func:`procrustes`).

    ``method``: where the map is fitted, not what is measured. ``"width"``: the
    SVD of the ``p x q`` cross-product ``X^T Y``; ``"score"``: the same fit and
    the same direct residual in each side's score space ``U S`` from its thin
    SVD (``r <= min(n, width)`` columns; ``X = A_x V_x^T`` with orthonormal
    ``V_x``, so ``||X R - Y||_F = ||A_x Q - A_y||_F`` for the fitted ``Q``);
    ``"auto"`` (default): ``"score"`` when n < min(p, q) with the numpy
    backend (an n x n SVD instead of a width x width one), else ``"width"``.
    """
    if method not in _METHODS:
        raise MeasureInputError(f"Procrustes method must be one of {_METHODS}; got {method!r}.")
    # scale invariant (both sides go to unit norm): an exact power-of-two rescale keeps the norms in float64
    x = rescale(bk.to_backend(X, "X", backend, device))
    y = rescale(bk.to_backend(Y, "Y", backend, device))
    n = check_rows(x, y, min_n=_min_n(center), what=_what(center))
    mid = _procrustes_id(center)
    xn, nx = _normalise(x, center)
    yn, ny = _normalise(y, center)
    if not (nx > 0 and ny > 0):
        bad = " and ".join(s for s, v in (("X", nx), ("Y", ny)) if not v > 0)
        reason = f"Procrustes is undefined: {bad} is zero" + (" after centring" if center else "") + "; returned nan."
        warn(reason)
        return MeasureResult(math.nan, mid, _ESTIMATOR, n, {"reason": reason})
    direction = "X->Y" if x.shape[1] <= y.shape[1] else "Y->X"
    if method == "auto":
        method = "score" if backend == "numpy" and n < min(x.shape[1], y.shape[1]) else "width"
    if method == "score":  # the fit and the residual in score space: ||X R - Y|| = ||A_x Q - A_y||
        xn, yn = _scores(xn), _scores(yn)
    src, dst = (xn, yn) if xn.shape[1] <= yn.shape[1] else (yn, xn)
    U, s, Vt = _svd(src.T @ dst)
    diff = src @ (U @ Vt) - dst  # the residual itself, never ||X||^2 + ||Y||^2 - 2 ||X^T Y||_*
    residual = float(bk.namespace(diff).sqrt((diff * diff).sum()))
    value = 1.0 - residual**2 / 2.0
    details = {
        "residual": residual,
        "direction": direction,
        "nuclear_norm": float(s.sum()),
        "center": center,
        "backend": backend,
        "method": method,
    }
    return MeasureResult(value, mid, _ESTIMATOR, n, details)


def _scores(a: Any) -> Any:
    """``U S`` of the thin SVD of ``a``: the same rows' inner products (``a a^T``) in ``min(n, width)`` columns."""
    U, s, _ = _svd(a)
    return U * s


def procrustes(
    X: Any, Y: Any, *, center: bool = True, backend: str = "numpy", device: Any = None, method: str = "auto"
) -> float:
    """Orthogonal-Procrustes alignability in [0, 1]: ``1 - ||X R - Y||_F^2 / 2`` after centring
    (unless ``center=False``) and scaling each side to unit Frobenius norm; R (semi-)orthogonal,
    residual computed directly in float64. Symmetric; p != q handled by mapping the narrower
    side into the wider one. ``backend="torch"`` (``device`` "cpu"/"cuda") runs the same steps in torch.
    """
    return procrustes_result(X, Y, center=center, backend=backend, device=device, method=method).value


_ESTIMATOR = (
    "orthogonal Procrustes, score = 1 - ||XR - Y||_F^2 / (||X||^2 + ||Y||^2) with both sides scaled to unit "
    "Frobenius norm, residual computed directly in float64"
)


@dataclass(frozen=True, eq=False)
class ProcrustesSide:
    """One side prepared for :func:`procrustes_prepared`: scores ``U S`` of its centred (or raw) columns."""

    n: int
    x: np.ndarray = field(repr=False)  # the float64 input (direct fallback, constant-column checks)
    scores: np.ndarray = field(repr=False)  # (n, min(n, p)): Xc = scores @ V^T, V orthonormal columns
    norm: float  # ||Xc||_F
    constant: np.ndarray | None = field(repr=False)  # columns constant over all n rows (center=True)


def procrustes_prepare(
    X: Any, *, center: bool = True, backend: str = "numpy", device: Any = None, method: str = "auto"
) -> ProcrustesSide:
    """Centre (unless ``center=False``) one side and take its thin SVD, once per side.

    ``backend``/``device``/``method`` are accepted for call compatibility; the
    prepared path runs in float64 numpy score space whatever they say.
    """
    x = rescale(as_matrix(X, "X"))
    check_min_n(x.shape[0], _min_n(center), _what(center))
    xc = centre_columns(x) if center else x
    U, s, _ = np.linalg.svd(xc, full_matrices=False)
    norm = float(np.sqrt((xc * xc).sum()))
    return ProcrustesSide(x.shape[0], x, U * s, norm, constant_columns(x) if center else None)


def procrustes_prepared(
    sx: ProcrustesSide, sy: ProcrustesSide, rows_x: np.ndarray | None, rows_y: np.ndarray | None, *, center: bool
) -> np.ndarray:
    """Procrustes of ``X[rows_x[i]], Y[rows_y[i]]`` from prepared sides: ``||A_x^T A_y||_* / (||A_x|| ||A_y||)``.

    Permuted rows reuse the full-sample norms (centring commutes with a row
    permutation); resampled rows are re-centred and re-normed in score space. A
    resample that makes a column constant which was not constant on all n rows
    (``centre_columns`` would zero it) is computed directly instead, so the
    value always matches :func:`procrustes`.
    """
    n = sx.n
    given = rows_x if rows_x is not None else rows_y
    b, m = (1, n) if given is None else given.shape
    perm_x, perm_y = _perm_flags(rows_x, n, b), _perm_flags(rows_y, n, b)
    out = np.empty(b)
    for sl in chunks(b, 8 * m * (sx.scores.shape[1] + sy.scores.shape[1])):
        ax, nx = _gathered(sx, rows_x, sl, center, perm_x[sl])
        ay, ny = _gathered(sy, rows_y, sl, center, perm_y[sl])
        nuc = svdvals(np.matmul(np.swapaxes(ax, -1, -2), ay)).sum(axis=-1)  # (k,) or scalar
        with np.errstate(divide="ignore", invalid="ignore"):
            vals = nuc / (nx * ny)
        out[sl] = np.where((nx > 0) & (ny > 0), vals, np.nan)
    if center:  # a resample that makes a new column constant: the direct path (centre_columns zeroes it)
        for i in range(b):
            if _new_constant(sx, rows_x, perm_x, i) or _new_constant(sy, rows_y, perm_y, i):
                xi = sx.x if rows_x is None else sx.x[rows_x[i]]
                yi = sy.x if rows_y is None else sy.x[rows_y[i]]
                out[i] = _quiet_direct(xi, yi, center)
    return out


def _perm_flags(rows: np.ndarray | None, n: int, b: int) -> np.ndarray:
    return np.ones(b, dtype=bool) if rows is None else is_permutation(rows, n)


def _new_constant(s: ProcrustesSide, rows: np.ndarray | None, perm: np.ndarray, i: int) -> bool:
    return rows is not None and not perm[i] and bool(np.any(constant_columns(s.x[rows[i]]) != s.constant))


def _gathered(
    s: ProcrustesSide, rows: np.ndarray | None, sl: slice, center: bool, perm: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the indexed rows (re-centred for resamples) and their Frobenius norms.

    ``(n, r)`` and the full norm for all rows in order; ``(k, m, r)`` and ``(k,)`` otherwise.
    """
    k = sl.stop - sl.start
    if rows is None:
        return s.scores, np.full(k, s.norm)
    a = s.scores[rows[sl]]
    if perm.all():
        return a, np.full(k, s.norm)
    if center:
        a = a - a.mean(axis=1, keepdims=True)
    return a, np.where(perm, s.norm, np.sqrt(np.einsum("kij,kij->k", a, a)))


def _quiet_direct(x: np.ndarray, y: np.ndarray, center: bool) -> float:
    """The direct value, without repeating the warnings the prepared sides already gave."""
    import warnings

    from interlingua.analysis.measures.validation import MeasureWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return procrustes_result(x, y, center=center).value


def _min_n(center: bool) -> int:
    """Fewest rows with a value that depends on the data: two centred rows are ``+-d/2`` on each side, so any
    two centred sides align exactly (score 1 whatever the data); uncentred, two rows still carry an angle."""
    return 3 if center else 2


def _what(center: bool) -> str:
    if center:
        return "Procrustes (at n = 2 the two centred rows are +-d/2 on each side, so every pair scores 1)"
    return "uncentred Procrustes"


def _procrustes_id(center: bool) -> str:
    return f"procrustes_resid2_{'centered' if center else 'raw'}_unitnorm"


def _fn(X: Any, Y: Any, *, center: bool, **kw: Any) -> MeasureResult:
    return procrustes_result(X, Y, center=center, **kw)


for _center in (True, False):
    register(
        Measure(
            id=_procrustes_id(_center),
            metadata=MeasureMetadata(
                cost_model="svd",
                larger_is_more_similar=True,
                symmetric=True,
                invariances=frozenset({"orthogonal", "isotropic_scale", "permutation"})
                | ({"translation"} if _center else set()),
                min_n=_min_n(_center),
                estimator=_ESTIMATOR + ("" if _center else ", no centring"),
                reference="Schoenemann 1966; Williams et al. 2021 (shape metrics)",
                prepared=True,
            ),
            fn=_fn,
            params={"center": _center},
            prepare_fn=procrustes_prepare,
            prepared_fn=procrustes_prepared,
        )
    )
