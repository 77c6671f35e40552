"""The maps' positive control and under-determination: known answers, flagged in the rows and the report.

A map of a side onto itself must be the identity; a fit on fewer centred rows
than a side's width does not fix the map on every direction and must say so.
``procrustes_span`` is the remedy for equal widths: Procrustes on the training
span, the identity on its complement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.core.schema import result_table
from interlingua.maps import MapInputError, MapOptions, MapWarning, ProcrustesSpan, evaluate_pair, get_map, load_map
from interlingua.maps.columns import MAP_COLUMNS
from interlingua.maps.evaluate import IDENTITY_CONTROL_MAX_DEV, IDENTITY_CONTROL_MIN_COS, centred_rank


def _anisotropic(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Rows with column scales from 5 down to 0.1 (a conditioning like a residual stream's), plus an offset."""
    return rng.standard_normal((n, d)) * np.geomspace(5.0, 0.1, d) + 1.5


def _orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _complement(*sides: np.ndarray) -> np.ndarray:
    """Orthonormal columns spanning the directions orthogonal to every centred row of ``sides``."""
    stacked = np.vstack([s - s.mean(axis=0) for s in sides])
    _, sv, vt = np.linalg.svd(stacked, full_matrices=True)
    rank = int(np.count_nonzero(sv > sv[0] * max(stacked.shape) * np.finfo(np.float64).eps))
    return vt[rank:].T


def _self_dev(m) -> float:
    d = m.coef_.shape[0]
    return float(np.linalg.norm(m.coef_ - np.eye(d)) / math.sqrt(d))


# -- procrustes_span --------------------------------------------------------------------------------------------


def test_procrustes_span_is_the_identity_outside_the_training_span_and_orthogonal():
    rng = np.random.default_rng(0)
    n, d = 30, 48
    x = _anisotropic(rng, n, d)
    y = x @ _orthogonal(rng, d) + 0.05 * rng.standard_normal((n, d))
    x[:, -12:] = 0.0  # neither side varies in 12 coordinates, so the joint training span misses them;
    y[:, -12:] = 0.0
    g = _orthogonal(rng, d)  # turned into 12 generic directions
    x, y = x @ g, y @ g
    m = get_map("procrustes_span").fit(x, y)
    r = m.rotation_
    np.testing.assert_allclose(r.T @ r, np.eye(d), atol=1e-12)
    comp = _complement(x, y)
    assert comp.shape[1] == 12
    np.testing.assert_allclose(r.T @ comp, comp, atol=1e-12)  # directions outside the span map to themselves
    np.testing.assert_allclose(r @ comp, comp, atol=1e-12)
    np.testing.assert_allclose(m.transform(x.mean(axis=0) + comp.T), y.mean(axis=0) + comp.T, atol=1e-11)
    assert m.fit_info_["rank"] == 29 and m.fit_info_["free_directions"] == d - 29
    # one of the optimal rotations: it fits the training rows exactly as well as plain Procrustes
    with pytest.warns(MapWarning, match="not unique"):
        plain = get_map("procrustes").fit(x, y)
    xc, yc = x - x.mean(axis=0), y - y.mean(axis=0)
    assert np.linalg.norm(xc @ r - yc) == pytest.approx(np.linalg.norm(xc @ plain.rotation_ - yc), rel=1e-10)


def test_procrustes_span_equals_plain_procrustes_on_full_rank_data():
    rng = np.random.default_rng(1)
    x = _anisotropic(rng, 200, 16)
    y = x @ _orthogonal(rng, 16) + 0.3 * rng.standard_normal((200, 16))
    span, plain = get_map("procrustes_span").fit(x, y), get_map("procrustes").fit(x, y)
    assert span.fit_info_["free_directions"] == 0
    np.testing.assert_allclose(span.coef_, plain.coef_, atol=1e-13)
    np.testing.assert_allclose(span.intercept_, plain.intercept_, atol=1e-12)


def test_procrustes_span_self_map_reverse_save_and_widths(tmp_path):
    rng = np.random.default_rng(2)
    x = _anisotropic(rng, 20, 40)  # 19 centred rows for 40 directions
    m = get_map("procrustes_span").fit(x, x)
    np.testing.assert_allclose(m.coef_, np.eye(40), atol=1e-12)  # a side onto itself: exactly the identity
    y = x @ _orthogonal(rng, 40)
    fwd = get_map("procrustes_span").fit(x, y)
    np.testing.assert_allclose(fwd.reverse().coef_, get_map("procrustes_span").fit(y, x).coef_, atol=1e-12)
    assert isinstance(fwd.reverse(), ProcrustesSpan) and fwd.name == "procrustes_span"
    back = load_map(fwd.save(tmp_path / "span.safetensors"))
    assert isinstance(back, ProcrustesSpan) and back.key == fwd.key
    np.testing.assert_array_equal(back.transform(x), fwd.transform(x))
    with pytest.raises(MapInputError, match="equal widths"):
        get_map("procrustes_span").fit(x, x[:, :30])


# -- the identity control and the under-determination flag in evaluate_pair --------------------------------------


@pytest.mark.parametrize(
    "estimator", ["identity", "procrustes", "procrustes_scaled", "procrustes_span", "affine", "ridge"]
)
def test_identity_control_recovers_the_identity_when_rows_outnumber_the_width(estimator):
    rng = np.random.default_rng(3)
    a = _anisotropic(rng, 150, 12)[None]  # 120 training rows per fold for width 12
    b = (a[0] @ _orthogonal(rng, 12) + 0.5 * rng.standard_normal((150, 12)))[None]
    rows = evaluate_pair(a, b, MapOptions(estimators=[estimator], bootstrap=0, residual=False))
    for r in rows:
        assert r["identity_control"] == "passed" and not r["underdetermined"]
        assert r["n_fit"] == 120 and r["rank"] == 12
        assert r["identity_control_p1"] == 1.0
        # ridge shrinks a little: its CV picks the grid's smallest penalty, 1e-6 x the mean eigenvalue, on these
        # noise-free self pairs, and the smallest eigenvalue is 1/2500 of the largest
        tol = 1e-3 if estimator == "ridge" else 1e-9
        assert r["identity_control_dev"] < tol
        assert r["identity_control_cos"] > 1 - tol


def test_under_determination_is_flagged_at_the_demo_shape_and_not_with_enough_rows():
    rng = np.random.default_rng(4)
    width = 640
    for n, under in ((300, True), (2560, False)):
        a = _anisotropic(rng, n, width)[None]
        # one 80/20 split: n_fit = 240 (rank 239 < 640), or 2048 (rank 640)
        rows = evaluate_pair(
            a,
            a,
            MapOptions(
                estimators=["procrustes"],
                folds=0.2,
                directions=("a->b",),
                bootstrap=0,
                residual=False,
                csls_k=0,
                identity_control=False,
            ),
        )
        (r,) = rows
        assert r["n_fit"] == int(0.8 * n) and r["underdetermined"] is under
        assert r["rank"] == min(int(0.8 * n) - 1, width)
        assert ("under-determined" in r["note"]) is under
        if under:
            assert "n_fit - 1 >= width" in r["note"] and "procrustes_span" in r["note"]


def test_the_flag_is_exactly_rank_below_width():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, 8))
    # a split holding out 3 of 12: n_fit = 9, centred rank 8 = width (fixed); 8 rows give rank 7 (not fixed)
    rows = evaluate_pair(
        x[None],
        x[None],
        MapOptions(
            estimators=["procrustes", "identity"],
            folds=0.25,
            bootstrap=0,
            residual=False,
            csls_k=0,
            directions=("a->b",),
        ),
    )
    assert [(r["n_fit"], r["rank"], r["underdetermined"]) for r in rows] == [(9, 8, False), (9, 8, False)]
    rows = evaluate_pair(
        x[None, :11],
        x[None, :11],
        MapOptions(
            estimators=["procrustes"], folds=3 / 11, bootstrap=0, residual=False, csls_k=0, directions=("a->b",)
        ),
    )
    assert [(r["n_fit"], r["rank"], r["underdetermined"]) for r in rows] == [(8, 7, True)]
    # many rows but a duplicated column: the rows still do not fix the map on one direction
    wide = rng.standard_normal((100, 8))
    wide[:, 7] = wide[:, 6]
    rows = evaluate_pair(
        wide[None],
        wide[None],
        MapOptions(estimators=["procrustes", "identity"], bootstrap=0, residual=False, csls_k=0, directions=("a->b",)),
    )
    assert [(r["estimator"], r["rank"], r["underdetermined"]) for r in rows] == [
        ("procrustes", 7, True),
        ("identity", 7, False),
    ]  # the identity map has nothing to fix
    assert centred_rank(wide) == 7 == np.linalg.matrix_rank(wide - wide.mean(axis=0))


def test_underdetermined_procrustes_fails_the_identity_control_and_procrustes_span_passes():
    rng = np.random.default_rng(6)
    a = _anisotropic(rng, 375, 640)[None]  # one 80/20 split: n_fit = 300 rows, width 640 (the demo's shape)
    rows = evaluate_pair(
        a,
        a,
        MapOptions(
            estimators=["procrustes", "procrustes_span", "ridge"],
            folds=0.2,
            directions=("a->b",),
            bootstrap=0,
            residual=False,
            csls_k=0,
            per_fold=True,
        ),
    )
    by = {r["estimator"]: r for r in rows if r["fold"] == -1}
    plain, span, ridge = by["procrustes"], by["procrustes_span"], by["ridge"]
    for r in rows:
        assert r["n_fit"] == 300 and r["rank"] == 299 and r["underdetermined"]
    assert plain["identity_control"] == "failed" and plain["identity_control_dev"] > 0.5
    assert plain["identity_control_cos"] < IDENTITY_CONTROL_MIN_COS
    assert plain["note"].startswith("IDENTITY CONTROL FAILED") and "not a finding" in plain["note"]
    assert "SVD's arbitrary choice" in plain["note"]
    assert span["identity_control"] == "passed" and span["identity_control_dev"] < 1e-12
    assert span["identity_control_cos"] == pytest.approx(1.0, abs=1e-12) and span["identity_control_p1"] == 1.0
    assert "IDENTITY CONTROL" not in span["note"] and "unchanged (identity)" in span["note"]
    # ridge is a projection onto the 299 seen directions: ||R - I|| / sqrt(d) near sqrt(341 / 640), so it fails too
    assert ridge["identity_control"] == "failed" and ridge["identity_control_dev"] > IDENTITY_CONTROL_MAX_DEV
    assert "shrinks" in ridge["note"]
    # the reported deviation is ||R - I||_F / sqrt(d) of the self-map fitted on the training rows, recomputed here
    from interlingua.maps import make_folds

    tr = make_folds(375, 0.2, 0).train(0)
    with pytest.warns(MapWarning, match="not unique"):
        own = get_map("procrustes").fit(a[0][tr], a[0][tr])
    assert plain["identity_control_dev"] == pytest.approx(_self_dev(own), rel=1e-9)
    fold_row = next(r for r in rows if r["fold"] == 0 and r["estimator"] == "procrustes")
    assert fold_row["identity_control_dev"] == plain["identity_control_dev"]
    assert fold_row["identity_control"] == "failed"


def test_mlp_skips_the_control_with_a_reason_and_columns_are_declared():
    rng = np.random.default_rng(7)
    a = _anisotropic(rng, 60, 4)[None]
    rows = evaluate_pair(
        a,
        a,
        MapOptions(
            estimators=[("mlp", {"hidden": 4, "max_epochs": 2})],
            directions=("a->b",),
            bootstrap=0,
            residual=False,
            folds=3,
        ),
    )
    (r,) = rows
    assert r["identity_control"] == "" and math.isnan(r["identity_control_dev"])
    assert "identity control not run for mlp" in r["note"]
    table = result_table(rows, MAP_COLUMNS)
    assert table["underdetermined"].dtype == bool and table["n_fit"].dtype == np.int64


@pytest.mark.slow
def test_report_shows_the_failed_control_and_the_remedy_first(tmp_path):
    from interlingua.maps.report import maps_section

    rng = np.random.default_rng(8)
    a = _anisotropic(rng, 50, 64)[None]  # 5 folds: n_fit = 40 rows for width 64
    labels = {
        "pair": "m:eng_Latn|m:deu_Latn",
        "model_a": "m",
        "lang_a": "eng_Latn",
        "model_b": "m",
        "lang_b": "deu_Latn",
        "pooling": "mean",
        "control_seed": 0,
    }
    rows = evaluate_pair(
        a,
        a,
        MapOptions(
            estimators=["procrustes", "procrustes_span"], directions=("a->b",), bootstrap=0, residual=False, csls_k=0
        ),
        labels=labels,
    )
    text = "\n".join(maps_section(result_table(rows, MAP_COLUMNS), {}, tmp_path))
    control = text.index("Positive control and under-determination")
    failed = text.index("**IDENTITY CONTROL FAILED** for procrustes a->b of m:eng_Latn|m:deu_Latn")
    assert control < failed < text.index("| pair | estimator | direction | layer_a")  # before the main table
    assert "procrustes_span a->b" not in text[failed : text.index("\n", failed)]
    assert "**Under-determined maps**: 2 of 2 map rows" in text and "`ridge`" in text and "`procrustes_span`" in text
    assert "FAILED 1/1" in text and "passed 1/1" in text


def test_rank_is_counted_at_the_precision_the_rows_were_stored_in():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((100, 8))
    x -= x.mean(axis=1, keepdims=True)  # every row sums to zero, like a LayerNorm output: one direction unspanned
    x32 = x.astype(np.float32)
    assert centred_rank(x) == 7
    assert centred_rank(x32.astype(np.float64)) == 8  # float32 rounding, read at float64 precision, looks like one
    assert centred_rank(x32.astype(np.float64), float(np.finfo(np.float32).eps)) == 7
    (r,) = evaluate_pair(
        x32[None],
        x32[None],
        MapOptions(estimators=["procrustes"], bootstrap=0, residual=False, csls_k=0, directions=("a->b",)),
    )
    assert r["rank"] == 7 and r["underdetermined"]
