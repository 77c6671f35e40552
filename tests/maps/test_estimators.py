"""Map estimators: planted maps are recovered, the efficient ridge path equals a naive refit, bad inputs fail clearly.

Tolerances: the planted problems are well conditioned (singular values of the
inputs within a factor ~10 of each other), so float64 results agree with the
exact answer to a few hundred ulps of the data's scale; 1e-9 relative leaves
a margin of ~10^4 over that, and a wrong formula misses by O(1).
"""

from __future__ import annotations

import numpy as np
import pytest

from interlingua.core.errors import InterlinguaError, NonFiniteError
from interlingua.maps import (
    MLP,
    MapInputError,
    MapNonFiniteError,
    MapWarning,
    Procrustes,
    get_map,
    kfold,
    list_maps,
)

RTOL = 1e-9


def _orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _data(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    # columns with spreads between 0.5 and 3: a conditioning of ~6, plus an offset the maps must handle
    return rng.standard_normal((n, p)) * np.linspace(3.0, 0.5, p) + 2.0


def test_registry_lists_the_seven_maps():
    assert list_maps() == ["identity", "procrustes", "procrustes_scaled", "procrustes_span", "affine", "ridge", "mlp"]
    assert get_map("procrustes_scaled").params == {"center": True, "scale": True}
    assert get_map("procrustes_scaled").name == "procrustes_scaled"
    assert get_map("procrustes", center=False).name == "procrustes_uncentred"
    with pytest.raises(MapInputError, match="known maps: identity, procrustes"):
        get_map("rotation")
    with pytest.raises(MapInputError, match="no parameter"):
        get_map("ridge", lamda=1.0)


def test_procrustes_recovers_a_rotation_exactly_in_both_directions():
    rng = np.random.default_rng(0)
    x = _data(rng, 120, 16)
    q = _orthogonal(rng, 16)
    shift = rng.standard_normal(16)
    y = x @ q + shift
    m = get_map("procrustes").fit(x, y)
    scale = np.abs(y).max()
    np.testing.assert_allclose(m.rotation_, q, rtol=0, atol=RTOL)
    np.testing.assert_allclose(m.transform(x), y, rtol=0, atol=RTOL * scale)
    assert m.score(x, y) == pytest.approx(1.0, abs=RTOL)
    back = m.reverse()
    np.testing.assert_allclose(back.transform(y), x, rtol=0, atol=RTOL * scale)


@pytest.mark.parametrize("p,q", [(10, 24), (24, 10)])
def test_procrustes_recovers_an_isometric_embedding_of_the_narrower_side(p, q):
    rng = np.random.default_rng(1)
    k = min(p, q)
    narrow = _data(rng, 150, k)
    e = _orthogonal(rng, max(p, q))[:k]  # k x max(p, q), orthonormal rows
    wide = narrow @ e
    x, y = (narrow, wide) if p < q else (wide, narrow)
    m = get_map("procrustes").fit(x, y)
    assert m.rotation_.shape == (p, q)
    gram = m.rotation_ @ m.rotation_.T if p < q else m.rotation_.T @ m.rotation_
    np.testing.assert_allclose(gram, np.eye(k), atol=RTOL)  # semi-orthogonal
    np.testing.assert_allclose(m.transform(x), y, atol=RTOL * np.abs(y).max())
    np.testing.assert_allclose(m.reverse().transform(y), x, atol=RTOL * np.abs(x).max())


def test_procrustes_reverse_is_the_fit_the_other_way():
    rng = np.random.default_rng(2)
    x, y = _data(rng, 80, 12), _data(rng, 80, 9)
    for name in ("procrustes", "procrustes_scaled"):
        rev = get_map(name).fit(x, y).reverse()
        direct = get_map(name).fit(y, x)
        np.testing.assert_allclose(rev.coef_, direct.coef_, atol=RTOL)
        np.testing.assert_allclose(rev.intercept_, direct.intercept_, atol=RTOL * 10)


def test_scaled_procrustes_recovers_the_scale():
    rng = np.random.default_rng(3)
    x = _data(rng, 100, 8)
    y = 0.37 * x @ _orthogonal(rng, 8) - 1.0
    m = get_map("procrustes_scaled").fit(x, y)
    assert m.scale_ == pytest.approx(0.37, rel=RTOL)
    np.testing.assert_allclose(m.transform(x), y, atol=RTOL)
    plain = get_map("procrustes").fit(x, y)
    assert plain.scale_ == 1.0 and plain.score(x, y) < 0.5  # a rotation alone cannot shrink


def test_procrustes_centring_is_what_the_docstring_says():
    rng = np.random.default_rng(4)
    x, y = _data(rng, 60, 5), _data(rng, 60, 5)
    m = get_map("procrustes").fit(x, y)
    u, _, vt = np.linalg.svd((x - x.mean(0)).T @ (y - y.mean(0)))
    np.testing.assert_allclose(m.coef_, u @ vt, atol=RTOL)
    np.testing.assert_allclose(m.transform(x.mean(0)[None]), y.mean(0)[None], atol=RTOL * 10)
    raw = get_map("procrustes", center=False).fit(x, y)
    u, _, vt = np.linalg.svd(x.T @ y)
    np.testing.assert_allclose(raw.coef_, u @ vt, atol=RTOL)
    np.testing.assert_array_equal(raw.intercept_, np.zeros(5))


def test_affine_recovers_a_random_linear_map_exactly():
    rng = np.random.default_rng(5)
    x = _data(rng, 90, 20)
    w, b = rng.standard_normal((20, 7)), rng.standard_normal(7)
    y = x @ w + b
    m = get_map("affine").fit(x, y)
    np.testing.assert_allclose(m.coef_, w, atol=RTOL * 10)
    np.testing.assert_allclose(m.intercept_, b, atol=RTOL * 100)
    assert m.score(x, y) == pytest.approx(1.0, abs=RTOL)


def test_ridge_recovers_a_random_linear_map_and_picks_a_small_penalty_without_noise():
    rng = np.random.default_rng(6)
    x = _data(rng, 200, 15)
    w, b = rng.standard_normal((15, 6)), rng.standard_normal(6)
    y = x @ w + b
    m = get_map("ridge").fit(x, y)
    assert m.fit_info_["alpha_relative"] == 1e-6  # noise-free: the smallest penalty in the grid wins
    # the penalty shrinks W by about alpha / (smallest eigenvalue of X_c^T X_c) ~ 1e-6 * mean / min ~ 1e-5
    np.testing.assert_allclose(m.coef_, w, rtol=0, atol=1e-4)
    noisy = y + 0.5 * rng.standard_normal(y.shape)
    m2 = get_map("ridge").fit(x, noisy)
    # least-squares standard error of W[j]: noise sd / (sd of column j * sqrt(n)); allow 5 of them
    se = 0.5 / (x.std(0) * np.sqrt(200))
    assert np.all(np.abs(m2.coef_ - w) <= 5 * se[:, None])


def test_ridge_with_fixed_alpha_is_the_closed_form():
    rng = np.random.default_rng(7)
    x, y = _data(rng, 50, 12), _data(rng, 50, 4)
    xc, yc = x - x.mean(0), y - y.mean(0)
    for alpha in (0.1, 10.0):
        w = np.linalg.solve(xc.T @ xc + alpha * np.eye(12), xc.T @ yc)
        m = get_map("ridge", alpha=alpha).fit(x, y)
        np.testing.assert_allclose(m.coef_, w, atol=RTOL)
        np.testing.assert_allclose(m.intercept_, y.mean(0) - x.mean(0) @ w, atol=RTOL * 10)
    # wide source (p > n): the dual form gives the same closed form
    xw = _data(rng, 20, 35)
    xwc = xw - xw.mean(0)
    yw = _data(rng, 20, 3)
    w = np.linalg.solve(xwc.T @ xwc + 2.0 * np.eye(35), xwc.T @ (yw - yw.mean(0)))
    m = get_map("ridge", alpha=2.0).fit(xw, yw)
    assert m.fit_info_["form"] == "dual"
    np.testing.assert_allclose(m.coef_, w, atol=RTOL)


@pytest.mark.parametrize("n,p", [(60, 10), (24, 40)])  # primal (p <= n) and dual (p > n) forms
def test_ridge_cross_validation_equals_a_naive_refit_for_every_fold_and_alpha(n, p):
    rng = np.random.default_rng(8)
    x = _data(rng, n, p)
    y = x @ rng.standard_normal((p, 5)) + 2.0 * rng.standard_normal((n, 5))
    alphas = (0.01, 1.0, 30.0, 1000.0)
    m = get_map("ridge", alphas=alphas, cv=4, seed=3).fit(x, y)
    naive = np.zeros((4, len(alphas)))
    for f, (tr, va) in enumerate(kfold(n, 4, 3)):
        xt, yt = x[tr], y[tr]
        mx, my = xt.mean(0), yt.mean(0)
        for i, a in enumerate(alphas):
            w = np.linalg.solve((xt - mx).T @ (xt - mx) + a * np.eye(p), (xt - mx).T @ (yt - my))
            err = y[va] - ((x[va] - mx) @ w + my)
            naive[f, i] = np.mean(err**2)
    np.testing.assert_allclose(m.fit_info_["cv_mse"], naive.mean(0), rtol=1e-8)
    assert m.fit_info_["alpha"] == alphas[int(np.argmin(naive.mean(0)))]


def test_fit_many_equals_separate_fits():
    rng = np.random.default_rng(9)
    x = _data(rng, 70, 9)
    ys = [_data(rng, 70, 4), _data(rng, 70, 4)]
    for name in ("ridge", "affine", "procrustes"):
        many = get_map(name).fit_many(x, ys)
        for m, y in zip(many, ys):
            single = get_map(name).fit(x, y)
            np.testing.assert_allclose(m.coef_, single.coef_, atol=RTOL)
            assert m.fit_info_.get("alpha") == single.fit_info_.get("alpha")


def test_identity_is_the_identity_and_needs_equal_widths():
    rng = np.random.default_rng(10)
    x = _data(rng, 10, 4)
    m = get_map("identity").fit(x, x + 1)
    np.testing.assert_array_equal(m.transform(x), x)
    with pytest.raises(MapInputError, match="equal widths.*4 and target 5"):
        get_map("identity").fit(x, _data(rng, 10, 5))


def test_mlp_is_deterministic_for_a_seed_and_learns_a_smooth_map():
    rng = np.random.default_rng(11)
    x = _data(rng, 200, 6)
    y = np.tanh(x @ rng.standard_normal((6, 3)) / 3)
    kw = dict(hidden=32, max_epochs=60, patience=10, lr=3e-3, batch_size=32)
    a = MLP(seed=5, **kw).fit(x, y)
    b = MLP(seed=5, **kw).fit(x, y)
    for name in ("w1_", "b1_", "w2_", "b2_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.transform(x), b.transform(x))
    c = MLP(seed=6, **kw).fit(x, y)
    assert not np.array_equal(a.w1_, c.w1_)
    assert a.score(x, y) > 0.8  # a learnable target (the linear part alone explains most of it)
    assert 1 <= a.fit_info_["best_epoch"] <= a.fit_info_["epochs"] <= 60


def test_bad_inputs_fail_clearly():
    rng = np.random.default_rng(12)
    x = _data(rng, 30, 40)
    with pytest.raises(MapInputError, match="n_train=30, width 40"):
        get_map("affine").fit(x, _data(rng, 30, 5))
    with pytest.raises(MapInputError, match="30 rows but Y.*29"):
        get_map("procrustes").fit(x, _data(rng, 29, 5))
    bad = x.copy()
    bad[3, 1] = np.nan
    bad[7, 2] = np.inf
    with pytest.raises(MapNonFiniteError, match=r"1 NaN and 1 inf in row\(s\) 3, 7"):
        get_map("ridge").fit(bad, x)
    err = pytest.raises(MapInputError, get_map("ridge").fit, x, bad).value
    assert isinstance(err, InterlinguaError) and isinstance(err, NonFiniteError) and "Y (target)" in str(err)
    with pytest.raises(MapInputError, match="not fitted"):
        get_map("procrustes").transform(x)
    m = get_map("procrustes").fit(x[:, :20], x[:, :20])
    with pytest.raises(MapInputError, match="width 20 but X has width 5"):
        m.transform(x[:, :5])
    with pytest.raises(MapInputError, match="no variance"):
        get_map("procrustes").fit(np.ones((10, 3)), _data(rng, 10, 3))
    with pytest.raises(MapInputError, match="alpha"):
        get_map("ridge", alpha=-1.0)


def test_rank_deficient_fits_warn_instead_of_pretending():
    rng = np.random.default_rng(13)
    x = _data(rng, 40, 6)
    x[:, 5] = x[:, 4]  # a duplicated column
    with pytest.warns(MapWarning, match="minimum-norm"):
        get_map("affine").fit(x, _data(rng, 40, 3))
    few = _data(rng, 5, 8)  # 4 centred directions for an 8 x 8 rotation
    with pytest.warns(MapWarning, match="not unique"):
        m = get_map("procrustes").fit(few, few @ _orthogonal(rng, 8))
    assert isinstance(m, Procrustes) and m.fit_info_["rank"] == 4
