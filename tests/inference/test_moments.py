"""Analytic permutation moments of biased linear CKA (the RV coefficient) and their Pearson type III p-values.

Facts checked here:
- the exact mean, variance and skewness equal those of the full enumeration
  of all n! permutations (n = 4..7; Gaussian, heavy-tailed, tied and low-rank data);
- the closed-form coefficients equal an independent, exact (rational)
  derivation from set partitions at many n, so they are the same rational
  functions of n, not just equal at the enumerated sizes;
- invariances (rotation, isotropic scaling, translation) and the equivalence
  of the feature, Gram and unit-Gram inputs;
- the p-value lies in (0, 1], is monotone in the observed value, and agrees
  with a seeded 20,000-draw Monte-Carlo null at n = 60 in the central range;
- bad input raises MeasureInputError.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from interlingua.analysis.inference import permutation_test
from interlingua.analysis.inference.moments import (
    _second_coefficients,
    _third_coefficients,
    pearson3_pvalue,
    rv_moments_grid,
    rv_moments_pvalue,
    rv_permutation_moments,
    rv_side,
    rv_test_from_sides,
)
from interlingua.analysis.measures import cka_grid, get_measure, linear_cka
from interlingua.core.errors import MeasureInputError


def _centred_gram(X: np.ndarray) -> np.ndarray:
    Xc = X - X.mean(0)
    return Xc @ Xc.T


def _enumerate(K: np.ndarray, L: np.ndarray) -> tuple[float, float, float]:
    """Mean, variance, skewness of <K, P L P^T> over ALL n! permutations (the definition)."""
    n = K.shape[0]
    vals = np.array([np.sum(K * L[np.ix_(p, p)]) for p in map(list, itertools.permutations(range(n)))])
    mean = vals.mean()
    dev = vals - mean
    var = np.mean(dev**2)
    return float(mean), float(var), float(np.mean(dev**3) / var**1.5) if var > 0 else math.nan


def _data(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if kind == "gaussian":
        return rng.standard_normal((n, 3)), rng.standard_normal((n, 4))
    if kind == "heavy":
        return rng.standard_t(2, (n, 3)), rng.standard_t(2, (n, 2))
    if kind == "ties":  # duplicated rows and integer-valued (tied) coordinates
        X = rng.integers(0, 3, (n, 3)).astype(float)
        X[1] = X[0]
        Y = rng.integers(0, 2, (n, 2)).astype(float)
        Y[:, 0] = np.arange(n) % 2  # never constant
        Y[2] = Y[0]
        return X, Y
    if kind == "lowrank":  # rank-1 on one side, wider than n on the other
        return rng.standard_normal((n, 1)) @ rng.standard_normal((1, 5)), rng.standard_normal((n, n + 3))
    raise AssertionError(kind)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


# --------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("n", [4, 5, 6, 7])
@pytest.mark.parametrize("kind", ["gaussian", "heavy", "ties", "lowrank"])
def test_moments_equal_full_enumeration(n: int, kind: str) -> None:
    rng = np.random.default_rng(1000 * n + len(kind))
    X, Y = _data(kind, n, rng)
    K, L = _centred_gram(X), _centred_gram(Y)
    mean, var, skew = rv_permutation_moments(K, L)
    e_mean, e_var, e_skew = _enumerate(K, L)
    assert _rel(mean, e_mean) < 1e-10
    if e_var <= 1e-12 * e_mean**2:  # tied data can make every permutation equal: then say so exactly
        assert var == 0.0 and math.isnan(skew)
        assert rv_moments_pvalue(X, Y).p_value == 1.0
        return
    assert _rel(var, e_var) < 1e-10
    assert abs(skew - e_skew) < 1e-10 * max(1.0, abs(e_skew))
    # the same moments in CKA units, from features
    res = rv_moments_pvalue(X, Y)
    s = np.linalg.norm(K) * np.linalg.norm(L)
    assert _rel(res.mean, e_mean / s) < 1e-10
    assert _rel(res.variance, e_var / s**2) < 1e-10
    assert abs(res.skewness - e_skew) < 1e-10 * max(1.0, abs(e_skew))
    assert res.observed == pytest.approx(linear_cka(X, Y), rel=1e-12)


@pytest.mark.parametrize("n", [4, 5, 6, 7])
def test_variance_formula_holds_from_n_4(n: int) -> None:
    """The closed-form variance (used for every n >= 6; n = 4, 5 enumerate) is already exact at n = 4, 5."""
    rng = np.random.default_rng(n)
    X, Y = rng.standard_normal((n, 2)), rng.standard_t(3, (n, 3))
    a, b = rv_side(X, keep_gram=True), rv_side(Y, keep_gram=True)
    var = float(a.second @ _second_coefficients(n) @ b.second)
    _, e_var, _ = _enumerate(a.gram, b.gram)
    assert _rel(var, e_var) < 1e-10


# An independent derivation of the coefficient matrices, in exact rational arithmetic: E[T^r] as a
# sum over the set partitions of the 2r indices, Moebius inversion to unrestricted contractions, and
# the contractions that survive for doubly centred, trace-free matrices (named as in the module).


def _set_partitions(elems: list[int]):
    if not elems:
        yield []
        return
    first, rest = elems[0], elems[1:]
    for part in _set_partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first] + part[i]] + part[i + 1 :]
        yield [[first]] + part


def _canon(edges: list[tuple[int, int]], verts: list[int]) -> tuple:
    keys = []
    for perm in itertools.permutations(range(len(verts))):
        m = dict(zip(verts, perm))
        keys.append(tuple(sorted(tuple(sorted((m[a], m[b]))) for a, b in edges)))
    return (len(verts), min(keys))


_NAMES2 = {_canon([(0, 0), (0, 0)], [0]): 0, _canon([(0, 1), (0, 1)], [0, 1]): 1}  # S2, Q
_NAMES3 = {  # D3, C3, R3, M, N
    _canon([(0, 0)] * 3, [0]): 0,
    _canon([(0, 1)] * 3, [0, 1]): 1,
    _canon([(0, 1), (1, 2), (2, 0)], [0, 1, 2]): 2,
    _canon([(0, 0), (0, 1), (0, 1)], [0, 1]): 3,
    _canon([(0, 0), (0, 1), (1, 1)], [0, 1]): 4,
}


def _contraction(tau: list[list[int]], r: int, names: dict) -> int | None:
    """Index of the named invariant an unrestricted contraction equals, or None when it is 0."""
    block = {x: k for k, blk in enumerate(tau) for x in blk}
    edges = [(block[2 * k], block[2 * k + 1]) for k in range(r)]
    verts = sorted(set(block.values()))
    for v in verts:  # a vertex met by a single non-loop edge is a zero row sum
        ends = [e for e in edges if v in e]
        if len(ends) == 1 and ends[0][0] != ends[0][1]:
            return None
    comps: list[set[int]] = []
    for a, b in edges:
        hit = [c for c in comps if a in c or b in c]
        merged = {a, b}.union(*hit) if hit else {a, b}
        comps = [c for c in comps if c not in hit] + [merged]
    if len(comps) > 1:  # with r <= 3 edges a product has a one-edge factor: a trace (0) or a row sum (0)
        return None
    if len(edges) == 1:
        return None
    return names[_canon(edges, verts)]


def _exact_coefficients(n: int, r: int) -> list[list[Fraction]]:
    names = _NAMES2 if r == 2 else _NAMES3
    size = len(names)
    coef = [[Fraction(0)] * size for _ in range(size)]
    for sigma in _set_partitions(list(range(2 * r))):
        m = len(sigma)
        if m > n:
            continue
        a = [0] * size
        for pp in _set_partitions(list(range(m))):  # coarsenings tau of sigma, Moebius mu(sigma, tau)
            mu = 1
            for blk in pp:
                mu *= (-1) ** (len(blk) - 1) * math.factorial(len(blk) - 1)
            idx = _contraction([sum((sigma[i] for i in blk), []) for blk in pp], r, names)
            if idx is not None:
                a[idx] += mu
        falling = math.prod(n - i for i in range(m))
        for i in range(size):
            for j in range(size):
                coef[i][j] += Fraction(a[i] * a[j], falling)
    return coef


@pytest.mark.parametrize("n", [6, 7, 9, 13, 20, 60, 1012, 10**5])
def test_closed_form_coefficients_equal_partition_derivation(n: int) -> None:
    """Exact rational coefficients from the partition sum vs the module's closed forms (rounded once)."""
    for r, closed in ((2, _second_coefficients(n)), (3, _third_coefficients(n))):
        exact = _exact_coefficients(n, r)
        for i, row in enumerate(exact):
            for j, v in enumerate(row):
                assert closed[i, j] == pytest.approx(float(v), rel=1e-14, abs=0.0)


def test_partition_derivation_reproduces_enumeration_at_n7() -> None:
    """The derivation itself (not only the closed forms) against the definition, incl. n < 6 restrictions."""
    rng = np.random.default_rng(11)
    for n in (5, 7):
        X, Y = rng.standard_t(3, (n, 2)), rng.standard_normal((n, 3))
        a, b = rv_side(X, keep_gram=True), rv_side(Y, keep_gram=True)
        c3 = np.array([[float(v) for v in row] for row in _exact_coefficients(n, 3)])
        _, e_var, e_skew = _enumerate(a.gram, b.gram)
        assert _rel(float(a.third @ c3 @ b.third) / e_var**1.5, e_skew) < 1e-9


# --------------------------------------------------------------------------- invariances and input forms


def test_moments_invariant_to_rotation_scaling_translation() -> None:
    rng = np.random.default_rng(3)
    n = 40
    X, Y = rng.standard_normal((n, 6)), rng.standard_t(4, (n, 3))
    base = rv_moments_pvalue(X, Y)
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    for X2, Y2 in ((X @ Q, Y), (X, Y @ R), (7.5 * X, Y), (X, 1e-3 * Y + 4.0), (X @ Q * 3.0 - 2.0, Y @ R * 0.1)):
        res = rv_moments_pvalue(X2, Y2)
        for f in ("observed", "mean", "variance", "skewness", "statistic", "p_value"):
            assert _rel(getattr(res, f), getattr(base, f)) < 1e-9, f


@pytest.mark.parametrize("p", [5, 300])  # p < n: streamed feature path; p > n: Gram path
def test_features_gram_and_unit_gram_inputs_agree(p: int) -> None:
    rng = np.random.default_rng(p)
    n = 200
    X = rng.standard_normal((n, p)) @ np.diag(np.linspace(0.1, 3, p))
    Y = X[:, :3] + rng.standard_normal((n, 3))
    feat = rv_moments_pvalue(X, Y)
    gram = rv_moments_pvalue(X @ X.T, Y @ Y.T, kind="gram")
    m = get_measure("cka_linear_biased")
    unit = rv_moments_pvalue(m.unit_gram(X), m.unit_gram(Y), kind="gram")
    for other in (gram, unit):
        for f in ("observed", "mean", "variance", "skewness", "statistic", "p_value"):
            assert _rel(getattr(other, f), getattr(feat, f)) < 1e-9, f


def test_degenerate_side_gives_p_one() -> None:
    """A regular simplex (centred Gram = H): every permutation gives the same CKA; the exact p is 1."""
    n = 6
    X = np.eye(n)
    Y = np.random.default_rng(0).standard_normal((n, 2))
    K, L = _centred_gram(X), _centred_gram(Y)
    vals = {round(float(np.sum(K * L[np.ix_(p, p)])), 12) for p in itertools.permutations(range(n))}
    assert len(vals) == 1
    res = rv_moments_pvalue(X, Y)
    assert res.degenerate and res.p_value == 1.0 and res.variance == 0.0
    assert math.isnan(res.statistic) and math.isnan(res.skewness)
    assert res.mean == pytest.approx(res.observed, rel=1e-12)
    mean, var, skew = rv_permutation_moments(_centred_gram(X), _centred_gram(Y))
    assert var == 0.0 and math.isnan(skew)


# --------------------------------------------------------------------------- p-values


def test_pvalue_in_unit_interval_and_monotone_in_observed() -> None:
    rng = np.random.default_rng(8)
    for n in (5, 12, 80):
        a, b = rv_side(rng.standard_normal((n, 4))), rv_side(rng.standard_t(3, (n, 2)))
        obs = np.linspace(0.0, 1.0, 201)
        p = np.array([rv_test_from_sides(float(o), a, b).p_value for o in obs])
        assert np.all((p > 0) & (p <= 1))
        assert np.all(np.diff(p) <= 0)
        assert p[0] > 0.9  # CKA 0 lies below the bulk of every null
        assert p[-1] >= 1.0 / math.factorial(n) if n <= 170 else p[-1] > 0


def test_pearson3_reduces_to_normal_and_gamma() -> None:
    z = np.linspace(-3, 5, 17)
    assert np.allclose(pearson3_pvalue(z, 0.0, 1000), stats.norm.sf(z), rtol=1e-12, atol=0)
    g = 0.8  # skew 2/sqrt(k) of a Gamma(k) standardised
    k = 4 / g**2
    assert np.allclose(pearson3_pvalue(z, g, 1000), stats.gamma.sf(k + z * math.sqrt(k), k), rtol=1e-10, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_agrees_with_seeded_monte_carlo_null_in_the_central_range(seed: int) -> None:
    """n = 60 Gaussian data, 20,000 seeded draws (the project's Monte-Carlo path).

    At thresholds t placed at the null's 50-95% quantiles (p from 0.5 to 0.05)
    the analytic p and the Monte-Carlo fraction of draws >= t differ by less
    than 0.02 (Monte-Carlo standard error <= 0.0036 at 20,000 draws; the
    Pearson III error measured here is ~0.003).
    """
    rng = np.random.default_rng(100 + seed)
    n = 60
    X = rng.standard_normal((n, 8))
    Y = 0.15 * X[:, :5] + rng.standard_normal((n, 5))
    mc = permutation_test("cka_linear_biased", X, Y, n_permutations=20_000, seed=seed)
    a, b = rv_side(X), rv_side(Y)
    mom = rv_test_from_sides(mc.observed, a, b)
    assert mom.observed == pytest.approx(rv_moments_pvalue(X, Y).observed, rel=1e-12)
    if 0.05 <= mc.p_value <= 0.5:
        assert abs(mom.p_value - mc.p_value) < 0.02
    for q in (0.5, 0.7, 0.8, 0.9, 0.95):
        t = float(np.quantile(mc.null, q))
        p_mc = (1 + np.count_nonzero(mc.null >= t)) / (1 + mc.null.size)
        assert abs(rv_test_from_sides(t, a, b).p_value - p_mc) < 0.02
    # the null's first two moments themselves (Monte-Carlo error ~1% at 20,000 draws)
    assert mc.null.mean() == pytest.approx(mom.mean, rel=0.01)
    assert mc.null.std() == pytest.approx(math.sqrt(mom.variance), rel=0.03)


# --------------------------------------------------------------------------- grid and permutation_test


def test_grid_equals_per_cell_tests() -> None:
    rng = np.random.default_rng(4)
    n = 50
    Z = rng.standard_normal((n, 3))
    A = [Z @ rng.standard_normal((3, 6)) * k + rng.standard_normal((n, 6)) for k in range(3)]
    B = [Z @ rng.standard_normal((3, 4)) * k + rng.standard_t(3, (n, 4)) for k in range(2)]
    B.append(rng.standard_normal((n, 70)))  # wider than n: the Gram path
    res = rv_moments_grid(A, B)
    assert res.p_values.shape == (3, 3) and res.method == "moments"
    assert np.allclose(res.grid, cka_grid(A, B), rtol=1e-12, atol=0)
    for i, a in enumerate(A):
        for j, b in enumerate(B):
            one = rv_moments_pvalue(a, b)
            cells = {"mean": res.mean, "variance": res.variance, "skewness": res.skewness, "p_value": res.p_values}
            for f, arr in cells.items():
                assert _rel(float(arr[i, j]), getattr(one, f)) < 1e-9, f
    grams = rv_moments_grid([x @ x.T for x in A], [y @ y.T for y in B], kind="gram")
    assert np.allclose(grams.p_values, res.p_values, rtol=1e-9, atol=0)
    given = rv_moments_grid(np.stack(A), B, grid=res.grid)
    assert np.array_equal(given.p_values, res.p_values)


def test_grid_with_small_n_enumerates() -> None:
    rng = np.random.default_rng(5)
    A = [rng.standard_normal((5, 2)) for _ in range(2)]
    B = [rng.standard_normal((5, 3))]
    res = rv_moments_grid(A, B)
    for i, a in enumerate(A):
        e = _enumerate(_centred_gram(a), _centred_gram(B[0]))
        assert res.skewness[i, 0] == pytest.approx(e[2], rel=1e-9)


def test_permutation_test_moments_path() -> None:
    rng = np.random.default_rng(6)
    X, Y = rng.standard_normal((40, 5)), rng.standard_normal((40, 3))
    res = permutation_test("cka_linear_biased", X, Y, null_method="moments")
    ref = rv_moments_pvalue(X, Y)
    assert res.method == "moments" and res.n_permutations == 0 and res.null.size == 0
    assert res.p_value == pytest.approx(ref.p_value, rel=1e-12)
    assert res.observed == pytest.approx(ref.observed, rel=1e-12)
    assert res.null_quantiles[0.5] == pytest.approx(ref.quantile(0.5), rel=1e-12)
    assert res.to_dict()["method"] == "moments"
    default = permutation_test("cka_linear_biased", X, Y, n_permutations=9)
    assert default.method in ("gram_gather", "feature") and default.null.size == 9
    with pytest.raises(MeasureInputError, match="cka_linear_biased"):
        permutation_test("cka_linear_debiased", X, Y, null_method="moments")
    with pytest.raises(MeasureInputError, match="null_method"):
        permutation_test("cka_linear_biased", X, Y, null_method="exact")


# --------------------------------------------------------------------------- bad input


def test_bad_input_raises() -> None:
    rng = np.random.default_rng(7)
    X, Y = rng.standard_normal((10, 3)), rng.standard_normal((10, 2))
    with pytest.raises(MeasureInputError, match="at least 4"):
        rv_moments_pvalue(X[:3], Y[:3])
    with pytest.raises(MeasureInputError, match="at least 4"):
        permutation_test("cka_linear_biased", X[:3], Y[:3], null_method="moments")
    bad = X.copy()
    bad[2, 1] = np.nan
    with pytest.raises(MeasureInputError, match="non-finite"):
        rv_moments_pvalue(bad, Y)
    with pytest.raises(MeasureInputError, match="no variance"):
        rv_moments_pvalue(np.ones((10, 3)), Y)
    with pytest.raises(MeasureInputError, match="no variance"):
        rv_moments_grid([X], [Y, np.full((10, 2), 3.0)])
    with pytest.raises(MeasureInputError, match="rows"):
        rv_moments_pvalue(X, Y[:9])
    with pytest.raises(MeasureInputError, match="symmetric"):
        rv_moments_pvalue(rng.standard_normal((10, 10)), Y @ Y.T, kind="gram")
    with pytest.raises(MeasureInputError, match="kind"):
        rv_moments_pvalue(X, Y, kind="grams")
    with pytest.raises(MeasureInputError, match="doubly centred"):
        rv_permutation_moments(X @ X.T, _centred_gram(Y))
    with pytest.raises(MeasureInputError, match="grid has shape"):
        rv_moments_grid([X], [Y], grid=np.zeros((2, 2)))
