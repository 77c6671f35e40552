"""Resampling that is defined on its own resamples (issue 40, item 7): kNN, the CCA family's cap, PWCCA's
two paths and RSA's ties, each against a from-scratch computation."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.spatial.distance import pdist, squareform
from scipy.stats import spearmanr

from interlingua.analysis.inference import bootstrap_interval
from interlingua.analysis.measures import MeasureWarning, get_measure, rsa
from interlingua.analysis.measures.cca import cca_result
from interlingua.core.errors import MeasureInputError


def _related(n: int, p: int, q: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    return (
        z @ rng.standard_normal((4, p)) + rng.standard_normal((n, p)),
        z @ rng.standard_normal((4, q)) + rng.standard_normal((n, q)),
    )


def _knn_from_scratch(x: np.ndarray, y: np.ndarray, k: int) -> float:
    """Mutual kNN by sorting cosine similarities row by row (no shared code with the package)."""

    def sets(a: np.ndarray) -> list[set[int]]:
        u = a / np.linalg.norm(a, axis=1, keepdims=True)
        s = u @ u.T
        out = []
        for i in range(a.shape[0]):
            order = [j for j in np.argsort(-s[i], kind="stable") if j != i]
            out.append(set(order[:k]))
        return out

    sx, sy = sets(x), sets(y)
    return float(np.mean([len(a & b) / k for a, b in zip(sx, sy)]))


@pytest.mark.parametrize("n", [53, 120])
def test_knn_bootstrap_replicates_are_resampled_leave_one_out_pseudo_values(n: int) -> None:
    """Every replicate is finite (on main: 0 of B) and equals, with the same draws, the estimate plus the mean
    of the resampled pseudo-value deviations (n - 1)(mean(v) - v_r), each v_r mutual kNN recomputed from
    scratch without row r."""
    x, y = _related(n, 8, 6, n)
    loo = np.array([_knn_from_scratch(np.delete(x, r, 0), np.delete(y, r, 0), 10) for r in range(n)])
    assert get_measure("mknn_k10").leave_one_out(x, y) == pytest.approx(loo, abs=1e-12)
    ci = bootstrap_interval("mknn_k10", x, y, n_boot=30, seed=3)
    assert ci.n_valid == 30
    assert ci.estimate == pytest.approx(_knn_from_scratch(x, y, 10), abs=1e-12)
    dev = (n - 1) * (loo.mean() - loo)
    draws = np.random.default_rng(3)
    for rep in ci.replicates:
        assert rep == pytest.approx(ci.estimate + dev[draws.integers(0, n, size=n)].mean(), abs=1e-12)


def test_knn_bootstrap_refuses_a_tie_that_a_leave_out_would_promote() -> None:
    """Two rows of X at the same angle from row 0 (one the other's mirror image about row 0's direction), its
    (k+1)-th and (k+2)-th nearest: the full sample is defined, but leaving out one of row 0's k neighbours
    makes its set depend on a tie-break."""
    x, y = _related(40, 8, 6, 7)
    sim = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (x[0] / np.linalg.norm(x[0]))
    order = np.argsort(-sim)[1:]  # row 0's other rows, nearest first
    u = x[0] / np.linalg.norm(x[0])
    v = x[order[10]]
    x[order[11]] = 2 * (v @ u) * u - v  # the (k+1)-th row reflected: the same cosine with row 0, k = 10
    loo = get_measure("mknn_k10").leave_one_out(x, y)
    assert np.isfinite(get_measure("mknn_k10")(x, y))
    assert np.isnan(loo[order[:10]]).all()
    with pytest.raises(MeasureInputError, match="leave-one-out"):
        bootstrap_interval("mknn_k10", x, y, n_boot=10, seed=0)


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return fn(*a, **kw)


def test_cca_cap_follows_the_resample_distinct_rows_and_never_forces_rho_1() -> None:
    """The issue's shape: n = 48, p = 48, q = 36 with wide='reduce'."""
    x, y = _related(48, 48, 36, 0)
    rng = np.random.default_rng(1)
    for _ in range(10):
        idx = rng.integers(0, 48, size=48)
        d = np.unique(idx).size
        r = _quiet(cca_result, x[idx], y[idx])
        assert r.details["dims_x"] + r.details["dims_y"] <= d - 1
        assert float(np.max(r.details["rho"])) < 1 - 1e-6
        # the same as the distinct rows alone: duplicates add nothing the cap could count
        assert r.details["dims_x"] == _quiet(cca_result, x[np.unique(idx)], y[np.unique(idx)]).details["dims_x"]


@pytest.mark.parametrize(  # fast: three measures; the full suite: all six
    "mid",
    [
        *(pytest.param(m, marks=pytest.mark.slow) for m in ("pwcca_x", "cca_mean", "svcca_var0.99")),
        "pwcca_y",
        "pwcca_narrower",
        "cca_mean_sq",
    ],
)
def test_prepared_and_direct_resamples_agree_to_rounding(mid: str) -> None:
    """On main PWCCA's two paths differed by up to 2.7e-3 on the forced subspace; now to float64 rounding."""
    x, y = _related(48, 48, 36, 2)
    m = get_measure(mid)
    sx, sy = _quiet(m.prepare, x), _quiet(m.prepare, y)
    rng = np.random.default_rng(5)
    rows = rng.integers(0, 48, size=(12, 48))
    fast = m.from_prepared(sx, sy, rows, rows)
    for i, idx in enumerate(rows):
        assert fast[i] == pytest.approx(_quiet(m, x[idx], y[idx]), abs=1e-10)


def _scipy_rsa(x: np.ndarray, y: np.ndarray, metric: str) -> float:
    """Spearman (scipy) of RDMs whose duplicated rows are exact ties: pdist of the distinct rows, expanded."""

    def condensed(a: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(a, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        return squareform(pdist(uniq, metric))[np.ix_(inv, inv)][np.triu_indices(a.shape[0], k=1)]

    return float(spearmanr(condensed(x), condensed(y)).statistic)


@pytest.mark.parametrize("metric", ["correlation", "cosine", "euclidean"])
def test_rsa_with_duplicated_rows_tie_averages_like_scipy(metric: str) -> None:
    """Bootstrap resamples (every one has duplicates) and a plain input with repeated examples."""
    x, y = _related(20, 7, 5, 4)
    rng = np.random.default_rng(6)
    for _ in range(15):
        idx = rng.integers(0, 20, size=20)
        assert rsa(x[idx], y[idx], metric) == pytest.approx(_scipy_rsa(x[idx], y[idx], metric), abs=1e-12)
    plain = np.r_[np.arange(20), [0, 3, 3, 7]]
    assert rsa(x[plain], y[plain], metric) == pytest.approx(_scipy_rsa(x[plain], y[plain], metric), abs=1e-12)
    ci = bootstrap_interval(f"rsa_spearman_{ {'correlation': 'corr'}.get(metric, metric) }", x, y, n_boot=20, seed=0)
    assert all(math.isfinite(v) for v in ci.replicates)


def test_resample_distinct_floor_is_four_sd_below_the_monte_carlo_mean() -> None:
    """The expected number and spread of distinct rows in n draws with replacement, against simulation."""
    from interlingua.analysis.inference.intervals import resample_distinct_floor

    rng = np.random.default_rng(8)
    for n in (48, 150):
        d = np.array([np.unique(rng.integers(0, n, n)).size for _ in range(20_000)])
        assert resample_distinct_floor(n) == pytest.approx(d.mean() - 4 * d.std(), abs=0.15 + 4 * 0.05 * d.std())
        assert resample_distinct_floor(n) < d.min() + 1  # rarer than 1 in 30,000 below it


@pytest.mark.parametrize("mid", ["cca_mean", "cca_mean_sq", "pwcca_x", "svcca_var0.99"])
def test_cca_bootstrap_is_refused_where_the_full_sample_needs_the_wide_cap(mid: str) -> None:
    """The issue's shape (n = 48, p = 48, q = 36): on main the interval [0.801, 0.942] missed the estimate
    0.697, because every resample, with about 30 distinct rows, was cut to fewer components."""
    x, y = _related(48, 48, 36, 0)
    assert _quiet(get_measure(mid).compute, x, y).details["wide_capped"]
    with pytest.raises(MeasureInputError, match="needs the wide='reduce' cap.*Reduce the widths"):
        _quiet(bootstrap_interval, mid, x, y, n_boot=20, seed=0)


def test_cca_bootstrap_is_refused_where_resamples_cannot_carry_the_estimate_dimensions() -> None:
    """n = 60, p = q = 20: the full sample keeps all 40 dimensions (no cap), but a resample's ~38 distinct rows
    cannot; on main every replicate was cut to fewer components."""
    x, y = _related(60, 20, 20, 1)
    r = get_measure("cca_mean").compute(x, y)
    assert (r.details["dims_x"], r.details["dims_y"], r.details["wide_capped"]) == (20, 20, False)
    with pytest.raises(MeasureInputError, match="20 \\+ 20 dimensions.*about 38 distinct"):
        bootstrap_interval("cca_mean", x, y, n_boot=20, seed=0)


def test_cca_bootstrap_replicates_keep_the_estimate_dimensions_where_allowed() -> None:
    """n = 150, p = 6, q = 5: every replicate equals CCA recomputed from scratch on its resample, with the
    estimate's dimensions (the distinct rows always carry them)."""
    x, y = _related(150, 6, 5, 2)
    ci = bootstrap_interval("cca_mean", x, y, n_boot=25, seed=4)
    draws = np.random.default_rng(4)
    for rep in ci.replicates:
        idx = draws.integers(0, 150, size=150)
        r = cca_result(x[idx], y[idx])
        assert (r.details["dims_x"], r.details["dims_y"]) == (6, 5)
        assert rep == pytest.approx(r.value, abs=1e-10)
