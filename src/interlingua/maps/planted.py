"""A planted-answer control for every estimator: a side and its rotated twin, whose map is a known ``Q``.

The identity control (a side mapped onto itself must give ``I``) cannot catch a map applied in the wrong
direction or transposed (``I`` is its own inverse and transpose) or a basis mix-up. A model and its rotated
twin (:mod:`interlingua.patching.twin`: the same function with the residual stream rotated by a random
orthogonal ``Q``) can: the twin's states are the model's times ``Q``, so the map fitted from one to the
other has the known answer ``Q``, which is neither the identity nor symmetric.

:func:`planted_rotation_control` fits each estimator on ``(X, X Q)`` (or on the twin's own states ``Y``)
and reports ``||R - Q||_F / sqrt(d)`` against what the estimator must give, with a held-out P@1:

* ``procrustes`` / ``procrustes_span`` and ``affine``: exactly ``Q`` when the centred rows span the width
  (``n_fit - 1 >= d`` and full rank): Procrustes because ``X_c^T Y_c = X_c^T X_c Q`` has the SVD
  ``V S^2 (Q^T V)^T`` and ``U V^T = Q``; least squares because ``X_c Q`` is fitted without residual. The
  deviation is rounding: at most :data:`EXACT_TOL` (1e-8) for float64 rows whose centred Gram matrix has a
  condition number under ~1e6 (the rounding of an SVD or QR solve grows with it).
* ``ridge`` (penalty ``alpha``, chosen by its inner CV or fixed): ``R = (G + alpha I)^{-1} G Q`` with
  ``G = X_c^T X_c``, so ``R - Q = -alpha (G + alpha I)^{-1} Q`` and, ``Q`` being orthogonal,
  ``||R - Q||_F = sqrt(sum_i (alpha / (lambda_i + alpha))^2)`` over the eigenvalues ``lambda_i`` of ``G``:
  the deviation the data and the chosen penalty imply (``expected_dev``), not zero. Ridge passes when its
  deviation equals that to :data:`EXACT_TOL`, i.e. it shrinks exactly as a ridge must and nothing
  else (a transposed or mis-oriented ridge map is ~sqrt(2) away), and that expected deviation is under
  :data:`RIDGE_MAX_DEV` (the penalty did not wash the map out).

Held-out P@1: every 5th row is left out of a refit on the others and its mapped row must be nearest (cosine,
training-mean centred) to its own twin row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from interlingua.maps.errors import MapInputError

__all__ = ["EXACT_TOL", "RIDGE_MAX_DEV", "planted_rotation_control", "ridge_shrinkage_norm", "rotation_deviation"]

#: Procrustes and affine recover Q to this (||R - Q||_F / sqrt(d)) when the centred rows span the width
EXACT_TOL = 1e-8
#: ridge's implied deviation (its penalty's shrinkage on these rows) must be under this for the control to pass
RIDGE_MAX_DEV = 0.1


def rotation_deviation(coef: Any, q: Any) -> float:
    """``||R - Q||_F / sqrt(d)``: 0 for the planted answer; a transposed random rotation is about sqrt(2) away."""
    r, q = np.asarray(coef, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if r.shape != q.shape:
        return math.nan
    return float(np.linalg.norm(r - q) / math.sqrt(q.shape[0]))


def ridge_shrinkage_norm(eig: Any, alpha: float) -> float:
    """``||R - A||_F`` of a ridge map fitted from rows ``X`` onto ``X A`` (``A`` orthogonal), penalty ``alpha``:
    ``sqrt(sum_i (alpha / (lambda_i + alpha))^2)`` over the eigenvalues ``lambda_i`` of ``X_c^T X_c`` given (all of
    them for the whole space; those of the directions the rows determine for the deviation on their span)."""
    lam = np.clip(np.asarray(eig, dtype=np.float64), 0.0, None)
    return float(np.sqrt(np.sum((alpha / (lam + alpha)) ** 2))) if alpha > 0 else 0.0


def _held_out_p1(est: Any, x: np.ndarray, y: np.ndarray) -> float:
    from interlingua.maps.retrieval import retrieval_ranks

    test = np.arange(x.shape[0]) % 5 == 4
    if test.sum() < 2 or (~test).sum() - 1 < x.shape[1]:
        return math.nan
    m = est.clone().fit(x[~test], y[~test])
    pred = m.transform(x[test]) - m.transform(x[~test]).mean(axis=0)
    true = y[test] - y[~test].mean(axis=0)
    return float(np.mean(retrieval_ranks(pred, true, csls_k=0).cosine == 0))


def planted_rotation_control(
    x: Any,
    q: Any,
    y: Any = None,
    *,
    estimators: Sequence[Any] = ("procrustes", "affine", "ridge"),
    tol: float = EXACT_TOL,
) -> list[dict[str, Any]]:
    """One row per estimator: the map fitted from ``x`` onto its twin ``y`` (default ``x @ q``) against ``q``.

    Columns: ``estimator``, ``n_fit``, ``width``, ``rank`` (centred rows), ``dev`` (``||R - Q||_F / sqrt(d)``),
    ``dev_transposed`` (the same map read as ``R^T``: what a map applied transposed would be judged),
    ``expected_dev`` (0, or ridge's implied shrinkage), ``alpha`` (ridge), ``held_out_p1``, ``passed`` and
    ``note``. ``y`` given (a twin's own extracted states) is compared as it is: its rounding adds to ``dev``.
    """
    from interlingua.maps.estimators import Map, get_map
    from interlingua.maps.evaluate import centred_rank

    x = np.asarray(x, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if x.ndim != 2 or q.shape != (x.shape[1], x.shape[1]):
        raise MapInputError(f"x must be (n, d) and q (d, d); got {x.shape} and {q.shape}")
    if not np.allclose(q.T @ q, np.eye(q.shape[0]), atol=1e-10):
        raise MapInputError("q must be orthogonal (q^T q = I): the planted answer is a rotation")
    y = x @ q if y is None else np.asarray(y, dtype=np.float64)
    if y.shape != x.shape:
        raise MapInputError(f"y must have x's shape {x.shape}; got {y.shape}")
    n, d = x.shape
    rank = centred_rank(x)
    spans = n - 1 >= d and rank == d
    xc = x - x.mean(axis=0)
    eig = np.clip(np.linalg.eigvalsh(xc.T @ xc), 0.0, None)
    rows = []
    for spec in estimators:
        est: Map = get_map(spec) if not isinstance(spec, Map) else spec.clone()
        m = est.clone().fit(x, y)
        coef = getattr(m, "coef_", None)
        if coef is None:
            raise MapInputError(f"{est.name} has no matrix; the planted-rotation control needs a linear map")
        dev = rotation_deviation(coef, q)
        alpha = (m.fit_info_ or {}).get("alpha")
        notes = []
        if alpha is not None:
            expected = ridge_shrinkage_norm(eig, float(alpha)) / math.sqrt(d)
            ok = abs(dev - expected) <= tol and expected <= RIDGE_MAX_DEV
            if expected > RIDGE_MAX_DEV:
                notes.append(f"ridge's penalty ({alpha:.3g}) shrinks the map {expected:.3g} away from Q")
        else:
            expected = 0.0
            ok = spans and dev <= tol
            if not spans:
                notes.append(f"the centred rows do not span the width (n_fit {n}, rank {rank}, width {d})")
        if not abs(dev - expected) <= tol:
            notes.append(f"||R - Q||_F / sqrt(d) = {dev:.3g}, expected {expected:.3g}")
        rows.append(
            {
                "estimator": m.name,
                "n_fit": n,
                "width": d,
                "rank": rank,
                "dev": dev,
                "dev_transposed": rotation_deviation(np.asarray(coef).T, q),
                "expected_dev": expected,
                "alpha": math.nan if alpha is None else float(alpha),
                "held_out_p1": _held_out_p1(est, x, y),
                "passed": bool(ok),
                "note": "; ".join(notes),
            }
        )
    return rows
