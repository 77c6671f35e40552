"""What predicts alignment: last-layer results against model quality and typology, with honest inference.

One frame row per last-layer pair x pooling x measure (the pairs of the
chosen kinds), with its predictors:

* ``nll``: the mean of the two sides' NLL (each model on the language it
  reads, from ``quality.csv``); ``nll_gap``: their absolute difference;
* ``length_control``: what the two sides' sentence lengths alone give;
* URIEL distances between the two sides' languages (``syntactic``,
  ``genetic``, ``geographic``, ``phonological``, ``inventory``, ``featural``;
  0 for the same language), from :mod:`interlingua.analysis.typology`.

:func:`predictor_table` correlates each result column with each predictor per
pooling and measure through :func:`interlingua.analysis.stats.correlation_table`
(Spearman or Pearson, a seeded permutation null, a bootstrap interval, the
smallest p the n can attain; by default of the calibrated score, whose chance
level is 0 for every pair, so a correlation with a predictor that covaries with
width or n is not a correlation with chance) and takes Benjamini-Hochberg q across the whole
table. The rows nest in models and languages: with few pairs the table says
so (``reachable``, ``note``) rather than reporting a p it cannot have.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from interlingua.core.schema import last_layer_rows

__all__ = ["KNOWN_PREDICTORS", "RESULT_PREDICTOR_COLUMNS", "TYPOLOGY_PREDICTORS", "predictor_frame", "predictor_table"]

TYPOLOGY_PREDICTORS = ("syntactic", "genetic", "geographic", "phonological", "inventory", "featural")
KNOWN_PREDICTORS = frozenset({"nll", "nll_gap", "length_control", *TYPOLOGY_PREDICTORS})
RESULT_PREDICTOR_COLUMNS = [
    "calibrated",
    "matched",
    "shuffled",
    "matched_length_removed",
    "length_control",
    "p_value",
    "tau",
]


def _last_rows(results: pd.DataFrame, kinds: Sequence[str]) -> pd.DataFrame:
    last = last_layer_rows(results[results["kind"].isin(list(kinds))])
    return last.reset_index(drop=True) if not last.empty else last


def predictor_frame(
    results: pd.DataFrame,
    predictors: Sequence[str],
    *,
    quality: pd.DataFrame | None = None,
    kinds: Sequence[str] = ("within_model", "cross_model"),
) -> pd.DataFrame:
    """Last-layer rows of ``results`` with one column per predictor (NaN where a value is unknown)."""
    frame = _last_rows(results, kinds).copy()
    nll: dict[tuple[str, str], float] = {}
    if quality is not None and not quality.empty:
        nll = {(str(r.model), str(r.language)): float(r.nll) for r in quality.itertuples()}
    a = np.array([nll.get((m, lang), math.nan) for m, lang in zip(frame["model_a"], frame["lang_a"])], dtype=float)
    b = np.array([nll.get((m, lang), math.nan) for m, lang in zip(frame["model_b"], frame["lang_b"])], dtype=float)
    for name in predictors:
        if name == "nll":
            frame[name] = (a + b) / 2
        elif name == "nll_gap":
            frame[name] = np.abs(a - b)
        elif name == "length_control":
            continue  # already a result column
        elif name in TYPOLOGY_PREDICTORS:
            from interlingua.analysis.typology import uriel_distance

            cache: dict[tuple[str, str], float] = {}
            values = []
            for la, lb in zip(frame["lang_a"], frame["lang_b"]):
                if (la, lb) not in cache:
                    cache[(la, lb)] = 0.0 if la == lb else float(uriel_distance(la, lb, kind=name))
                values.append(cache[(la, lb)])
            frame[name] = values
        else:
            raise ValueError(f"unknown predictor {name!r}; choose from {sorted(KNOWN_PREDICTORS)}")
    return frame


def predictor_table(
    results: pd.DataFrame,
    *,
    columns: Sequence[str],
    predictors: Sequence[str],
    quality: pd.DataFrame | None = None,
    kinds: Sequence[str] = ("within_model", "cross_model"),
    method: str = "spearman",
    permutations: int = 20000,
    bootstrap: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(correlation rows with ``predictors.columns.PREDICTOR_COLUMNS``, the frame they were computed on)."""
    from interlingua.analysis.stats import benjamini_hochberg, correlation_table
    from interlingua.core.schema import result_table
    from interlingua.predictors.columns import PREDICTOR_COLUMNS

    frame = predictor_frame(results, predictors, quality=quality, kinds=kinds)
    parts: list[pd.DataFrame] = []
    for (pooling, measure), g in frame.groupby(["pooling", "measure"], sort=False):
        if len(g) < 3:
            parts.append(
                pd.DataFrame(
                    [
                        {
                            "pooling": pooling,
                            "measure": measure,
                            "column": c,
                            "predictor": x,
                            "n": len(g),
                            "note": f"{len(g)} pairs: a correlation needs at least 3",
                        }
                        for c in columns
                        for x in predictors
                    ]
                )
            )
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # each row says itself when its level is unreachable
            t = correlation_table(
                g.reset_index(drop=True),
                list(columns),
                list(predictors),
                method=method,  # type: ignore[arg-type]
                permutations=permutations,
                seed=seed,
                bootstrap=bootstrap,
                level=level,
                nan_policy="omit",
            )
        t.insert(0, "measure", measure)
        t.insert(0, "pooling", pooling)
        parts.append(t)
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not table.empty:
        table["q"] = benjamini_hochberg(table["p"].to_numpy(dtype=float)) if "p" in table else math.nan
        table["kinds"] = ",".join(kinds)
    keep = [c for c in table.columns if c in {col.name for col in PREDICTOR_COLUMNS}]
    rows: list[dict[str, Any]] = table[keep].to_dict("records") if not table.empty else []
    # a group too small to correlate has no count of dropped pairs or permutations: leave them missing
    ints = {col.name for col in PREDICTOR_COLUMNS if col.dtype == "int"}
    rows = [{k: v for k, v in r.items() if not (k in ints and isinstance(v, float) and math.isnan(v))} for r in rows]
    return result_table(rows, PREDICTOR_COLUMNS), frame
