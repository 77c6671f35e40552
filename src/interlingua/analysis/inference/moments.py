"""Analytic permutation p-values for biased linear CKA (the RV coefficient): exact moments + Pearson type III.

Biased linear CKA of X (n x p) and Y (n x q) is the RV coefficient of the
column-centred data: with the centred Grams ``K = Xc Xc^T``, ``L = Yc Yc^T``,

    CKA = <K, L>_F / (||K||_F ||L||_F).

Its permutation null (rows of Y permuted relative to X, ``L -> P L P^T``)
has exactly computable mean, variance and skewness over all n! permutations
(Kazi-Aoul et al. 1995; Josse, Pages & Husson 2008, "Testing the
significance of the RV coefficient", CSDA 53:82-91). Matching a Pearson type
III distribution to these three moments gives the p-value without drawing a
single permutation (Josse et al. 2008; FactoMineR's ``coeffRV``). The moments
need only per-side quantities (one pass over each side's Gram) and the
observed CKA, so once every layer's quantities are known a cell of a layer x
layer grid costs O(1): the grid costs little more than its observed values.

The moments (derived here, and checked against full enumeration of all n!
permutations at n = 4..7 in tests/inference/test_moments.py)
-----------------------------------------------------------------------------
Write ``T = <A, P B P^T>`` for symmetric, doubly centred A, B (zero row sums)
and P uniform over the n! permutation matrices, ``H = I - 11^T/n``.

- Mean: ``E[T] = tr(A) tr(B) / (n - 1)``.
- Centring the statistic: with ``A0 = A - tr(A)/(n-1) H`` (and B0 alike),
  ``T - E[T] = <A0, P B0 P^T>`` for EVERY P (``P H P^T = H``, ``<H, M> = tr M``
  for doubly centred M), so the central moments of T are the raw moments of
  a statistic whose two matrices are doubly centred AND trace-free. That kills
  every term with a trace and avoids the cancellation of raw moments.
- Per side (of A0; B0 alike), with ``d = diag(A0)``:
  ``S2 = sum d_i^2``, ``Q = tr(A0^2) = ||A0||_F^2`` (second moments) and
  ``D3 = sum d_i^3``, ``C3 = sum_ij A0_ij^3``, ``R3 = tr(A0^3)``,
  ``M = sum_i d_i (A0^2)_ii``, ``N = d^T A0 d`` (third moments).
- ``E[T0^2] = n(n+1)/((n-1)(n-2)(n-3)) S2 S2' - 2/((n-2)(n-3)) (S2 Q' + Q S2')
  + 2/(n(n-3)) Q Q'``  (n >= 4), which is Josse et al.'s variance.
- ``E[T0^3] = v3^T C3(n) v3'`` with ``v3 = (D3, C3, R3, M, N)`` and the
  symmetric 5 x 5 matrix of rational functions in :func:`_third_coefficients`
  (all over ``(n)_6 = n(n-1)...(n-5)``, so n >= 6). Derivation: expand
  ``E[T^3] = sum_sigma a_sigma b_sigma / (n)_{|sigma|}`` over the 203 set
  partitions sigma of the six indices ``(i1, j1, i2, j2, i3, j3)``, where
  ``a_sigma`` sums ``A_{i1 j1} A_{i2 j2} A_{i3 j3}`` over index tuples whose
  equality pattern is exactly sigma; Moebius inversion on the partition
  lattice writes ``a_sigma`` as an integer combination of unrestricted
  contractions, and for doubly centred, trace-free A every contraction
  vanishes except the five above (a vertex met by a single edge is a zero row
  sum). The coefficients agree term by term with the published expression
  (Kazi-Aoul et al. 1995, as implemented in FactoMineR) restricted to
  trace-free matrices. For n = 4, 5 (fewer than six distinct indices) the
  moments come from enumerating the 24 / 120 permutations.

CKA is ``T / (||K|| ||L||)``; every per-side quantity here is computed for the
unit-norm centred Gram ``K / ||K||``, so the moments are directly those of the
permuted CKA. The p-value is the upper tail (larger CKA = more similar) of the
Pearson type III distribution with these mean, variance and skewness:
``scipy.stats.pearson3(skew).sf(z)``, ``z = (CKA - mean) / sd``, floored at
``1/n!`` (the exact test's smallest possible p; ``float`` tiny when 1/n!
underflows).

Accuracy (benchmarks/bench_moments.py, against 100,000-draw Monte-Carlo
nulls): three moments fix a Pearson III curve, not the permutation
distribution itself. Gaussian data (n = 100-300) and mean-pooled LM states
agree to |dp| <= 0.005 and <= 0.012 for p >= 0.01, within 20% at p = 0.001.
It breaks down when a few rows dominate the Grams (Student-t rows with 2 df at
n = 300: skewness ~5, dp = -0.16 at the median) and in the far tail at tiny n
(n = 8: p_moments is 3x the exact p at p = 0.001). Values far beyond the
Monte-Carlo range (p < 1e-4, say) are extrapolations of the fitted curve:
read them as "very small", not as calibrated probabilities.

Costs per side: from features (p < n) the Gram is never stored: the blocks of
``Xc Xc^T`` stream through (O(n^2 p) for ``C3``, the one quantity that needs
every Gram entry), ``R3`` comes from the eigenvalues of ``Xc^T Xc`` (O(p^3));
from an n x n Gram everything is O(n^2) except ``R3 = tr(A0^3)`` (one n x n
product, O(n^3)).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import stats

from interlingua.analysis.measures.validation import as_matrix, centre_columns_rescaled
from interlingua.core.errors import MeasureInputError

__all__ = [
    "MOMENTS_MEASURES",
    "RVSide",
    "MomentsResult",
    "MomentsGridResult",
    "rv_side",
    "rv_permutation_moments",
    "rv_moments_pvalue",
    "rv_moments_grid",
    "rv_test_from_sides",
    "grid_moments",
    "pearson3_pvalue",
]

#: Measures whose permutation p-value :mod:`interlingua.analysis.inference.moments` computes analytically.
MOMENTS_MEASURES = ("cka_linear_biased",)

_MIN_N = 4  # the variance formula has (n - 3) in a denominator; n <= 3 has at most 6 permutations
_ENUMERATE_BELOW = 6  # the third-moment formula needs six distinct indices; n = 4, 5 enumerate 24 / 120
_DEGENERATE_SIDE = 1e-20  # ||A0||^2 / ||A||^2 below this: the side's Gram is a multiple of H (to rounding)
_DEGENERATE_CELL = 1e-12  # variance below this fraction of its positive terms: cancellation, treated as 0
_BLOCK_BYTES = 8 * 2**20


# --------------------------------------------------------------------------- coefficients


@lru_cache(maxsize=64)
def _second_coefficients(n: int) -> np.ndarray:
    """2 x 2 matrix C2 with ``E[T0^2] = (S2, Q) C2 (S2', Q')^T`` (n >= 4)."""
    c = np.empty((2, 2))
    c[0, 0] = n * (n + 1) / ((n - 1) * (n - 2) * (n - 3))
    c[0, 1] = c[1, 0] = -2.0 / ((n - 2) * (n - 3))
    c[1, 1] = 2.0 / (n * (n - 3))
    c.setflags(write=False)  # cached: shared by every caller
    return c


@lru_cache(maxsize=64)
def _third_coefficients(n: int) -> np.ndarray:
    """5 x 5 symmetric matrix C3 with ``E[T0^3] = v3 C3 v3'^T``, ``v3 = (D3, C3, R3, M, N)`` (n >= 6).

    Numerators are exact Python integers; each entry is rounded once.
    """
    ff = n * (n - 1) * (n - 2) * (n - 3) * (n - 4) * (n - 5)  # (n)_6
    D, C, R, M, N = range(5)
    num: dict[tuple[int, int], int] = {
        (D, D): n * n * (n + 1) * (n * n + 15 * n - 4),
        (C, C): 4 * (n**4 - 8 * n**3 + 19 * n**2 - 4 * n - 16),
        (R, R): 8 * (n**3 - 9 * n**2 + 26 * n - 22),
        (M, M): 12 * (n + 4) * (n * n - 3 * n + 6) * (n - 2),
        (N, N): 6 * (n**3 - 6 * n**2 + 9 * n + 12) * (n - 2),
        (D, C): -4 * (n * n - n + 4) * n * (n - 1),
        (D, R): 16 * n * (n - 1) * (n - 2),
        (D, M): -12 * (n + 4) * n * (n - 1) ** 2,
        (D, N): -6 * (n * n - n + 4) * n * (n - 1),
        (C, R): -8 * (3 * n * n - 15 * n + 16),
        (C, M): 24 * (n * n - n - 4) * (n - 2),
        (C, N): 24 * (n * n - n - 4),
        (R, M): -24 * (n * n - 5 * n + 8) * (n - 2),
        (R, N): -24 * (n * n - 5 * n + 8),
        (M, N): 24 * (n**3 - 2 * n**2 - 3 * n + 12),
    }
    c = np.empty((5, 5))
    for (i, j), v in num.items():
        c[i, j] = c[j, i] = v / ff
    c.setflags(write=False)  # cached: shared by every caller
    return c


# --------------------------------------------------------------------------- per-side quantities


@dataclass(frozen=True, eq=False)
class RVSide:
    """What the permutation moments need from one side (one layer), for its unit-norm centred Gram ``K/||K||``.

    ``trace``: ``tr(K)/||K||``; ``second``: ``(S2, Q)`` and ``third``:
    ``(D3, C3, R3, M, N)`` of the trace-free part ``A0`` (module docstring);
    ``degenerate``: ``A0`` is 0 to rounding (the centred Gram is a multiple of
    the centring matrix, e.g. a regular simplex), so every permutation gives
    the same CKA. ``gram``: the unit centred Gram, kept only for n < 6
    (the moments are then enumerated) or when asked.
    """

    n: int
    trace: float
    second: np.ndarray = field(repr=False)
    third: np.ndarray = field(repr=False)
    degenerate: bool
    gram: np.ndarray | None = field(default=None, repr=False)


def _no_variance(name: str) -> MeasureInputError:
    return MeasureInputError(
        f"{name} has no variance after centring (constant rows, or all-zero Gram): CKA and its permutation "
        "distribution are undefined."
    )


def _check_n(n: int, name: str) -> None:
    if n < _MIN_N:
        raise MeasureInputError(
            f"{name}: analytic permutation moments need at least {_MIN_N} paired examples (the variance is "
            f"undefined below; n <= 3 has at most 6 permutations, enumerate them instead); got n={n}."
        )


def _side_from_trace_free(K0: np.ndarray, trace: float, r3: float | None, gram: np.ndarray | None) -> RVSide:
    """Invariants of the trace-free unit Gram ``K0`` (n x n, symmetric; modified by nothing here)."""
    d = np.ascontiguousarray(np.diagonal(K0))
    rowsq = np.einsum("ij,ij->i", K0, K0)
    q = float(rowsq.sum())
    c3 = float(np.einsum("ij,ij,ij->", K0, K0, K0))
    if r3 is None:
        r3 = float(np.einsum("ij,ij->", K0, K0 @ K0))
    third = np.array([float(np.sum(d**3)), c3, r3, float(d @ rowsq), float(d @ (K0 @ d))])
    second = np.array([float(d @ d), q])
    return RVSide(K0.shape[0], trace, second, third, bool(q <= _DEGENERATE_SIDE), gram)


def _side_from_centred_gram(K: np.ndarray, name: str, keep_gram: bool) -> RVSide:
    """``K``: a doubly centred symmetric float64 Gram, owned by this call (scaled and shifted in place)."""
    n = K.shape[0]
    norm2 = float(np.einsum("ij,ij->", K, K))
    if not 0 < norm2 < math.inf:
        raise _no_variance(name)
    K *= 1.0 / math.sqrt(norm2)
    gram = K.copy() if (keep_gram or n < _ENUMERATE_BELOW) else None
    trace = float(np.trace(K))
    alpha = trace / (n - 1)
    K += alpha / n
    K[np.diag_indices(n)] -= alpha  # K0 = K - alpha H
    return _side_from_trace_free(K, trace, None, gram)


def _side_from_features(xc: np.ndarray, name: str) -> RVSide:
    """Column-centred ``xc`` (n x p, p < n): the Gram streams through in row blocks, never stored whole."""
    n, p = xc.shape
    G = xc.T @ xc
    norm2 = float(np.einsum("ij,ij->", G, G))  # ||Xc Xc^T||_F^2 = ||Xc^T Xc||_F^2
    if not 0 < norm2 < math.inf:
        raise _no_variance(name)
    scale = norm2**-0.25
    xs = xc * scale  # xs xs^T = K / ||K||
    G *= scale * scale
    lam = np.linalg.eigvalsh(G)
    trace = float(np.trace(G))
    alpha = trace / (n - 1)
    m = min(p, n - 1)  # the spectrum of K on 1-perp: the top m eigenvalues of G, then zeros
    top = lam[-m:] - alpha
    r3 = float(np.sum(top**3)) - (n - 1 - m) * alpha**3
    d = np.einsum("ij,ij->i", xs, xs) - alpha * (1.0 - 1.0 / n)  # diag(K0)
    rows = max(1, min(n, _BLOCK_BYTES // (8 * n)))
    q = c3 = mm = nn = 0.0
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        blk = xs @ xs.T if rows == n else xs[r0:r1] @ xs.T  # one block: syrk, half the multiply-adds
        blk += alpha / n
        blk[np.arange(r1 - r0), np.arange(r0, r1)] -= alpha  # rows r0:r1 of K0
        rowsq = np.einsum("ij,ij->i", blk, blk)
        q += float(rowsq.sum())
        c3 += float(np.einsum("ij,ij,ij->", blk, blk, blk))
        mm += float(d[r0:r1] @ rowsq)
        nn += float(d[r0:r1] @ (blk @ d))
    third = np.array([float(np.sum(d**3)), c3, r3, mm, nn])
    second = np.array([float(d @ d), q])
    return RVSide(n, trace, second, third, bool(q <= _DEGENERATE_SIDE), None)


def _square(a: Any, name: str) -> np.ndarray:
    g = as_matrix(a, name)
    if g.shape[0] != g.shape[1]:
        raise MeasureInputError(f"{name}: a Gram matrix must be square; got shape {g.shape}.")
    scale = float(np.max(np.abs(g)))
    if float(np.max(np.abs(g - g.T))) > 1e-8 * scale:
        raise MeasureInputError(
            f"{name} is not symmetric (max |G - G^T| = {float(np.max(np.abs(g - g.T))):.3g}); pass a Gram matrix "
            "X X^T (or kind='features' for an (n, p) representation)."
        )
    return g


def rv_side(A: Any, *, kind: str = "features", name: str = "X", keep_gram: bool = False) -> RVSide:
    """Per-side quantities of the permutation moments of linear CKA, for one representation or Gram.

    ``kind="features"``: ``A`` is an (n, p) representation (rows = examples);
    ``kind="gram"``: ``A`` is an (n, n) Gram matrix ``X X^T``, centred or not
    (it is H-centred here; centring is idempotent, so a centred or unit Gram
    such as ``measure.unit_gram(X)`` works too). Raises
    :class:`MeasureInputError` for n < 4, non-finite values, a non-symmetric
    Gram, or a side without variance.
    """
    if kind == "features":
        x = as_matrix(A, name)
        n, p = x.shape
        _check_n(n, name)
        xc = centre_columns_rescaled(x)
        if p < n and n >= _ENUMERATE_BELOW and not keep_gram:
            return _side_from_features(xc, name)
        return _side_from_centred_gram(xc @ xc.T, name, keep_gram)
    if kind == "gram":
        g = _square(A, name)
        _check_n(g.shape[0], name)
        K = g - g.mean(1)[:, None]
        K -= K.mean(0)[None, :]
        K = 0.5 * (K + K.T)
        return _side_from_centred_gram(K, name, keep_gram)
    raise MeasureInputError(
        f"kind must be 'features' (an (n, p) representation) or 'gram' (an (n, n) Gram); got {kind!r}."
    )


# --------------------------------------------------------------------------- moments


def _enumerated(ga: np.ndarray, gb: np.ndarray) -> tuple[float, float, float]:
    """Mean, variance and third central moment of ``<ga, P gb P^T>`` over all n! permutations (small n)."""
    n = ga.shape[0]
    perms = map(list, itertools.permutations(range(n)))
    vals = np.array([float(np.einsum("ij,ij->", ga, gb[np.ix_(p, p)])) for p in perms])
    mean = float(vals.mean())
    dev = vals - mean
    return mean, float(np.mean(dev**2)), float(np.mean(dev**3))


def _cell_moments(a: RVSide, b: RVSide) -> tuple[float, float, float, bool]:
    """(mean, variance, third central moment, degenerate) of the permuted CKA of two sides."""
    n = a.n
    mean = a.trace * b.trace / (n - 1)
    if a.degenerate or b.degenerate:
        return mean, 0.0, 0.0, True
    c2 = _second_coefficients(n)
    if n < _ENUMERATE_BELOW:
        _, var, third = _enumerated(a.gram, b.gram)  # type: ignore[arg-type]
    else:
        var = float(a.second @ c2 @ b.second)
        third = float(a.third @ _third_coefficients(n) @ b.third)
    positive = c2[0, 0] * a.second[0] * b.second[0] + c2[1, 1] * a.second[1] * b.second[1]
    degenerate = not var > _DEGENERATE_CELL * positive
    return mean, (0.0 if degenerate else var), (0.0 if degenerate else third), degenerate


def rv_permutation_moments(K: Any, L: Any) -> tuple[float, float, float]:
    """Exact ``(mean, variance, skewness)`` of ``<K, P L P^T>_F`` over all n! permutation matrices P.

    ``K``, ``L``: symmetric, doubly centred (zero row sums) n x n matrices,
    e.g. the centred Grams ``Xc Xc^T`` and ``Yc Yc^T`` (not normalised: the
    moments are of the raw inner product; divide the mean by
    ``||K|| ||L||``, the variance by its square, for CKA). Needs n >= 4.
    Skewness is nan when the variance is 0 (every permutation gives the same
    value: one matrix is a multiple of the centring matrix H).
    """
    k = _square(K, "K")
    m = _square(L, "L")
    if k.shape != m.shape:
        raise MeasureInputError(f"K and L must have the same shape; got {k.shape} and {m.shape}.")
    _check_n(k.shape[0], "K")
    for g, nm in ((k, "K"), (m, "L")):
        tol = 1e-9 * max(float(np.max(np.abs(g))), 1e-300) * g.shape[0]
        if float(np.max(np.abs(g.sum(1)))) > tol:
            raise MeasureInputError(
                f"{nm} is not doubly centred (its rows do not sum to 0); centre it first "
                "(interlingua.analysis.measures.center_gram), or use rv_moments_pvalue, which centres."
            )
    sk = math.sqrt(float(np.einsum("ij,ij->", k, k)))
    sl = math.sqrt(float(np.einsum("ij,ij->", m, m)))
    if not (sk > 0 and sl > 0):
        return 0.0, 0.0, math.nan
    a = _side_from_centred_gram(0.5 * (k + k.T), "K", False)
    b = _side_from_centred_gram(0.5 * (m + m.T), "L", False)
    mean, var, third, degenerate = _cell_moments(a, b)
    s = sk * sl
    skew = math.nan if degenerate else third / var**1.5
    return mean * s, var * s * s, skew


def _p_floor(n: int) -> float:
    """The exact permutation test's smallest p-value, 1/n! (the identity permutation ties), or float tiny."""
    return max(1.0 / math.factorial(n), float(np.finfo(float).tiny)) if n <= 170 else float(np.finfo(float).tiny)


def pearson3_pvalue(z: Any, skew: Any, n: int) -> np.ndarray:
    """Upper-tail p-value ``scipy.stats.pearson3(skew).sf(z)`` (vectorised), floored at 1/n!; nan in, nan out."""
    z = np.asarray(z, dtype=float)
    skew = np.asarray(skew, dtype=float)
    with np.errstate(invalid="ignore"):
        p = stats.pearson3.sf(z, np.where(np.isfinite(skew), skew, 0.0))
    p = np.where(np.isfinite(z) & np.isfinite(skew), np.maximum(p, _p_floor(n)), np.nan)
    return np.minimum(p, 1.0)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, eq=False)
class MomentsResult:
    """Analytic permutation test of biased linear CKA (the RV coefficient) for one pair.

    ``mean``, ``variance``, ``skewness``: exact moments of CKA over all n!
    row permutations of Y; ``statistic``: ``(observed - mean) / sqrt(variance)``;
    ``p_value``: upper tail of the Pearson type III distribution with those
    moments (floored at 1/n!). ``degenerate``: every permutation gives the
    same CKA (a side's centred Gram is a multiple of H): ``p_value = 1``
    exactly, as in the exact test, and statistic / skewness are nan.
    """

    observed: float
    mean: float
    variance: float
    skewness: float
    statistic: float
    p_value: float
    n: int
    degenerate: bool = False
    measure_id: str = "cka_linear_biased"
    method: str = "moments"
    distribution: str = "pearson3"
    larger_is_more_similar: bool = True

    def quantile(self, q: Any) -> Any:
        """Quantiles of the fitted Pearson type III null (in CKA units)."""
        if self.degenerate:
            return np.full(np.shape(q), self.mean) if np.ndim(q) else self.mean
        out = self.mean + math.sqrt(self.variance) * stats.pearson3.ppf(q, self.skewness)
        return float(out) if np.ndim(out) == 0 else out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "measure_id": self.measure_id,
            "observed": self.observed,
            "mean": self.mean,
            "variance": self.variance,
            "skewness": self.skewness,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "n": self.n,
            "degenerate": self.degenerate,
            "method": self.method,
            "distribution": self.distribution,
            "larger_is_more_similar": self.larger_is_more_similar,
        }


def rv_test_from_sides(observed: float, a: RVSide, b: RVSide) -> MomentsResult:
    """The analytic test of one pair from its observed CKA and the two sides' :func:`rv_side` quantities."""
    if a.n != b.n:
        raise MeasureInputError(f"the two sides hold {a.n} and {b.n} examples; rows must be paired.")
    mean, var, third, degenerate = _cell_moments(a, b)
    if degenerate:
        return MomentsResult(observed, mean, 0.0, math.nan, math.nan, 1.0, a.n, True)
    sd = math.sqrt(var)
    skew = third / var**1.5
    z = (observed - mean) / sd
    return MomentsResult(observed, mean, var, skew, z, float(pearson3_pvalue(z, skew, a.n)), a.n, False)


def _observed_from_inputs(x: np.ndarray, y: np.ndarray, kind: str) -> float:
    """Biased linear CKA of the inputs (features: :func:`~interlingua.analysis.measures.linear_cka`; Grams: the
    centred product)."""
    if kind == "features":
        from interlingua.analysis.measures import linear_cka

        return float(linear_cka(x, y))
    K, L = x - x.mean(1)[:, None], y - y.mean(1)[:, None]
    K -= K.mean(0)[None, :]
    L -= L.mean(0)[None, :]
    kl, kk, ll = (float(np.einsum("ij,ij->", u, v)) for u, v in ((K, L), (K, K), (L, L)))
    return kl / math.sqrt(kk * ll)


def rv_moments_pvalue(X: Any, Y: Any, *, kind: str = "features", observed: float | None = None) -> MomentsResult:
    """Analytic permutation p-value of biased linear CKA (RV coefficient) of X and Y.

    ``kind="features"``: X (n, p) and Y (n, q) representations, rows paired;
    ``kind="gram"``: X and Y are (n, n) Gram matrices (``X X^T``; centred or
    not). ``observed``: the CKA if already computed (e.g. from a grid);
    otherwise computed here. Returns a :class:`MomentsResult` (``method``
    ``"moments"``). Raises :class:`MeasureInputError` for n < 4, NaN/inf,
    mismatched rows, a non-symmetric Gram or a side without variance.
    """
    if kind not in ("features", "gram"):
        raise MeasureInputError(f"kind must be 'features' or 'gram'; got {kind!r}.")
    a = rv_side(X, kind=kind, name="X")
    b = rv_side(Y, kind=kind, name="Y")
    if a.n != b.n:
        raise MeasureInputError(
            f"X has {a.n} rows but Y has {b.n}; rows are paired examples, so both sides need the same examples "
            "in the same order."
        )
    if observed is None:
        observed = _observed_from_inputs(as_matrix(X, "X"), as_matrix(Y, "Y"), kind)
    return rv_test_from_sides(float(observed), a, b)


@dataclass(frozen=True, eq=False)
class MomentsGridResult:
    """Analytic per-cell permutation tests of a layer x layer biased-linear-CKA grid.

    Every array is (La, Lb): ``grid`` (observed CKA), ``mean``, ``variance``,
    ``skewness``, ``statistic`` (z) and ``p_values`` (per cell, uncorrected:
    no adjustment for searching the grid; multiply by the number of cells
    for Bonferroni). ``degenerate`` cells have ``p = 1`` and nan z / skewness.
    """

    grid: np.ndarray = field(repr=False)
    mean: np.ndarray = field(repr=False)
    variance: np.ndarray = field(repr=False)
    skewness: np.ndarray = field(repr=False)
    statistic: np.ndarray = field(repr=False)
    p_values: np.ndarray = field(repr=False)
    degenerate: np.ndarray = field(repr=False)
    n: int
    measure_id: str = "cka_linear_biased"
    method: str = "moments"
    distribution: str = "pearson3"


def _layer_list(layers: Any, name: str) -> list[Any]:
    if isinstance(layers, (str, bytes)) or layers is None:
        raise MeasureInputError(f"{name} must be a sequence of (n, p) arrays or an (L, n, p) array.")
    seq = [layers[i] for i in range(layers.shape[0])] if getattr(layers, "ndim", None) == 3 else list(layers)
    if not seq:
        raise MeasureInputError(f"{name} is empty; pass at least one layer.")
    return seq


def grid_moments(sides_a: Sequence[RVSide], sides_b: Sequence[RVSide], grid: Any) -> MomentsGridResult:
    """Per-cell moments and p-values from per-side quantities and the observed (La, Lb) CKA grid (vectorised)."""
    g = np.asarray(grid, dtype=float)
    la, lb = len(sides_a), len(sides_b)
    if g.shape != (la, lb):
        raise MeasureInputError(f"grid has shape {g.shape}; expected ({la}, {lb}) (layers of A x layers of B).")
    n = sides_a[0].n
    if any(s.n != n for s in (*sides_a, *sides_b)):
        raise MeasureInputError("every layer of both sides must hold the same n examples.")
    ta = np.array([s.trace for s in sides_a])
    tb = np.array([s.trace for s in sides_b])
    mean = np.outer(ta, tb) / (n - 1)
    if n < _ENUMERATE_BELOW:
        var = np.empty((la, lb))
        third = np.empty((la, lb))
        deg = np.empty((la, lb), dtype=bool)
        for i, a in enumerate(sides_a):
            for j, b in enumerate(sides_b):
                _, var[i, j], third[i, j], deg[i, j] = _cell_moments(a, b)
    else:
        s2a, s2b = np.stack([s.second for s in sides_a]), np.stack([s.second for s in sides_b])
        c2 = _second_coefficients(n)
        var = s2a @ c2 @ s2b.T
        third = np.stack([s.third for s in sides_a]) @ _third_coefficients(n) @ np.stack([s.third for s in sides_b]).T
        positive = c2[0, 0] * np.outer(s2a[:, 0], s2b[:, 0]) + c2[1, 1] * np.outer(s2a[:, 1], s2b[:, 1])
        deg = ~(var > _DEGENERATE_CELL * positive)
        deg |= np.array([s.degenerate for s in sides_a])[:, None] | np.array([s.degenerate for s in sides_b])[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(deg, 0.0, var)
        skew = np.where(deg, np.nan, third / var**1.5)
        z = np.where(deg, np.nan, (g - mean) / np.sqrt(var))
    p = pearson3_pvalue(z, skew, n)
    p = np.where(deg & np.isfinite(g), 1.0, p)
    return MomentsGridResult(g, mean, var, skew, z, p, deg, n)


def rv_moments_grid(layers_a: Any, layers_b: Any, *, kind: str = "features", grid: Any = None) -> MomentsGridResult:
    """Analytic p-values of biased linear CKA for every (layer of A, layer of B) cell.

    ``layers_a`` / ``layers_b``: ``(L, n, p)`` arrays or sequences of (n, p_i)
    representations (``kind="features"``) or of (n, n) Grams (``kind="gram"``).
    Each layer's per-side quantities (:func:`rv_side`) are computed once and
    every cell costs O(1) after that. ``grid``: the observed (La, Lb) CKA grid
    if already computed (e.g. ``interlingua.analysis.measures.cka_grid(A, B)``);
    otherwise it is computed here (``cka_grid`` for features, the centred
    Grams' inner products for Grams).
    """
    if kind not in ("features", "gram"):
        raise MeasureInputError(f"kind must be 'features' or 'gram'; got {kind!r}.")
    A = _layer_list(layers_a, "layers_a")
    B = _layer_list(layers_b, "layers_b")
    sides_a = [rv_side(a, kind=kind, name=f"layers_a[{i}]") for i, a in enumerate(A)]
    sides_b = [rv_side(b, kind=kind, name=f"layers_b[{j}]") for j, b in enumerate(B)]
    n = sides_a[0].n
    for nm, ss in (("layers_a", sides_a), ("layers_b", sides_b)):
        for i, s in enumerate(ss):
            if s.n != n:
                raise MeasureInputError(
                    f"{nm}[{i}] has {s.n} rows but layers_a[0] has {n}; every layer must hold the same n examples "
                    "in the same order."
                )
    if grid is None:
        if kind == "features":
            from interlingua.analysis.measures import cka_grid

            grid = cka_grid(A, B, debiased=False)
        else:
            grid = np.array([[_observed_from_inputs(as_matrix(a), as_matrix(b), "gram") for b in B] for a in A])
    return grid_moments(sides_a, sides_b, grid)
