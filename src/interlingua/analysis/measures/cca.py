"""Canonical correlation analysis and its descendants: CCA, SVCCA (Raghu 2017), PWCCA (Morcos 2018).

All three start the same way: cast to float64, centre the columns, drop
constant columns (with a :class:`MeasureWarning` that says how many), and take
an orthonormal basis of each side's column space from a thin SVD. The
canonical correlations are the singular values of ``Qx^T Qy``.

Width against n. The centred rows live in an (n-1)-dimensional space, so when
``rank(X) + rank(Y) > n - 1`` at least ``rank(X) + rank(Y) - (n - 1)``
canonical correlations are exactly 1 whatever the data: CCA is ill-posed.
Such inputs are never scored silently. With ``wide="reduce"`` (default) each
side is cut to its top ``(n - 1) // 2`` principal components and a warning
says so; with ``wide="refuse"`` a :class:`MeasureInputError` is raised. Even
below that limit CCA overfits when the widths approach n (random data give
large correlations); keep the widths well below n, e.g. with SVCCA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register, register_family
from interlingua.analysis.measures.validation import check_pair, constant_columns, rescale, warn
from interlingua.core.errors import MeasureInputError

__all__ = [
    "canonical_correlations",
    "cca",
    "cca_result",
    "svcca",
    "svcca_result",
    "pwcca",
    "pwcca_result",
]

_WIDE = ("reduce", "refuse")
_CCA_MIN_N = 3


@dataclass
class _Side:
    """One centred side: the kept columns, its left singular vectors and the variance spectrum."""

    name: str
    xc: np.ndarray  # centred, constant columns removed (times one power of two, see _side)
    U: np.ndarray  # left singular vectors of the numerical column space, (n, rank)
    s: np.ndarray  # singular values, (rank,)
    width: int  # original width
    dropped: int  # constant columns removed
    Vt: np.ndarray | None = None  # right singular vectors, (rank, kept columns)
    colscale: np.ndarray | None = None  # per kept column power of two the SVD saw (None: all 1)
    lost: int = 0  # dimensions the raw-column SVD could not resolve (see _side)
    peaks: tuple[float, float] = (0.0, 0.0)  # smallest and largest max |centred column|


def _side(x: np.ndarray, name: str, what: str, equilibrate: bool = True) -> _Side:
    """Centre, drop constant columns, thin SVD.

    The whole side is first multiplied by a power of two (every measure of the family is invariant to
    isotropic scale; exact, so squared singular values neither overflow nor underflow). When the columns'
    magnitudes differ by more than 2^20, the SVD of the columns each scaled by its own power of two is
    taken too: if it resolves more dimensions (e.g. one entry of 1e300 pushes every other column below the
    rank tolerance), the float64 SVD of the raw columns has lost directions. CCA and PWCCA, whose
    canonical directions depend only on the column SPACE, then use the equilibrated basis
    (``equilibrate=True``, ``colscale`` set); ``lost`` records the count either way, so that what needs
    the raw spectrum (SVCCA's variance cut, the wide='reduce' PCA cap) can refuse instead of guessing.
    """
    x = rescale(x)
    const = constant_columns(x)
    dropped = int(const.sum())
    if dropped == x.shape[1]:
        raise MeasureInputError(f"{what}: every column of {name} is constant; there is nothing to correlate.")
    if dropped:
        warn(f"{what}: dropped {dropped} constant column(s) of {name} (zero variance over the {x.shape[0]} rows).")
        x = x[:, ~const]
    xc = x - x.mean(axis=0)
    U, s, Vt = np.linalg.svd(xc, full_matrices=False)
    rank = _rank(s, xc.shape)
    colscale, lost = None, 0
    peaks = np.max(np.abs(xc), axis=0)
    if peaks.max() > 2.0**20 * peaks.min():
        f = np.ldexp(1.0, -np.frexp(peaks)[1])
        Ue, se, Vte = np.linalg.svd(xc * f, full_matrices=False)
        rank_e = _rank(se, xc.shape)
        if rank_e > rank:
            lost = rank_e - rank
            if equilibrate:
                U, s, Vt, rank, colscale = Ue, se, Vte, rank_e, f
    return _Side(
        name,
        xc,
        U[:, :rank],
        s[:rank],
        width=x.shape[1] + dropped,
        dropped=dropped,
        Vt=Vt[:rank],
        colscale=colscale,
        lost=lost,
        peaks=(float(peaks.min()), float(peaks.max())),
    )


def _rank(s: np.ndarray, shape: tuple[int, ...]) -> int:
    tol = s[0] * max(shape) * np.finfo(np.float64).eps if s.size else 0.0
    return int(np.count_nonzero(s > tol))


def _ill_scaled(sx: _Side, sy: _Side, what: str, reduced: bool) -> str:
    """The reason a CCA / PWCCA value cannot be computed in float64 (empty when it can); see :func:`_side`.

    The equilibrated basis serves the full column space; the wide='reduce' cap keeps top principal
    components, which the equilibrated SVD does not give and the raw one could not resolve.
    """
    bad = [side for side in (sx, sy) if side.lost and reduced]
    if not bad:
        return ""
    parts = "; ".join(
        f"the centred columns of {side.name} range in size from {side.peaks[0]:.1e} to {side.peaks[1]:.1e} "
        f"(relative), so a float64 SVD of the raw columns resolves only {side.U.shape[1] - side.lost} of their "
        f"{side.U.shape[1]} dimensions"
        for side in bad
    )
    return (
        f"{what} is not computable in float64: the widths need the wide='reduce' principal-component cap, but "
        f"{parts} (e.g. one huge outlier entry); returned nan (standardise the columns, e.g. "
        "compare(..., standardize=True), remove the outlier, or use fewer columns than n/2)."
    )


def distinct_rows(*sides: np.ndarray) -> int:
    """How many distinct joint rows ``[X Y]`` there are: duplicated rows (a bootstrap resample, or repeated
    examples) lie in one point, so n rows with d distinct span only d - 1 centred dimensions."""
    ids = [np.unique(s, axis=0, return_inverse=True)[1].reshape(-1) for s in sides]
    joint = ids[0].astype(np.int64)
    for other in ids[1:]:
        joint = joint * (int(other.max()) + 1) + other
    return int(np.unique(joint).size)


def _check_wide(
    kx: int, ky: int, n: int, wide: str, what: str, sx: _Side, sy: _Side, distinct: int | None = None
) -> tuple[int, int]:
    """Cap the kept dimensions so that no canonical correlation is 1 by dimension counting alone.

    ``distinct``: the number of distinct joint rows (default n). Centred rows span at most
    ``distinct - 1`` dimensions, so that, not n, bounds ``kx + ky`` (a bootstrap resample of n rows has about
    0.63 n distinct ones; capping by n would force canonical correlations of 1 there).
    """
    if wide not in _WIDE:
        raise MeasureInputError(f"wide must be one of {_WIDE}; got {wide!r}.")
    d = n if distinct is None else distinct
    if kx + ky <= d - 1:
        return kx, ky
    forced = kx + ky - (d - 1)
    rows = f"n={n} centred examples" if d == n else f"n={n} examples with {d} distinct rows"
    msg = (
        f"{what}: {sx.name} keeps {kx} and {sy.name} keeps {ky} dimensions but {rows} span only "
        f"{d - 1}, so {forced} canonical correlation(s) would be exactly 1 regardless of the data"
    )
    if wide == "refuse":
        raise MeasureInputError(msg + "; reduce the widths (PCA/SVD) below n/2, or pass wide='reduce'.")
    cap = (d - 1) // 2
    if cap < 1:
        raise MeasureInputError(msg + f"; {d} distinct rows are too few for CCA.")
    new = min(kx, cap), min(ky, cap)
    warn(
        msg + f"; reduced {sx.name} to {new[0]} and {sy.name} to {new[1]} principal components "
        "(pass wide='refuse' to raise instead)."
    )
    return new


def _prepare(X: Any, Y: Any, what: str, equilibrate: bool = True) -> tuple[_Side, _Side, int, int]:
    """Both sides (see :func:`_side`), n and the number of distinct joint rows."""
    x, y = check_pair(X, Y, min_n=_CCA_MIN_N, what=what)
    sx, sy = _side(x, "X", what, equilibrate), _side(y, "Y", what, equilibrate)
    return sx, sy, x.shape[0], distinct_rows(x, y)


def _nan(reason: str, mid: str, est: str, n: int, details: dict[str, Any]) -> MeasureResult:
    warn(reason)
    return MeasureResult(math.nan, mid, est, n, {**details, "reason": reason})


def _rho(Ux: np.ndarray, Uy: np.ndarray) -> np.ndarray:
    return np.clip(np.linalg.svd(Ux.T @ Uy, compute_uv=False), 0.0, 1.0)


def _details(sx: _Side, sy: _Side, kx: int, ky: int, **extra: Any) -> dict[str, Any]:
    return {
        "dims_x": kx,
        "dims_y": ky,
        "rank_x": sx.U.shape[1],
        "rank_y": sy.U.shape[1],
        "dropped_constant_x": sx.dropped,
        "dropped_constant_y": sy.dropped,
        **extra,
    }


# --------------------------------------------------------------------------- CCA


def canonical_correlations(X: Any, Y: Any, *, wide: str = "reduce") -> np.ndarray:
    """Canonical correlations of X (n x p) and Y (n x q), descending, length min(rank X, rank Y).

    Singular values of ``Qx^T Qy`` with ``Qx``, ``Qy`` orthonormal bases of the
    centred columns (numerical rank from the SVD). See the module docstring for
    ``wide``.
    """
    sx, sy, n, d = _prepare(X, Y, "CCA")
    kx, ky = _check_wide(sx.U.shape[1], sy.U.shape[1], n, wide, "CCA", sx, sy, d)
    return _rho(sx.U[:, :kx], sy.U[:, :ky])


def cca_result(X: Any, Y: Any, statistic: str = "mean", *, wide: str = "reduce") -> MeasureResult:
    """Summary of the canonical correlations (see :func:`cca`) with dimensions and drops recorded."""
    if statistic not in ("mean", "mean_sq"):
        raise MeasureInputError(f"statistic must be 'mean' or 'mean_sq'; got {statistic!r}.")
    sx, sy, n, d = _prepare(X, Y, "CCA")
    kx, ky = _check_wide(sx.U.shape[1], sy.U.shape[1], n, wide, "CCA", sx, sy, d)
    reason = _ill_scaled(sx, sy, "CCA", (kx, ky) != (sx.U.shape[1], sy.U.shape[1]))
    if reason:
        return _nan(reason, f"cca_{statistic}", "CCA", n, _details(sx, sy, kx, ky))
    rho = _rho(sx.U[:, :kx], sy.U[:, :ky])
    value = float(np.mean(rho) if statistic == "mean" else np.mean(rho**2))
    est = "CCA via SVD of Qx^T Qy, " + (
        "mean canonical correlation" if statistic == "mean" else "mean squared canonical correlation"
    )
    capped = (kx, ky) != (sx.U.shape[1], sy.U.shape[1])
    return MeasureResult(value, f"cca_{statistic}", est, n, _details(sx, sy, kx, ky, rho=rho, wide_capped=capped))


def cca(X: Any, Y: Any, statistic: str = "mean", *, wide: str = "reduce") -> float:
    """Mean canonical correlation (``statistic="mean"``, Raghu's rho-bar) or mean squared
    canonical correlation (``"mean_sq"``, Yanai's R^2_CCA) of X and Y.

    Invariant to any invertible linear map of either side (while no reduction is needed).
    """
    return cca_result(X, Y, statistic, wide=wide).value


# --------------------------------------------------------------------------- SVCCA


def _n_components(s: np.ndarray, threshold: float) -> int:
    """Fewest leading directions whose share of the VARIANCE (sum of squared singular values) reaches threshold."""
    var = s.astype(np.float64) ** 2
    frac = np.cumsum(var) / var.sum()
    return min(int(np.searchsorted(frac, threshold - 1e-12, side="left")) + 1, s.size)


def svcca_result(
    X: Any,
    Y: Any,
    threshold: float = 0.99,
    max_components: int | None = None,
    *,
    wide: str = "reduce",
) -> MeasureResult:
    """SVCCA with the number of kept components and the variance they explain recorded (see :func:`svcca`)."""
    if not 0.0 < threshold <= 1.0:
        raise MeasureInputError(f"SVCCA variance threshold must be in (0, 1]; got {threshold}.")
    if max_components is not None and max_components < 1:
        raise MeasureInputError(f"max_components must be >= 1 or None; got {max_components}.")
    sx, sy, n, d = _prepare(X, Y, "SVCCA", equilibrate=False)
    kx, ky = _n_components(sx.s, threshold), _n_components(sy.s, threshold)
    if max_components is not None:
        kx, ky = min(kx, max_components), min(ky, max_components)
    chosen = kx, ky
    kx, ky = _check_wide(kx, ky, n, wide, "SVCCA", sx, sy, d)
    explained_cap = {"wide_capped": (kx, ky) != chosen}
    rho = _rho(sx.U[:, :kx], sy.U[:, :ky])
    explained = {
        "variance_kept_x": float((sx.s[:kx] ** 2).sum() / (sx.s**2).sum()),
        "variance_kept_y": float((sy.s[:ky] ** 2).sum() / (sy.s**2).sum()),
    }
    est = f"SVCCA: top singular directions explaining >= {threshold} of the variance"
    if max_components is not None:
        est += f" (at most {max_components})"
    est += ", then mean canonical correlation"
    mid = _svcca_id(threshold, max_components)
    details = _details(sx, sy, kx, ky, rho=rho, **explained, **explained_cap)
    return MeasureResult(float(np.mean(rho)), mid, est, n, details)


def svcca(
    X: Any,
    Y: Any,
    threshold: float = 0.99,
    max_components: int | None = None,
    *,
    wide: str = "reduce",
) -> float:
    """SVCCA (Raghu et al. 2017): mean canonical correlation after keeping, on each centred side,
    the fewest top singular directions whose squared singular values reach ``threshold`` of the
    total variance, capped at ``max_components``. Kept directions beyond the n limit are
    handled as described in the module docstring.
    """
    return svcca_result(X, Y, threshold, max_components, wide=wide).value


def _svcca_id(threshold: float, max_components: int | None) -> str:
    return f"svcca_var{float(threshold)!r}" + (f"_max{max_components}" if max_components is not None else "")


# --------------------------------------------------------------------------- PWCCA


def pwcca_result(X: Any, Y: Any, side: str = "x", *, wide: str = "reduce") -> MeasureResult:
    """PWCCA with the weights and correlations recorded (see :func:`pwcca`)."""
    if side not in ("x", "y", "narrower"):
        raise MeasureInputError(f"side must be 'x', 'y' or 'narrower'; got {side!r}.")
    sx, sy, n, d = _prepare(X, Y, "PWCCA")
    kx, ky = _check_wide(sx.U.shape[1], sy.U.shape[1], n, wide, "PWCCA", sx, sy, d)
    reason = _ill_scaled(sx, sy, "PWCCA", (kx, ky) != (sx.U.shape[1], sy.U.shape[1]))
    if reason:
        return _nan(reason, f"pwcca_{side}", "PWCCA", n, _details(sx, sy, kx, ky))
    Qx, Qy = sx.U[:, :kx], sy.U[:, :ky]
    A, rho, Bt = np.linalg.svd(Qx.T @ Qy, full_matrices=False)
    rho = np.clip(rho, 0.0, 1.0)
    chosen = side if side != "narrower" else ("x" if sx.width <= sy.width else "y")
    if chosen == "x":
        variates, neurons = Qx @ A, sx.xc  # canonical variates of X, (n, m), orthonormal columns
    else:
        variates, neurons = Qy @ Bt.T, sy.xc
    # alpha_i = sum_t |<h_i, x_t>| over the neurons x_t of the SAME side as the variates h_i
    alpha = np.abs(variates.T @ neurons).sum(axis=1)
    total = alpha.sum()
    if not total > 0:
        reason = "PWCCA is undefined: the canonical variates carry none of the chosen side's activity; returned nan."
        warn(reason)
        return MeasureResult(math.nan, f"pwcca_{side}", "PWCCA", n, _details(sx, sy, kx, ky, reason=reason))
    alpha = alpha / total
    value = float(np.dot(alpha, rho))
    est = f"PWCCA (Morcos et al. 2018), weights from the canonical variates and neurons of side {chosen.upper()}"
    capped = (kx, ky) != (sx.U.shape[1], sy.U.shape[1])
    details = _details(sx, sy, kx, ky, rho=rho, weights=alpha, side=chosen, wide_capped=capped)
    return MeasureResult(value, f"pwcca_{side}", est, n, details)


def pwcca(X: Any, Y: Any, side: str = "x", *, wide: str = "reduce") -> float:
    """Projection-weighted CCA (Morcos et al. 2018): ``sum_i alpha_i rho_i``.

    ``alpha_i = sum_t |<h_i, x_t>|`` (normalised to sum 1), where h_i are the
    unit-norm canonical variates of the chosen side and x_t its centred neurons
    (columns). ``side="x"`` weights by X, ``"y"`` by Y, ``"narrower"`` by the side
    with fewer neurons (Morcos's choice; X on a tie). Asymmetric; correct for
    p != q (the variates and neurons always come from the same side).
    """
    return pwcca_result(X, Y, side, wide=wide).value


# --------------------------------------------------------------------------- prepared path
#
# Each side is centred, cleared of constant columns and decomposed ONCE: Xc = U S V^T (rank r). Permuting
# the rows of Y permutes the rows of U and nothing else (centring commutes with a row permutation), so a
# permutation costs the (k_x, k_y) product Qx^T P Qy and its singular values, batched over permutations;
# PWCCA's neuron sums come from U^T Xc = S V^T without touching the n x p data again. A resample X[idx]
# centres to (A[idx] - mean) V^T with A = U S, so its SVD is that of an (m, r) block: r <= min(n, p)
# instead of p columns. Dimension choices (numerical rank, SVCCA's variance cut, the wide='reduce' cap)
# are recomputed on each resample exactly as the direct call does; a resample that makes a column
# constant that was not constant on all n rows is computed directly (the direct call drops it).


@dataclass(frozen=True, eq=False)
class CCASide:
    """One side prepared for the CCA family's prepared path (see the section comment in the source)."""

    n: int
    x: np.ndarray  # float64 input: direct fallback and constant-column checks
    constant: np.ndarray  # columns constant over all n rows (dropped, as the direct call does)
    U: np.ndarray  # (n, rank) left singular vectors of the centred kept columns
    s: np.ndarray  # (rank,)
    Vt: np.ndarray  # (rank, kept columns)
    width: int
    wide: str
    colscale: np.ndarray | None  # per kept column power of two the SVD saw (see _side); None: all 1
    lost: int  # dimensions a raw-column SVD could not resolve (see _side): every item is computed directly
    classes: np.ndarray  # (n,) id of each row's distinct value (duplicated rows share one)
    distinct: int  # number of distinct rows


def cca_prepare(X: Any, *, wide: str = "reduce", **_params: Any) -> CCASide:
    """Centre one side, drop its constant columns and take its thin SVD (warnings as in the direct call)."""
    from interlingua.analysis.measures.validation import as_matrix, check_min_n

    if wide not in _WIDE:
        raise MeasureInputError(f"wide must be one of {_WIDE}; got {wide!r}.")
    x = as_matrix(X, "X")
    check_min_n(x.shape[0], _CCA_MIN_N, "CCA")
    const = constant_columns(x)
    side = _side(x, "X", "CCA", equilibrate="threshold" not in _params)  # SVCCA: no per-column scaling
    assert side.Vt is not None  # _side always keeps the right singular vectors
    _, classes = np.unique(x, axis=0, return_inverse=True)
    classes = classes.reshape(-1).astype(np.int64)
    distinct = int(classes.max()) + 1
    return CCASide(
        x.shape[0], x, const, side.U, side.s, side.Vt, side.width, wide, side.colscale, side.lost, classes, distinct
    )


def _neurons(sv: np.ndarray, vt: np.ndarray, colscale: np.ndarray | None) -> np.ndarray:
    """``S V^T`` rows in the neurons' own units (undoing the per-column powers of two the SVD saw)."""
    c = sv[:, None] * vt
    return c if colscale is None else c / colscale[None, :]


def _joint_distinct(sx: CCASide, sy: CCASide, ix: np.ndarray, iy: np.ndarray) -> int:
    """Distinct joint rows ``(X[ix[r]], Y[iy[r]])`` from each side's row classes (as :func:`distinct_rows`)."""
    return int(np.unique(sx.classes[ix] * sy.distinct + sy.classes[iy]).size)


def _quiet(fn: Any, *args: Any, **kw: Any) -> Any:
    import warnings

    from interlingua.analysis.measures.validation import MeasureWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return fn(*args, **kw)


def _dims(
    kind: str, params: dict[str, Any], sx_s: np.ndarray, sy_s: np.ndarray, n: int, wide: str, distinct: int
) -> tuple[int, int]:
    """Kept dimensions as the direct call chooses them (the wide='reduce' warning is not repeated)."""
    if kind == "svcca":
        kx, ky = _n_components(sx_s, params["threshold"]), _n_components(sy_s, params["threshold"])
        if params["max_components"] is not None:
            kx, ky = min(kx, params["max_components"]), min(ky, params["max_components"])
    else:
        kx, ky = sx_s.size, sy_s.size
    names = (_Side(nm, np.empty((0, 0)), np.empty((0, 0)), sv, 0, 0) for nm, sv in (("X", sx_s), ("Y", sy_s)))
    return _quiet(_check_wide, kx, ky, n, wide, kind.upper(), *names, distinct)


def _values(
    kind: str, params: dict[str, Any], qx: np.ndarray, qy: np.ndarray, cx: np.ndarray, cy: np.ndarray, choose_x: bool
) -> np.ndarray:
    """The statistic for a stack of bases ``qx (k, m, kx)``, ``qy (k, m, ky)``; ``c = S V^T`` rows for PWCCA."""
    cross = np.matmul(np.swapaxes(qx, -1, -2), qy)  # (k, kx, ky)
    if kind != "pwcca":
        rho = np.clip(np.linalg.svd(cross, compute_uv=False), 0.0, 1.0)
        return np.mean(rho**2 if params.get("statistic") == "mean_sq" else rho, axis=-1)
    A, rho, Bt = np.linalg.svd(cross, full_matrices=False)
    rho = np.clip(rho, 0.0, 1.0)
    # variates^T neurons = A^T Qx^T U S V^T = A^T (S V^T)[:kx]  (Qx = U[:, :kx], U orthonormal)
    proj = np.matmul(np.swapaxes(A, -1, -2), cx) if choose_x else np.matmul(Bt, cy)
    alpha = np.abs(proj).sum(axis=-1)
    total = alpha.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        vals = np.einsum("ki,ki->k", alpha, rho) / total
    return np.where(total > 0, vals, np.nan)


def _cca_prepared(
    kind: str, sx: CCASide, sy: CCASide, rows_x: np.ndarray | None, rows_y: np.ndarray | None, params: dict[str, Any]
) -> np.ndarray:
    from interlingua.analysis.measures._prepared import chunks, is_permutation

    n, wide = sx.n, sx.wide
    given = rows_x if rows_x is not None else rows_y
    b = 1 if given is None else given.shape[0]
    choose_x = params.get("side") == "x" or (params.get("side") == "narrower" and sx.width <= sy.width)
    px = np.ones(b, dtype=bool) if rows_x is None else is_permutation(rows_x, n)
    py = np.ones(b, dtype=bool) if rows_y is None else is_permutation(rows_y, n)
    # a permutation keeps n distinct joint rows when one side has no duplicated rows; otherwise the count
    # depends on the pairing, so such permutations take the per-item path below
    batched = px & py
    if sx.distinct < n and sy.distinct < n and not (rows_x is None and rows_y is None):
        batched[:] = False
    if sx.lost or sy.lost:  # ill-scaled columns (see _side): every item through the direct call
        batched[:] = False
    out = np.empty(b)
    perm = np.flatnonzero(batched)
    if perm.size:  # the spectra are those of the full sample: one dimension choice, one batched SVD
        d = n if (sx.distinct == n or sy.distinct == n) else _joint_distinct(sx, sy, np.arange(n), np.arange(n))
        kx, ky = _dims(kind, params, sx.s, sy.s, n, wide, d)
        qx, qy = sx.U[:, :kx], sy.U[:, :ky]
        cx, cy = _neurons(sx.s[:kx], sx.Vt[:kx], sx.colscale), _neurons(sy.s[:ky], sy.Vt[:ky], sy.colscale)
        for sl in chunks(perm.size, 8 * n * (kx + ky) + 8 * min(kx, ky) * max(cx.shape[1], cy.shape[1])):
            idx = perm[sl]
            gx = qx[None] if rows_x is None else qx[rows_x[idx]]
            gy = qy[None] if rows_y is None else qy[rows_y[idx]]
            out[idx] = _values(kind, params, gx, gy, cx, cy, choose_x)
    for i in np.flatnonzero(~batched):  # resamples: each side's (m, r) block decomposed again
        ix = np.arange(n) if rows_x is None else rows_x[i]
        iy = np.arange(n) if rows_y is None else rows_y[i]
        out[i] = _resampled(kind, sx, sy, ix, iy, params, choose_x)
    return out


def _resampled_side(s: CCASide, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(U, s, V^T)`` of the centred kept columns of ``x[idx]`` from the score block; None: not exact here."""
    if np.any(constant_columns(s.x[idx]) != s.constant):
        return None
    a = (s.U * s.s)[idx]
    a = a - a.mean(axis=0)
    U, sv, Wt = np.linalg.svd(a, full_matrices=False)
    kept = s.Vt.shape[1]
    tol = sv[0] * max(idx.size, kept) * np.finfo(np.float64).eps if sv.size else 0.0
    rank = int(np.count_nonzero(sv > tol))
    return U[:, :rank], sv[:rank], Wt[:rank] @ s.Vt


def _resampled(
    kind: str, sx: CCASide, sy: CCASide, ix: np.ndarray, iy: np.ndarray, params: dict[str, Any], choose_x: bool
) -> float:
    rx, ry = (None, None) if sx.lost or sy.lost else (_resampled_side(sx, ix), _resampled_side(sy, iy))
    if rx is None or ry is None or rx[1].size == 0 or ry[1].size == 0:
        fn = {"cca": _cca_fn, "svcca": _svcca_fn, "pwcca": _pwcca_fn}[kind]
        return float(_quiet(fn, sx.x[ix], sy.x[iy], wide=sx.wide, **params).value)
    kx, ky = _dims(kind, params, rx[1], ry[1], ix.size, sx.wide, _joint_distinct(sx, sy, ix, iy))
    cx, cy = _neurons(rx[1][:kx], rx[2][:kx], sx.colscale), _neurons(ry[1][:ky], ry[2][:ky], sy.colscale)
    return float(_values(kind, params, rx[0][None, :, :kx], ry[0][None, :, :ky], cx, cy, choose_x)[0])


def _prepared_for(kind: str) -> Any:
    def prepared(sx: CCASide, sy: CCASide, rows_x: Any, rows_y: Any, **params: Any) -> np.ndarray:
        return _cca_prepared(kind, sx, sy, rows_x, rows_y, params)

    prepared.__doc__ = f"{kind.upper()} of X[rows_x[i]], Y[rows_y[i]] from prepared sides (see the section comment)."
    return prepared


# --------------------------------------------------------------------------- registry

_CCA_REF = "Hotelling 1936; SVCCA: Raghu et al. 2017; PWCCA: Morcos et al. 2018"
_ALL = frozenset({"orthogonal", "isotropic_scale", "translation", "invertible_linear", "permutation"})


def _cca_fn(X: Any, Y: Any, *, statistic: str, **kw: Any) -> MeasureResult:
    return cca_result(X, Y, statistic, **kw)


def _svcca_fn(X: Any, Y: Any, *, threshold: float, max_components: int | None, **kw: Any) -> MeasureResult:
    return svcca_result(X, Y, threshold, max_components, **kw)


def _pwcca_fn(X: Any, Y: Any, *, side: str, **kw: Any) -> MeasureResult:
    return pwcca_result(X, Y, side, **kw)


for _stat, _desc in (("mean", "mean canonical correlation"), ("mean_sq", "mean squared canonical correlation")):
    register(
        Measure(
            id=f"cca_{_stat}",
            metadata=MeasureMetadata(
                cost_model="svd",
                larger_is_more_similar=True,
                symmetric=True,
                invariances=_ALL,
                min_n=_CCA_MIN_N,
                bounds=(0.0, 1.0),
                estimator=f"CCA via SVD of Qx^T Qy, {_desc}",
                reference=_CCA_REF,
                prepared=True,
            ),
            fn=_cca_fn,
            params={"statistic": _stat},
            prepare_fn=cca_prepare,
            prepared_fn=_prepared_for("cca"),
        )
    )


def _svcca_measure(threshold: float, max_components: int | None) -> Measure:
    if not 0.0 < threshold <= 1.0:
        raise MeasureInputError(f"SVCCA variance threshold must be in (0, 1]; got {threshold}.")
    if max_components is not None and max_components < 1:
        raise MeasureInputError(f"SVCCA max_components must be >= 1; got {max_components} (drop _max for no cap).")
    return Measure(
        id=_svcca_id(threshold, max_components),
        metadata=MeasureMetadata(
            cost_model="svd",
            larger_is_more_similar=True,
            symmetric=True,
            # the SVD truncation depends on the variance spectrum, which invertible maps change
            invariances=frozenset({"orthogonal", "isotropic_scale", "translation", "permutation"}),
            min_n=_CCA_MIN_N,
            bounds=(0.0, 1.0),
            estimator=f"SVCCA, {threshold} of variance (squared singular values)"
            + (f", at most {max_components} components" if max_components else ""),
            reference=_CCA_REF,
            prepared=True,
        ),
        fn=_svcca_fn,
        params={"threshold": float(threshold), "max_components": max_components},
        prepare_fn=cca_prepare,
        prepared_fn=_prepared_for("svcca"),
    )


def _pwcca_measure(side: str) -> Measure:
    return Measure(
        id=f"pwcca_{side}",
        metadata=MeasureMetadata(
            cost_model="svd",
            larger_is_more_similar=True,
            symmetric=False,
            # the weights sum |<h_i, x_t>| over neurons: not rotation invariant, but permutation invariant
            invariances=frozenset({"isotropic_scale", "translation", "permutation"}),
            min_n=_CCA_MIN_N,
            bounds=(0.0, 1.0),
            estimator=f"PWCCA, weights from side {side}",
            reference=_CCA_REF,
            prepared=True,
        ),
        fn=_pwcca_fn,
        params={"side": side},
        prepare_fn=cca_prepare,
        prepared_fn=_prepared_for("pwcca"),
    )


register(_svcca_measure(0.99, None))
register(_svcca_measure(0.99, 64))
for _side_name in ("x", "y", "narrower"):
    register(_pwcca_measure(_side_name))
register_family(
    r"svcca_var(\d*\.?\d+)(?:_max(\d+))?",
    lambda m: _svcca_measure(float(m.group(1)), int(m.group(2)) if m.group(2) else None),
    "svcca_var<threshold>[_max<k>]",
)
