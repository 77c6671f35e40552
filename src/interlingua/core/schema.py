"""The declared schema of ``results.csv`` / ``results.parquet``: one row per comparison value.

The code that writes rows (:mod:`interlingua.compare`) and the code that reads
them (:mod:`interlingua.report`) both use :data:`RESULT_COLUMNS`; a row with an
undeclared column is a bug and fails loudly, and every table has every declared
column in this order with this dtype. :data:`MAP_COLUMNS` declares the rows of
the held-out map evaluation (:func:`interlingua.maps.evaluate_pair`); pass it
as ``result_table(rows, MAP_COLUMNS)``.
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
    "MAP_COLUMNS",
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
    Column("bootstrap_low", "float", "percentile bootstrap interval, lower bound"),
    Column("bootstrap_high", "float", "percentile bootstrap interval, upper bound"),
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
    two last layers when the depths differ (:func:`interlingua.compare.layer_pairs`), so these are the rows of
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


# -- maps (interlingua.maps.evaluate_pair): one row per pair, layer pair, estimator, direction, fold ------

MAP_COLUMNS: tuple[Column, ...] = (
    Column("pair", "str", "side A label | side B label (model:language), as the caller passes it"),
    Column("model_a", "str", "side A's model name"),
    Column("lang_a", "str", "side A's language"),
    Column("model_b", "str", "side B's model name"),
    Column("lang_b", "str", "side B's language"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("estimator", "str", "map id: identity, procrustes, procrustes_scaled, procrustes_span, affine, ridge, mlp"),
    Column("estimator_params", "str", "the map's hyper-parameters (JSON)"),
    Column("direction", "str", "a->b: map fitted from side A to side B and queries from A; b->a: the reverse fit"),
    Column("layer_a", "int", "hidden-state index of side A (0 = embeddings)"),
    Column("layer_b", "int", "hidden-state index of side B"),
    Column("depth_a", "float", "layer_a / number of blocks of A"),
    Column("depth_b", "float", "layer_b / number of blocks of B"),
    Column("grid", "bool", "row of the full layer x layer Procrustes retrieval grid"),
    Column("fold", "int", "-1: aggregate over every held-out row; else the fold index"),
    Column("protocol", "str", "kfold or split (one train/test split)"),
    Column("n_folds", "int", "number of folds (1 for a split)"),
    Column("fold_seed", "int", "seed of the fold assignment"),
    Column("folds_key", "str", "sha256 prefix of the fold assignment (Folds.key)"),
    Column("n", "int", "paired sentences of the pair"),
    Column("n_test", "int", "held-out sentences scored in this row"),
    Column("n_train", "int", "training sentences per fit (smallest over folds)"),
    Column("width_source", "int", "width of the side the map reads"),
    Column("width_target", "int", "width of the side the map writes"),
    Column("n_fit", "int", "rows each map was fitted on (the training fold's size; smallest over folds)"),
    Column("rank", "int", "numerical rank of the centred training rows, the smaller of the two sides (smallest fold)"),
    Column(
        "underdetermined",
        "bool",
        "some fold's centred training rows do not span a side's width (rank < width; "
        "always when n_fit - 1 < width): the data do not fix the map on every direction (see note for the remedy)",
    ),
    Column("standardized", "bool", "each side z-scored per column with its training rows' statistics"),
    Column("p1", "float", "held-out retrieval precision@1 by cosine among the fold's held-out targets"),
    Column("p5", "float", "precision@5 by cosine"),
    Column("mrr", "float", "mean reciprocal rank by cosine"),
    Column("p1_csls", "float", "precision@1 by CSLS (hubness-corrected cosine)"),
    Column("p5_csls", "float", "precision@5 by CSLS"),
    Column("mrr_csls", "float", "mean reciprocal rank by CSLS"),
    Column("csls_k", "int", "CSLS neighbourhood size used"),
    Column("mse", "float", "held-out mean squared error per coordinate, ||Y - f(X)||^2 / (n_test * width)"),
    Column(
        "rel_mse",
        "float",
        "held-out relative error ||Y - f(X)||^2 / ||Y - mean(Y)||^2 (means over each fold's "
        "held-out rows): 0 = perfect, 1 = no better than predicting the target mean, above 1 = worse (e.g. sides "
        "of different scale and a map that does not rescale)",
    ),
    Column("cka", "float", "linear CKA (biased) of the mapped held-out rows and their targets"),
    Column("cka_debiased", "float", "linear CKA (debiased HSIC) of the mapped held-out rows and their targets"),
    Column("chance_p1", "float", "precision@1 of a random ranking: mean of 1 / n_test of the row's fold"),
    Column("chance_p5", "float", "precision@5 of a random ranking"),
    Column("chance_mrr", "float", "mean reciprocal rank of a random ranking"),
    Column("identity_p1", "float", "precision@1 with no map (identity; equal widths only)"),
    Column("identity_mrr", "float", "mean reciprocal rank with no map"),
    Column("identity_rel_mse", "float", "relative MSE with no map"),
    Column("shuffled_p1", "float", "precision@1 of the same estimator fitted on the pair's shuffled training pairs"),
    Column("shuffled_p1_csls", "float", "CSLS precision@1 of the shuffled-fit control"),
    Column("shuffled_mrr", "float", "mean reciprocal rank of the shuffled-fit control"),
    Column("shuffled_rel_mse", "float", "relative MSE of the shuffled-fit control"),
    Column(
        "identity_control",
        "str",
        "positive control: the estimator fitted from this row's source side onto itself "
        "on the same folds: passed (held-out cosine >= 0.99, ||R - I||_F / sqrt(d) <= 0.1 and worst-direction "
        "error <= 0.1) or failed (a null "
        "from this map is then not a finding); empty: not run (note says why)",
    ),
    Column(
        "identity_control_dev", "float", "||R - I||_F / sqrt(d) of the self-map's matrix, worst fold (NaN: no matrix)"
    ),
    Column(
        "identity_control_p1", "float", "held-out precision@1 of the self-map (cosine among the fold's held-out rows)"
    ),
    Column(
        "identity_control_cos", "float", "mean cosine of self-mapped and true held-out rows (training-mean centred)"
    ),
    Column(
        "identity_control_dir",
        "float",
        "worst held-out principal direction: the self-map's error along it over the data's spread there "
        "(reflection of one direction ~2, 0.5 scale 0.5, identity 0; passes at <= 0.1), worst fold",
    ),
    Column(
        "twin_control",
        "str",
        "rotated-twin control: passed / failed (the row's estimator, layer and direction fitted from a Llama-family "
        "side's rows onto the same rows times Q must give Q), not applicable (no Llama-family model), or empty (off)",
    ),
    Column("twin_model", "str", "the side whose twin the control maps onto (B preferred)"),
    Column("twin_seed", "int", "seed of the twin's rotation Q"),
    Column("twin_control_dev", "float", "||R - Q||_F / sqrt(d) of the map fitted onto the twin (Q^T for b->a)"),
    Column("twin_control_expected_dev", "float", "what the estimator must give: 0, or ridge's implied shrinkage"),
    Column("twin_control_p1", "float", "held-out precision@1 of the twin map (every 5th row left out of a refit)"),
    Column("twin_control_note", "str", "why the twin control failed"),
    Column("control_seed", "int", "seed of the pair's shuffled permutation, as the caller passes it"),
    Column("bootstrap", "int", "bootstrap resamples of the held-out sentences (0: no intervals)"),
    Column("level", "float", "confidence level of the intervals"),
    Column("p1_low", "float", "percentile bootstrap interval of p1, lower bound"),
    Column("p1_high", "float", "percentile bootstrap interval of p1, upper bound"),
    Column("p1_csls_low", "float", "bootstrap interval of p1_csls, lower bound"),
    Column("p1_csls_high", "float", "bootstrap interval of p1_csls, upper bound"),
    Column("mrr_low", "float", "bootstrap interval of mrr, lower bound"),
    Column("mrr_high", "float", "bootstrap interval of mrr, upper bound"),
    Column("rel_mse_low", "float", "bootstrap interval of rel_mse, lower bound"),
    Column("rel_mse_high", "float", "bootstrap interval of rel_mse, upper bound"),
    Column("alpha", "float", "ridge penalty chosen by inner cross-validation (median over folds)"),
    Column(
        "target_erank", "float", "effective rank of the centred held-out target (entropy of normalised singular values)"
    ),
    Column("resid_erank", "float", "effective rank of the centred held-out residual Y - f(X)"),
    Column("resid_n50", "int", "singular values holding half of the residual's energy"),
    Column("resid_n90", "int", "singular values holding 90% of the residual's energy"),
    Column("resid_out10", "float", "share of residual energy outside the target's top-10 principal directions"),
    Column("resid_out50", "float", "share of residual energy outside the target's top-50 principal directions"),
    Column("resid_rel_norm", "float", "||centred residual||_F / ||centred target||_F"),
    Column("fit_info", "str", "per fold: what each fit decided (chosen alpha, rank, scale, epochs), JSON"),
    Column(
        "note", "str", "why a value is missing (NaN) or what changed, empty otherwise; several are separated by ' | '"
    ),
)


# -- audit (interlingua.audit.audit): one row per model spec ------------------------------------------------

AUDIT_COLUMNS: tuple[Column, ...] = (
    Column("model", "str", "the spec's label"),
    Column("path", "str", "the resolved base: local folder, Hub id or package:NAME"),
    Column("adapter", "str", "the PEFT adapter folder or id, empty without one"),
    Column("verdict", "str", "ok, or every bad finding of this row joined by '; '"),
    Column("bad", "bool", "some finding is bad (what --strict exits 1 on)"),
    Column(
        "adapter_verdict", "str", "identity (every lora_B == 0), tiny, active, missing, unsupported; empty: no adapter"
    ),
    Column("adapter_reason", "str", "why the adapter verdict"),
    Column("peft_type", "str", "adapter_config.json peft_type"),
    Column("lora_r", "int", "adapter_config.json r"),
    Column("lora_alpha", "float", "adapter_config.json lora_alpha"),
    Column("target_modules", "str", "adapter target modules, comma-separated"),
    Column("modules_to_save", "str", "modules the adapter ships whole copies of, comma-separated"),
    Column("adapter_modules", "str", "per target module: r, scaling, max|B|, max|scaling*B@A| and its method (JSON)"),
    Column("max_abs_lora_b", "float", "largest |lora_B| element over the target modules"),
    Column("max_abs_delta", "float", "largest |scaling * B @ A| element (exact) or its bound scaling*||B||_2*||A||_2"),
    Column("delta_method", "str", "exact, or bound when any module's value is the spectral-norm bound"),
    Column("tiny_threshold", "float", "max_abs_delta below this is 'tiny'"),
    Column("adapter_base_recorded", "str", "base_model_name_or_path in adapter_config.json"),
    Column("adapter_base_check", "str", "matched, mismatched, unrecorded, not checked, or error: ..."),
    Column("tokenizer_verdict", "str", "ok, mismatched tokenizer, unchecked, missing"),
    Column("tokenizer_reason", "str", "why the tokenizer verdict"),
    Column("tokenizer_sha256", "str", "sha256 over the tokenizer files"),
    Column("vocab_size", "int", "len(tokenizer): ids the tokenizer can emit, added tokens included"),
    Column("embedding_rows", "int", "rows of the input embedding (safetensors header)"),
    Column("special_tokens", "str", "special token -> id (JSON)"),
    Column("reference_tokenizer", "str", "the tokenizer compared id by id (the base model's own)"),
    Column("agree", "int", "ids mapping to the same token string in the tokenizer and the reference"),
    Column("compared", "int", "ids compared: min of the two vocabulary sizes"),
    Column("agree_share", "float", "agree / compared"),
    Column("quality_verdict", "str", "ok, not a language model, unchecked; empty without sentences"),
    Column("quality_reason", "str", "why the quality verdict"),
    Column("nll", "float", "mean NLL in nats per scored token (first token never predicted; special targets excluded)"),
    Column("chance_nll", "float", "ln V, V = rows of the output layer"),
    Column("nll_margin", "float", "NLL within this of chance is 'not a language model'"),
    Column("n_tokens", "int", "scored tokens"),
    Column("n_sentences", "int", "sentences scored"),
    Column("quality_language", "str", "the corpus side the NLL was measured on (run audits)"),
    Column("weights_group", "str", "W1, W2, ...: specs bit-identical in effective weights (identity adapter = base)"),
    Column("tokenizer_group", "str", "T1, T2, ...: specs with the same tokenizer files"),
    Column(
        "effective_sha256", "str", "key of the effective weights: base weights + adapter (no-op adapter = none) + dtype"
    ),
    Column("confounds", "str", "'same model as X' / 'differs from X only by tokenizer', joined by '; '"),
    Column("note", "str", "anything that could not be checked and why"),
)
__all__.append("AUDIT_COLUMNS")


# -- sweeps (interlingua.predictors.sweeps): degeneracy, trends, contrasts ---------------------------------------------

SWEEP_COLUMNS: tuple[Column, ...] = (
    Column("sweep", "str", "the sweep's name (models with the same `sweep`)"),
    Column("variables", "str", "the swept settings, comma-separated"),
    Column("lang_a", "str", "side A's language (within-model pairs)"),
    Column("lang_b", "str", "side B's language"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("estimator", "str", "the measure's estimator"),
    Column("n_models", "int", "models of the sweep with a last-layer matched value in this cell"),
    Column("n_distinct", "int", "distinct matched values among them (exact float equality)"),
    Column("degenerate", "bool", "some models of the sweep give bit-identical values"),
    Column("verdict", "str", "ok, partly degenerate, or 'a measurement of a constant' (one value for all)"),
    Column("min", "float", "smallest last-layer matched value along the sweep"),
    Column("max", "float", "largest last-layer matched value along the sweep"),
    Column("identical", "str", "groups of models with bit-identical values (JSON)"),
    Column("explanation", "str", "what the identical models share: audit identity groups or fingerprints"),
)

TREND_COLUMNS: tuple[Column, ...] = (
    Column("sweep", "str", "the sweep's name"),
    Column("variable", "str", "the swept setting the rank correlation is taken against"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("estimator", "str", "the measure's estimator"),
    Column("value", "str", "the results column correlated: calibrated (default) or matched (inference.score: raw)"),
    Column("groups", "int", "groups of cells sharing everything but this variable (language pair, other settings)"),
    Column("groups_defined", "int", "groups where rho is defined (n >= 3, neither side constant)"),
    Column("mean_within_rho", "float", "mean of the within-group Spearman rhos: the repeated-measures-safe summary"),
    Column("min_rho", "float", "smallest within-group rho"),
    Column("max_rho", "float", "largest within-group rho"),
    Column("n_per_group", "int", "settings per group (the n of each rho)"),
    Column("p", "float", "permutation p of the mean within-group rho (y permuted within groups)"),
    Column("p_method", "str", "exact (every within-group permutation) or monte carlo"),
    Column("smallest_p", "float", "smallest two-sided p this design can attain: what the data could show at best"),
    Column("argmax", "str", "per group, the setting with the largest value (JSON)"),
    Column("detail", "str", "per group: n, rho, smallest attainable p, included or why not (JSON)"),
    Column("note", "str", "undefined rhos, unreachable significance levels"),
)

CONTRAST_COLUMNS: tuple[Column, ...] = (
    Column("a", "str", "arm a (a sweep or a model)"),
    Column("b", "str", "arm b"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("estimator", "str", "the measure's estimator"),
    Column("value", "str", "the results column compared: calibrated (default) or matched (inference.score: raw)"),
    Column("n", "int", "paired cells (same sweep values, same language pair), last layer"),
    Column("mean_a", "float", "mean value of arm a over the cells"),
    Column("mean_b", "float", "mean value of arm b"),
    Column("mean_diff", "float", "mean of a - b"),
    Column("ci_low", "float", "t interval of the mean difference, lower bound"),
    Column("ci_high", "float", "t interval of the mean difference, upper bound"),
    Column("level", "float", "confidence level of the interval"),
    Column("t", "float", "paired t statistic"),
    Column("t_p", "float", "paired t test, two-sided p"),
    Column("wilcoxon_stat", "float", "Wilcoxon signed-rank statistic"),
    Column("wilcoxon_p", "float", "Wilcoxon signed-rank test, two-sided p"),
    Column("wilcoxon_method", "str", "exact, permutation or asymptotic (scipy's choice for this n)"),
    Column("n_nonzero", "int", "cells with a non-zero difference"),
    Column("wilcoxon_min_p", "float", "smallest two-sided Wilcoxon p attainable at this n (2 / 2**n_nonzero)"),
    Column("cells", "str", "the paired cells (JSON)"),
    Column("note", "str", "degenerate cases (all differences zero, too few cells)"),
)
__all__ += ["SWEEP_COLUMNS", "TREND_COLUMNS", "CONTRAST_COLUMNS"]

# -- quality (quality: section) and predictors (predictors: section) ----------------------------------------

QUALITY_COLUMNS: tuple[Column, ...] = (
    Column("model", "str", "model name"),
    Column("language", "str", "the side scored"),
    Column(
        "nll",
        "float",
        "mean NLL in nats per scored token (teacher-forced; first token never predicted; "
        "special-token targets excluded unless special_tokens: include)",
    ),
    Column("chance_nll", "float", "ln V, V = rows of the output layer"),
    Column("vocab", "int", "V"),
    Column("n_tokens", "int", "scored tokens"),
    Column("n_sentences", "int", "sentences"),
    Column("truncated", "int", "sentences cut at max_length"),
    Column("verdict", "str", "ok, or 'not a language model' within 0.5 nats of chance"),
)

PREDICTOR_COLUMNS: tuple[Column, ...] = (
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("kinds", "str", "the pair kinds the rows come from"),
    Column("column", "str", "the result column correlated (last layer)"),
    Column("predictor", "str", "nll, nll_gap, length_control or a URIEL distance"),
    Column("method", "str", "spearman or pearson"),
    Column("n", "int", "pairs with both values"),
    Column("n_dropped", "int", "pairs without a value for this predictor"),
    Column("rho", "float", "the correlation"),
    Column("p", "float", "two-sided permutation p (|rho| at least as large; exact enumeration when n! is small)"),
    Column("q", "float", "Benjamini-Hochberg q across the whole table"),
    Column("p_method", "str", "exact, monte carlo, or none (rho undefined)"),
    Column("permutations", "int", "permutations scored"),
    Column("ci_low", "float", "percentile bootstrap interval of rho, lower bound"),
    Column("ci_high", "float", "percentile bootstrap interval of rho, upper bound"),
    Column("min_attainable_p", "float", "smallest p this n can give (2/n! for Spearman)"),
    Column("reachable", "bool", "min_attainable_p <= 0.05"),
    Column("note", "str", "undefined rho (constant column), unreachable level, too few pairs"),
)
__all__ += ["QUALITY_COLUMNS", "PREDICTOR_COLUMNS"]

_PAIR = (
    Column("pair", "str", "model A | model B"),
    Column("model_a", "str", "model A's name"),
    Column("model_b", "str", "model B's name"),
)

COVERAGE_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("source", "str", "tensors (safetensors headers) or header (GGUF metadata facts only)"),
    Column("key", "str", "canonical tensor key (facts.<name> for a header-only row)"),
    Column("part", "str", "embedding, attention, mlp, norm, head, ... (facts for header rows)"),
    Column("layer", "int", "block index (-1 outside the blocks)"),
    Column("status", "str", "shared or excluded"),
    Column("reason", "str", "why excluded (interlingua.mergeability.comparability.REASONS)"),
    Column("detail", "str", "the reason with the numbers"),
    Column("name_a", "str", "A's tensor name"),
    Column("shape_a", "str", "A's stored shape"),
    Column("dtype_a", "str", "A's stored dtype"),
    Column("numel_a", "int", "elements of A's tensor (-1: none)"),
    Column("name_b", "str", "B's tensor name"),
    Column("shape_b", "str", "B's stored shape"),
    Column("dtype_b", "str", "B's stored dtype"),
    Column("numel_b", "int", "elements of B's tensor (-1: none)"),
)

MERGEABILITY_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("base", "str", "the shared ancestor of the pair (task vectors), empty when none"),
    Column(
        "source_a",
        "str",
        "where A's weights were read: folder, folder+adapter, converted (GGUF's float32 copy), gguf-header",
    ),
    Column("source_b", "str", "where B's weights were read"),
    Column("route", "str", "native, transport or none (interlingua.mergeability.comparability)"),
    Column("reason", "str", "why this route (widths, depths, vocabularies, families)"),
    Column("shared_tensors", "int", "coverage rows shared"),
    Column("excluded_tensors", "int", "coverage rows excluded (-1: header-only)"),
    Column("shared_share", "float", "share of both models' elements in shared tensors"),
    Column("diag_numel", "int", "elements compared by the diagnostics"),
    Column("cosine", "float", "global cosine of the shared weights (float64, streamed)"),
    Column("rel_l2", "float", "||A - B|| / ||B|| over the shared weights"),
    Column("rel_l2_sym", "float", "2 ||A - B|| / (||A|| + ||B||)"),
    Column("norm_ratio", "float", "||A|| / ||B||"),
    Column("tv_cosine", "float", "task-vector cosine over the base (NaN without one)"),
    Column("ties_sign_agreement", "float", "TIES sign agreement of the trimmed task vectors (NaN without a base)"),
    Column("barrier", "float", "loss barrier, mean over the scored languages (barriers.csv per language)"),
    Column("best_gain", "float", "largest NLL gain of an interpolation over the better endpoint"),
    Column(
        "cka_last",
        "float",
        "last-layer matched value of the run's same-language cross-model pairs of A and B "
        "(first pooling and measure; NaN when the run compares none)",
    ),
    Column("checkpoint_arm", "bool", "both models are checkpoints of the arm"),
    Column("step_a", "int", "A's training step (checkpoint arm; -1 otherwise)"),
    Column("step_b", "int", "B's training step"),
    Column("log10_step_ratio", "float", "trajectory distance log10(step_b / step_a) (NaN when step_a is 0)"),
    Column("note", "str", "what could not be computed and why"),
)

BARRIER_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("language", "str", "corpus side scored"),
    Column("tokenizer", "str", "the tokenizer used (A's)"),
    Column("n_sentences", "int", "sentences scored"),
    Column("n_tokens", "int", "scored tokens"),
    Column("nll_a", "float", "NLL at t = 0 (A)"),
    Column("nll_b", "float", "NLL at t = 1 (B)"),
    Column("barrier", "float", "max over the grid of NLL minus the straight line (>= 0)"),
    Column("t_barrier", "float", "first t reaching the barrier"),
    Column("best_t", "float", "first t of least NLL"),
    Column("best_nll", "float", "least NLL over the grid"),
    Column("best_gain", "float", "min(nll_a, nll_b) - best_nll (>= 0)"),
    Column("points", "int", "grid points"),
    Column("note", "str", "why the pair could not be interpolated (empty when scored)"),
)

BARRIER_CURVE_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("language", "str", "corpus side scored"),
    Column("t", "float", "interpolation weight of B"),
    Column("nll", "float", "mean NLL of (1 - t) A + t B"),
    Column("n_tokens", "int", "scored tokens"),
    Column("line", "float", "(1 - t) nll_a + t nll_b"),
    Column("excess", "float", "nll - line"),
)

CHECKPOINT_CORRELATION_COLUMNS: tuple[Column, ...] = (
    Column("column", "str", "diagnostic (mergeability.csv column) of the row"),
    Column("predictor", "str", "diagnostic of the column (each unordered pair of diagnostics once)"),
    Column("method", "str", "spearman"),
    Column("n", "int", "checkpoint pairs with both values"),
    Column("n_dropped", "int", "pairs without a value"),
    Column("rho", "float", "Spearman rho"),
    Column("p", "float", "two-sided permutation p (exact enumeration when n! is small)"),
    Column("q", "float", "Benjamini-Hochberg q across the table"),
    Column("p_method", "str", "exact, monte carlo, or none"),
    Column("permutations", "int", "label shuffles scored"),
    Column("min_attainable_p", "float", "smallest p this n can give"),
    Column("reachable", "bool", "min_attainable_p <= 0.05"),
    Column("redundant", "bool", "|rho| above mergeability.redundant (one of the two says what the other does)"),
    Column("note", "str", "undefined rho, unreachable level"),
)
__all__ += [
    "COVERAGE_COLUMNS",
    "MERGEABILITY_COLUMNS",
    "BARRIER_COLUMNS",
    "BARRIER_CURVE_COLUMNS",
    "CHECKPOINT_CORRELATION_COLUMNS",
]

ALIGNMENT_COLUMNS: tuple[Column, ...] = (
    Column("languages", "str", "the aligned language pair (side a-side b; one language: every word to itself)"),
    Column("identity", "bool", "the pair is one language: each word linked to itself, no encoder"),
    Column("encoder", "str", "the model whose contextual word vectors were aligned (empty for identity)"),
    Column("layer", "int", "the encoder's hidden state (0 = embeddings; -1 for identity)"),
    Column("method", "str", "inter, itermax or match (SimAlign's names; empty for identity)"),
    Column("sentences", "int", "sentence pairs aligned (the first n of the corpus)"),
    Column("words_a", "int", "words of side a (segmented; punctuation dropped)"),
    Column("words_b", "int", "words of side b"),
    Column("links", "int", "word links (a word can be linked twice by itermax)"),
    Column("unaligned_sentences", "int", "sentence pairs without a single link (dropped and counted, not an error)"),
    Column("seconds", "float", "time to align (encoder forward passes included)"),
)
__all__ += ["ALIGNMENT_COLUMNS"]
