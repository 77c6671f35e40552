"""evaluate_pair: planted facts at the row level, controls at chance, no leakage, declared columns."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy import stats

from interlingua.core.schema import RESULT_COLUMNS, result_table
from interlingua.maps import (
    MAP_COLUMNS,
    MapInputError,
    MapNonFiniteError,
    MapOptions,
    evaluate_pair,
    kfold,
    layer_pairs,
    procrustes_grid,
)
from interlingua.maps.estimators import _Linear


def _rotation(rng: np.random.Generator, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _planted(seed: int = 0, n: int = 120, p: int = 12, q: int = 12, la: int = 3, lb: int = 3):
    """Side B's every layer is an exact rotation (embedding when q > p) of side A's, plus an offset."""
    rng = np.random.default_rng(seed)
    base = [rng.standard_normal((n, p)) * np.linspace(2.0, 0.5, p) for _ in range(la)]
    embed = _rotation(rng, max(p, q))[:p, :q] if p <= q else None
    a = np.stack(base)
    pairs = layer_pairs(la, lb)
    b = np.zeros((lb, n, q))
    for i, j in pairs:
        b[j] = (base[i] @ embed if embed is not None else base[i][:, :q]) + 3.0
    return a, b, rng.permutation(n)


def _agg(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["fold"] == -1 and not r["grid"]]


def test_planted_rotation_is_retrieved_perfectly_with_zero_residual_in_both_directions():
    a, b, perm = _planted(0, p=12, q=12)
    rows = evaluate_pair(a, b, MapOptions(estimators=["procrustes"], bootstrap=200, seed=1), control_permutation=perm)
    assert len(rows) == 3 * 2
    for r in rows:
        assert r["p1"] == 1.0 and r["p1_csls"] == 1.0 and r["mrr"] == 1.0
        assert r["rel_mse"] < 1e-20  # exact map: float64 rounding of O(1) data, squared
        assert r["cka"] == pytest.approx(1.0, abs=1e-12)
        assert r["resid_rel_norm"] < 1e-10
        assert r["p1_low"] == r["p1_high"] == 1.0
        assert r["chance_p1"] == pytest.approx(1 / 24)  # 5 folds of 120: 24 held out each
        assert r["identity_p1"] < 0.5  # a rotation is not the identity
        assert r["n_test"] == 120 and r["n_train"] == 96 and r["protocol"] == "kfold"


def test_planted_embedding_across_widths_and_depths():
    a, b, perm = _planted(1, n=150, p=8, q=14, la=3, lb=5)
    rows = evaluate_pair(a, b, MapOptions(estimators=["procrustes", "ridge"], bootstrap=0), control_permutation=perm)
    assert {(r["layer_a"], r["layer_b"]) for r in rows} == {(0, 0), (1, 2), (2, 4)}
    for r in rows:
        if r["estimator"] == "procrustes":
            assert r["p1"] == 1.0 and r["rel_mse"] < 1e-20
        assert r["p1"] >= 0.99  # ridge: nearly exact (smallest penalty)
        assert np.isnan(r["identity_p1"]) and "widths differ (8 and 14)" in r["note"]
        assert (r["width_source"], r["width_target"]) == ((8, 14) if r["direction"] == "a->b" else (14, 8))


def test_random_linear_map_is_recovered_by_affine_and_ridge():
    rng = np.random.default_rng(2)
    n, p, q = 200, 10, 7
    x = rng.standard_normal((2, n, p))
    w = rng.standard_normal((p, q))
    y = x @ w + 0.01 * rng.standard_normal((2, n, q))
    rows = evaluate_pair(
        x, y, MapOptions(estimators=["affine", "ridge"], directions=("a->b",), bootstrap=0, residual=False)
    )
    for r in rows:
        assert r["p1"] == 1.0
        assert r["rel_mse"] < 1e-3  # noise variance 1e-4 against an O(1) signal


def test_the_shuffled_fit_control_sits_at_chance():
    # a strong planted map (P@1 = 1) whose shuffled-fit control must fall to chance
    a, b, perm = _planted(3, n=600, p=16, q=16, la=1, lb=1)
    rows = evaluate_pair(
        a,
        b,
        MapOptions(estimators=["procrustes", "ridge"], bootstrap=0, residual=False, folds=5),
        control_permutation=perm,
    )
    for r in rows:
        assert r["p1"] == 1.0
        # 600 held-out queries, each right by chance with p = 1/120; the 1e-6 upper tail of that binomial
        hi = stats.binom.ppf(1 - 1e-6, 600, 1 / 120) / 600
        assert r["chance_p1"] == pytest.approx(1 / 120)
        assert r["shuffled_p1"] <= hi and r["shuffled_p1_csls"] <= hi
        assert r["shuffled_rel_mse"] > 0.9  # the control map predicts ~the mean


class _Spy(_Linear):
    """Records the marker column (row ids) of every fit; maps by least squares."""

    seen: ClassVar[list[np.ndarray]] = []

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        _Spy.seen.append(x[:, 0].copy())
        xa = np.c_[x, np.ones(len(x))]
        sol = np.linalg.lstsq(xa, y, rcond=None)[0]
        self.coef_, self.intercept_ = sol[:-1], sol[-1]


def test_no_held_out_sentence_ever_enters_a_fit():
    rng = np.random.default_rng(4)
    n = 60
    ids = np.arange(n, dtype=np.float64)
    a = np.stack([np.c_[ids, rng.standard_normal((n, 3))]])
    b = np.stack([np.c_[ids, rng.standard_normal((n, 3))]])
    perm = rng.permutation(n)
    _Spy.seen.clear()
    evaluate_pair(
        a, b, MapOptions(estimators=[_Spy()], folds=4, seed=9, bootstrap=0, residual=False), control_permutation=perm
    )
    folds = kfold(n, 4, 9)
    assert len(_Spy.seen) == 4 * 6  # per fold: the identity control of each side, matched and control both ways
    for f, (tr, te) in enumerate(folds):
        for rows_seen in _Spy.seen[6 * f : 6 * f + 6]:
            assert np.intersect1d(rows_seen.astype(int), te).size == 0
            np.testing.assert_array_equal(np.sort(rows_seen.astype(int)), tr)


def test_rows_fill_the_declared_columns():
    a, b, perm = _planted(5, n=80, p=6, q=6, la=2, lb=2)
    labels = {
        "pair": "m1:eng_Latn|m2:fra_Latn",
        "model_a": "m1",
        "lang_a": "eng_Latn",
        "model_b": "m2",
        "lang_b": "fra_Latn",
        "pooling": "mean",
        "control_seed": 77,
    }
    rows = evaluate_pair(
        a,
        b,
        MapOptions(
            estimators=["identity", "procrustes_scaled", "affine"], layers="grid", per_fold=True, bootstrap=50, folds=4
        ),
        control_permutation=perm,
        labels=labels,
    )
    table = result_table(rows, MAP_COLUMNS)
    assert list(table.columns) == [c.name for c in MAP_COLUMNS]
    agg = table[(table.fold == -1) & ~table.grid]
    assert len(agg) == 2 * 3 * 2 and set(agg.pair) == {labels["pair"]} and set(agg.control_seed) == {77}
    assert len(table[table.fold >= 0]) == 4 * len(agg)
    grid = table[table.grid]
    assert len(grid) == 2 * 2 * 2 and set(grid.estimator) == {"procrustes"}
    ident = agg[agg.estimator == "identity"]
    np.testing.assert_array_equal(ident.p1, ident.identity_p1)  # the identity map equals the identity baseline
    assert json.loads(agg.estimator_params.iloc[2]) == {"center": True, "scale": True}
    # the default schema is untouched
    assert list(result_table([]).columns) == [c.name for c in RESULT_COLUMNS]
    with pytest.raises(KeyError, match="undeclared"):
        result_table([{"p1": 1.0}])


def test_grid_cells_on_the_planted_diagonal_retrieve_perfectly():
    rng = np.random.default_rng(6)
    n = 90
    a = rng.standard_normal((3, n, 5))
    b = np.stack([a[1] @ _rotation(rng, 5), rng.standard_normal((n, 5))])
    rows = procrustes_grid(a, b, MapOptions(folds=3, grid_folds=2))
    cell = {(r["layer_a"], r["layer_b"], r["direction"]): r for r in rows}
    assert cell[(1, 0, "a->b")]["p1"] == 1.0 and cell[(1, 0, "b->a")]["p1"] == 1.0
    assert cell[(1, 0, "a->b")]["n_test"] == 60  # two of the three folds
    assert cell[(0, 1, "a->b")]["p1"] < 0.5


def test_bootstrap_intervals_are_seeded_and_bracket_the_estimate():
    rng = np.random.default_rng(7)
    n = 100
    a = rng.standard_normal((1, n, 6))
    b = a @ rng.standard_normal((6, 6)) + 1.5 * rng.standard_normal((1, n, 6))
    kw = dict(estimators=["ridge"], bootstrap=300, directions=("a->b",), residual=False)
    r1, r2 = evaluate_pair(a, b, MapOptions(seed=3, **kw))[0], evaluate_pair(a, b, MapOptions(seed=3, **kw))[0]
    assert r1 == r2 or all(r1[k] == r2[k] or (np.isnan(r1[k]) and np.isnan(r2[k])) for k in r1)
    for m in ("p1", "mrr", "rel_mse", "p1_csls"):
        assert r1[f"{m}_low"] <= r1[m] <= r1[f"{m}_high"]
    assert 0 < r1["p1"] < 1 and r1["p1_low"] < r1["p1_high"]
    r3 = evaluate_pair(a, b, MapOptions(seed=3, bootstrap_seed=4, **kw))[0]
    assert r3["p1"] == r1["p1"] and (r3["p1_low"], r3["p1_high"]) != (r1["p1_low"], r1["p1_high"])


def test_unfittable_maps_give_a_noted_row_and_bad_arguments_fail_early():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((1, 40, 50)), rng.standard_normal((1, 40, 45))
    rows = evaluate_pair(a, b, MapOptions(estimators=["affine", "procrustes"], bootstrap=0, directions=("a->b",)))
    affine = rows[0]
    assert np.isnan(affine["p1"]) and "map not fitted: affine" in affine["note"] and "n_train=32" in affine["note"]
    assert "not unique" in rows[1]["note"]  # 32 centred training rows span 31 of the 45 target directions
    bad = a.copy()
    bad[0, 5, 2] = np.nan
    with pytest.raises(MapNonFiniteError, match=r"reps_a .*layer 0: 1 NaN and 0 inf in row\(s\) 5"):
        evaluate_pair(bad, b)
    with pytest.raises(MapInputError, match="40 sentences but reps_b has 39"):
        evaluate_pair(a, b[:, :39])
    with pytest.raises(MapInputError, match="not a permutation"):
        evaluate_pair(a, b, control_permutation=np.zeros(40, dtype=int))
    with pytest.raises(MapInputError, match="not label columns"):
        evaluate_pair(a, b, labels={"p1": 0.5})
    with pytest.raises(MapInputError, match="directions"):
        evaluate_pair(a, b, MapOptions(directions=("a->c",)))


def test_standardized_identity_of_a_rescaled_copy_is_exact():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((1, 60, 4))
    b = a * np.array([1.0, 10.0, 0.1, 3.0]) + 5.0  # per-column rescaling: z-scoring undoes it
    r = evaluate_pair(a, b, MapOptions(estimators=["identity"], standardize=True, bootstrap=0, directions=("a->b",)))[0]
    assert r["standardized"] and r["p1"] == 1.0 and r["rel_mse"] < 1e-20


def test_a_constant_target_side_gives_nan_retrieval_in_the_table_not_a_worst_rank():
    a, b, perm = _planted(2, p=12, q=12)
    b = np.array(b, dtype=np.float64)
    b[:] = b[:, :1, :]  # every row of every layer of B equal: retrieval into B ranks nothing
    with pytest.warns(Warning):
        rows = evaluate_pair(
            a, b, MapOptions(estimators=["ridge"], bootstrap=50, seed=1, directions=("a->b",)), control_permutation=perm
        )
    for r in [r for r in rows if not r["grid"]]:
        assert np.isnan(r["p1"]) and np.isnan(r["mrr"]) and np.isnan(r["p5"]), r["fold"]
        assert "retrieval is undefined" in r["note"]
    agg = [r for r in rows if r["fold"] == -1 and not r["grid"]]
    assert agg and all(np.isnan(r["p1_low"]) and np.isnan(r["p1_high"]) for r in agg)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"directions": ()}, "directions must be a non-empty subset"),
        ({"directions": ("a->b", "a->b")}, "directions must be a non-empty subset"),
        ({"bootstrap": 1}, "bootstrap must be 0"),
        ({"bootstrap": True}, "bootstrap must be 0"),
        ({"level": 1.0}, "level must lie in"),
        ({"csls_k": -1}, "csls_k must be an integer"),
        ({"memory_bytes": 0}, "memory_bytes must be a positive integer"),
        ({"seed": -1}, "bootstrap_seed must be a non-negative integer"),
        ({"bootstrap_seed": 2.5}, "bootstrap_seed must be a non-negative integer"),
        ({"identity_control": 1}, "identity_control must be True or False"),
        ({"permutations": -1}, "permutations must be an integer"),
        ({"null_layers": "first"}, "null_layers must be 'last' or 'all'"),
    ],
)
def test_map_options_refuse_bad_values_when_made(kw, match):
    with pytest.raises(MapInputError, match=match):
        MapOptions(**kw)


def test_map_options_hold_normalised_values_and_the_bootstrap_seed_defaults_to_the_fold_seed():
    o = MapOptions(directions=["b->a"], bootstrap=np.int64(20), level=np.float32(0.5), seed=4)
    assert o.directions == ("b->a",) and type(o.bootstrap) is int and type(o.level) is float
    assert o.resampling_seed == 4 and MapOptions(seed=4, bootstrap_seed=9).resampling_seed == 9
