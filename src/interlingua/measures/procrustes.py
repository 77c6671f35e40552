"""Orthogonal Procrustes alignability.

Score convention (id ``procrustes_resid2_centered_unitnorm``):

1. centre the columns of X and Y (``center=False`` skips this; the id then reads
   ``procrustes_resid2_raw_unitnorm``) and scale each side to unit Frobenius norm;
2. fit the best orthogonal map from the narrower side into the wider one:
   for ``p <= q``, ``R = U V^T`` from the thin SVD ``X^T Y = U S V^T`` is
   ``p x q`` with orthonormal rows (semi-orthogonal; square and orthogonal when
   ``p == q``); for ``p > q`` the roles swap (Y is mapped into X's space);
3. compute the residual ``r = ||X R - Y||_F`` DIRECTLY, in float64;
4. score ``= 1 - r^2 / (||X||^2 + ||Y||^2) = 1 - r^2 / 2``.

The score lies in [0, 1]; 1 means one side is an exact rotation (or, for
p != q, an isometric embedding) of the other. Mathematically it equals the
nuclear norm ``||X^T Y||_*`` of the normalised sides, which is why it is
symmetric, but the expansion ``2 - 2 ||X^T Y||_*`` cancels catastrophically
near perfect alignment (worst in float32); the direct residual does not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from interlingua.measures.base import Measure, MeasureMetadata, MeasureResult, register
from interlingua.measures import _backend as bk
from interlingua.measures.validation import centre_columns, check_pair, check_rows, warn

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


def procrustes_result(
    X: Any, Y: Any, *, center: bool = True, backend: str = "numpy", device: Any = None
) -> MeasureResult:
    """Procrustes alignability with the residual, map direction and nuclear norm recorded (see :func:`procrustes`)."""
    x = bk.to_backend(X, "X", backend, device)
    y = bk.to_backend(Y, "Y", backend, device)
    n = check_rows(x, y, min_n=2, what="Procrustes")
    mid = _procrustes_id(center)
    xn, nx = _normalise(x, center)
    yn, ny = _normalise(y, center)
    if not (nx > 0 and ny > 0):
        bad = " and ".join(s for s, v in (("X", nx), ("Y", ny)) if not v > 0)
        reason = f"Procrustes is undefined: {bad} is zero" + (" after centring" if center else "") + "; returned nan."
        warn(reason)
        return MeasureResult(math.nan, mid, _ESTIMATOR, n, {"reason": reason})
    src, dst, direction = (xn, yn, "X->Y") if x.shape[1] <= y.shape[1] else (yn, xn, "Y->X")
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
    }
    return MeasureResult(value, mid, _ESTIMATOR, n, details)


def procrustes(X: Any, Y: Any, *, center: bool = True, backend: str = "numpy", device: Any = None) -> float:
    """Orthogonal-Procrustes alignability in [0, 1]: ``1 - ||X R - Y||_F^2 / 2`` after centring
    (unless ``center=False``) and scaling each side to unit Frobenius norm; R (semi-)orthogonal,
    residual computed directly in float64. Symmetric; p != q handled by mapping the narrower
    side into the wider one. ``backend="torch"`` (``device`` "cpu"/"cuda") runs the same steps in torch.
    """
    return procrustes_result(X, Y, center=center, backend=backend, device=device).value


_ESTIMATOR = (
    "orthogonal Procrustes, score = 1 - ||XR - Y||_F^2 / (||X||^2 + ||Y||^2) with both sides scaled to unit "
    "Frobenius norm, residual computed directly in float64"
)


def _procrustes_id(center: bool) -> str:
    return f"procrustes_resid2_{'centered' if center else 'raw'}_unitnorm"


def _fn(X: Any, Y: Any, *, center: bool, **kw: Any) -> MeasureResult:
    return procrustes_result(X, Y, center=center, **kw)


for _center in (True, False):
    register(
        Measure(
            id=_procrustes_id(_center),
            metadata=MeasureMetadata(
                larger_is_more_similar=True,
                symmetric=True,
                invariances=frozenset({"orthogonal", "isotropic_scale", "permutation"})
                | ({"translation"} if _center else set()),
                min_n=2,
                estimator=_ESTIMATOR + ("" if _center else ", no centring"),
                reference="Schoenemann 1966; Williams et al. 2021 (shape metrics)",
            ),
            fn=_fn,
            params={"center": _center},
        )
    )
