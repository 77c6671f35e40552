"""Centered kernel alignment (Kornblith et al. 2019), linear and RBF, biased and debiased.

Conventions
-----------
- X is ``(n, p)``, Y is ``(n, q)``, rows are paired examples. Inputs are cast
  to float64 first and every sum accumulates in float64.
- Biased CKA uses the biased HSIC estimator: ``<Kc, Lc> / (||Kc|| ||Lc||)``
  with ``Kc = H K H``; for the linear kernel that equals the feature form
  ``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)`` on column-centred data.
- Debiased CKA replaces HSIC by the unbiased estimator of Song et al. (2012),
  computed as the inner product of U-centred Grams (Szekely & Rizzo 2014,
  Kornblith's reference code) or, for the linear kernel, in feature space from
  row norms without any n x n matrix. It needs n >= 4.
- The centring matrix H is never formed: centring subtracts row / column
  means (biased) or U-centres (unbiased) in O(n^2).
- Cross HSIC may be negative (debiased CKA < 0 happens on independent data).
  A self-HSIC ``<= 0`` (a side with no usable variance) makes CKA undefined:
  the value is nan, a :class:`MeasureWarning` says why, and
  ``MeasureResult.details["reason"]`` records it. No square root of a negative
  number is ever taken.

Forms and cost: the Gram form costs O(n^2 (p + q)), the feature form
O(n (pq + p^2 + q^2)); ``method="auto"`` picks the cheaper one. Both agree to
rounding (tests check 1e-10).

Backends: ``backend="numpy"`` (default) or ``backend="torch"`` with
``device="cpu"``/``"cuda"``; the same code runs on both (float64), see
:mod:`interlingua.analysis.measures._backend`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from interlingua.analysis.measures import _backend as bk
from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register, register_family
from interlingua.analysis.measures.validation import (
    MeasureWarning,
    _centre,
    as_matrix,
    as_tensor,
    centre_columns,
    centre_columns_rescaled,
    check_min_n,
    check_rows,
    pairwise_distances,
    rescale,
    warn,
)
from interlingua.core.errors import MeasureInputError

__all__ = [
    "gram_linear",
    "gram_rbf",
    "center_gram",
    "cka_from_grams",
    "centred_linear_gram",
    "unit_centred_gram",
    "hsic",
    "linear_cka",
    "linear_cka_result",
    "rbf_cka",
    "rbf_cka_result",
    "cka_grid",
    "cka_grid_peak_bytes",
]

_METHODS = ("auto", "gram", "feature")
#: biased linear CKA's minimum n, with the reason (two centred rows make every pair of sides score 1)
_CKA_WHAT = "CKA (at n = 2 the two centred rows are +-d/2 on each side, so every pair scores 1)"


# --------------------------------------------------------------------------- Grams


def gram_linear(X: Any) -> Any:
    """Linear-kernel Gram matrix ``X X^T`` (n x n, float64; numpy in, numpy out; torch in, torch out).

    Centre it with :func:`center_gram`. For data with a large mean, centring the
    columns of X first (``X - X.mean(0)``) gives the same centred Gram with less
    rounding error.
    """
    x = _as_float64_matrix(X, "X")
    return x @ x.T


def gram_rbf(X: Any, sigma: float | None = None, *, factor: float = 1.0) -> tuple[Any, float]:
    """RBF Gram ``exp(-||x_i - x_j||^2 / (2 sigma^2))`` and the bandwidth used.

    ``sigma=None`` uses the median heuristic: ``sigma = factor * median_{i<j} ||x_i - x_j||``
    (median over distinct pairs, zero self-distances excluded). Squared distances
    are computed in float64 from column-centred rows and clipped at 0.
    """
    raw = _as_float64_matrix(X, "X")
    x = centre_columns(raw)
    d = pairwise_distances(x, raw)  # pairs where the Gram identity cancels are recomputed from differences
    if sigma is None:
        factor = _check_factor(factor)
        med = bk.median(d[_triu_indices(x.shape[0], d)])
        if not med > 0:
            raise MeasureInputError(_zero_median_reason(x))
        sigma = factor * med
    elif not (sigma > 0 and math.isfinite(sigma)):
        raise MeasureInputError(f"RBF bandwidth sigma must be a positive finite number; got {sigma}.")
    r = d / sigma  # scaled before squaring: tiny distances over a tiny bandwidth do not underflow
    # exp(-r^2 / 2) is 0 in float64 beyond r ~ 39; the cap only keeps r^2 from overflowing to inf on the way
    r = r.clamp(max=1e100) if bk.is_torch(r) else np.minimum(r, 1e100)
    return bk.namespace(r).exp(r * r * -0.5), float(sigma)


def _zero_median_reason(xc: Any) -> str:
    """Why the median pairwise distance is 0 (distances are exact, see :func:`pairwise_distances`)."""
    return (
        "RBF bandwidth is 0: the median pairwise distance is 0 (at least half of the row pairs are "
        "identical); the median heuristic is undefined."
    )


def _triu_indices(n: int, like: Any) -> Any:
    if bk.is_torch(like):
        import torch

        i = torch.triu_indices(n, n, offset=1, device=like.device)
        return (i[0], i[1])
    return np.triu_indices(n, k=1)


def center_gram(K: Any, unbiased: bool = False) -> Any:
    """Centre a square Gram matrix without forming the centring matrix H.

    ``unbiased=False``: ``H K H`` (subtract row and column means, add the grand mean).
    ``unbiased=True``: U-centring (Song et al. 2012; Szekely & Rizzo 2014) --
    zero the diagonal, subtract row sums / (n-2) and column sums / (n-2), add
    the total / ((n-1)(n-2)), zero the diagonal again. The inner product of two
    U-centred Grams is ``n (n-3)`` times the unbiased HSIC estimate; needs n >= 4.

    Returns a new float64 matrix (numpy or torch, like the input); ``K`` is not modified.
    """
    K = _as_float64_matrix(K, "K")
    n = K.shape[0]
    if K.shape[1] != n:
        raise MeasureInputError(f"a Gram matrix must be square; got shape {tuple(K.shape)}.")
    if unbiased:
        check_min_n(n, 4, "U-centring (unbiased HSIC)")
        return _u_centre_(bk.copy(K))
    row = K.sum(1) / n
    col = K.sum(0) / n
    total = K.sum() / (n * n)
    return K - row[:, None] - col[None, :] + total


def _u_centre_(K: Any, symmetric: bool = False) -> Any:
    """U-centre the square float64 matrix ``K`` in place (n >= 4 checked by the caller); returns ``K``.

    ``symmetric=True`` (K exactly symmetric, e.g. straight from syrk): the column
    sums are the row sums and the total is their sum, so one reduction over K
    instead of three, and two update passes instead of three.
    """
    n = K.shape[0]
    bk.zero_diagonal_(K)
    row = K.sum(1) / (n - 2)
    if symmetric:
        col, total = row, float(row.sum()) / (n - 1)
    else:
        col, total = K.sum(0) / (n - 2), K.sum() / ((n - 1) * (n - 2))
    K -= row[:, None]
    K -= (col - total)[None, :]
    return bk.zero_diagonal_(K)


def hsic(Kc: Any, Lc: Any) -> float:
    """``<Kc, Lc>_F`` for centred Grams: the HSIC estimate up to the factor 1/(n-1)^2 (biased,
    H-centred) or 1/(n(n-3)) (unbiased, U-centred)."""
    return float((Kc * Lc).sum())


def cka_from_grams(Kc: Any, Lc: Any) -> float:
    """CKA from two centred Grams (both H-centred, or both U-centred): ``<Kc,Lc> / (||Kc|| ||Lc||)``.

    Returns nan with a :class:`MeasureWarning` when a self term is <= 0 (a side
    without variance), never a NaN from the square root of a negative number.
    """
    if tuple(Kc.shape) != tuple(Lc.shape) or Kc.ndim != 2:
        raise MeasureInputError(
            f"Grams must be square and of equal shape; got {tuple(Kc.shape)} and {tuple(Lc.shape)}."
        )
    value, reason = _normalised(hsic(Kc, Lc), hsic(Kc, Kc), hsic(Lc, Lc))
    if reason:
        warn(reason)
    return value


def _normalised(kl: float, kk: float, ll: float) -> tuple[float, str]:
    """``kl / sqrt(kk ll)`` with the self terms checked before the square root."""
    if not all(math.isfinite(v) for v in (kl, kk, ll)):
        return math.nan, "CKA is undefined: an HSIC term is not finite (NaN or inf in the Gram matrices); returned nan."
    bad = [side for side, v in (("X", kk), ("Y", ll)) if not v > 0]
    if bad:
        return math.nan, (
            f"CKA is undefined: the self-HSIC of {' and '.join(bad)} is <= 0 "
            "(no variance left after centring, e.g. constant or duplicated rows); returned nan."
        )
    return kl / math.sqrt(kk * ll), ""


# --------------------------------------------------------------------------- linear CKA

#: Debiased CKA is refused when a side's unbiased self-HSIC is below this many times the rounding of the
#: U-centring (``n * eps`` times the biased self term): the value would then carry less than ~6 digits.
_DEBIAS_MARGIN = 2.0**20


def _rounding_reason(n: int, sides: tuple[tuple[str, float, float], ...]) -> str:
    """Why debiased CKA cannot be trusted in float64 here (empty when it can).

    The unbiased self-HSIC is a difference of terms of the size of the biased one (``t``); its rounding
    is ~``n eps t``. When one or a few rows dominate a side (an outlier row 1e6 times the others), the
    unbiased term shrinks towards 0 while ``t`` does not, and the value is decided by rounding.
    """
    eps = float(np.finfo(np.float64).eps)
    bad = [(name, kk, t) for name, kk, t in sides if t > 0 and kk < _DEBIAS_MARGIN * n * eps * t]
    if not bad:
        return ""
    what = "; ".join(f"{name}: {kk / t:.1e}" for name, kk, t in bad)
    return (
        "debiased CKA is not computable in float64 here: the unbiased self-HSIC is a vanishing fraction of the "
        f"biased one ({what}; rounding is ~{n * eps:.0e} of it), as when one or a few rows dominate a side "
        "(an outlier row far larger than the rest); returned nan (remove or clip the outlier rows, or use "
        "cka_linear_biased)."
    )


def _as_float64_matrix(a: Any, side: str) -> Any:
    """Checked float64 2-D array, staying on its backend (and device, for torch)."""
    return as_tensor(a, side) if bk.is_torch(a) else as_matrix(a, side)


def _centre_unit(x: Any) -> tuple[Any, float]:
    """Column-centre and scale to unit Frobenius norm (CKA is invariant to both; keeps sums O(1))."""
    xc = centre_columns(x)
    norm = float(bk.namespace(xc).sqrt((xc * xc).sum()))
    return (xc / norm if norm > 0 else xc), norm


def _choose_form(method: str, n: int, p: int, q: int) -> str:
    if method not in _METHODS:
        raise MeasureInputError(f"method must be one of {_METHODS}; got {method!r}.")
    if method != "auto":
        return method
    return "feature" if p * q + p * p + q * q <= n * (p + q) else "gram"


def _debias_terms(t: float, dx: Any, dy: Any, sx: float, sy: float, n: int) -> float:
    """Unbiased HSIC times n(n-3), in feature space (column-centred data).

    With K = Xc Xc^T: sum_{i!=j} K_ij L_ij = t - dx.dy, 1'K~1 = -sx, 1'K~L~1 = dx.dy,
    so Song et al.'s estimator reduces to t - n/(n-2) dx.dy + sx sy / ((n-1)(n-2)).
    """
    return t - n / (n - 2) * float((dx * dy).sum()) + sx * sy / ((n - 1) * (n - 2))


def _feature_terms(x: Any, y: Any, debiased: bool) -> tuple[float, float, float]:
    """(cross, self_x, self_y) HSIC terms of centred x, y in feature form."""
    n = x.shape[0]
    xy = float(((y.T @ x) ** 2).sum())
    xx = float(((x.T @ x) ** 2).sum())
    yy = float(((y.T @ y) ** 2).sum())
    if not debiased:
        return xy, xx, yy
    dx = (x * x).sum(1)
    dy = (y * y).sum(1)
    sx, sy = float(dx.sum()), float(dy.sum())
    return (
        _debias_terms(xy, dx, dy, sx, sy, n),
        _debias_terms(xx, dx, dx, sx, sx, n),
        _debias_terms(yy, dy, dy, sy, sy, n),
    )


def _centred_gram(xc: Any, debiased: bool, out: Any = None) -> Any:
    """Centred linear Gram of column-centred ``xc``: ``xc xc^T`` is already H-centred.

    numpy (OpenBLAS) evaluates ``xc @ xc.T`` with the symmetric rank-k update
    (syrk: n^2 p / 2 + O(n p) multiply-adds, half those of a general product,
    and an exactly symmetric result), also when writing into ``out`` (an
    ``(n, n)`` float64 buffer on xc's backend, e.g. one row of a stack of Grams:
    no fresh n x n allocation and no copy). U-centring (``debiased``) works in
    place on that matrix.
    """
    K = xc @ xc.T if out is None else bk.namespace(xc).matmul(xc, xc.T, out=out)
    return _u_centre_(K, symmetric=not bk.is_torch(K)) if debiased else K  # syrk: exactly symmetric


def _unit_centred_gram_into(x: Any, debiased: bool, out: Any, work: Any = None) -> bool:
    """Write the unit centred Gram of the checked float64 ``x`` (n, p) into ``out`` (n, n).

    The ONE implementation behind :func:`unit_centred_gram`, the Gram path of
    :func:`cka_grid` and the permutation nulls of :mod:`interlingua.analysis.inference`:
    exact column centring (constant columns exactly 0, so a side without
    variance has a Gram of exactly 0, never normalised rounding noise; a
    power-of-two rescale only for extreme magnitudes), one syrk into ``out``,
    U-centring in place if ``debiased``, and an in-place scaling to unit
    Frobenius norm. ``work``: optional flat float64 buffer of at least n p
    elements for the centred data (reused across the layers of a grid).
    Returns False, with ``out`` all nan, when the centred Gram is 0.
    """
    n, p = x.shape
    buf = None if work is None else work[: n * p].reshape(n, p)
    K = _centred_gram(centre_columns_rescaled(x, buf), debiased, out)
    norm2 = _sq_norm(K)
    if 0 < norm2 < math.inf:
        K *= 1.0 / math.sqrt(norm2)
        return True
    K[...] = math.nan
    return False


def centred_linear_gram(X: Any, debiased: bool = False) -> np.ndarray:
    """Centred linear-kernel Gram of X as an ``(n, n)`` float64 numpy array, not normalised.

    ``Xc Xc^T`` of the column-centred rows (that is ``H K H`` for ``K = X X^T``),
    or its U-centring when ``debiased``. Constant columns count as exactly 0;
    data beyond 2^+-200 are first multiplied by an exact power of two (CKA is
    scale invariant). Re-centring a gathered block ``K[idx][:, idx]`` gives the
    centred Gram of the rows ``idx`` (what resampling intervals use).
    """
    x = as_matrix(X, "X")
    check_min_n(x.shape[0], 4 if debiased else 2, "a U-centred Gram (debiased CKA)" if debiased else "a centred Gram")
    return _centred_gram(centre_columns_rescaled(x), debiased)


def unit_centred_gram(X: Any, debiased: bool = False) -> np.ndarray:
    """The Gram form of linear CKA: an ``(n, n)`` float64 numpy array ``G(X)`` such that
    ``linear_cka(X, Y, debiased) == np.vdot(G(X), G(Y))`` (to rounding).

    ``G(X)`` is the centred Gram of :func:`centred_linear_gram` (H-centred, or
    U-centred when ``debiased``) scaled to unit Frobenius norm. It is
    equivariant under row permutations: ``G(X[p]) == G(X)[p][:, p]``, so a
    permuted CKA is one gather and one inner product. A side without variance
    (centred Gram 0) gives an all-nan matrix and a :class:`MeasureWarning`.
    """
    return _unit_centred_gram(X, debiased, stacklevel=3)


def _unit_centred_gram(X: Any, debiased: bool, stacklevel: int) -> np.ndarray:
    x = as_matrix(X, "X")
    n = x.shape[0]
    check_min_n(n, 4 if debiased else 3, "debiased CKA" if debiased else _CKA_WHAT)
    out = np.empty((n, n))
    if not _unit_centred_gram_into(x, debiased, out):
        warnings.warn(
            "CKA is undefined for this side: its centred Gram is 0 (no variance after centring, e.g. constant "
            "or duplicated rows); its unit Gram is all nan, so every CKA computed from it is nan.",
            MeasureWarning,
            stacklevel=stacklevel,
        )
    return out


def _sq_norm(a: Any) -> float:
    """Squared Frobenius norm in one pass without a temporary (numpy: einsum, which, unlike BLAS
    dot / vdot, does not wake sleeping BLAS threads; see benchmarks/README.md)."""
    if bk.is_torch(a):
        v = a.reshape(-1)
        return float(v @ v)
    return float(np.einsum("ij,ij->", a, a))


def _estimator_name(kernel: str, debiased: bool, form: str) -> str:
    est = "unbiased HSIC (Song et al. 2012, U-centred)" if debiased else "biased HSIC (H-centred)"
    return f"CKA, {kernel} kernel, {est}, {form} form, float64"


def linear_cka_result(
    X: Any,
    Y: Any,
    debiased: bool = False,
    *,
    method: str = "auto",
    backend: str = "numpy",
    device: Any = None,
) -> MeasureResult:
    """Linear CKA with the estimator, form and any nan reason recorded (see :func:`linear_cka`)."""
    # scale invariant: an exact power-of-two rescale keeps norms and HSIC terms inside float64 (1e-300..1e300)
    x = rescale(bk.to_backend(X, "X", backend, device))
    y = rescale(bk.to_backend(Y, "Y", backend, device))
    n = check_rows(x, y, min_n=4 if debiased else 3, what="debiased CKA" if debiased else _CKA_WHAT)
    p, q = x.shape[1], y.shape[1]
    form = _choose_form(method, n, p, q)
    xc, _ = _centre_unit(x)
    yc, _ = _centre_unit(y)
    if form == "feature":
        kl, kk, ll = _feature_terms(xc, yc, debiased)
        tx, ty = (float(((a.T @ a) ** 2).sum()) for a in (xc, yc)) if debiased else (kk, ll)
    else:
        K, L = _centred_gram(xc, False), _centred_gram(yc, False)
        tx, ty = hsic(K, K), hsic(L, L)  # the biased self terms: the scale of U-centring's rounding
        if debiased:
            K, L = _u_centre_(K, symmetric=not bk.is_torch(K)), _u_centre_(L, symmetric=not bk.is_torch(L))
        kl, kk, ll = hsic(K, L), hsic(K, K), hsic(L, L)
    reason = _rounding_reason(n, (("X", kk, tx), ("Y", ll, ty))) if debiased else ""
    value, reason = (math.nan, reason) if reason else _normalised(kl, kk, ll)
    details: dict[str, Any] = {"form": form, "debiased": debiased, "backend": backend}
    if reason:
        warn(reason)
        details["reason"] = reason
    mid = "cka_linear_debiased" if debiased else "cka_linear_biased"
    return MeasureResult(value, mid, _estimator_name("linear", debiased, form), n, details)


def linear_cka(
    X: Any,
    Y: Any,
    debiased: bool = False,
    *,
    method: str = "auto",
    backend: str = "numpy",
    device: Any = None,
) -> float:
    """Linear CKA of paired representations X (n x p) and Y (n x q).

    ``debiased=False``: biased HSIC (Kornblith 2019); inflated when n is small
    relative to the widths (independent Gaussians, n=100, width 4096: ~0.98).
    ``debiased=True``: unbiased HSIC (Song et al. 2012), ~0 on independent data;
    may be slightly negative; needs n >= 4.
    ``method``: "auto" (cheaper of the two), "gram" (n x n Grams) or "feature"
    (p x q cross-covariance, no n x n matrix). ``backend``: "numpy" or "torch"
    (``device`` "cpu"/"cuda"). Returns nan with a :class:`MeasureWarning` when a
    side has no variance.
    """
    return linear_cka_result(X, Y, debiased, method=method, backend=backend, device=device).value


# --------------------------------------------------------------------------- RBF CKA


def rbf_cka_result(
    X: Any,
    Y: Any,
    factor: float = 1.0,
    debiased: bool = False,
    *,
    backend: str = "numpy",
    device: Any = None,
) -> MeasureResult:
    """RBF-kernel CKA with the bandwidths recorded (see :func:`rbf_cka`)."""
    factor = _check_factor(factor)
    # the median heuristic makes the kernel scale free: rescale exactly so that squared distances fit float64
    x = rescale(bk.to_backend(X, "X", backend, device))
    y = rescale(bk.to_backend(Y, "Y", backend, device))
    n = check_rows(x, y, min_n=4 if debiased else 3, what="debiased RBF CKA" if debiased else "RBF CKA")
    details: dict[str, Any] = {"factor": factor, "debiased": debiased, "backend": backend}
    try:
        K, sx = gram_rbf(x, factor=factor)
        L, sy = gram_rbf(y, factor=factor)
    except MeasureInputError as exc:
        reason = f"RBF CKA is undefined: {exc} Returned nan."
        warn(reason)
        details["reason"] = reason
        return MeasureResult(math.nan, _rbf_id(factor, debiased), _estimator_name("RBF", debiased, "gram"), n, details)
    details.update(sigma_x=sx, sigma_y=sy)
    Kc, Lc = center_gram(K, debiased), center_gram(L, debiased)
    value, reason = _normalised(hsic(Kc, Lc), hsic(Kc, Kc), hsic(Lc, Lc))
    if reason:
        warn(reason)
        details["reason"] = reason
    est = _estimator_name(f"RBF (sigma = {factor} x median pairwise distance)", debiased, "gram")
    return MeasureResult(value, _rbf_id(factor, debiased), est, n, details)


def rbf_cka(
    X: Any,
    Y: Any,
    factor: float = 1.0,
    debiased: bool = False,
    *,
    backend: str = "numpy",
    device: Any = None,
) -> float:
    """CKA with RBF kernels; each side's bandwidth is ``factor`` x its median pairwise distance.

    Gram form only (the RBF kernel has no finite feature map). ``debiased`` as in
    :func:`linear_cka`. Same backends.
    """
    return rbf_cka_result(X, Y, factor, debiased, backend=backend, device=device).value


def _rbf_id(factor: float, debiased: bool) -> str:
    return f"cka_rbf{'_debiased' if debiased else ''}_median{float(factor)!r}"


# --------------------------------------------------------------------------- grid over layers


def _layer_list(layers: Any, name: str, backend: str, device: Any) -> list[Any]:
    if isinstance(layers, (str, bytes)) or layers is None:
        raise MeasureInputError(f"{name} must be a sequence of (n, p) arrays or an (L, n, p) array.")
    ndim = getattr(layers, "ndim", None)
    if ndim is not None:
        if ndim != 3:
            raise MeasureInputError(f"{name} has shape {tuple(layers.shape)}; expected (L, n, p) or a list of (n, p).")
        seq: Sequence[Any] = [layers[i] for i in range(layers.shape[0])]
    else:
        seq = list(layers)
    if not seq:
        raise MeasureInputError(f"{name} is empty; pass at least one layer.")
    return [rescale(bk.to_backend(a, f"{name}[{i}]", backend, device)) for i, a in enumerate(seq)]


def cka_grid(
    layers_a: Any,
    layers_b: Any = None,
    debiased: bool = False,
    backend: str = "numpy",
    *,
    device: Any = None,
    method: str = "auto",
) -> np.ndarray:
    """Linear CKA between every layer of A and every layer of B: an ``(La, Lb)`` float64 array.

    ``layers_a``/``layers_b``: sequences of ``(n, p_i)`` arrays (widths may differ)
    or ``(L, n, p)`` arrays; ``layers_b=None`` (or the same object) compares A with
    itself and computes each Gram once.

    Gram path (the main one): one centred (or U-centred, ``debiased=True``) Gram
    per layer, each flattened and scaled to unit norm, stacked into
    ``(La, n^2)`` and ``(Lb, n^2)`` matrices, and ONE matrix product gives the
    grid (the diagonals of the self products are 1 after the scaling; a Gram with
    norm 0 gives a nan row with a warning). The Grams are never held whole: the
    products accumulate over row blocks of the upper triangles, so memory is
    linear in n: the centred layers plus ``GRID_BLOCK_BYTES`` of blocks (see
    :func:`cka_grid_peak_bytes`).
    Feature path (``method="feature"``, or "auto" when the widths are much
    smaller than n): per pair ``||Yc^T Xc||^2`` with self terms computed once per
    layer, no n x n matrix.
    """
    bk.check_backend(backend)
    A = _layer_list(layers_a, "layers_a", backend, device)
    same = layers_b is None or layers_b is layers_a
    B = A if same else _layer_list(layers_b, "layers_b", backend, device)
    n = A[0].shape[0]
    for name, Ls in (("layers_a", A), ("layers_b", B)):
        for i, a in enumerate(Ls):
            if a.shape[0] != n:
                raise MeasureInputError(
                    f"{name}[{i}] has {a.shape[0]} rows but layers_a[0] has {n}; every layer must hold the same n "
                    "examples."
                )
    check_min_n(n, 4 if debiased else 3, "debiased CKA" if debiased else _CKA_WHAT)
    if method not in _METHODS:
        raise MeasureInputError(f"method must be one of {_METHODS}; got {method!r}.")
    pa = [a.shape[1] for a in A]
    pb = [b.shape[1] for b in B]
    if method == "auto":
        cost_gram = n * n * (sum(pa) + (0 if same else sum(pb)) + len(A) * len(B))
        cost_feat = n * (sum(pa) * sum(pb) + sum(p * p for p in pa) + (0 if same else sum(p * p for p in pb)))
        method = "feature" if cost_feat < cost_gram else "gram"
    # centred in place where the float64 arrays are this call's own conversions: one copy of each side
    A = _centred_layers(A, _raw_layers(layers_a), rescaled=method == "gram")
    B = A if same else _centred_layers(B, _raw_layers(layers_b), rescaled=method == "gram")
    # numpy, or a torch tensor on the torch backend
    grid: Any = _grid_gram(A, B, same, debiased) if method == "gram" else _grid_feature(A, B, same, debiased)
    if bk.is_torch(grid):
        grid = grid.cpu().numpy()
    if np.isnan(grid).any():
        rows = np.flatnonzero(np.isnan(grid).all(1)).tolist()
        cols = np.flatnonzero(np.isnan(grid).all(0)).tolist()
        warn(
            "cka_grid: CKA is undefined for layers without variance after centring (self-HSIC <= 0): "
            f"layers_a {rows}, layers_b {cols}; their rows/columns are nan."
        )
    return grid


GRID_BLOCK_BYTES = 256 * 2**20
"""Memory for the row blocks of the Gram path of :func:`cka_grid` (the Grams are never held whole)."""


def _grid_block_rows(n: int, la: int, lb: int, same: bool, budget: int | None = None) -> int:
    """Rows per block: the weighted and plain row blocks of every layer (``(2 La or La + Lb) m n`` floats)
    must fit in ``budget`` bytes (default :data:`GRID_BLOCK_BYTES`); at least 1, at most n."""
    budget = GRID_BLOCK_BYTES if budget is None else budget
    per_row = (2 * la if same else la + lb) * n * 8
    return int(max(1, min(n, budget // max(per_row, 1))))


def cka_grid_peak_bytes(
    n: int,
    widths_a: Sequence[int],
    widths_b: Sequence[int] | None = None,
    *,
    method: str = "auto",
    input_float64: bool = False,
) -> int:
    """Bytes :func:`cka_grid` allocates at its peak for ``n`` rows and these layer widths (an estimate).

    ``widths_b=None``: A against itself. ``input_float64``: the caller passes float64
    numpy arrays (then the centred layers are new copies, else the float64
    conversions are centred in place; either way one float64 copy of each
    side). Counted: that copy (``8 n sum(p)``), then the path's largest working
    set: the Gram path's row blocks (``GRID_BLOCK_BYTES``, or less when n is
    small) and their weights; the feature path's per-layer ``p x p`` products and
    per-pair ``p x q`` products. Not counted: the caller's own arrays and the
    interpreter. ``benchmarks/bench_grid_memory.py`` checks it against measured peaks.
    """
    pa = [int(p) for p in widths_a]
    same = widths_b is None
    pb = pa if same else [int(p) for p in (widths_b or [])]
    la, lb = len(pa), len(pb)
    if method == "auto":
        cost_gram = n * n * (sum(pa) + (0 if same else sum(pb)) + la * lb)
        cost_feat = n * (sum(pa) * sum(pb) + sum(p * p for p in pa) + (0 if same else sum(p * p for p in pb)))
        method = "feature" if cost_feat < cost_gram else "gram"
    data = 8 * n * (sum(pa) + (0 if same else sum(pb)))
    pmax = max(pa + pb)
    if method == "gram":
        m = _grid_block_rows(n, la, lb, same)
        work = 8 * m * n * ((2 * la if same else la + lb) + 2) + 8 * n * pmax  # blocks, weights + product, one x*x
    else:
        qmax = max(pb)
        work = 8 * max(n * pmax, 2 * pmax * pmax, 2 * max(pa) * qmax)
    return int(data + work)


def _raw_layers(layers: Any) -> list[Any]:
    """The caller's layer objects in the order :func:`_layer_list` converted them."""
    if getattr(layers, "ndim", None) is not None:
        return [layers[i] for i in range(layers.shape[0])]
    return list(layers)


def _host_view(a: Any) -> Any:
    """``a`` as a numpy array sharing its memory where it lives in host memory, else None."""
    if isinstance(a, np.ndarray):
        return a
    if bk.is_torch(a):
        return a.detach().numpy() if a.device.type == "cpu" else None
    return None


def _may_share(x: Any, orig: Any) -> bool:
    """Whether the checked float64 array ``x`` may share memory with the caller's ``orig`` (then it is
    never written to); False only where it is certainly a fresh conversion."""
    if x is orig:
        return True
    try:
        hx, ho = _host_view(x), _host_view(orig)
        if hx is None:  # on a device: a fresh copy unless orig is the same device tensor
            return bool(bk.is_torch(orig) and x.untyped_storage().data_ptr() == orig.untyped_storage().data_ptr())
        return ho is not None and bool(np.shares_memory(hx, ho))
    except Exception:  # noqa: BLE001 - an unknown array type: assume shared, copy
        return True


def _centred_layers(Ls: list[Any], originals: list[Any], rescaled: bool) -> list[Any]:
    """Column-centred layers (exact zero for constant columns), in place where the float64 array is
    a conversion this call made (never the caller's own array), so at most one extra copy exists."""
    out = []
    for x, orig in zip(Ls, originals):
        buf = None if _may_share(x, orig) else x
        out.append(centre_columns_rescaled(x, buf) if rescaled else _centre(x, buf)[0])
    return out


def _weighted_sq(K: Any, w: Any) -> float:
    """``sum(w * K * K)`` without temporaries on numpy (einsum; see :func:`_sq_norm`)."""
    if bk.is_torch(K):
        return float((K * K * w).sum())
    return float(np.einsum("ij,ij,ij->", K, K, w))


class _BlockGram:
    """Row blocks ``K[r0:r1, r0:]`` of one layer's centred (or U-centred) Gram, never the whole Gram.

    ``xc``: the column-centred layer. Biased: ``K = xc xc^T`` (already H-centred).
    Debiased: U-centring from row sums known in advance: with the diagonal
    zeroed, row i of ``xc xc^T`` sums to ``r_i = xc_i . s - ||xc_i||^2``
    (``s`` the column sums of ``xc``), so each entry off the diagonal is
    ``K_ij - r_i/(n-2) - r_j/(n-2) + sum(r)/((n-1)(n-2))`` and the diagonal is 0,
    the same matrix :func:`_u_centre_` makes of the whole Gram.
    """

    def __init__(self, xc: Any, debiased: bool) -> None:
        self.xc = xc
        self.debiased = debiased
        if debiased:
            n = xc.shape[0]
            r = xc @ xc.sum(0) - (xc * xc).sum(1)
            self.u = r / (n - 2)
            self.c = float(self.u.sum()) / (n - 1)

    def block(self, r0: int, r1: int, out: Any) -> Any:
        """Write ``K[r0:r1, r0:]`` into ``out`` (an ``(r1 - r0, n - r0)`` float64 view); returns it."""
        xc = self.xc
        K = bk.namespace(xc).matmul(xc[r0:r1], xc[r0:].T, out=out)
        if self.debiased:
            K -= self.u[r0:r1, None]
            K -= (self.u[r0:] - self.c)[None, :]
            bk.zero_diagonal_(K[:, : r1 - r0])
        return K


def _block_weights(m: int, width: int, like: Any) -> Any:
    """Weights of the upper-triangle block ``[r0:r0+m, r0:]``: 1 on the diagonal, 2 above, 0 below, so
    ``sum(w * K * L)`` over all blocks is ``<K, L>`` for symmetric K, L."""
    w = bk.empty((m, width), like=like)
    w[...] = 2.0
    tri = w[:, :m]
    if bk.is_torch(w):
        import torch

        tri.copy_(torch.triu(torch.full((m, m), 2.0, dtype=torch.float64, device=w.device), 1))
        tri.fill_diagonal_(1.0)
    else:
        tri[...] = np.triu(np.full((m, m), 2.0), 1)
        np.fill_diagonal(tri, 1.0)
    return w


def _grid_gram(A: list[Any], B: list[Any], same: bool, debiased: bool, budget: int | None = None) -> Any:
    """The Gram path of :func:`cka_grid`, accumulated over row blocks: memory linear in n.

    ``<K_i, L_j>`` of every pair of centred Grams is summed over the row blocks
    ``[r0:r1, r0:]`` of the upper triangle (weights of :func:`_block_weights`),
    one matrix product of the stacked blocks per block; each Gram's squared norm
    accumulates the same way, and the grid is ``<K_i, L_j> / (||K_i|| ||L_j||)``
    (nan for a Gram of norm 0). Memory: the centred layers (``n sum(p)``
    floats) and ``(2 La or La + Lb) m n`` floats of blocks with
    ``m = GRID_BLOCK_BYTES / (8 n (2 La or La + Lb))`` rows, instead of the
    ``(La + Lb) n^2`` of whole Grams; the same multiply-adds as a syrk per Gram.
    """
    n = A[0].shape[0]
    PA = [_BlockGram(x, debiased) for x in A]
    PB = PA if same else [_BlockGram(x, debiased) for x in B]
    la, lb = len(PA), len(PB)
    m = _grid_block_rows(n, la, lb, same, budget)
    like = A[0]
    wa = bk.empty((la, m * n), like=like)
    ga = bk.empty((la, m * n), like=like) if same else None
    gb = None if same else bk.empty((lb, m * n), like=like)
    acc = bk.empty((la, lb), like=like)
    acc[...] = 0.0
    sa = [0.0] * la
    sb = [0.0] * lb
    for r0 in range(0, n, m):
        r1 = min(n, r0 + m)
        rows, width = r1 - r0, n - r0
        size = rows * width
        w = _block_weights(rows, width, like)
        for i, g in enumerate(PA):
            K = g.block(r0, r1, wa[i, :size].reshape(rows, width))
            if same:
                assert ga is not None
                ga[i, :size] = K.reshape(-1)
            else:
                sa[i] += _weighted_sq(K, w)
            K *= w
        if not same:
            assert gb is not None
            for j, g in enumerate(PB):
                sb[j] += _weighted_sq(g.block(r0, r1, gb[j, :size].reshape(rows, width)), w)
        other = ga if same else gb
        assert other is not None
        acc += wa[:, :size] @ other[:, :size].T
    if same:
        sa = sb = [float(v) for v in acc.diagonal()]
    grid = acc.cpu().numpy().copy() if bk.is_torch(acc) else acc
    na = np.array([math.sqrt(v) if 0 < v < math.inf else math.nan for v in sa])
    nb = np.array([math.sqrt(v) if 0 < v < math.inf else math.nan for v in sb])
    return grid / na[:, None] / nb[None, :]


def _grid_feature(A: list[Any], B: list[Any], same: bool, debiased: bool) -> np.ndarray:
    n = A[0].shape[0]

    def prep(Ls: list[Any]) -> list[tuple[Any, Any, float, float]]:
        out = []
        for xc in Ls:  # column-centred already (see cka_grid); scaled to unit norm here, in place
            norm = float(bk.namespace(xc).sqrt((xc * xc).sum()))
            if norm > 0:
                xc /= norm
            d = (xc * xc).sum(1)
            s = float(d.sum())
            self_t = float(((xc.T @ xc) ** 2).sum())
            if debiased:
                self_t = _debias_terms(self_t, d, d, s, s, n)
            out.append((xc, d, s, self_t))
        return out

    PA = prep(A)
    PB = PA if same else prep(B)
    grid = np.empty((len(PA), len(PB)))
    for i, (x, dx, sx, tx) in enumerate(PA):
        for j, (y, dy, sy, ty) in enumerate(PB):
            if same and j < i:
                grid[i, j] = grid[j, i]
                continue
            t = float(((y.T @ x) ** 2).sum())
            if debiased:
                t = _debias_terms(t, dx, dy, sx, sy, n)
            grid[i, j] = _normalised(t, tx, ty)[0]
    return grid


# --------------------------------------------------------------------------- registry

_CKA_REF = "Kornblith et al. 2019; unbiased HSIC: Song et al. 2012"
_CKA_INV = frozenset({"orthogonal", "isotropic_scale", "translation", "permutation"})


def _linear_fn(X: Any, Y: Any, *, debiased: bool, **kw: Any) -> MeasureResult:
    return linear_cka_result(X, Y, debiased, **kw)


def _rbf_fn(X: Any, Y: Any, *, factor: float, debiased: bool, **kw: Any) -> MeasureResult:
    return rbf_cka_result(X, Y, factor, debiased, **kw)


def _linear_unit_gram(X: Any, *, debiased: bool) -> np.ndarray:
    return _unit_centred_gram(X, debiased, stacklevel=4)  # attributed to the caller of Measure.unit_gram


def _linear_grid(layers_a: Any, layers_b: Any, *, debiased: bool, **kw: Any) -> np.ndarray:
    return cka_grid(layers_a, layers_b, debiased, **kw)


def _linear_measure(debiased: bool) -> Measure:
    return Measure(
        id="cka_linear_debiased" if debiased else "cka_linear_biased",
        metadata=MeasureMetadata(
            cost_model="gram",
            larger_is_more_similar=True,
            symmetric=True,
            invariances=_CKA_INV,
            # two centred rows are +-d/2: every pair of sides has CKA 1 at n = 2 (biased), so 3 is the least
            # n whose value depends on the data; the U-statistic (debiased) needs 4
            min_n=4 if debiased else 3,
            estimator=_estimator_name("linear", debiased, "gram or feature"),
            bounds=(-math.inf, math.inf) if debiased else (0.0, 1.0),
            reference=_CKA_REF,
            gram=True,
            grid=True,
        ),
        fn=_linear_fn,
        params={"debiased": debiased},
        unit_gram_fn=_linear_unit_gram,
        grid_fn=_linear_grid,
    )


#: RBF bandwidth factors (times the median distance) that give a kernel depending on the data: far below,
#: every off-diagonal entry underflows to 0 (the identity kernel: CKA 1 whatever the data); far above, the
#: entries differ from 1 by less than float64 resolves (the centred kernel is rounding noise).
RBF_FACTOR_RANGE = (1e-6, 1e6)


def _check_factor(factor: Any) -> float:
    try:
        f = float(factor)
    except (TypeError, ValueError):
        raise MeasureInputError(f"RBF bandwidth factor must be a number; got {factor!r}.") from None
    lo, hi = RBF_FACTOR_RANGE
    if not lo <= f <= hi:
        raise MeasureInputError(
            f"RBF bandwidth factor must lie in [{lo:g}, {hi:g}] (times the median pairwise distance); got {factor!r}. "
            "Far below, every off-diagonal kernel entry is 0 in float64 (CKA 1 for any data); far above, the kernel "
            "differs from 1 by less than float64 resolves. Typical factors are 0.2 ... 5."
        )
    return f


def _rbf_measure(factor: float, debiased: bool) -> Measure:
    factor = _check_factor(factor)
    return Measure(
        id=_rbf_id(factor, debiased),
        metadata=MeasureMetadata(
            cost_model="rbf",
            larger_is_more_similar=True,
            symmetric=True,
            # the median heuristic scales sigma with the data, so isotropic scaling cancels
            invariances=_CKA_INV,
            min_n=4 if debiased else 3,
            bounds=(-math.inf, math.inf) if debiased else (0.0, 1.0),
            estimator=_estimator_name(f"RBF (sigma = {factor} x median pairwise distance)", debiased, "gram"),
            reference=_CKA_REF,
        ),
        fn=_rbf_fn,
        params={"factor": float(factor), "debiased": debiased},
    )


register(_linear_measure(False))
register(_linear_measure(True))
register(_rbf_measure(1.0, False))
register(_rbf_measure(1.0, True))
_FLOAT = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
register_family(r"cka_rbf_median" + _FLOAT, lambda m: _rbf_measure(float(m.group(1)), False), "cka_rbf_median<factor>")
register_family(
    r"cka_rbf_debiased_median" + _FLOAT,
    lambda m: _rbf_measure(float(m.group(1)), True),
    "cka_rbf_debiased_median<factor>",
)
