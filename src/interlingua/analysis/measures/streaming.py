"""Linear CKA over rows that arrive in chunks: feature-space sums, never an n x n Gram nor all rows.

:class:`StreamingLinearCKA` keeps, in float64, the sums linear CKA needs and
nothing that grows with n: per side the column sums ``s``, the cross-product
``S = X^T X``, and (for the debiased estimator) the row norms' sums
``A = sum_i a_i``, ``sum_i a_i^2`` and ``v = sum_i a_i x_i`` (``a_i = ||x_i||^2``);
across sides ``X^T Y``, ``sum_i a_i b_i``, ``sum_i a_i y_i`` and ``sum_i b_i x_i``.
Memory is ``O(p^2 + q^2 + p q)`` whatever n: at width 576 on both sides, 8 MB.

Biased CKA (Kornblith et al. 2019), with ``C_xy = X^T Y - s_x s_y^T / n`` the
centred cross-product: ``||C_xy||_F^2 / (||C_xx||_F ||C_yy||_F)``.

Debiased CKA (unbiased HSIC, Song et al. 2012). On column-centred rows,
``n (n - 3) HSIC_u = t - n / (n - 2) D + T_x T_y / ((n - 1) (n - 2))`` with
``t = ||C_xy||_F^2``, ``T_x = tr C_xx`` and ``D = sum_i ||xc_i||^2 ||yc_i||^2``
(the in-memory feature form, :mod:`interlingua.analysis.measures.cka`). ``D`` couples
the two sides row by row, but it is a polynomial in the rows and the mean, so
it expands exactly into the accumulated sums (``mu = s / n``)::

    D = sum a_i b_i - 2 mu_y . sum a_i y_i - 2 mu_x . sum b_i x_i + |mu_y|^2 A + |mu_x|^2 B
        + 4 mu_x^T (X^T Y) mu_y - 3 n |mu_x|^2 |mu_y|^2

(``mu_x . s_x = n |mu_x|^2`` folds three terms into the last one); the self
terms are the same expression with ``Y = X``.

Rounding: raw sums of rows with a large common offset lose digits when the
mean is subtracted at the end. Every row is therefore shifted by its side's
first-chunk mean before it is added (centred quantities do not depend on the
shift), which leaves only the small residual mean to cancel.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from interlingua.analysis.measures.cka import _normalised
from interlingua.analysis.measures.validation import as_matrix, warn
from interlingua.core.errors import MeasureInputError

__all__ = ["StreamingLinearCKA", "streaming_linear_cka"]


class _Side:
    """One side's sums, over rows shifted by the first chunk's mean."""

    def __init__(self, first: np.ndarray, debiased: bool) -> None:
        p = first.shape[1]
        self.shift = first.mean(axis=0)
        self.s = np.zeros(p)
        self.S = np.zeros((p, p))
        self.debiased = debiased
        if debiased:
            self.A = 0.0
            self.AA = 0.0
            self.v = np.zeros(p)  # sum_i a_i x_i

    def add(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Add shifted rows; return them and their squared norms (for the cross sums)."""
        xs = x - self.shift
        self.s += xs.sum(axis=0)
        self.S += xs.T @ xs
        a = None
        if self.debiased:
            a = np.einsum("ij,ij->i", xs, xs)
            self.A += float(a.sum())
            self.AA += float(a @ a)
            self.v += a @ xs
        return xs, a


class StreamingLinearCKA:
    """Linear CKA of paired rows fed in chunks: ``update(X_chunk, Y_chunk)`` any number of times, then
    :meth:`cka`. Equal to :func:`~interlingua.analysis.measures.linear_cka` on the stacked rows (to float64 rounding),
    whatever the chunk sizes and order (rows are exchangeable in CKA).

    ``debiased=True`` (the default) also keeps the row-norm sums that the unbiased HSIC needs, so
    :meth:`cka` can give both estimators; with ``False`` only the biased one is available (a little less work
    per chunk). Inputs: numpy arrays or torch tensors, any float dtype (summed in float64).
    """

    def __init__(self, *, debiased: bool = True) -> None:
        self.debiased = bool(debiased)
        self.n = 0
        self._x: _Side | None = None
        self._y: _Side | None = None

    def update(self, X_chunk: Any, Y_chunk: Any) -> StreamingLinearCKA:
        """Add paired rows ``(m, p)`` and ``(m, q)``; returns ``self``."""
        x, y = as_matrix(X_chunk, "X_chunk"), as_matrix(Y_chunk, "Y_chunk")
        if x.shape[0] != y.shape[0]:
            raise MeasureInputError(
                f"X_chunk and Y_chunk must hold the same rows (paired examples); got {x.shape[0]} and {y.shape[0]}."
            )
        if self._x is None or self._y is None:
            self._x, self._y = _Side(x, self.debiased), _Side(y, self.debiased)
            p, q = x.shape[1], y.shape[1]
            self._Sxy = np.zeros((p, q))
            if self.debiased:
                self._ab = 0.0
                self._ay = np.zeros(q)  # sum_i a_i y_i
                self._bx = np.zeros(p)  # sum_i b_i x_i
        for side, arr, name in ((self._x, x, "X"), (self._y, y, "Y")):
            if arr.shape[1] != side.s.size:
                raise MeasureInputError(
                    f"{name}_chunk has width {arr.shape[1]}, earlier chunks {side.s.size}; every chunk of a side "
                    "must have the same columns."
                )
        xs, a = self._x.add(x)
        ys, b = self._y.add(y)
        self._Sxy += xs.T @ ys
        if a is not None and b is not None:  # the debiased sums: add returns the squared norms then
            self._ab += float(a @ b)
            self._ay += a @ ys
            self._bx += b @ xs
        self.n += x.shape[0]
        return self

    def extend(self, chunks: Iterable[tuple[Any, Any]]) -> StreamingLinearCKA:
        """``update`` every ``(X_chunk, Y_chunk)`` of an iterable (e.g. a generator over a corpus)."""
        for x, y in chunks:
            self.update(x, y)
        return self

    def terms(self, debiased: bool = False) -> tuple[float, float, float]:
        """(cross, self_x, self_y) HSIC terms (times n (n - 3) when debiased; CKA is their normalised ratio)."""
        n = self.n
        need = 4 if debiased else 2
        if n < need or self._x is None or self._y is None:
            raise MeasureInputError(
                f"{'debiased ' if debiased else ''}CKA needs at least {need} rows; {n} have been added "
                "(call update with more rows first)."
            )
        if debiased and not self.debiased:
            raise MeasureInputError(
                "this accumulator was made with debiased=False and kept no row-norm sums; make it with "
                "StreamingLinearCKA(debiased=True) to get debiased CKA."
            )
        X, Y = self._x, self._y
        mx, my = X.s / n, Y.s / n
        cxy = self._Sxy - np.outer(X.s, my)
        cxx = X.S - np.outer(X.s, mx)
        cyy = Y.S - np.outer(Y.s, my)
        t_xy, t_xx, t_yy = (float(np.vdot(c, c)) for c in (cxy, cxx, cyy))
        if not debiased:
            return t_xy, t_xx, t_yy
        Tx, Ty = float(np.trace(cxx)), float(np.trace(cyy))
        mx2, my2 = float(mx @ mx), float(my @ my)
        d_xy = (
            self._ab
            - 2.0 * float(my @ self._ay)
            - 2.0 * float(mx @ self._bx)
            + my2 * X.A
            + mx2 * Y.A
            + 4.0 * float(mx @ self._Sxy @ my)
            - 3.0 * n * mx2 * my2
        )
        d_xx = X.AA - 4.0 * float(mx @ X.v) + 2.0 * mx2 * X.A + 4.0 * float(mx @ X.S @ mx) - 3.0 * n * mx2 * mx2
        d_yy = Y.AA - 4.0 * float(my @ Y.v) + 2.0 * my2 * Y.A + 4.0 * float(my @ Y.S @ my) - 3.0 * n * my2 * my2

        def unbiased(t: float, d: float, sa: float, sb: float) -> float:
            return t - n / (n - 2) * d + sa * sb / ((n - 1) * (n - 2))

        return unbiased(t_xy, d_xy, Tx, Ty), unbiased(t_xx, d_xx, Tx, Tx), unbiased(t_yy, d_yy, Ty, Ty)

    def cka(self, debiased: bool = False) -> float:
        """Linear CKA of every row added so far (nan, with a warning, when a side has no variance)."""
        value, reason = _normalised(*self.terms(debiased))
        if reason:
            warn(reason)
        return value

    @property
    def nbytes(self) -> int:
        """Bytes held by the accumulated sums (independent of n)."""
        arrays = [getattr(self, name) for name in ("_Sxy", "_ay", "_bx") if hasattr(self, name)]
        for side in (self._x, self._y):
            if side is not None:
                arrays += [side.shift, side.s, side.S] + ([side.v] if side.debiased else [])
        return int(sum(a.nbytes for a in arrays))


def streaming_linear_cka(chunks: Iterable[tuple[Any, Any]], debiased: bool = False) -> float:
    """Linear CKA of the rows of an iterable of ``(X_chunk, Y_chunk)`` pairs, without holding them all."""
    acc = StreamingLinearCKA(debiased=debiased).extend(chunks)
    if acc.n == 0:
        raise MeasureInputError("streaming_linear_cka got no chunks; pass an iterable of (X_chunk, Y_chunk) pairs.")
    value = acc.cka(debiased)
    return value if math.isfinite(value) else math.nan
