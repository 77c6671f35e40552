"""Degeneracy, trends and contrasts on planted result tables (no models).

The planted rows carry a calibrated score (what trends and contrasts read by default) and a raw matched
value in the reverse order (1 - calibrated), so a table that read the wrong column would fail.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from interlingua.core.schema import result_table
from interlingua.data.models.spec import ModelSpec
from interlingua.predictors.sweeps import CONSTANT, contrast_table, degeneracy_table, trend_table


def _models(sweep: str, values: list[float], var: str = "alpha") -> dict[str, ModelSpec]:
    return {
        f"{sweep}-{v}": ModelSpec(path=f"/m/{sweep}-{v}", name=f"{sweep}-{v}", sweep=sweep, sweep_values={var: v})
        for v in values
    }


def _rows(models: dict[str, ModelSpec], matched: list[float], langs=("eng_Latn", "deu_Latn")) -> list[dict]:
    rows = []
    for (name, _), value in zip(models.items(), matched):
        for layer, v in ((1, value / 2), (2, value)):  # layer 2 of 2 is the last
            rows.append(
                {
                    "pair": f"{name}:{langs[0]}|{name}:{langs[1]}",
                    "kind": "within_model",
                    "model_a": name,
                    "lang_a": langs[0],
                    "model_b": name,
                    "lang_b": langs[1],
                    "pooling": "sgpt",
                    "measure": "cka_linear_biased",
                    "estimator": "biased",
                    "layer_a": layer,
                    "layer_b": layer,
                    "depth_a": layer / 2,
                    "depth_b": layer / 2,
                    "calibrated": v,
                    "matched": 1.0 - v,
                }
            )
    return rows


def test_planted_constant_sweep_is_a_measurement_of_a_constant():
    models = _models("up", [0.25, 0.5, 0.75])
    table = result_table(_rows(models, [0.1064452, 0.1064452, 0.1064452]))
    out = degeneracy_table(table, models, fingerprints={m: "same" for m in models})
    assert len(out) == 1
    row = out.iloc[0]
    assert row["verdict"] == CONSTANT and row["n_distinct"] == 1 and row["n_models"] == 3 and row["degenerate"]
    assert "the same fingerprint" in row["explanation"]
    assert json.loads(row["identical"]) == [list(models)]


def test_partly_degenerate_and_clean_sweeps():
    models = _models("s", [0.1, 0.5, 0.9, 1.0])
    table = result_table(_rows(models, [0.2, 0.3, 0.3, 0.4]))
    audit = pd.DataFrame(
        {"model": list(models), "weights_group": ["W1", "W2", "W3", "W4"], "tokenizer_group": ["T1", "T1", "T1", "T1"]}
    )
    row = degeneracy_table(table, models, audit=audit).iloc[0]
    assert row["n_distinct"] == 3 and row["degenerate"] and row["verdict"].startswith("partly degenerate")
    assert "W2/T1, W3/T1" in row["explanation"]  # the audit says they differ: a coincidence worth a look
    clean = result_table(_rows(models, [0.2, 0.3, 0.35, 0.4]))
    row = degeneracy_table(clean, models).iloc[0]
    assert row["verdict"] == "ok" and not row["degenerate"] and row["n_distinct"] == 4


def test_trend_is_the_mean_of_within_group_spearman():
    a = _models("sw", [0.1, 0.25, 0.5, 0.75])
    rows = _rows(a, [0.1, 0.3, 0.2, 0.4]) + _rows(a, [0.4, 0.3, 0.2, 0.1], langs=("eng_Latn", "spa_Latn"))
    out = trend_table(result_table(rows), a)
    row = out.iloc[0]
    rho_deu = stats.spearmanr([0.1, 0.25, 0.5, 0.75], [0.1, 0.3, 0.2, 0.4]).statistic
    assert row["groups"] == 2 and row["n_per_group"] == 4
    assert row["mean_within_rho"] == pytest.approx((rho_deu + -1.0) / 2, abs=1e-12)
    assert row["smallest_p"] <= 2 / 24  # two groups of 4 can do better than one
    assert json.loads(row["argmax"]) == {"eng_Latn|spa_Latn": 0.1, "eng_Latn|deu_Latn": 0.75}


def test_trend_and_contrast_read_matched_when_asked():
    a = _models("sw", [0.1, 0.25, 0.5, 0.75])
    table = result_table(_rows(a, [0.1, 0.2, 0.3, 0.4]))
    assert trend_table(table, a).iloc[0]["mean_within_rho"] == pytest.approx(1.0)
    raw = trend_table(table, a, value="matched").iloc[0]
    assert raw["mean_within_rho"] == pytest.approx(-1.0) and raw["value"] == "matched"
    with pytest.raises(ValueError, match="value must be"):
        trend_table(table, a, value="tau")


def test_contrast_matches_scipy_on_shared_cells():
    a = {
        f"a-{v}": ModelSpec(path=f"/a{v}", name=f"a-{v}", sweep="a", sweep_values={"alpha": v}) for v in (1, 2, 3, 4, 5)
    }
    b = {
        f"b-{v}": ModelSpec(path=f"/b{v}", name=f"b-{v}", sweep="b", sweep_values={"alpha": v}) for v in (2, 3, 4, 5, 6)
    }
    va, vb = [0.31, 0.35, 0.42, 0.40, 0.52], [0.30, 0.33, 0.41, 0.36, 0.49]
    table = result_table(_rows(a, va) + _rows(b, vb))
    row = contrast_table(table, {**a, **b}, [("a", "b")]).iloc[0]
    xa, xb = np.array(va[1:]), np.array(vb[:4])  # shared alphas 2..5
    assert row["n"] == 4
    assert row["mean_diff"] == pytest.approx(float(np.mean(xa - xb)), abs=1e-15)
    assert row["t_p"] == pytest.approx(stats.ttest_rel(xa, xb).pvalue, rel=1e-12)
    assert row["wilcoxon_p"] == pytest.approx(stats.wilcoxon(xa, xb).pvalue, rel=1e-12)
    assert row["wilcoxon_min_p"] == pytest.approx(2 / 2**4)
    assert row["value"] == "calibrated"
    raw = contrast_table(table, {**a, **b}, [("a", "b")], value="matched").iloc[0]
    assert raw["mean_diff"] == pytest.approx(-float(np.mean(xa - xb)), abs=1e-12)
