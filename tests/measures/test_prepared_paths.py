"""Prepared paths (metadata.prepared) equal the direct call: matched, permuted and resampled rows.

Tolerance: every value is a handful of float64 BLAS/LAPACK steps (a thin SVD,
a product, singular values, ranks) on well-conditioned data, so two ways of
computing it differ by ~1e-15 relative; 1e-10 leaves five orders of margin for
the condition factors, while a real error (a wrong subspace, a missed centring
or norm) moves the values here by more than 1e-4.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from measures_helpers import related_pair
from scipy.linalg import orthogonal_procrustes, subspace_angles
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

from interlingua.analysis.inference import bootstrap_interval, jackknife_interval, permutation_test
from interlingua.analysis.measures import (
    Measure,
    MeasureMetadata,
    MeasureResult,
    MeasureWarning,
    get_measure,
    list_measures,
)
from interlingua.core.errors import MeasureInputError

RTOL = 1e-10
PREPARED = [m for m in list_measures() if get_measure(m).metadata.prepared] + ["svcca_var0.9_max5", "mknn_k3"]
SHAPES = [(30, 80, 50), (120, 12, 9), (25, 25, 25), (60, 3, 40)]  # n < width, n > width, equal, mixed


@pytest.fixture(autouse=True)
def _quiet() -> None:
    warnings.simplefilter("ignore", MeasureWarning)  # wide='reduce' and constant-column notes are expected here


def _direct(m: Measure, x: np.ndarray, y: np.ndarray) -> float:
    return m(x, y)


def test_the_expected_measures_declare_a_prepared_path() -> None:
    ids = set(PREPARED)
    for mid in (
        "procrustes_resid2_centered_unitnorm",
        "procrustes_resid2_raw_unitnorm",
        "cca_mean",
        "cca_mean_sq",
        "svcca_var0.99",
        "svcca_var0.99_max64",
        "pwcca_x",
        "pwcca_y",
        "pwcca_narrower",
        "rsa_spearman_corr",
        "rsa_spearman_cosine",
        "rsa_spearman_euclidean",
        "mknn_k10",
        "mknn_k3",
    ):
        assert mid in ids
    for mid in ("cka_linear_biased", "anc_abs"):  # Gram gather, or O(n p) a draw already: no prepared form
        assert not get_measure(mid).metadata.prepared
        with pytest.raises(MeasureInputError, match="no prepared form"):
            get_measure(mid).prepare(np.ones((5, 2)))


@pytest.mark.parametrize("measure_id", PREPARED)
@pytest.mark.parametrize("shape", SHAPES)
def test_prepared_equals_direct_for_permutations_and_resamples(measure_id: str, shape: tuple[int, int, int]) -> None:
    m = get_measure(measure_id)
    n, p, q = shape
    rng = np.random.default_rng(n * 7 + p * 3 + q)
    x, y = related_pair(rng, n=n, p=p, q=q)
    sx, sy = m.prepare(x), m.prepare(y)
    assert m.from_prepared(sx, sy)[0] == pytest.approx(_direct(m, x, y), rel=RTOL, abs=0)
    perms = np.stack([rng.permutation(n) for _ in range(6)])
    np.testing.assert_allclose(
        m.from_prepared(sx, sy, None, perms), [_direct(m, x, y[p_]) for p_ in perms], rtol=RTOL, atol=0
    )
    # permuting both sides (a permutation of the pairs) leaves the value unchanged
    np.testing.assert_allclose(m.from_prepared(sx, sy, perms, perms), _direct(m, x, y), rtol=RTOL, atol=0)
    # jackknife: distinct rows, one group left out
    keep = np.stack([np.delete(np.arange(n), rng.choice(n, 3, replace=False)) for _ in range(3)])
    np.testing.assert_allclose(
        m.from_prepared(sx, sy, keep, keep), [_direct(m, x[k], y[k]) for k in keep], rtol=RTOL, atol=0
    )
    # bootstrap: duplicated rows. PWCCA is skipped where the distinct rows (~0.63 n) leave canonical
    # correlations tied at 1: its weights then depend on an arbitrary basis of that tie (the direct value
    # itself changes when the resampled rows are reordered), so no second computation can match it.
    if not (measure_id.startswith("pwcca") and 0.6 * n < min(p, (n - 1) // 2) + min(q, (n - 1) // 2)):
        boot = rng.integers(0, n, size=(3, n))
        np.testing.assert_allclose(
            m.from_prepared(sx, sy, boot, boot), [_direct(m, x[b], y[b]) for b in boot], rtol=RTOL, atol=0
        )


@pytest.mark.parametrize("shape", [(30, 80, 50), (100, 7, 7), (40, 20, 20), (50, 5, 30)])
@pytest.mark.parametrize("center", [True, False])
def test_procrustes_prepared_agrees_with_scipy_orthogonal_procrustes(shape: tuple[int, int, int], center: bool) -> None:
    """Independent: scipy's orthogonal Procrustes on the normalised sides, the narrower one padded with zero
    columns (a semi-orthogonal map into the wider space is an orthogonal map of the padded side)."""
    n, p, q = shape
    rng = np.random.default_rng(p + q)
    x, y = related_pair(rng, n=n, p=p, q=q)
    m = get_measure("procrustes_resid2_centered_unitnorm" if center else "procrustes_resid2_raw_unitnorm")
    sx, sy = m.prepare(x), m.prepare(y)
    perm = rng.permutation(n)
    got = m.from_prepared(sx, sy, None, perm[None])[0]

    def unit(a: np.ndarray) -> np.ndarray:
        a = a - a.mean(axis=0) if center else a
        a = a / np.linalg.norm(a)
        return np.hstack([a, np.zeros((n, max(p, q) - a.shape[1]))])

    a, b = unit(x), unit(y[perm])
    R, _ = orthogonal_procrustes(a, b)
    assert got == pytest.approx(1.0 - np.linalg.norm(a @ R - b) ** 2 / 2.0, rel=RTOL, abs=0)


def test_cca_prepared_agrees_with_scipy_subspace_angles() -> None:
    """Independent: canonical correlations are the cosines of the principal angles between the centred column
    spaces (scipy.linalg.subspace_angles)."""
    rng = np.random.default_rng(5)
    x, y = related_pair(rng, n=80, p=6, q=9)
    perms = np.stack([rng.permutation(80) for _ in range(4)])
    m = get_measure("cca_mean")
    got = m.from_prepared(m.prepare(x), m.prepare(y), None, perms)
    want = [np.mean(np.cos(subspace_angles(x - x.mean(0), y[p_] - y.mean(0)))) for p_ in perms]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)  # subspace_angles goes through arcsin/arccos


@pytest.mark.parametrize(
    "metric,scipy_metric", [("corr", "correlation"), ("cosine", "cosine"), ("euclidean", "euclidean")]
)
def test_rsa_prepared_agrees_with_scipy_pdist_and_spearmanr(metric: str, scipy_metric: str) -> None:
    rng = np.random.default_rng(9)
    x, y = related_pair(rng, n=35, p=20, q=8)
    m = get_measure(f"rsa_spearman_{metric}")
    perms = np.stack([rng.permutation(35) for _ in range(4)])
    got = m.from_prepared(m.prepare(x), m.prepare(y), None, perms)
    want = [spearmanr(pdist(x, scipy_metric), pdist(y[p_], scipy_metric))[0] for p_ in perms]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0)


@pytest.mark.parametrize(
    "measure_id",
    ["procrustes_resid2_centered_unitnorm", "svcca_var0.99", "pwcca_x", "cca_mean_sq", "rsa_spearman_corr"],
)
@pytest.mark.parametrize("shape", [(40, 120, 90), (150, 10, 14)])
@pytest.mark.parametrize("related", [True, False])
def test_permutation_test_prepared_equals_recompute(
    measure_id: str, shape: tuple[int, int, int], related: bool
) -> None:
    """Same permutations, nulls equal to rounding, p-values EXACTLY equal: no draw lies within rounding of the
    observed value (checked), so both paths count the same exceedances."""
    n, p, q = shape
    rng = np.random.default_rng(n + p)
    x, y = related_pair(rng, n=n, p=p, q=q, noise=0.7 if related else 50.0)
    new = permutation_test(measure_id, x, y, n_permutations=30, seed=3)
    old = permutation_test(measure_id, x, y, n_permutations=30, seed=3, fast=False)
    assert (new.method, old.method) == ("prepared", "recompute")
    assert new.observed == old.observed  # the observed value is the direct call on both paths
    np.testing.assert_allclose(new.null, old.null, rtol=RTOL, atol=0)
    assert np.min(np.abs(old.null - old.observed)) > 1e-8
    assert new.p_value == old.p_value
    if related and measure_id != "rsa_spearman_corr":
        assert new.p_value == 1 / 31  # a real signal: no permutation reaches it


@pytest.mark.parametrize(
    "measure_id",
    ["procrustes_resid2_raw_unitnorm", "cca_mean", "svcca_var0.99_max64", "pwcca_narrower", "rsa_spearman_euclidean"],
)
def test_intervals_prepared_equal_recompute(measure_id: str) -> None:
    rng = np.random.default_rng(2)
    x, y = related_pair(rng, n=90, p=12, q=30)
    jk_new = jackknife_interval(measure_id, x, y, n_groups=10, seed=1)
    jk_old = jackknife_interval(measure_id, x, y, n_groups=10, seed=1, fast=False)
    np.testing.assert_allclose(jk_new.leave_out, jk_old.leave_out, rtol=RTOL, atol=0)
    bs_new = bootstrap_interval(measure_id, x, y, n_boot=8, seed=1)
    bs_old = bootstrap_interval(measure_id, x, y, n_boot=8, seed=1, fast=False)
    np.testing.assert_allclose(bs_new.replicates, bs_old.replicates, rtol=RTOL, atol=0)


@pytest.mark.parametrize("measure_id", ["procrustes_resid2_centered_unitnorm", "cca_mean", "pwcca_y", "svcca_var0.99"])
def test_a_resample_that_makes_a_column_constant_matches_the_direct_call(measure_id: str) -> None:
    """Column 0 sits at 1e9 with a wobble below the constant-column tolerance (1e-12 relative) except in row 0:
    leaving row 0 out makes it constant, which the direct call zeroes or drops; its centred wobble would
    still be a direction in score space, so the prepared path detects the case and takes the direct value."""
    rng = np.random.default_rng(4)
    x, y = related_pair(rng, n=50, p=6, q=5)
    x[:, 0] = 1e9 + rng.uniform(-4e-4, 4e-4, 50)
    x[0, 0] = 1e9 + 3.0
    m = get_measure(measure_id)
    sx, sy = m.prepare(x), m.prepare(y)
    rows = np.arange(1, 50)[None]
    assert m.from_prepared(sx, sy, rows, rows)[0] == pytest.approx(_direct(m, x[1:], y[1:]), rel=RTOL, abs=0)


def test_procrustes_prepared_side_without_variance_gives_nan() -> None:
    rng = np.random.default_rng(0)
    x, y = np.ones((20, 4)), rng.standard_normal((20, 3))
    m = get_measure("procrustes_resid2_centered_unitnorm")
    vals = m.from_prepared(m.prepare(x), m.prepare(y), None, np.stack([rng.permutation(20) for _ in range(3)]))
    assert np.isnan(vals).all()
    res = permutation_test(m, x, y, n_permutations=5)
    assert np.isnan(res.observed) and np.isnan(res.p_value) and res.method == "prepared"


def test_batches_larger_than_a_chunk_match_single_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    from interlingua.analysis.measures import _prepared

    rng = np.random.default_rng(8)
    x, y = related_pair(rng, n=30, p=40, q=10)
    m = get_measure("procrustes_resid2_centered_unitnorm")
    sx, sy = m.prepare(x), m.prepare(y)
    perms = np.stack([rng.permutation(30) for _ in range(7)])
    whole = m.from_prepared(sx, sy, None, perms)
    assert len(list(_prepared.chunks(7, 10))) == 1
    monkeypatch.setattr(_prepared, "CHUNK_BYTES", 1)  # one permutation per chunk
    assert len(list(_prepared.chunks(7, 10))) == 7
    chunked = m.from_prepared(sx, sy, None, perms)
    one_by_one = np.concatenate([m.from_prepared(sx, sy, None, p_[None]) for p_ in perms])
    np.testing.assert_allclose(whole, chunked, rtol=RTOL, atol=0)
    np.testing.assert_allclose(whole, one_by_one, rtol=RTOL, atol=0)
    cca = get_measure("pwcca_x")  # the CCA family's batches too
    cx, cy = cca.prepare(x), cca.prepare(y)
    monkeypatch.setattr(_prepared, "CHUNK_BYTES", 64 * 2**20)
    whole = cca.from_prepared(cx, cy, None, perms)
    monkeypatch.setattr(_prepared, "CHUNK_BYTES", 1)
    np.testing.assert_allclose(cca.from_prepared(cx, cy, None, perms), whole, rtol=RTOL, atol=0)


def test_from_prepared_refuses_bad_rows() -> None:
    m = get_measure("procrustes_resid2_centered_unitnorm")
    rng = np.random.default_rng(1)
    sx, sy = m.prepare(rng.standard_normal((10, 3))), m.prepare(rng.standard_normal((10, 4)))
    with pytest.raises(MeasureInputError, match="outside"):
        m.from_prepared(sx, sy, None, np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 10]]))
    with pytest.raises(MeasureInputError, match="integer index"):
        m.from_prepared(sx, sy, None, np.zeros((1, 10)))
    with pytest.raises(MeasureInputError, match="same shape"):
        m.from_prepared(sx, sy, np.zeros((2, 5), dtype=int), np.zeros((2, 6), dtype=int))
    with pytest.raises(MeasureInputError, match="must also index 10 rows"):
        m.from_prepared(sx, sy, None, np.zeros((2, 6), dtype=int))
    with pytest.raises(MeasureInputError, match="same n examples"):
        m.from_prepared(sx, m.prepare(rng.standard_normal((11, 4))))


def test_declaring_prepared_needs_both_functions() -> None:
    meta = MeasureMetadata(larger_is_more_similar=True, symmetric=True, invariances=frozenset(), prepared=True)

    def fn(X, Y):  # noqa: ANN001, ANN202
        return MeasureResult(0.0, "t", "", 1)

    with pytest.raises(ValueError, match="prepared_fn is missing"):
        Measure(id="t", metadata=meta, fn=fn, prepare_fn=lambda X: X)
    with pytest.raises(ValueError, match="prepare_fn is given"):
        Measure(id="t", metadata=MeasureMetadata(True, True, frozenset()), fn=fn, prepare_fn=lambda X: X)


@pytest.mark.parametrize("shape", [(20, 60, 45), (30, 31, 200), (12, 13, 14)])
@pytest.mark.parametrize("center", [True, False])
def test_procrustes_score_space_fit_equals_the_width_space_fit(shape: tuple[int, int, int], center: bool) -> None:
    """n < min(p, q): the default fits in n-column score space; value, residual and nuclear norm equal the
    p x q fit's to rounding."""
    from interlingua.analysis.measures.procrustes import procrustes_result

    n, p, q = shape
    x, y = related_pair(np.random.default_rng(n + q), n=n, p=p, q=q)
    auto, width = procrustes_result(x, y, center=center), procrustes_result(x, y, center=center, method="width")
    assert auto.details["method"] == "score" and width.details["method"] == "width"
    for key in ("residual", "nuclear_norm"):
        assert auto.details[key] == pytest.approx(width.details[key], rel=RTOL, abs=0)
    assert auto.value == pytest.approx(width.value, rel=RTOL, abs=0)
    assert procrustes_result(x, y, center=center, method="score").value == auto.value
    with pytest.raises(MeasureInputError, match="method must be one of"):
        procrustes_result(x, y, method="fast")


def test_procrustes_score_space_keeps_the_residual_precise_near_perfect_alignment() -> None:
    """n = 10 < width = 14, Y an exact rotation of X up to float32 rounding (residual ~1e-8): the score-space
    residual agrees with 50-digit arithmetic to 100 eps absolute (~1e-6 relative), which the cancelling
    expansion sqrt(2 - 2 ||X^T Y||_*) (error ~sqrt(eps) ~ 1e-8) could not."""
    from test_measures_procrustes import EPS, mp_procrustes, random_orthogonal

    from interlingua.analysis.measures.procrustes import procrustes_result

    rng = np.random.default_rng(4)
    x = rng.standard_normal((10, 14)).astype(np.float32).astype(np.float64)
    y = (x @ random_orthogonal(rng, 14)).astype(np.float32).astype(np.float64)
    residual, nuclear = mp_procrustes(x, y)
    res = procrustes_result(x, y)
    assert res.details["method"] == "score" and 1e-9 < residual < 1e-6
    assert abs(res.details["residual"] - residual) <= 100 * EPS
    assert abs(res.details["nuclear_norm"] - nuclear) <= 100 * EPS


@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("noise", [0.7, 50.0])
def test_knn_permutation_test_prepared_is_bitwise_the_recompute(k: int, noise: float) -> None:
    """mutual kNN takes few distinct values (multiples of 1 / (n k)), so null draws often EQUAL the observed
    value: the prepared null must be the direct call's bits, not its value to rounding, or the p-values'
    tie counts would differ. Checked: ties with the observed value occur here (unrelated sides)."""
    rng = np.random.default_rng(k + int(noise))
    x, y = related_pair(rng, n=40, p=30, q=20, noise=noise)
    new = permutation_test(f"mknn_k{k}", x, y, n_permutations=60, seed=5)
    old = permutation_test(f"mknn_k{k}", x, y, n_permutations=60, seed=5, fast=False)
    assert (new.method, old.method) == ("prepared", "recompute")
    np.testing.assert_array_equal(new.null, old.null)
    assert new.p_value == old.p_value
    if noise > 1 and k < 10:
        assert np.any(old.null == old.observed)


def test_knn_prepared_agrees_with_an_independent_neighbour_count() -> None:
    """Independent: sklearn-free brute force, the k most cosine-similar other rows by a full argsort."""
    rng = np.random.default_rng(12)
    x, y = related_pair(rng, n=50, p=7, q=11)
    k = 5

    def sets(a: np.ndarray) -> list[set[int]]:
        u = a / np.linalg.norm(a, axis=1, keepdims=True)
        s = u @ u.T
        return [set(int(j) for j in np.argsort(-s[i])[1 : k + 1]) for i in range(len(a))]

    m = get_measure(f"mknn_k{k}")
    perms = np.stack([rng.permutation(50) for _ in range(5)])
    got = m.from_prepared(m.prepare(x), m.prepare(y), None, perms)
    sx = sets(x)
    want = [np.mean([len(sx[i] & sy[i]) / k for i in range(50)]) for sy in (sets(y[p_]) for p_ in perms)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_knn_prepared_side_with_tied_rows_gives_nan_like_the_direct_call() -> None:
    rng = np.random.default_rng(3)
    x, y = related_pair(rng, n=30, p=6, q=6)
    x[1:12] = x[0]  # twelve copies of one row: its 10th and 11th nearest rows are equally similar
    m = get_measure("mknn_k10")
    perms = np.stack([rng.permutation(30) for _ in range(3)])
    assert np.isnan(m.from_prepared(m.prepare(x), m.prepare(y), None, perms)).all()
    assert np.isnan([m(x, y[p_]) for p_ in perms]).all()
    with pytest.raises(MeasureInputError, match="all-zero"):
        m.prepare(np.vstack([np.zeros((1, 6)), y[1:]]))
    with pytest.raises(MeasureInputError, match="at least k \\+ 2"):
        m.prepare(x[:11])
