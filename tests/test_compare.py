"""Pairs, layers and matched-vs-shuffled rows on constructions with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from interlingua.analysis.inference.config import InferenceSpec
from interlingua.analysis.measures import linear_cka
from interlingua.comparison import compare_grid, compare_pair, length_features
from interlingua.contract.pairs import Pair, Side, SideData, enumerate_pairs, layer_pairs, pair_permutation
from interlingua.core.errors import ConfigError, MeasureInputError


def side(reps, lengths=None, seed=0):
    """Wrap ``(L, n, d)`` representations with random sentence lengths and no pooled special tokens."""
    n = reps.shape[1]
    if lengths is None:
        lengths = np.random.default_rng(seed).integers(3, 40, size=(n, 2)).astype(float)
    return SideData(reps, np.asarray(lengths, float), np.zeros(reps.shape[0]))


LANGS = ["eng_Latn", "deu_Latn", "rus_Cyrl", "cmn_Hans"]


def test_pair_counts_follow_the_spec():
    assert len(enumerate_pairs(["a", "b"], LANGS, cross_model="none")) == 2 * 6
    assert len(enumerate_pairs(["a", "b"], LANGS, within_model=False)) == 4
    assert len(enumerate_pairs(["a", "b"], LANGS, within_model=False, cross_model="all")) == 16
    assert len(enumerate_pairs(["a", "b", "c"], LANGS)) == 3 * 6 + 3 * 4


def test_explicit_duplicates_collapse_and_self_pairs_are_refused():
    dup = (Side("b", "deu_Latn"), Side("a", "deu_Latn"))  # reversed cross-model same-language pair
    assert len(enumerate_pairs(["a", "b"], LANGS[:2], explicit=[dup])) == 2 + 2
    with pytest.raises(ConfigError, match="with itself"):
        enumerate_pairs(["a"], LANGS[:2], explicit=[(Side("a", "eng_Latn"), Side("a", "eng_Latn"))])


def test_layers_are_paired_one_to_one_only_for_equal_depth():
    assert layer_pairs(3, 3) == [(0, 0), (1, 1), (2, 2)]
    assert layer_pairs(19, 31) == [(18, 30)]


def test_permutation_depends_on_pair_not_on_enumeration_order():
    p = Pair(Side("a", "eng_Latn"), Side("a", "deu_Latn"))
    perm1, seed1 = pair_permutation(p, 50, 7)
    perm2, seed2 = pair_permutation(Pair(Side("a", "eng_Latn"), Side("a", "deu_Latn")), 50, 7)
    assert seed1 == seed2 and np.array_equal(perm1, perm2)
    assert sorted(perm1.tolist()) == list(range(50))
    other, seed3 = pair_permutation(Pair(Side("a", "eng_Latn"), Side("a", "rus_Cyrl")), 50, 7)
    assert seed3 != seed1 and not np.array_equal(other, perm1)


def _layers(rng, n=60, width=12, n_states=4, noise=0.3):
    """Side B = orthogonal rotation of side A plus noise, at every layer."""
    a = rng.standard_normal((n_states, n, width))
    q, _ = np.linalg.qr(rng.standard_normal((width, width)))
    b = a @ q + noise * rng.standard_normal((n_states, n, width))
    return a.astype(np.float32), b.astype(np.float32)


def test_matched_beats_shuffled_and_one_permutation_serves_every_layer():
    rng = np.random.default_rng(0)
    a, b = _layers(rng)
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    perm, seed = pair_permutation(pair, a.shape[1], 1)
    rows = compare_pair(
        pair,
        side(a),
        side(b),
        pooling="sgpt",
        measures=["cka_linear_biased", "cka_linear_debiased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=99),
        test_seed=3,
    )
    assert len(rows) == 2 * 4
    for r in rows:
        assert r["matched"] > 0.8 > 0.3 > r["shuffled"]
        assert r["p_value"] == pytest.approx(1 / 100)  # nothing in 99 draws reaches a planted signal
        assert r["control_seed"] == seed and r["n"] == 60
    # the shuffled value is exactly CKA against the stored permutation
    r0 = rows[0]
    x, y = a[0].astype(np.float64), b[0].astype(np.float64)
    assert r0["shuffled"] == pytest.approx(linear_cka(x, y[perm]), abs=1e-12)
    assert r0["matched"] == pytest.approx(linear_cka(x, y), abs=1e-12)


def test_measures_that_need_one_model_are_skipped_across_models():
    rng = np.random.default_rng(1)
    a, b = _layers(rng, n_states=2)
    pair = Pair(Side("m1", "eng_Latn"), Side("m2", "eng_Latn"))
    perm, seed = pair_permutation(pair, a.shape[1], 1)
    rows = compare_pair(
        pair,
        side(a),
        side(b),
        pooling="mean",
        measures=["anc_abs", "cka_linear_biased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    assert {r["measure"] for r in rows} == {"cka_linear_biased"}
    within = Pair(Side("m1", "eng_Latn"), Side("m1", "deu_Latn"))
    rows = compare_pair(
        within,
        side(a),
        side(a),
        pooling="mean",
        measures=["anc_abs"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    assert all(r["matched"] == pytest.approx(1.0) for r in rows)


def test_grid_matches_pairwise_cka_and_marks_its_maximum():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 40, 8)).astype(np.float32)
    b = np.concatenate([a[[2]] @ np.linalg.qr(rng.standard_normal((8, 8)))[0], rng.standard_normal((4, 40, 8))]).astype(
        np.float32
    )  # b[0] is a rotated a[2]
    pair = Pair(Side("x", "eng_Latn"), Side("y", "eng_Latn"))
    perm, seed = pair_permutation(pair, 40, 1)
    rows = compare_grid(
        pair,
        side(a),
        side(b),
        pooling="sgpt",
        measures=["cka_linear_biased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=50),
        test_seed=0,
    )
    assert len(rows) == 3 * 5
    for r in rows:
        want = linear_cka(a[r["layer_a"]].astype(np.float64), b[r["layer_b"]].astype(np.float64))
        assert r["matched"] == pytest.approx(want, abs=1e-10)
    best = [r for r in rows if r["grid_max"]]
    assert len(best) == 1 and (best[0]["layer_a"], best[0]["layer_b"]) == (2, 0)
    assert best[0]["matched"] == pytest.approx(1.0)
    assert best[0]["p_grid_max"] == pytest.approx(1 / 51)


def test_sides_with_different_sentence_counts_are_refused():
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    a = np.zeros((2, 10, 4), np.float32)
    b = np.zeros((2, 12, 4), np.float32)
    with pytest.raises(MeasureInputError, match="same sentence ids"):
        compare_pair(
            pair,
            side(a),
            side(b),
            pooling="mean",
            measures=["cka_linear_biased"],
            permutation=np.arange(10),
            control_seed=0,
            inference=InferenceSpec(permutations=0),
            test_seed=0,
        )


def test_inference_can_be_limited_to_the_last_layer():
    rng = np.random.default_rng(4)
    a, b = _layers(rng, n_states=3)
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    perm, seed = pair_permutation(pair, a.shape[1], 1)
    rows = compare_pair(
        pair,
        side(a),
        side(b),
        pooling="sgpt",
        measures=["cka_linear_biased"],
        permutation=perm,
        control_seed=seed,
        test_seed=0,
        inference=InferenceSpec(permutations=19, jackknife_groups=5, layers="last"),
    )
    assert [("p_value" in r, "jackknife_low" in r) for r in rows] == [(False, False)] * 2 + [(True, True)]
    assert [r["n_permutations"] for r in rows] == [0, 0, 19]
    last = rows[-1]
    assert last["jackknife_low"] <= last["matched"] <= last["jackknife_high"]


def test_length_control_is_the_measure_on_length_features():
    """A side whose representation IS its length features: matched equals the length control."""
    rng = np.random.default_rng(5)
    n = 50
    la = rng.integers(5, 60, size=(n, 2)).astype(float)
    lb = la + rng.normal(0, 3, size=(n, 2))
    a = length_features(la)[None].astype(np.float32)
    b = length_features(lb)[None].astype(np.float32)
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    perm, seed = pair_permutation(pair, n, 1)
    (row,) = compare_pair(
        pair,
        side(a, la),
        side(b, lb),
        pooling="mean",
        measures=["cka_linear_biased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    assert row["length_control"] == pytest.approx(row["matched"], abs=1e-6)
    assert row["length_control"] == pytest.approx(linear_cka(length_features(la), length_features(lb)), abs=1e-12)
    # sentences of one length carry no length signal: the control is undefined and says why
    const = np.full((n, 2), 7.0)
    (row,) = compare_pair(
        pair,
        side(a, const),
        side(b, lb),
        pooling="mean",
        measures=["cka_linear_biased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    assert np.isnan(row["length_control"]) and "same length" in row["note"]


def test_a_constant_layer_gives_nan_with_its_reason_not_a_crash():
    rng = np.random.default_rng(6)
    a, b = _layers(rng, n_states=3)
    a[1] = 1.0  # layer 1 of side A is the same vector for every sentence
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    perm, seed = pair_permutation(pair, a.shape[1], 1)
    rows = compare_pair(
        pair,
        side(a),
        side(b),
        pooling="mean",
        measures=["cka_linear_biased", "svcca_var0.99"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=9),
        test_seed=0,
    )
    bad = [r for r in rows if r["layer_a"] == 1]
    good = [r for r in rows if r["layer_a"] != 1]
    assert len(bad) == 2 and all(np.isnan(r["matched"]) and np.isnan(r["shuffled"]) for r in bad)
    assert all("constant" in r["note"] for r in bad)  # each NaN says why
    assert all(np.isfinite(r["matched"]) and r["note"] == "" for r in good)


def test_standardize_removes_per_dimension_scale_and_the_diagnostic_sees_it():
    rng = np.random.default_rng(7)
    a, b = _layers(rng, n_states=1, width=10, noise=1.0)
    scaled = a.copy()
    scaled[..., 0] *= 1000.0  # one dominant coordinate
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    perm, seed = pair_permutation(pair, a.shape[1], 1)
    kw = dict(
        pooling="mean",
        measures=["cka_linear_biased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    (raw,) = compare_pair(pair, side(a), side(b), **kw)
    (raw_scaled,) = compare_pair(pair, side(scaled), side(b), **kw)
    (std,) = compare_pair(pair, side(a), side(b), standardized=True, **kw)
    (std_scaled,) = compare_pair(pair, side(scaled), side(b), standardized=True, **kw)
    assert abs(raw_scaled["matched"] - raw["matched"]) > 0.1  # raw CKA follows the outlier coordinate
    assert std_scaled["matched"] == pytest.approx(std["matched"], abs=1e-9)  # standardised CKA does not
    assert raw_scaled["top1_share_a"] > 0.99 and raw["top1_share_a"] < 0.5
    assert raw_scaled["top3_share_a"] >= raw_scaled["top1_share_a"]


def test_length_removed_value_drops_what_length_explains_and_keeps_the_rest():
    """A planted length direction inflates matched CKA; regressing length out removes exactly that part."""
    rng = np.random.default_rng(8)
    n, d = 80, 16
    lengths = rng.integers(5, 60, size=(n, 2)).astype(float)
    z = (lengths[:, :1] - lengths[:, :1].mean()) / lengths[:, :1].std()
    independent_a, independent_b = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    a = (independent_a + 20 * z * rng.standard_normal(d))[None].astype(np.float32)
    b = (independent_b + 20 * z * rng.standard_normal(d))[None].astype(np.float32)
    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    perm, seed = pair_permutation(pair, n, 1)
    (row,) = compare_pair(
        pair,
        side(a, lengths),
        side(b, lengths),
        pooling="mean",
        measures=["cka_linear_debiased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    assert row["matched"] > 0.8  # all of it length
    assert abs(row["matched_length_removed"]) < 0.1  # nothing beyond length
    # sides related beyond length (a rotated noisy copy, no length signal) keep their similarity
    ra, rb = _layers(rng, n=n, width=d, n_states=1)
    (plain,) = compare_pair(
        pair,
        side(ra, lengths),
        side(rb, lengths),
        pooling="mean",
        measures=["cka_linear_debiased"],
        permutation=perm,
        control_seed=seed,
        inference=InferenceSpec(permutations=0),
        test_seed=0,
    )
    assert plain["matched"] > 0.8
    assert abs(plain["matched_length_removed"] - plain["matched"]) < 0.05
