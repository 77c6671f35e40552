"""Other libraries' conventions as measure ids, so a user can reproduce a number published with them.

Our defaults (``cka_linear_biased``, ``cca_mean_sq``, ``procrustes_resid2_centered_unitnorm``,
``rsa_spearman_corr``, ...) are one choice among several the field uses. Each id here is the
convention of a named peer library, checked against it in ``tests/oracles/``
(see ``docs/protocol.md``, "Peers' conventions"):

- ``cka_linear_minibatch<b>``: pytorch-cka's estimator (Nguyen et al. 2020): the unbiased HSIC
  (Song et al. 2012) of each batch of ``b`` consecutive rows, summed over batches, then
  ``sum HSIC(X, Y) / sqrt(sum HSIC(X, X) sum HSIC(Y, Y))``. The last batch may be shorter but needs
  4 rows. Not clipped (pytorch-cka clips to [0, 1]).
- ``cka_rbf_kornblith<t>``, ``cka_rbf_debiased_kornblith<t>``: the RBF bandwidth of Kornblith's
  reference notebook, ``sigma^2 = t^2 median(||x_i - x_j||^2)`` over ALL n^2 pairs (the zero diagonal
  included); ours (``cka_rbf_median<t>``) is ``sigma = t median_{i<j} ||x_i - x_j||``.
- ``cka_linear_uncentered``: hoggorm's ``RVcoeff`` on the arrays as given (it does not centre):
  ``<X X^T, Y Y^T> / (||X X^T|| ||Y Y^T||)``. On centred data it is ``cka_linear_biased``.
- ``rv_modified``: hoggorm's ``RV2coeff`` (Smilde et al. 2009) on centred data: the RV coefficient
  with the diagonals of the centred Grams set to 0.
- ``cca_mean_uncentered``, ``cca_mean_sq_uncentered``: canonical correlations of the columns as given
  (no centring; Kornblith's notebook ``cca``, a QR of the raw features).
- ``procrustes_angular``, ``procrustes_angular_raw``: the angular shape metric of netrep
  (``LinearMetric(alpha=1, center_columns=True/False, score_method="angular")``) and wrongu/repsim:
  ``arccos(||X^T Y||_* / (||X|| ||Y||))``, a distance in [0, pi/2]; computed as
  ``2 arcsin(r / 2)`` from the direct Procrustes residual ``r`` of the unit-norm sides (no arccos
  near 1, where it loses half the digits).
- ``procrustes_euclidean``: netrep's ``score_method="euclidean"``: ``min_Q ||Xc Q - Yc||_F`` on the
  centred data at their own scale (not normalised; the narrower side zero-padded).
- ``rsa_<comparison>_<rdm>``: rsatoolbox's RDM comparisons ``pearson`` (its ``corr``), ``cosine``,
  ``kendalltaua`` (``tau-a``), ``rhoa`` (``rho-a``) on our RDMs ``corr``, ``cosine``, ``euclidean``,
  and ``sqeuclidean`` (rsatoolbox's "euclidean" RDM is the squared distance divided by the width;
  the division does not change any comparison).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register_family
from interlingua.analysis.measures.cka import center_gram, cka_from_grams
from interlingua.analysis.measures.procrustes import procrustes_result
from interlingua.analysis.measures.rsa import rdm
from interlingua.analysis.measures.validation import check_pair, constant_columns, warn
from interlingua.core.errors import MeasureInputError

__all__ = [
    "minibatch_cka",
    "kornblith_rbf_cka",
    "uncentered_linear_cka",
    "modified_rv",
    "uncentered_cca",
    "procrustes_angular",
    "procrustes_euclidean",
    "rsa_compare",
    "RSA_COMPARISONS",
    "RSA_RDMS",
]

_CKA_INV = frozenset({"orthogonal", "isotropic_scale", "translation", "permutation"})


def _nan(mid: str, est: str, n: int, reason: str, **details: Any) -> MeasureResult:
    warn(reason)
    return MeasureResult(math.nan, mid, est, n, {**details, "reason": reason})


# --------------------------------------------------------------------------- pytorch-cka: minibatch HSIC


def _u_centred(x: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=0)  # U-centring removes row/column constants: the same Gram, less rounding
    return center_gram(xc @ xc.T, unbiased=True)


def minibatch_cka_result(X: Any, Y: Any, batch_size: int) -> MeasureResult:
    """pytorch-cka's minibatch CKA (see the module docstring): batches of ``batch_size`` consecutive rows."""
    b = int(batch_size)
    mid = f"cka_linear_minibatch{b}"
    if b < 4:
        raise MeasureInputError(f"{mid}: the unbiased HSIC of a batch needs at least 4 rows; use a batch size >= 4.")
    x, y = check_pair(X, Y, min_n=4, what=mid)
    n = x.shape[0]
    last = n % b
    if 0 < last < 4:
        raise MeasureInputError(
            f"{mid}: n={n} rows leave a last batch of {last} < 4 rows, whose unbiased HSIC is undefined "
            f"(pytorch-cka raises too); pick a batch size for which n % b is 0 or at least 4."
        )
    xy = xx = yy = 0.0
    batches = 0
    for s in range(0, n, b):
        m = min(b, n - s)
        K, L = _u_centred(x[s : s + m]), _u_centred(y[s : s + m])
        scale = 1.0 / (m * (m - 3))  # unbiased HSIC = <K~, L~> / (m (m - 3)); batches of unequal size weigh so
        xy += float(np.vdot(K, L)) * scale
        xx += float(np.vdot(K, K)) * scale
        yy += float(np.vdot(L, L)) * scale
        batches += 1
    est = f"CKA from unbiased HSIC summed over {batches} batches of {b} consecutive rows (Nguyen et al. 2020)"
    details = {"batch_size": b, "batches": batches}
    bad = [side for side, v in (("X", xx), ("Y", yy)) if not v > 0]
    if bad:
        return _nan(mid, est, n, f"{mid} is undefined: the summed self-HSIC of {' and '.join(bad)} is <= 0.", **details)
    return MeasureResult(xy / math.sqrt(xx * yy), mid, est, n, details)


def minibatch_cka(X: Any, Y: Any, batch_size: int) -> float:
    """pytorch-cka's minibatch linear CKA, unclipped (see the module docstring)."""
    return minibatch_cka_result(X, Y, batch_size).value


# --------------------------------------------------------------------------- Kornblith's RBF bandwidth


def _kornblith_rbf_gram(x: np.ndarray, threshold: float) -> np.ndarray | None:
    xc = x - x.mean(axis=0)
    sq = np.einsum("ij,ij->i", xc, xc)
    d2 = np.clip(sq[:, None] + sq[None, :] - 2.0 * (xc @ xc.T), 0.0, None)
    np.fill_diagonal(d2, 0.0)
    med = float(np.median(d2))  # over all n^2 entries, the n zeros of the diagonal included
    if not med > 0:
        return None
    return np.exp(-d2 / (2.0 * threshold**2 * med))


def kornblith_rbf_cka_result(X: Any, Y: Any, threshold: float = 1.0, debiased: bool = False) -> MeasureResult:
    """RBF CKA with Kornblith's bandwidth ``sigma^2 = threshold^2 median(all squared distances)``."""
    mid = f"cka_rbf{'_debiased' if debiased else ''}_kornblith{float(threshold)!r}"
    if not threshold > 0:
        raise MeasureInputError(f"{mid}: the bandwidth threshold must be > 0; got {threshold}.")
    x, y = check_pair(X, Y, min_n=4 if debiased else 3, what=mid)
    n = x.shape[0]
    est = f"CKA, RBF kernel, sigma^2 = {threshold}^2 x median of all n^2 squared distances (Kornblith et al. 2019)"
    K, L = _kornblith_rbf_gram(x, threshold), _kornblith_rbf_gram(y, threshold)
    if K is None or L is None:
        bad = " and ".join(s for s, g in (("X", K), ("Y", L)) if g is None)
        return _nan(mid, est, n, f"{mid} is undefined: the median squared distance of {bad} is 0.")
    value = cka_from_grams(center_gram(K, debiased), center_gram(L, debiased))
    return MeasureResult(value, mid, est, n, {"threshold": threshold, "debiased": debiased})


def kornblith_rbf_cka(X: Any, Y: Any, threshold: float = 1.0, debiased: bool = False) -> float:
    """RBF CKA with the bandwidth rule of Kornblith's reference notebook (see the module docstring)."""
    return kornblith_rbf_cka_result(X, Y, threshold, debiased).value


# --------------------------------------------------------------------------- hoggorm: RV as given, RV2


def _cosine_of_grams(K: np.ndarray, L: np.ndarray) -> tuple[float, str]:
    kk, ll = float(np.vdot(K, K)), float(np.vdot(L, L))
    bad = [s for s, v in (("X", kk), ("Y", ll)) if not v > 0]
    if bad:
        return math.nan, f"its Gram of {' and '.join(bad)} is 0"
    return float(np.vdot(K, L)) / math.sqrt(kk * ll), ""


def uncentered_linear_cka_result(X: Any, Y: Any) -> MeasureResult:
    """RV coefficient of the arrays as given (hoggorm's ``RVcoeff`` without centring first)."""
    mid = "cka_linear_uncentered"
    x, y = check_pair(X, Y, min_n=2, what=mid)
    n = x.shape[0]
    est = "RV coefficient <XX^T, YY^T> / (||XX^T|| ||YY^T||) of the uncentred arrays (hoggorm RVcoeff)"
    # feature form: <XX^T, YY^T> = ||Y^T X||^2, ||XX^T|| = ||X^T X||
    xy = float(np.sum((y.T @ x) ** 2))
    xx = math.sqrt(float(np.sum((x.T @ x) ** 2)))
    yy = math.sqrt(float(np.sum((y.T @ y) ** 2)))
    if not (xx > 0 and yy > 0):
        return _nan(mid, est, n, f"{mid} is undefined: a side is all zeros.")
    return MeasureResult(xy / (xx * yy), mid, est, n, {})


def uncentered_linear_cka(X: Any, Y: Any) -> float:
    """Linear CKA without centring: the RV coefficient of the arrays as given."""
    return uncentered_linear_cka_result(X, Y).value


def modified_rv_result(X: Any, Y: Any) -> MeasureResult:
    """Modified RV (Smilde et al. 2009; hoggorm ``RV2coeff``) of the column-centred arrays."""
    mid = "rv_modified"
    x, y = check_pair(X, Y, min_n=3, what=mid)
    n = x.shape[0]
    est = "modified RV (Smilde et al. 2009): RV of the centred Grams with their diagonals set to 0 (hoggorm RV2coeff)"
    grams = []
    for a in (x, y):
        ac = a - a.mean(axis=0)
        g = ac @ ac.T
        np.fill_diagonal(g, 0.0)
        grams.append(g)
    value, reason = _cosine_of_grams(grams[0], grams[1])
    if reason:
        return _nan(mid, est, n, f"{mid} is undefined: {reason}.")
    return MeasureResult(value, mid, est, n, {})


def modified_rv(X: Any, Y: Any) -> float:
    """The modified RV coefficient RV2 of the centred arrays (see the module docstring)."""
    return modified_rv_result(X, Y).value


# --------------------------------------------------------------------------- uncentred CCA


def _raw_basis(x: np.ndarray) -> np.ndarray:
    U, s, _ = np.linalg.svd(x, full_matrices=False)
    tol = s[0] * max(x.shape) * np.finfo(np.float64).eps if s.size else 0.0
    return U[:, : int(np.count_nonzero(s > tol))]


def uncentered_cca_result(X: Any, Y: Any, statistic: str = "mean_sq") -> MeasureResult:
    """Canonical correlations of the uncentred columns (Kornblith's notebook ``cca``): mean or mean square."""
    if statistic not in ("mean", "mean_sq"):
        raise MeasureInputError(f"statistic must be 'mean' or 'mean_sq'; got {statistic!r}.")
    mid = f"cca_{statistic}_uncentered"
    x, y = check_pair(X, Y, min_n=3, what=mid)
    n = x.shape[0]
    qx, qy = _raw_basis(x), _raw_basis(y)
    kx, ky = qx.shape[1], qy.shape[1]
    if kx == 0 or ky == 0:
        return _nan(mid, "uncentred CCA", n, f"{mid} is undefined: a side is all zeros.")
    if kx + ky > n:
        raise MeasureInputError(
            f"{mid}: X has rank {kx} and Y rank {ky} but n={n} rows span only {n}, so {kx + ky - n} canonical "
            "correlation(s) are 1 whatever the data; reduce the widths (PCA) below n/2."
        )
    rho = np.clip(np.linalg.svd(qx.T @ qy, compute_uv=False), 0.0, 1.0)
    value = float(np.mean(rho) if statistic == "mean" else np.mean(rho**2))
    est = "CCA of the uncentred columns (no mean removal), " + (
        "mean canonical correlation" if statistic == "mean" else "mean squared canonical correlation"
    )
    return MeasureResult(value, mid, est, n, {"rho": rho, "dims_x": kx, "dims_y": ky})


def uncentered_cca(X: Any, Y: Any, statistic: str = "mean_sq") -> float:
    """CCA without centring the columns (see the module docstring)."""
    return uncentered_cca_result(X, Y, statistic).value


# --------------------------------------------------------------------------- netrep / repsim: shape metrics


def procrustes_angular_result(X: Any, Y: Any, center: bool = True) -> MeasureResult:
    """Angular Procrustes distance ``arccos(||X^T Y||_*)`` of the unit-norm (centred) sides, in radians."""
    mid = "procrustes_angular" if center else "procrustes_angular_raw"
    base = procrustes_result(X, Y, center=center)
    est = "angular shape metric arccos(||X^T Y||_* / (||X|| ||Y||)) = 2 arcsin(r / 2) (Williams et al. 2021)"
    if not math.isfinite(base.value):
        return MeasureResult(math.nan, mid, est, base.n, dict(base.details))
    r = float(base.details["residual"])  # ||X R - Y|| of unit-norm sides: r^2 = 2 - 2 cos(theta)
    theta = 2.0 * math.asin(min(r / 2.0, 1.0))
    return MeasureResult(theta, mid, est, base.n, {"residual": r, "center": center})


def procrustes_angular(X: Any, Y: Any, center: bool = True) -> float:
    """netrep's angular shape distance (alpha = 1), in [0, pi/2]; 0 for a rotated (and shifted, scaled) copy."""
    return procrustes_angular_result(X, Y, center).value


def procrustes_euclidean_result(X: Any, Y: Any) -> MeasureResult:
    """``min_Q ||Xc Q - Yc||_F`` at the data's own scale (netrep ``score_method="euclidean"``, alpha = 1)."""
    mid = "procrustes_euclidean"
    x, y = check_pair(X, Y, min_n=2, what=mid)
    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    xc[:, constant_columns(x)] = 0.0
    yc[:, constant_columns(y)] = 0.0
    src, dst = (xc, yc) if xc.shape[1] <= yc.shape[1] else (yc, xc)
    U, _, Vt = np.linalg.svd(src.T @ dst, full_matrices=False)
    value = float(np.linalg.norm(src @ (U @ Vt) - dst))  # the residual itself, never a difference of norms
    est = "Euclidean Procrustes distance min ||Xc Q - Yc||_F of the centred data, unnormalised (netrep)"
    return MeasureResult(value, mid, est, x.shape[0], {})


def procrustes_euclidean(X: Any, Y: Any) -> float:
    """netrep's Euclidean Procrustes distance (centred, not normalised; see the module docstring)."""
    return procrustes_euclidean_result(X, Y).value


# --------------------------------------------------------------------------- rsatoolbox: RDM comparisons

RSA_COMPARISONS = ("pearson", "cosine", "kendalltaua", "rhoa")
RSA_RDMS = {"corr": "correlation", "cosine": "cosine", "euclidean": "euclidean", "sqeuclidean": "sqeuclidean"}


def _rdm(x: np.ndarray, name: str, side: str) -> np.ndarray:
    if name == "sqeuclidean":
        return rdm(x, "euclidean", side=side) ** 2
    return rdm(x, RSA_RDMS[name], side=side)


def _tau_a(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-a: (concordant - discordant) / (N (N - 1) / 2), tied pairs counting 0."""
    N = a.size
    tot = N * (N - 1) / 2.0

    def ties(v: np.ndarray) -> float:
        _, c = np.unique(v, return_counts=True)
        return float((c * (c - 1) / 2.0).sum())

    tx, ty = ties(a), ties(b)
    if tx == tot or ty == tot:
        return math.nan
    from scipy.stats import kendalltau  # here, not at import: scipy.stats costs seconds of every command's start

    tau_b = float(kendalltau(a, b, variant="b").statistic)  # (C - D) / sqrt((tot - tx)(tot - ty))
    return tau_b * math.sqrt((tot - tx) * (tot - ty)) / tot


def _compare(a: np.ndarray, b: np.ndarray, comparison: str) -> float:
    if comparison == "kendalltaua":
        return _tau_a(a, b)
    if comparison == "rhoa":
        from scipy.stats import rankdata

        ra, rb = rankdata(a), rankdata(b)
        ra -= ra.mean()
        rb -= rb.mean()
        N = a.size
        return 12.0 * float(ra @ rb) / (N**3 - N)
    if comparison == "pearson":
        a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float(a @ a) * float(b @ b))
    return float(a @ b) / den if den > 0 else math.nan


def rsa_compare_result(X: Any, Y: Any, comparison: str, rdm_name: str) -> MeasureResult:
    """RSA with rsatoolbox's RDM comparison ``comparison`` on RDMs ``rdm_name`` (see the module docstring)."""
    if comparison not in RSA_COMPARISONS:
        raise MeasureInputError(f"RDM comparison must be one of {RSA_COMPARISONS}; got {comparison!r}.")
    if rdm_name not in RSA_RDMS:
        raise MeasureInputError(f"RDM must be one of {tuple(RSA_RDMS)}; got {rdm_name!r}.")
    mid = f"rsa_{comparison}_{rdm_name}"
    x, y = check_pair(X, Y, min_n=3, what=mid)
    dx, dy = _rdm(x, rdm_name, "X"), _rdm(y, rdm_name, "Y")
    value = _compare(dx, dy, comparison)
    est = f"{comparison} comparison of {RSA_RDMS[rdm_name]}-distance RDM upper triangles (rsatoolbox convention)"
    if math.isnan(value):
        return _nan(mid, est, x.shape[0], f"{mid} is undefined: an RDM has no variation to compare.")
    return MeasureResult(value, mid, est, x.shape[0], {"pairs": dx.size})


def rsa_compare(X: Any, Y: Any, comparison: str = "pearson", rdm_name: str = "corr") -> float:
    """rsatoolbox-style RSA: ``comparison`` of the two RDMs (see the module docstring)."""
    return rsa_compare_result(X, Y, comparison, rdm_name).value


# --------------------------------------------------------------------------- registry

_FLOAT = r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
_RSA_INV = {
    "corr": {"isotropic_scale", "permutation"},
    "cosine": {"orthogonal", "isotropic_scale", "permutation"},
    "euclidean": {"orthogonal", "isotropic_scale", "translation", "permutation"},
    "sqeuclidean": {"orthogonal", "isotropic_scale", "translation", "permutation"},
}


def _measure(mid: str, fn: Any, est: str, ref: str, **meta: Any) -> Measure:
    meta.setdefault("larger_is_more_similar", True)
    meta.setdefault("symmetric", True)
    return Measure(id=mid, metadata=MeasureMetadata(estimator=est, reference=ref, **meta), fn=fn)


def _minibatch(m: re.Match[str]) -> Measure:
    b = int(m.group(1))
    if b < 4:
        raise MeasureInputError(f"cka_linear_minibatch{b}: the batch size must be at least 4.")
    return _measure(
        f"cka_linear_minibatch{b}",
        lambda X, Y, **kw: minibatch_cka_result(X, Y, b, **kw),
        f"CKA from unbiased HSIC summed over batches of {b} consecutive rows",
        "Nguyen et al. 2020; pytorch-cka",
        cost_model="gram",
        invariances=_CKA_INV,
        min_n=4,
    )


def _kornblith(m: re.Match[str]) -> Measure:
    debiased, t = bool(m.group(1)), float(m.group(2))
    if not t > 0:
        raise MeasureInputError(f"RBF bandwidth threshold must be > 0; got {t}.")
    return _measure(
        f"cka_rbf{'_debiased' if debiased else ''}_kornblith{t!r}",
        lambda X, Y, **kw: kornblith_rbf_cka_result(X, Y, t, debiased, **kw),
        f"RBF CKA, sigma^2 = {t}^2 x median of all squared distances",
        "Kornblith et al. 2019 (reference notebook)",
        cost_model="rbf",
        invariances=_CKA_INV,
        min_n=4 if debiased else 3,
        bounds=(-math.inf, math.inf) if debiased else (0.0, 1.0),
    )


def _fixed(mid: str, factory: Any) -> None:
    register_family(re.escape(mid), lambda _m: factory(), mid)


register_family(r"cka_linear_minibatch(\d+)", _minibatch, "cka_linear_minibatch<b>")
register_family(r"cka_rbf(_debiased)?_kornblith" + _FLOAT, _kornblith, "cka_rbf[_debiased]_kornblith<t>")
_fixed(
    "cka_linear_uncentered",
    lambda: _measure(
        "cka_linear_uncentered",
        lambda X, Y, **kw: uncentered_linear_cka_result(X, Y, **kw),
        "RV coefficient of the uncentred arrays",
        "Robert & Escoufier 1976; hoggorm RVcoeff",
        cost_model="gram",
        invariances=frozenset({"orthogonal", "isotropic_scale", "permutation"}),
        bounds=(0.0, 1.0),
    ),
)
_fixed(
    "rv_modified",
    lambda: _measure(
        "rv_modified",
        lambda X, Y, **kw: modified_rv_result(X, Y, **kw),
        "modified RV of the centred arrays",
        "Smilde et al. 2009; hoggorm RV2coeff",
        invariances=_CKA_INV,
        min_n=3,
        bounds=(-1.0, 1.0),
    ),
)
for _stat in ("mean", "mean_sq"):
    _fixed(
        f"cca_{_stat}_uncentered",
        lambda s=_stat: _measure(
            f"cca_{s}_uncentered",
            lambda X, Y, **kw: uncentered_cca_result(X, Y, s, **kw),
            f"CCA of the uncentred columns, {s}",
            "Kornblith et al. 2019 (reference notebook cca)",
            cost_model="svd",
            invariances=frozenset({"orthogonal", "isotropic_scale", "invertible_linear", "permutation"}),
            min_n=3,
            bounds=(0.0, 1.0),
        ),
    )
for _center in (True, False):
    _fixed(
        "procrustes_angular" if _center else "procrustes_angular_raw",
        lambda c=_center: _measure(
            "procrustes_angular" if c else "procrustes_angular_raw",
            lambda X, Y, **kw: procrustes_angular_result(X, Y, c, **kw),
            "angular Procrustes distance, radians",
            "Williams et al. 2021; netrep LinearMetric(alpha=1, score_method='angular')",
            cost_model="svd",
            larger_is_more_similar=False,
            invariances=frozenset({"orthogonal", "isotropic_scale", "permutation"}) | ({"translation"} if c else set()),
            bounds=(0.0, math.pi / 2),
        ),
    )
_fixed(
    "procrustes_euclidean",
    lambda: _measure(
        "procrustes_euclidean",
        lambda X, Y, **kw: procrustes_euclidean_result(X, Y, **kw),
        "Euclidean Procrustes distance of the centred data",
        "Williams et al. 2021; netrep LinearMetric(alpha=1, score_method='euclidean')",
        cost_model="svd",
        larger_is_more_similar=False,
        invariances=frozenset({"orthogonal", "translation", "permutation"}),
        bounds=(0.0, math.inf),
    ),
)


def _rsa(m: re.Match[str]) -> Measure:
    comparison, name = m.group(1), m.group(2)
    return _measure(
        f"rsa_{comparison}_{name}",
        lambda X, Y, **kw: rsa_compare_result(X, Y, comparison, name, **kw),
        f"{comparison} comparison of {RSA_RDMS[name]}-distance RDMs",
        "Kriegeskorte et al. 2008; rsatoolbox compare",
        cost_model="rsa",
        invariances=frozenset(_RSA_INV[name]),
        min_n=3,
        bounds=(-1.0, 1.0),
    )


register_family(
    r"rsa_(" + "|".join(RSA_COMPARISONS) + r")_(" + "|".join(RSA_RDMS) + r")", _rsa, "rsa_<comparison>_<rdm>"
)
