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

from interlingua.errors import MeasureInputError
from interlingua.measures.base import Measure, MeasureMetadata, MeasureResult, register, register_family
from interlingua.measures.validation import check_pair, constant_columns, warn

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
    xc: np.ndarray  # centred, constant columns removed
    U: np.ndarray  # left singular vectors of the numerical column space, (n, rank)
    s: np.ndarray  # singular values, (rank,)
    width: int  # original width
    dropped: int  # constant columns removed


def _side(x: np.ndarray, name: str, what: str) -> _Side:
    const = constant_columns(x)
    dropped = int(const.sum())
    if dropped == x.shape[1]:
        raise MeasureInputError(f"{what}: every column of {name} is constant; there is nothing to correlate.")
    if dropped:
        warn(f"{what}: dropped {dropped} constant column(s) of {name} (zero variance over the {x.shape[0]} rows).")
        x = x[:, ~const]
    xc = x - x.mean(axis=0)
    U, s, _ = np.linalg.svd(xc, full_matrices=False)
    tol = s[0] * max(xc.shape) * np.finfo(np.float64).eps if s.size else 0.0
    rank = int(np.count_nonzero(s > tol))
    return _Side(name, xc, U[:, :rank], s[:rank], width=x.shape[1] + dropped, dropped=dropped)


def _check_wide(kx: int, ky: int, n: int, wide: str, what: str, sx: _Side, sy: _Side) -> tuple[int, int]:
    """Cap the kept dimensions so that no canonical correlation is 1 by dimension counting alone."""
    if wide not in _WIDE:
        raise MeasureInputError(f"wide must be one of {_WIDE}; got {wide!r}.")
    if kx + ky <= n - 1:
        return kx, ky
    forced = kx + ky - (n - 1)
    msg = (
        f"{what}: {sx.name} keeps {kx} and {sy.name} keeps {ky} dimensions but n={n} centred examples span only "
        f"{n - 1}, so {forced} canonical correlation(s) would be exactly 1 regardless of the data"
    )
    if wide == "refuse":
        raise MeasureInputError(msg + "; reduce the widths (PCA/SVD) below n/2, or pass wide='reduce'.")
    cap = (n - 1) // 2
    if cap < 1:
        raise MeasureInputError(msg + f"; n={n} is too small for CCA.")
    new = min(kx, cap), min(ky, cap)
    warn(
        msg + f"; reduced {sx.name} to {new[0]} and {sy.name} to {new[1]} principal components "
        "(pass wide='refuse' to raise instead)."
    )
    return new


def _prepare(X: Any, Y: Any, what: str) -> tuple[_Side, _Side, int]:
    x, y = check_pair(X, Y, min_n=_CCA_MIN_N, what=what)
    return _side(x, "X", what), _side(y, "Y", what), x.shape[0]


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
    sx, sy, n = _prepare(X, Y, "CCA")
    kx, ky = _check_wide(sx.U.shape[1], sy.U.shape[1], n, wide, "CCA", sx, sy)
    return _rho(sx.U[:, :kx], sy.U[:, :ky])


def cca_result(X: Any, Y: Any, statistic: str = "mean", *, wide: str = "reduce") -> MeasureResult:
    """Summary of the canonical correlations (see :func:`cca`) with dimensions and drops recorded."""
    if statistic not in ("mean", "mean_sq"):
        raise MeasureInputError(f"statistic must be 'mean' or 'mean_sq'; got {statistic!r}.")
    sx, sy, n = _prepare(X, Y, "CCA")
    kx, ky = _check_wide(sx.U.shape[1], sy.U.shape[1], n, wide, "CCA", sx, sy)
    rho = _rho(sx.U[:, :kx], sy.U[:, :ky])
    value = float(np.mean(rho) if statistic == "mean" else np.mean(rho**2))
    est = "CCA via SVD of Qx^T Qy, " + ("mean canonical correlation" if statistic == "mean" else "mean squared canonical correlation")
    return MeasureResult(value, f"cca_{statistic}", est, n, _details(sx, sy, kx, ky, rho=rho))


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
    sx, sy, n = _prepare(X, Y, "SVCCA")
    kx, ky = _n_components(sx.s, threshold), _n_components(sy.s, threshold)
    if max_components is not None:
        kx, ky = min(kx, max_components), min(ky, max_components)
    kx, ky = _check_wide(kx, ky, n, wide, "SVCCA", sx, sy)
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
    return MeasureResult(float(np.mean(rho)), mid, est, n, _details(sx, sy, kx, ky, rho=rho, **explained))


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
    sx, sy, n = _prepare(X, Y, "PWCCA")
    kx, ky = _check_wide(sx.U.shape[1], sy.U.shape[1], n, wide, "PWCCA", sx, sy)
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
    return MeasureResult(value, f"pwcca_{side}", est, n, _details(sx, sy, kx, ky, rho=rho, weights=alpha, side=chosen))


def pwcca(X: Any, Y: Any, side: str = "x", *, wide: str = "reduce") -> float:
    """Projection-weighted CCA (Morcos et al. 2018): ``sum_i alpha_i rho_i``.

    ``alpha_i = sum_t |<h_i, x_t>|`` (normalised to sum 1), where h_i are the
    unit-norm canonical variates of the chosen side and x_t its centred neurons
    (columns). ``side="x"`` weights by X, ``"y"`` by Y, ``"narrower"`` by the side
    with fewer neurons (Morcos's choice; X on a tie). Asymmetric; correct for
    p != q (the variates and neurons always come from the same side).
    """
    return pwcca_result(X, Y, side, wide=wide).value


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
                larger_is_more_similar=True,
                symmetric=True,
                invariances=_ALL,
                min_n=_CCA_MIN_N,
                bounds=(0.0, 1.0),
                estimator=f"CCA via SVD of Qx^T Qy, {_desc}",
                reference=_CCA_REF,
            ),
            fn=_cca_fn,
            params={"statistic": _stat},
        )
    )


def _svcca_measure(threshold: float, max_components: int | None) -> Measure:
    if not 0.0 < threshold <= 1.0:
        raise MeasureInputError(f"SVCCA variance threshold must be in (0, 1]; got {threshold}.")
    return Measure(
        id=_svcca_id(threshold, max_components),
        metadata=MeasureMetadata(
            larger_is_more_similar=True,
            symmetric=True,
            # the SVD truncation depends on the variance spectrum, which invertible maps change
            invariances=frozenset({"orthogonal", "isotropic_scale", "translation", "permutation"}),
            min_n=_CCA_MIN_N,
            bounds=(0.0, 1.0),
            estimator=f"SVCCA, {threshold} of variance (squared singular values)"
            + (f", at most {max_components} components" if max_components else ""),
            reference=_CCA_REF,
        ),
        fn=_svcca_fn,
        params={"threshold": float(threshold), "max_components": max_components},
    )


def _pwcca_measure(side: str) -> Measure:
    return Measure(
        id=f"pwcca_{side}",
        metadata=MeasureMetadata(
            larger_is_more_similar=True,
            symmetric=False,
            # the weights sum |<h_i, x_t>| over neurons: not rotation invariant, but permutation invariant
            invariances=frozenset({"isotropic_scale", "translation", "permutation"}),
            min_n=_CCA_MIN_N,
            bounds=(0.0, 1.0),
            estimator=f"PWCCA, weights from side {side}",
            reference=_CCA_REF,
        ),
        fn=_pwcca_fn,
        params={"side": side},
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
