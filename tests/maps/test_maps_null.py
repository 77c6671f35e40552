"""The permutation null of a map's held-out P@1 and its calibrated score (maps.null, evaluate_pair)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from interlingua.analysis.inference.calibration import calibrate, critical_value
from interlingua.core.schema import result_table
from interlingua.maps import MAP_COLUMNS, NULL_COLUMNS, MapInputError, MapOptions, evaluate_pair, make_folds
from interlingua.maps.config import MapsSpec
from interlingua.maps.null import (
    MAX_DEFAULT_PERMUTATIONS,
    null_permutations,
    null_seconds,
    resolve_permutations,
)

ALPHA = 0.05


def _one_row(x, y, **kw):
    """The aggregate a->b Procrustes row of a one-layer pair."""
    rows = evaluate_pair(
        x[None],
        y[None],
        MapOptions(
            estimators=kw.pop("estimators", ["procrustes"]),
            directions=("a->b",),
            bootstrap=0,
            residual=False,
            csls_k=0,
            identity_control=False,
            **kw,
        ),
    )
    return [r for r in rows if r["fold"] == -1]


def test_null_draws_are_the_similarity_nulls_draws():
    """Draw k is the k-th default_rng(seed).permutation(n): the sequence compare's null uses."""
    rng = np.random.default_rng(7)
    expected = np.stack([rng.permutation(30) for _ in range(70)])
    assert np.array_equal(null_permutations(30, 70, 7), expected)
    assert null_permutations(30, 0, 7).shape == (0, 30)


@pytest.mark.parametrize(
    "width", [pytest.param(4, marks=pytest.mark.slow), 16, pytest.param(48, marks=pytest.mark.slow)]
)
def test_independent_sides_are_calibrated_to_zero_in_at_least_1_minus_alpha_of_draws(width):
    """Unrelated sides: P(calibrated > 0) <= alpha for every width, including one the fit over-fits (48 > n_fit).

    40 independent data sets per width, K = 19; the count of calibrated > 0 is at most the 99.9% point of
    Binomial(40, alpha) (an exact level-alpha test rejects with probability <= alpha; the bound allows for
    the finite number of data sets).
    """
    draws, positive = 40, 0
    scales = np.arange(1, width + 1) ** -0.5  # an anisotropic spectrum: chance of P@1 is not 1/n_test
    for s in range(draws):
        rng = np.random.default_rng(1000 * width + s)
        x = rng.normal(size=(60, width)) * scales
        y = rng.normal(size=(60, 12))
        (row,) = _one_row(x, y, folds=3, seed=s, permutations=19, permutation_seed=s, alpha=ALPHA)
        assert row["n_permutations"] == 19 and 0 <= row["calibrated"] <= 1
        positive += row["calibrated"] > 0
        assert (row["calibrated"] > 0) == (row["p_value"] <= ALPHA)  # tau is the level-alpha rejection point
    assert positive <= stats.binom.ppf(0.999, draws, ALPHA)
    assert positive / draws <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / draws)


def test_a_planted_map_is_calibrated_above_zero_and_rises_with_the_signal():
    """B = A Q + noise for a random orthogonal Q (the planted twin of maps.planted): calibrated > 0, p minimal."""
    rng = np.random.default_rng(3)
    n, d, k = 90, 8, 39
    x = rng.normal(size=(n, d))
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    values = []
    for noise in (3.0, 1.0, 0.3):
        y = x @ q + noise * rng.normal(size=(n, d))
        (row,) = _one_row(x, y, folds=3, permutations=k, permutation_seed=0, alpha=ALPHA)
        values.append(row["calibrated"])
    assert values[-1] > 0 and row["p_value"] == pytest.approx(1 / (k + 1))
    assert values[0] <= values[1] <= values[2]


def _hand_null(x, y, folds, perms):
    """The null's held-out P@1 values computed directly: Procrustes by SVD, cosine argmax, training-mean centring."""
    n = x.shape[0]
    values = []
    for perm in perms:
        hits = np.zeros(n, dtype=bool)
        for f, te in enumerate(folds.tests):
            tr = folds.train(f)
            # restrict the draw to the training rows: training row tr[i] is paired with the i-th training row
            # in the order they appear in perm
            order = [r for r in perm if r in set(tr.tolist())]
            xt, yt = x[tr], y[np.array(order)]
            mx, my = xt.mean(axis=0), yt.mean(axis=0)
            u, _, vt = np.linalg.svd((xt - mx).T @ (yt - my))
            pred = (x[te] - mx) @ (u @ vt)
            targ = y[te] - y[tr].mean(axis=0)
            pred /= np.linalg.norm(pred, axis=1, keepdims=True)
            targ /= np.linalg.norm(targ, axis=1, keepdims=True)
            hits[te] = np.argmax(pred @ targ.T, axis=1) == np.arange(te.size)
        values.append(hits.mean())
    return np.array(values)


def test_tau_p_and_calibrated_agree_with_the_calibration_function_on_an_independent_null():
    rng = np.random.default_rng(11)
    n, k = 48, 29
    x = rng.normal(size=(n, 6))
    y = x @ np.linalg.qr(rng.normal(size=(6, 6)))[0] + 1.5 * rng.normal(size=(n, 6))
    (row,) = _one_row(x, y, folds=4, seed=2, permutations=k, permutation_seed=5, alpha=0.1)
    draw = np.random.default_rng(5)  # the null's draws: seeds.test = 5, as the similarity null draws them
    null = _hand_null(x, y, make_folds(n, 4, 2), [draw.permutation(n) for _ in range(k)])
    assert row["tau"] == pytest.approx(critical_value(row["p1"], null, 0.1), abs=1e-12)
    cal = calibrate(row["p1"], null, alpha=0.1, bounds=(0.0, 1.0))
    assert row["calibrated"] == pytest.approx(cal.calibrated, abs=1e-12)
    assert row["p_value"] == pytest.approx(cal.p_value, abs=1e-12)
    # and the order statistic by hand: the ceil(0.9 * 30) = 27th smallest of the 30 values
    assert row["tau"] == pytest.approx(np.sort(np.append(null, row["p1"]))[26], abs=1e-12)


def test_the_null_is_per_fold_on_per_fold_rows_and_absent_where_it_is_not_drawn():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 40, 6)), rng.normal(size=(2, 40, 5))
    rows = evaluate_pair(
        x,
        y,
        MapOptions(
            estimators=["procrustes", "mlp"],
            folds=4,
            bootstrap=0,
            csls_k=0,
            per_fold=True,
            layers="grid",
            permutations=9,
            permutation_seed=1,
            identity_control=False,
            null_layers="all",
        ),
    )
    table = result_table(rows, MAP_COLUMNS)
    assert [c.name for c in NULL_COLUMNS] == list(table.columns[-len(NULL_COLUMNS) :])
    proc = table[(table["estimator"] == "procrustes") & ~table["grid"]]
    assert (proc["n_permutations"] == 9).all() and proc["tau"].between(0, 1).all()
    assert (proc[proc["fold"] >= 0]["p_value"] >= 0.1).all()  # add-one p with K = 9
    mlp = table[table["estimator"] == "mlp"]
    assert (mlp["n_permutations"] == 0).all() and mlp["calibrated"].isna().all()
    assert mlp["note"].str.contains("no permutation null for mlp").all()
    grid = table[table["grid"]]
    assert grid["calibrated"].isna().all() and grid["note"].str.contains("no permutation null on grid rows").all()
    ident = result_table(
        evaluate_pair(
            x[:, :, :5], y, MapOptions(estimators=["identity"], folds=4, bootstrap=0, csls_k=0, permutations=9)
        ),
        MAP_COLUMNS,
    )
    assert ident["calibrated"].isna().all() and ident["note"].str.contains("no permutation null for identity").all()
    off = result_table(
        evaluate_pair(x, y, MapOptions(estimators=["ridge"], folds=4, bootstrap=0, csls_k=0)), MAP_COLUMNS
    )
    assert off["calibrated"].isna().all() and off["note"].str.contains(r"permutations: 0").all()
    assert (off["n_permutations"] == 0).all()


def test_the_null_does_not_change_the_observed_columns():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(1, 36, 5)), rng.normal(size=(1, 36, 5))
    kw = dict(estimators=["procrustes", "ridge"], folds=3, bootstrap=20, csls_k=3)
    perm = rng.permutation(36)
    plain = evaluate_pair(x, y, MapOptions(**kw), control_permutation=perm)
    nulled = evaluate_pair(x, y, MapOptions(permutations=5, **kw), control_permutation=perm)
    for a, b in zip(plain, nulled, strict=True):
        for c in ("p1", "mrr", "p1_csls", "shuffled_p1", "rel_mse", "cka", "p1_low", "p1_high"):
            assert a[c] == b[c] or (math.isnan(a[c]) and math.isnan(b[c]))


@pytest.mark.parametrize(
    "kw", [{"permutations": -1}, {"permutations": 2.5}, {"permutation_seed": -3}, {"alpha": 1.0}, {"alpha": "x"}]
)
def test_bad_null_arguments_are_map_input_errors(kw):
    x = np.zeros((1, 10, 3)) + np.arange(30).reshape(1, 10, 3)
    with pytest.raises(MapInputError):
        evaluate_pair(x, x, MapOptions(folds=2, bootstrap=0, **kw))


def test_default_k_and_the_cost_of_the_refits():
    assert resolve_permutations(None, 1000) == MAX_DEFAULT_PERMUTATIONS
    assert resolve_permutations(None, 0) == 0 and resolve_permutations(None, 20) == 20
    assert resolve_permutations(7, 1000) == 7
    section = MapsSpec(estimators=["procrustes", "ridge", "mlp"], folds=5, directions=["a->b", "b->a"])
    kw = dict(layer_pairs=4, rate64=1e9)
    one = null_seconds(10, 200, 64, 64, section, **kw)
    assert null_seconds(0, 200, 64, 64, section, **kw) == 0.0
    assert null_seconds(20, 200, 64, 64, section, **kw) == pytest.approx(2 * one)  # linear in K
    assert null_seconds(10, 200, 64, 64, MapsSpec(estimators=["mlp"]), **kw) == 0.0
    assert null_seconds(10, 200, 256, 256, section, **kw) > one


def test_the_null_is_drawn_at_the_last_layer_pair_only_unless_every_pair_is_asked_for():
    """As compare's null follows ``inference.layers``: ``last`` draws it at the last layers (the other rows say
    why they have none), ``all`` at every pair, with the same draws at the last pair."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(3, 40, 6)), rng.normal(size=(3, 40, 5))
    kw = dict(estimators=["procrustes"], folds=4, bootstrap=0, csls_k=0, layers="auto", permutations=9)
    last = result_table(evaluate_pair(x, y, MapOptions(**kw)), MAP_COLUMNS)
    every = result_table(evaluate_pair(x, y, MapOptions(null_layers="all", **kw)), MAP_COLUMNS)
    at_last = (last["layer_a"] == 2) & (last["layer_b"] == 2)
    assert at_last.sum() == last["direction"].nunique() and (last.loc[at_last, "n_permutations"] == 9).all()
    assert (last.loc[~at_last, "n_permutations"] == 0).all() and last.loc[~at_last, "calibrated"].isna().all()
    assert last.loc[~at_last, "note"].str.contains("inference.layers: last tests only the last layers").all()
    assert (every["n_permutations"] == 9).all()
    cols = ["tau", "p_value", "calibrated", "p1"]
    pd.testing.assert_frame_equal(
        last.loc[at_last, cols].reset_index(drop=True), every.loc[at_last, cols].reset_index(drop=True)
    )
    with pytest.raises(MapInputError, match="null_layers must be 'last' or 'all'"):
        evaluate_pair(x, y, MapOptions(null_layers="first", **kw))
