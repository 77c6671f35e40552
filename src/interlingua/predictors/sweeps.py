"""Sweeps and arms: degeneracy along a sweep, trends within groups, paired contrasts of arms.

A *sweep* is a set of models that differ (by their labels) in one or more
settings, e.g. a tokenwise merge at several ``alpha`` and ``top_k`` (models
carry ``sweep`` and ``sweep_values``). Three questions are asked of the
results, each at every model's last layer and per within-model language
pair, pooling, measure and estimator:

* **Degeneracy** (:func:`degeneracy_table`): how many distinct matched values
  the sweep gives. Bit-identical values for models said to differ are "a
  measurement of a constant": the models compute the same function on this
  text. The audit's identity groups (same effective weights, same tokenizer
  files) name the reason when the run audited its models; otherwise models
  with the same fingerprint (same files) are named.
Trends and contrasts read the calibrated score by default (``value="calibrated"``; the run's
``inference.score: raw`` makes them read ``matched``), so arms and settings whose pairs differ in
width, depth or n are compared above their own chance level. Degeneracy always reads ``matched``:
it asks whether the models compute the same function, and distinct values can share a calibrated 0.

* **Trends** (:func:`trend_table`): Spearman rho of the value against
  each swept variable *inside* each group of cells that share everything else
  (language pair and the other variables), and the mean of those within-group
  rhos: the repeated-measures-safe summary. The cells of one group are
  perturbations of one object, not independent samples, so a pooled p over
  all cells would overstate the evidence; each group's smallest attainable p
  is printed instead.
* **Contrasts** (:func:`contrast_table`): arm a minus arm b over the cells both
  have (same sweep values, same language pair): Wilcoxon signed-rank and paired
  t, n, the mean difference and its interval (:func:`interlingua.analysis.stats.paired_contrast`).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from interlingua.core import schema
from interlingua.core.schema import result_table
from interlingua.data.models.spec import ModelSpec
from interlingua.predictors.columns import CONTRAST_COLUMNS, SWEEP_COLUMNS, TREND_COLUMNS

__all__ = [
    "contrast_table",
    "degeneracy_table",
    "within_model_last_rows",
    "trend_table",
    "value_column",
    "CONSTANT",
    "VALUES",
]

CONSTANT = "a measurement of a constant"
_CELL = ["lang_a", "lang_b", "pooling", "measure", "estimator"]


VALUES = ("calibrated", "matched")


def value_column(score: str) -> str:
    """The results column the questions read for ``inference.score``: calibrated, or matched for raw."""
    return "matched" if score == "raw" else "calibrated"


def _check_value(value: str) -> str:
    if value not in VALUES:
        raise ValueError(f"value must be one of {VALUES}; got {value!r}")
    return value


def within_model_last_rows(results: pd.DataFrame, value: str = "matched") -> pd.DataFrame:
    """Within-model rows at the model's last layer (:func:`schema.last_layer_rows`), with a ``value``."""
    if results.empty:
        return results
    last = schema.last_layer_rows(results[results["kind"] == "within_model"])
    return last[last[value].notna()] if not last.empty else last


def _members(models: Mapping[str, ModelSpec]) -> dict[str, list[str]]:
    """sweep name -> its models, in config order."""
    out: dict[str, list[str]] = {}
    for name, m in models.items():
        if m.sweep:
            out.setdefault(m.sweep, []).append(name)
    return out


def _explain(names: Sequence[str], audit: pd.DataFrame | None, fingerprints: Mapping[str, str]) -> str:
    """Why models give one value: shared identity groups (audit) or shared fingerprints."""
    if audit is not None and not audit.empty:
        rows = audit.set_index("model").reindex(list(names))
        if rows["weights_group"].notna().all():
            groups = sorted({(str(r.weights_group), str(r.tokenizer_group)) for r in rows.itertuples()})
            if len(groups) == 1:
                w, t = groups[0]
                return f"all are weights group {w} with tokenizer group {t} in audit.csv: the same model"
            return "audit.csv: " + ", ".join(f"{w}/{t}" for w, t in groups) + " (weights/tokenizer groups)"
    prints = {fingerprints.get(n, "") for n in names}
    if len(prints) == 1 and "" not in prints:
        return "all have the same fingerprint (the same files)"
    return "the files differ; add an `audit:` section to see whether the effective weights do"


def degeneracy_table(
    results: pd.DataFrame,
    models: Mapping[str, ModelSpec],
    *,
    audit: pd.DataFrame | None = None,
    fingerprints: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per sweep x cell (language pair, pooling, measure, estimator): distinct values and the verdict."""
    rows: list[dict[str, Any]] = []
    last = within_model_last_rows(results)
    fingerprints = fingerprints or {}
    for sweep, names in _members(models).items():
        if len(names) < 2:
            continue
        sub = last[last["model_a"].isin(names) & (last["model_a"] == last["model_b"])]
        for cell, group in sub.groupby(_CELL, sort=False):
            by_value: dict[float, list[str]] = {}
            for r in group.itertuples():
                by_value.setdefault(float(r.matched), []).append(str(r.model_a))
            n_models, n_distinct = len(group), len(by_value)
            shared = [v for v in by_value.values() if len(v) > 1]
            if n_distinct == 1 and n_models > 1:
                verdict = CONSTANT
            elif shared:
                verdict = f"partly degenerate: {n_distinct} distinct values for {n_models} models"
            else:
                verdict = "ok"
            explanation = "; ".join(_explain(v, audit, fingerprints) + f" ({', '.join(v)})" for v in shared)
            variables = sorted({k for n in names for k in models[n].sweep_values})
            rows.append(
                {
                    "sweep": sweep,
                    "variables": ",".join(variables),
                    **dict(zip(_CELL, cell)),
                    "n_models": n_models,
                    "n_distinct": n_distinct,
                    "degenerate": bool(shared),
                    "verdict": verdict,
                    "min": float(group["matched"].min()),
                    "max": float(group["matched"].max()),
                    "identical": json.dumps([v for v in shared]),
                    "explanation": explanation,
                }
            )
    return result_table(rows, SWEEP_COLUMNS)


def trend_table(results: pd.DataFrame, models: Mapping[str, ModelSpec], *, value: str = "calibrated") -> pd.DataFrame:
    """Within-group Spearman rho of the last-layer ``value`` (calibrated or matched) against each swept variable."""
    from interlingua.analysis.stats import within_group_correlation

    _check_value(value)
    rows: list[dict[str, Any]] = []
    last = within_model_last_rows(results, value)
    for sweep, names in _members(models).items():
        sub = last[last["model_a"].isin(names) & (last["model_a"] == last["model_b"])].copy()
        if sub.empty:
            continue
        variables = sorted({k for n in names for k in models[n].sweep_values})
        for var in variables:
            sub[var] = [models[m].sweep_values.get(var, math.nan) for m in sub["model_a"]]
        for var in variables:
            others = [v for v in variables if v != var]
            for cell, group in sub.dropna(subset=[var]).groupby(["pooling", "measure", "estimator"], sort=False):
                keys = group[["lang_a", "lang_b", *others]].astype(str).agg("|".join, axis=1)
                if group[var].nunique() < 3:
                    continue  # fewer than 3 settings: no rank correlation inside a group
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # the row itself says when a level is unreachable
                    w = within_group_correlation(
                        group[var].to_numpy(float), group[value].to_numpy(float), keys.to_numpy()
                    )
                per = w.to_frame()
                defined = per[per["included"]]
                rows.append(
                    {
                        "sweep": sweep,
                        "variable": var,
                        "pooling": cell[0],
                        "measure": cell[1],
                        "estimator": cell[2],
                        "value": value,
                        "groups": int(w.n_groups),
                        "groups_defined": int(w.n_groups_defined),
                        "mean_within_rho": float(w.mean_rho),
                        "min_rho": float(defined["rho"].min()) if len(defined) else math.nan,
                        "max_rho": float(defined["rho"].max()) if len(defined) else math.nan,
                        "n_per_group": int(per["n"].max()) if len(per) else 0,
                        "p": float(w.p),
                        "p_method": w.p_method,
                        "smallest_p": float(w.min_attainable_p),
                        "argmax": json.dumps(_argmax(group, var, keys, value)),
                        "detail": per.to_json(orient="records"),
                        "note": w.note,
                    }
                )
    return result_table(rows, TREND_COLUMNS)


def _argmax(group: pd.DataFrame, var: str, keys: pd.Series, value: str = "matched") -> dict[str, float]:
    """The swept value with the largest ``value``, per group (interior optima show here, not in rho)."""
    out = {}
    for key, g in group.groupby(keys, sort=False):
        scored = g[value].dropna()
        out[str(key)] = float(g.loc[scored.idxmax(), var]) if not scored.empty else float("nan")
    return out


def _arm_rows(last: pd.DataFrame, arm: str, models: Mapping[str, ModelSpec]) -> pd.DataFrame:
    names = [n for n, m in models.items() if m.sweep == arm] or ([arm] if arm in models else [])
    sub = last[last["model_a"].isin(names) & (last["model_a"] == last["model_b"])].copy()
    sub["cell"] = [
        json.dumps(models[m].sweep_values, sort_keys=True) + f"|{a}|{b}"
        for m, a, b in zip(sub["model_a"], sub["lang_a"], sub["lang_b"])
    ]
    return sub


def contrast_table(
    results: pd.DataFrame,
    models: Mapping[str, ModelSpec],
    contrasts: Sequence[tuple[str, str]],
    *,
    level: float = 0.95,
    value: str = "calibrated",
) -> pd.DataFrame:
    """Arm a - arm b of ``value`` (calibrated or matched) over shared cells, per pooling / measure / estimator."""
    from interlingua.analysis.stats import paired_contrast
    from interlingua.core.errors import InterlinguaError

    _check_value(value)
    last = within_model_last_rows(results, value)
    rows: list[dict[str, Any]] = []
    for a, b in contrasts:
        ra, rb = _arm_rows(last, a, models), _arm_rows(last, b, models)
        for cell, ga in ra.groupby(["pooling", "measure", "estimator"], sort=False):
            gb = rb[(rb["pooling"] == cell[0]) & (rb["measure"] == cell[1]) & (rb["estimator"] == cell[2])]
            merged = ga.merge(gb, on="cell", suffixes=("_a", "_b"))
            row: dict[str, Any] = {
                "a": a,
                "b": b,
                "pooling": cell[0],
                "measure": cell[1],
                "estimator": cell[2],
                "value": value,
                "n": int(len(merged)),
                "cells": json.dumps(sorted(merged["cell"])),
            }
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    c = paired_contrast(
                        merged[f"{value}_a"].to_numpy(float),
                        merged[f"{value}_b"].to_numpy(float),
                        level=level,
                        labels=(a, b),
                    )
            except (InterlinguaError, ValueError) as exc:
                row["note"] = str(exc)
            else:
                row.update(
                    mean_a=c.mean_a,
                    mean_b=c.mean_b,
                    mean_diff=c.mean_diff,
                    ci_low=c.ci_low,
                    ci_high=c.ci_high,
                    level=c.level,
                    t=c.t,
                    t_p=c.t_p,
                    wilcoxon_stat=c.wilcoxon_stat,
                    wilcoxon_p=c.wilcoxon_p,
                    wilcoxon_method=c.wilcoxon_method,
                    n_nonzero=c.n_nonzero,
                    wilcoxon_min_p=c.wilcoxon_min_p,
                    note=c.note,
                )
            rows.append(row)
    return result_table(rows, CONTRAST_COLUMNS)


def sweep_values_frame(models: Mapping[str, ModelSpec]) -> pd.DataFrame:
    """model, sweep and each swept value: the key for joining results to sweep settings."""
    rows = [{"model": n, "sweep": m.sweep, **m.sweep_values} for n, m in models.items() if m.sweep]
    return pd.DataFrame(rows)
