"""The declared schema of ``results.csv`` / ``results.parquet``: one row per comparison value.

The code that writes rows (:mod:`interlingua.compare`) and the code that reads
them (:mod:`interlingua.report`) both use :data:`RESULT_COLUMNS`; a row with an
undeclared column is a bug and fails loudly, and every table has every declared
column in this order with this dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

__all__ = ["Column", "RESULT_COLUMNS", "result_table", "column_names"]


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # "str" | "int" | "float" | "bool"
    doc: str


RESULT_COLUMNS: tuple[Column, ...] = (
    Column("pair", "str", "side A label | side B label (model:language)"),
    Column("kind", "str", "within_model (cross-lingual, one model) or cross_model"),
    Column("model_a", "str", "side A's model name"),
    Column("lang_a", "str", "side A's language (FLORES+ code)"),
    Column("model_b", "str", "side B's model name"),
    Column("lang_b", "str", "side B's language"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id (see `interlingua measures`)"),
    Column("estimator", "str", "the estimator that produced the value (e.g. biased / debiased HSIC)"),
    Column("layer_a", "int", "hidden-state index of side A (0 = embeddings)"),
    Column("layer_b", "int", "hidden-state index of side B"),
    Column("depth_a", "float", "layer_a / number of blocks of A"),
    Column("depth_b", "float", "layer_b / number of blocks of B"),
    Column("grid", "bool", "row of the full layer x layer grid (cross-model pairs)"),
    Column("grid_max", "bool", "the grid's maximum cell"),
    Column("p_grid_max", "float", "permutation p of the grid maximum against the max null"),
    Column("matched", "float", "the measure on aligned sentences"),
    Column("shuffled", "float", "the measure with side B's rows in the pair's one fixed permutation"),
    Column("length_control", "float", "the measure between the two sides' z-scored length features "
           "(token count, character count): what sentence length alone gives"),
    Column("n", "int", "aligned sentences"),
    Column("control_seed", "int", "seed of the pair's shuffled permutation (controls.json)"),
    Column("p_value", "float", "permutation-test p, (1 + #null >= observed) / (K + 1)"),
    Column("n_permutations", "int", "null draws K of the test (0: none)"),
    Column("null_q95", "float", "95% quantile of the permutation null"),
    Column("jackknife_low", "float", "delete-a-group jackknife interval, lower bound"),
    Column("jackknife_high", "float", "jackknife interval, upper bound"),
    Column("jackknife_se", "float", "jackknife standard error"),
    Column("bootstrap_low", "float", "percentile bootstrap interval, lower bound"),
    Column("bootstrap_high", "float", "percentile bootstrap interval, upper bound"),
    Column("top1_share_a", "float", "share of side A's variance in its largest-variance coordinate"),
    Column("top3_share_a", "float", "share of side A's variance in its three largest-variance coordinates"),
    Column("top1_share_b", "float", "the same for side B"),
    Column("top3_share_b", "float", "the same for side B"),
    Column("special_share_a", "float", "share of side A's centred variance carried by pooled special tokens "
           "(0 when they are excluded)"),
    Column("special_share_b", "float", "the same for side B"),
    Column("note", "str", "why a value is missing (NaN), empty otherwise"),
)

_BY_NAME = {c.name: c for c in RESULT_COLUMNS}
_MISSING: dict[str, Any] = {"str": "", "int": -1, "float": np.nan, "bool": False}
_PANDAS: dict[str, str] = {"str": "object", "int": "int64", "float": "float64", "bool": "bool"}


def column_names() -> list[str]:
    return [c.name for c in RESULT_COLUMNS]


def result_table(rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows -> a DataFrame with every declared column, in order, with its dtype.

    Raises ``KeyError`` for an undeclared column (a programming error). Missing
    values: NaN for floats, -1 for ints (e.g. ``n_permutations`` of a row
    without a test), False for flags, "" for text.
    """
    rows = list(rows)
    for r in rows:
        extra = set(r) - set(_BY_NAME)
        if extra:
            raise KeyError(f"result row has undeclared columns {sorted(extra)}; declare them in schema.py")
    data = {
        c.name: pd.Series([r.get(c.name, _MISSING[c.dtype]) for r in rows], dtype=_PANDAS[c.dtype])
        for c in RESULT_COLUMNS
    }
    frame = pd.DataFrame(data)
    for c in RESULT_COLUMNS:  # None in a text column reads back as ""
        if c.dtype == "str":
            frame[c.name] = frame[c.name].fillna("").astype(str)
    return frame
