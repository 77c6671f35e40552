"""within_group_correlation and correlation_table: each cell equals the single call, brute-force nulls, BH q's."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from interlingua.analysis.stats import (
    StatsError,
    StatsWarning,
    WithinGroup,
    benjamini_hochberg,
    correlation,
    correlation_table,
    permutation_indices,
    within_group_correlation,
)

TOL = 1e-12


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(sps.spearmanr(x, y)[0])


def _grouped_data(sizes: list[int], seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"g{i}" for i in range(len(sizes))], sizes)
    offsets = np.repeat(rng.normal(scale=5.0, size=len(sizes)), sizes)  # between-group shifts
    x = rng.normal(size=len(groups)) + offsets
    return x, 0.5 * x + rng.normal(size=len(groups)) + offsets, groups


# --------------------------------------------------------------------------- within groups


def test_within_group_rhos_mean_and_exclusions() -> None:
    x, y, g = _grouped_data([5, 6, 2, 4], seed=1)
    x[g == "g3"] = 1.0  # constant x in g3
    res = within_group_correlation(x, y, g, permutations=200, bootstrap=100)
    assert isinstance(res, WithinGroup)
    rows = {row.group: row for row in res.groups}
    assert [row.group for row in res.groups] == ["g0", "g1", "g2", "g3"]  # order of first appearance
    for name in ("g0", "g1"):
        assert rows[name].included and abs(rows[name].rho - _spearman(x[g == name], y[g == name])) < TOL
        assert rows[name].min_attainable_p == 2 / math.factorial(rows[name].n)
    assert not rows["g2"].included and rows["g2"].reason == "n = 2 < 3" and math.isnan(rows["g2"].rho)
    assert not rows["g3"].included and rows["g3"].reason == "x is constant: rho is undefined"
    assert res.n_groups == 4 and res.n_groups_defined == 2 and res.n == 11
    assert abs(res.mean_rho - (rows["g0"].rho + rows["g1"].rho) / 2) < TOL
    assert "2 of 4 groups excluded" in res.note
    frame = res.to_frame()
    assert list(frame["group"]) == ["g0", "g1", "g2", "g3"] and list(frame["included"]) == [True, True, False, False]
    assert res.to_dict()["groups"][2]["reason"] == "n = 2 < 3"


@pytest.mark.slow
def test_within_group_exact_p_equals_brute_force() -> None:
    x, y, g = _grouped_data([3, 4, 3], seed=2)  # 3! 4! 3! = 864 within-group permutations
    res = within_group_correlation(x, y, g, permutations=1000, bootstrap=0)
    assert res.p_method == "exact" and res.permutations == 864
    assert res.min_attainable_p == 2 / 864
    idx = [np.flatnonzero(g == name) for name in ("g0", "g1", "g2")]
    obs = abs(np.mean([_spearman(x[i], y[i]) for i in idx]))
    hits = 0
    for combo in itertools.product(*(itertools.permutations(i) for i in idx)):
        hits += abs(np.mean([_spearman(x[i], y[list(p)]) for i, p in zip(idx, combo)])) >= obs - TOL
    assert abs(res.p - hits / 864) < TOL


def test_within_group_monte_carlo_equals_documented_stream() -> None:
    x, y, g = _grouped_data([6, 7, 5], seed=3)
    k, seed = 300, 5
    res = within_group_correlation(x, y, g, permutations=k, seed=seed, bootstrap=0)
    assert res.p_method == "monte carlo"
    idx = [np.flatnonzero(g == name) for name in ("g0", "g1", "g2")]
    obs = abs(np.mean([_spearman(x[i], y[i]) for i in idx]))
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[0])
    hits = 0
    for _ in range(k):
        keys = rng.random(len(x))
        perm = np.arange(len(x))
        for i in idx:  # within each group, rows ordered by their keys
            perm[i] = i[np.argsort(keys[i], kind="stable")]
        hits += abs(np.mean([_spearman(x[i], y[perm[i]]) for i in idx])) >= obs - TOL
    assert res.p == (1 + hits) / (1 + k)


def test_stratified_permutations_stay_inside_groups() -> None:
    codes = np.array([0, 1, 0, 2, 1, 0, 2, 2, 1])
    for perm in np.concatenate(list(permutation_indices(9, 40, seed=1, groups=codes, batch=6))):
        assert (codes[perm] == codes).all() and sorted(perm) == list(range(9))


def test_within_group_bootstrap_resamples_groups() -> None:
    x, y, g = _grouped_data([5, 6, 7, 5], seed=4)
    boots, seed = 500, 9
    res = within_group_correlation(x, y, g, permutations=100, bootstrap=boots, seed=seed, level=0.9)
    rhos = np.array([row.rho for row in res.groups])
    draws = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1]).integers(0, 4, size=(boots, 4))
    low, high = np.quantile(rhos[draws].mean(axis=1), [0.05, 0.95])
    assert abs(res.ci_low - low) < TOL and abs(res.ci_high - high) < TOL


def test_within_group_removes_between_group_confound() -> None:
    # groups shifted together: pooled rho is high, within each group y is unrelated noise
    rng = np.random.default_rng(6)
    g = np.repeat(np.arange(6), 8)
    x = g * 10.0 + rng.normal(size=g.size)
    y = g * 10.0 + rng.normal(size=g.size)
    pooled = correlation(x, y, permutations=200, bootstrap=0)
    within = within_group_correlation(x, y, g, permutations=200, bootstrap=0)
    assert pooled.rho > 0.9 and abs(within.mean_rho) < 0.3


def test_within_group_no_defined_group() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = within_group_correlation([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 2.0, 2.0], ["a", "a", "b", "b"])
    assert math.isnan(res.mean_rho) and math.isnan(res.p) and res.n_groups_defined == 0
    assert "no group has a defined rho" in res.note


def test_within_group_bad_groups_raise() -> None:
    with pytest.raises(StatsError, match="one label per row"):
        within_group_correlation([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], ["a", "b"])
    with pytest.raises(StatsError, match="missing labels at positions \\[1\\]"):
        within_group_correlation([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], ["a", None, "a"])


# --------------------------------------------------------------------------- tables


def _frame(n: int = 24, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    data = {f"c{i}": 0.4 * i * z + rng.normal(size=n) for i in range(4)}
    data |= {f"p{j}": (j + 1) * 0.3 * z + rng.normal(size=n) for j in range(3)}
    data["model"] = np.repeat(["m0", "m1", "m2", "m3"], n // 4)
    return pd.DataFrame(data)


OPTS = {"permutations": 300, "seed": 4, "bootstrap": 150, "level": 0.9}


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_each_cell_equals_the_single_call(method: str) -> None:
    frame = _frame()
    frame.loc[[3, 10], "c1"] = np.nan
    frame.loc[[10, 15], "p2"] = np.nan
    frame["c3"] = 2.0  # constant column
    columns, predictors = ["c0", "c1", "c2", "c3"], ["p0", "p1", "p2"]
    table = correlation_table(frame, columns, predictors, method=method, nan_policy="omit", **OPTS)
    assert len(table) == 12 and list(table[["column", "predictor"]].itertuples(index=False, name=None)) == [
        (c, p) for c in columns for p in predictors
    ]
    for row in table.itertuples(index=False):
        single = correlation(
            frame[row.predictor],
            frame[row.column],
            method=method,
            nan_policy="omit",
            labels=(row.predictor, row.column),
            **OPTS,
        )
        assert row.n == single.n and row.n_dropped == single.n_dropped and row.p_method == single.p_method
        assert row.note == single.note and row.min_attainable_p == single.min_attainable_p
        if math.isnan(single.rho):
            assert math.isnan(row.rho) and math.isnan(row.p) and math.isnan(row.q)
            continue
        assert abs(row.rho - single.rho) < TOL and row.p == single.p
        assert abs(row.ci_low - single.ci_low) < TOL and abs(row.ci_high - single.ci_high) < TOL
    c3 = table[table["column"] == "c3"]
    assert c3["note"].str.endswith("c3 is constant: rho is undefined").all()
    assert table.loc[(table["column"] == "c1") & (table["predictor"] == "p2"), "n_dropped"].item() == 3


def test_q_is_benjamini_hochberg_over_the_table() -> None:
    table = correlation_table(_frame(), ["c0", "c1", "c2", "c3"], ["p0", "p1", "p2"], **OPTS)
    assert np.array_equal(table["q"].to_numpy(), benjamini_hochberg(table["p"].to_numpy()))
    assert (table["q"] >= table["p"]).all()


def test_grouped_table_cell_equals_within_group_call() -> None:
    frame = _frame(n=32)
    table = correlation_table(frame, ["c0", "c2"], ["p0", "p1"], groups="model", **OPTS)
    assert "n_groups" in table.columns
    for row in table.itertuples(index=False):
        single = within_group_correlation(
            frame[row.predictor], frame[row.column], frame["model"], labels=(row.predictor, row.column), **OPTS
        )
        assert abs(row.rho - single.mean_rho) < TOL and row.p == single.p and row.n_groups == single.n_groups_defined
        assert abs(row.ci_low - single.ci_low) < TOL and row.note == single.note


def test_table_warns_once_for_unreachable_cells() -> None:
    frame = _frame(n=4).drop(columns="model")
    with pytest.warns(StatsWarning, match=r"6 of 6 cells cannot reach p <= 0\.05") as record:
        table = correlation_table(frame, ["c0", "c1"], ["p0", "p1", "p2"], bootstrap=0)
    assert len([w for w in record if issubclass(w.category, StatsWarning)]) == 1
    assert (~table["reachable"]).all() and (table["min_attainable_p"] == 2 / 24).all()


def test_table_single_names_and_small_cells() -> None:
    frame = _frame()
    frame.loc[2:, "c0"] = np.nan  # two rows left
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = correlation_table(frame, "c0", "p0", nan_policy="omit", **OPTS)
    assert len(table) == 1 and math.isnan(table["rho"].item())
    assert "n = 2: rho needs at least 3 pairs" in table["note"].item()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"columns": ["c0", "nope"], "predictors": ["p0"]}, r"columns \['nope'\] not in the frame"),
        ({"columns": ["model"], "predictors": ["p0"]}, "not numeric"),
        ({"columns": [], "predictors": ["p0"]}, "columns is empty"),
        ({"columns": ["c0"], "predictors": ["p0"], "groups": "team"}, "groups 'team' is not a column"),
    ],
)
def test_table_bad_input_raises(kwargs: dict, match: str) -> None:
    with pytest.raises(StatsError, match=match):
        correlation_table(_frame(), **kwargs, permutations=10, bootstrap=0)


def test_table_nan_raises_by_default() -> None:
    frame = _frame()
    frame.loc[[5], "p1"] = np.nan
    with pytest.raises(StatsError, match=r"column 'p1' has NaN at rows \[5\]"):
        correlation_table(frame, ["c0"], ["p1"], permutations=10, bootstrap=0)
    with pytest.raises(StatsError, match="DataFrame"):
        correlation_table(frame.to_numpy(), ["c0"], ["p1"])  # type: ignore[arg-type]
