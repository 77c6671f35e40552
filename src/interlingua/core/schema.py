"""Declared table schemas: :class:`Column`, the tables built from them, and ``results.csv``'s columns.

Every table a run writes is declared column by column, each with its glossary text: ``results.csv`` /
``results.parquet`` here (:data:`RESULT_COLUMNS`, one row per comparison value: written by
:mod:`interlingua.comparison`, read by the pipeline, the report frame and several capabilities), every other
table in its capability's own ``columns.py`` (e.g. :data:`interlingua.maps.columns.MAP_COLUMNS`), listed by
:attr:`interlingua.contract.capability.Capability.columns`. A row with an undeclared column is a bug and
fails loudly, and every table has every declared column in this order with this dtype: pass a
capability's schema as ``result_table(rows, MAP_COLUMNS)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "Column",
    "RESULT_COLUMNS",
    "result_table",
    "column_names",
    "last_layer_rows",
    "NOTE_SEP",
    "join_notes",
    "split_notes",
]

#: between the notes of one ``note`` cell (a note may itself contain "; ")
NOTE_SEP = " | "


def join_notes(notes: Iterable[str]) -> str:
    """One ``note`` cell from its notes, in order."""
    return NOTE_SEP.join(n for n in notes if n)


def split_notes(note: str) -> list[str]:
    """The notes of one ``note`` cell."""
    return [p.strip() for p in str(note).split(NOTE_SEP) if p.strip()]


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
    Column(
        "tau_grid_max",
        "float",
        "critical value of the grid maximum: the (1 - alpha) order statistic of the maxima of the permuted grids "
        "(one permutation of B's rows for every layer), the observed maximum included",
    ),
    Column("calibrated_grid_max", "float", "the grid maximum calibrated against tau_grid_max (as `calibrated`)"),
    Column("grid_mean", "float", "mean of the grid's defined cells (on the grid maximum's row)"),
    Column("p_grid_mean", "float", "permutation p of grid_mean against the means of the permuted grids"),
    Column("tau_grid_mean", "float", "critical value of grid_mean from the means of the permuted grids"),
    Column("calibrated_grid_mean", "float", "grid_mean calibrated against tau_grid_mean"),
    Column(
        "p_best_b",
        "float",
        "on the cell that is layer_a's best match in model B: permutation p of that row maximum against the row "
        "maxima of the permuted grids (the search over B's layers paid for)",
    ),
    Column("tau_best_b", "float", "critical value of layer_a's best match in B"),
    Column("calibrated_best_b", "float", "layer_a's best match in B, calibrated against tau_best_b"),
    Column("p_best_a", "float", "on the cell that is layer_b's best match in model A: as p_best_b, the other way"),
    Column("tau_best_a", "float", "critical value of layer_b's best match in A"),
    Column("calibrated_best_a", "float", "layer_b's best match in A, calibrated against tau_best_a"),
    Column("matched", "float", "the measure on aligned sentences"),
    Column("shuffled", "float", "the measure with side B's rows in the pair's one fixed permutation"),
    Column(
        "length_control",
        "float",
        "the measure between the two sides' z-scored length features "
        "(token count, character count): what sentence length alone gives",
    ),
    Column(
        "matched_length_removed",
        "float",
        "the measure on aligned sentences after regressing each side's "
        "length features out of its representation: what remains beyond length",
    ),
    Column("n", "int", "aligned sentences"),
    Column("control_seed", "int", "seed of the pair's shuffled permutation (controls.json)"),
    Column("p_value", "float", "permutation-test p, (1 + #null >= observed) / (K + 1)"),
    Column("n_permutations", "int", "null draws K of the test (0: none, or the analytic null)"),
    Column("p_method", "str", "monte carlo (K draws) or moments (analytic, biased linear CKA); empty: no test"),
    Column("null_q95", "float", "95% quantile of the permutation null"),
    Column(
        "tau",
        "float",
        "critical value: the (1 - alpha) order statistic of the permutation null with the observed value included "
        "(alpha: inference.alpha, in run.json; the Pearson III quantile when p_method is moments); grid cells: "
        "each cell's own null, no correction for the search",
    ),
    Column(
        "calibrated",
        "float",
        "calibrated score: (matched - tau) / (s_max - tau) clipped to [0, 1] for a measure bounded above by s_max, "
        "max(matched - tau, 0) for an unbounded one (debiased CKA, Procrustes); 0 = not above chance at level alpha; "
        "comparable across widths, depths and n. NaN: no null (see note)",
    ),
    Column("jackknife_low", "float", "delete-a-group jackknife interval, lower bound"),
    Column("jackknife_high", "float", "jackknife interval, upper bound"),
    Column("jackknife_se", "float", "jackknife standard error"),
    Column("bootstrap_low", "float", "bootstrap interval (percentile; recentred for the CCA family), lower bound"),
    Column("bootstrap_high", "float", "bootstrap interval (percentile; recentred for the CCA family), upper bound"),
    Column("top1_share_a", "float", "share of side A's variance in its largest-variance coordinate"),
    Column("top3_share_a", "float", "share of side A's variance in its three largest-variance coordinates"),
    Column("top1_share_b", "float", "the same for side B"),
    Column("top3_share_b", "float", "the same for side B"),
    Column(
        "special_share_a",
        "float",
        "share of side A's centred variance carried by pooled special tokens (0 when they are excluded)",
    ),
    Column("special_share_b", "float", "the same for side B"),
    Column(
        "note",
        "str",
        "why a value is missing (NaN), or what the measure adjusted (SVCCA reducing "
        "components); several notes are separated by ' | '",
    ),
)

_BY_NAME = {c.name: c for c in RESULT_COLUMNS}
_MISSING: dict[str, Any] = {"str": "", "int": -1, "float": np.nan, "bool": False}
_PANDAS: dict[str, str] = {"str": "object", "int": "int64", "float": "float64", "bool": "bool"}


def column_names(columns: tuple[Column, ...] = RESULT_COLUMNS) -> list[str]:
    """Names of ``columns`` (default :data:`RESULT_COLUMNS`), in order."""
    return [c.name for c in columns]


def last_layer_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The result rows at each pair's last layer: both models' last hidden states (no grid rows).

    The one definition every table and report section uses: in each pair x pooling x measure, the row whose
    ``layer_a`` and ``layer_b`` are the largest. Rows outside the grid pair layer k with layer k, or only the
    two last layers when the depths differ (:func:`interlingua.contract.pairs.layer_pairs`), so these are the rows of
    relative depth 1 on both sides. The rows keep their order and index.
    """
    t = table[~table["grid"].astype(bool)] if "grid" in table else table
    if t.empty:
        return t
    last = t.groupby(["pair", "pooling", "measure"])[["layer_a", "layer_b"]].transform("max")
    return t[(t["layer_a"] == last["layer_a"]) & (t["layer_b"] == last["layer_b"])]


def result_table(rows: Iterable[Mapping[str, Any]], columns: tuple[Column, ...] = RESULT_COLUMNS) -> pd.DataFrame:
    """Rows -> a DataFrame with every declared column, in order, with its dtype.

    ``columns``: the declared schema (default :data:`RESULT_COLUMNS`; e.g.
    :data:`MAP_COLUMNS` for the rows of :func:`interlingua.maps.evaluate_pair`).
    Raises ``KeyError`` for an undeclared column (a programming error). Missing
    values: NaN for floats, -1 for ints (e.g. ``n_permutations`` of a row
    without a test), False for flags, "" for text.
    """
    by_name = _BY_NAME if columns is RESULT_COLUMNS else {c.name: c for c in columns}
    rows = list(rows)
    for r in rows:
        extra = set(r) - set(by_name)
        if extra:
            raise KeyError(f"result row has undeclared columns {sorted(extra)}; declare them in schema.py")
    data = {
        c.name: pd.Series([r.get(c.name, _MISSING[c.dtype]) for r in rows], dtype=_PANDAS[c.dtype]) for c in columns
    }
    frame = pd.DataFrame(data)
    for c in columns:  # None in a text column reads back as ""
        if c.dtype == "str":
            frame[c.name] = frame[c.name].fillna("").astype(str)
    return frame
