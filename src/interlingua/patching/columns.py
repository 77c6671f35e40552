"""The columns of ``patching.csv``, each with its glossary text."""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = ["PATCHING_COLUMNS"]

#: ``patching.csv``'s columns, in order (one row per experiment, relation, languages, start layer and condition):
#: the experiment and its fit, the summary of its patch trials (``patching.patch.SUMMARY_COLUMNS``), the maps'
#: pooling and trials, then its controls' verdicts (``patching.patch.CONTROL_COLUMNS``).
PATCHING_COLUMNS: tuple[Column, ...] = (
    Column(
        "experiment",
        "str",
        "donor:language->target:language (a control's rows: 'identity control: ' or 'twin control: ' before it; "
        "'[fit: ...]' after it when several fits run side by side)",
    ),
    Column("fit", "str", "what the maps were fitted on: sentences, words or probes (one of patching.fit)"),
    # the summary of the trials
    Column("relation", "str", "the probe's relation (e.g. capital): what the prompt asks about the country"),
    Column("donor_language", "str", "the language of the donor's prompt"),
    Column("target_language", "str", "the language of the target's prompt"),
    Column("layer", "int", "start layer j: the residual is replaced from block j to the last"),
    Column("condition", "str", "within (the target's own residual, the ceiling), mapped, unprojected, shuffled, noise"),
    Column("applicable", "bool", "the condition applies to this cell (false: no trial ran, see reason)"),
    Column("reason", "str", "why a condition does not apply (e.g. unprojected needs equal widths)"),
    Column("n", "int", "trials (prompt pairs) of the cell"),
    Column("flips", "int", "trials whose top-1 next token became the first token of A's answer"),
    Column("flip_rate", "float", "share of trials whose top-1 next token became the first token of A's answer"),
    Column("flip_low", "float", "Wilson 95% interval of flip_rate, lower bound"),
    Column("flip_high", "float", "Wilson 95% interval of flip_rate, upper bound"),
    Column(
        "success_rate", "float", "share of trials where log p of A's answer's first token rose over the unpatched run"
    ),
    Column("success_low", "float", "Wilson interval of success_rate, lower bound"),
    Column("success_high", "float", "Wilson interval of success_rate, upper bound"),
    Column(
        "prefers_a_rate",
        "float",
        "share of trials where the patched run gives A's answer's first token a higher log p than B's",
    ),
    Column("mean_delta_logp_a", "float", "mean change of log p of A's answer's first token over the unpatched run"),
    Column("mean_logp_a_minus_b", "float", "mean of log p(A's first token) - log p(B's first token), patched run"),
    Column("mean_norm_ratio", "float", "mean norm of the patched-in residual over the target's own"),
    Column("clean_accuracy", "float", "share of trials the unpatched target answers B correctly"),
    Column("success_answer_rate", "float", "share of trials where log p of A's whole answer rose"),
    Column("success_answer_low", "float", "Wilson interval of success_answer_rate, lower bound"),
    Column("success_answer_high", "float", "Wilson interval of success_answer_rate, upper bound"),
    Column("mean_delta_logp_answer_a", "float", "mean change of log p of A's whole answer over the unpatched run"),
    Column("target", "str", "the patched model (a twin control's: the model's rotated twin, model~twin)"),
    Column("donor", "str", "the model whose residual is patched in"),
    Column(
        "span_rule",
        "str",
        "mean (the donor span's mean written to every position of B's span) or last (last token to last token)",
    ),
    Column("layers_patched", "str", "the target layers patched, j..L (empty for the unpatched run)"),
    Column(
        "donor_layers",
        "str",
        "the donor layer read for each patched target layer, comma-separated (conditions that read the donor)",
    ),
    # as maps.csv's (empty on the rows of conditions without a map: within, unprojected, the unpatched run)
    Column("estimator", "str", "map id: identity, procrustes, procrustes_scaled, procrustes_span, affine, ridge, mlp"),
    Column("map_n_fit", "int", "rows the patched layers' maps were fitted on, smallest (-1: no map)"),
    Column("map_rank", "int", "smallest rank of those maps' centred training rows (-1: no map)"),
    Column(
        "map_underdetermined", "bool", "some patched layer's map was fitted on rows that do not span a side's width"
    ),
    Column(
        "map_dev", "float", "largest ||R - I||_F / sqrt(d) of the patched layers' maps (equal widths; NaN otherwise)"
    ),
    Column(
        "map_span_dev",
        "float",
        "largest ||V^T (R - I)||_F / sqrt(r) of the patched layers' maps on the r directions V their centred fit "
        "rows span (equal widths; NaN otherwise)",
    ),
    Column("map_span_expected", "float", "what the estimator must give there: 0, or ridge's shrinkage of I"),
    Column("map_span_excess", "float", "largest |map_span_dev - map_span_expected| over the patched layers"),
    Column(
        "map_site_cos",
        "float",
        "at the patch site: mean cosine of the probe countries' mapped donor states with the target's own, worst "
        "patched layer",
    ),
    Column(
        "map_site_p1",
        "float",
        "at the patch site: share of probe countries whose mapped donor state is nearest the target's own state "
        "of the same country, worst patched layer",
    ),
    Column(
        "map_site_dir",
        "float",
        "at the patch site: worst error of the probe countries' mapped donor states against the target's own (both "
        "centred), per principal direction of the own states, in units of their spread there; worst patched layer",
    ),
    Column(
        "unprojected_gap_flip",
        "float",
        "on a mapped row: its flip_rate minus the unprojected row's of the same cell (NaN without one)",
    ),
    Column(
        "unprojected_gap_success",
        "float",
        "on a mapped row: its success_rate minus the unprojected row's of the same cell (NaN without one)",
    ),
    # the maps' rows and the trials
    Column("pooling", "str", "mean, sgpt or last"),  # the pooling of the sentence rows the maps were fitted on
    Column("pairs", "str", "trials per cell as configured: derangement, all, or a number (patching.pairs)"),
    # the controls
    Column("control", "str", "identity or twin on a control's own rows; empty on an experiment's"),
    Column("fit_rows", "str", "what the maps were fitted on, in words (e.g. mean-pooled sentences)"),
    Column("identity_control", "str", "the target side's identity control: passed, failed or not run"),
    Column("identity_control_dev", "float", "largest ||R - I||_F / sqrt(d) of the identity control's maps"),
    Column("identity_control_span_dev", "float", "the identity control's maps on their fit rows' span, largest"),
    Column("identity_control_dir", "float", "the identity control's worst patch-site direction error"),
    Column("identity_control_p1", "float", "the identity control's patch-site P@1, worst cell"),
    Column("identity_control_cos", "float", "the identity control's patch-site cosine, worst cell"),
    Column("identity_control_note", "str", "what the identity control failed on"),
    Column(
        "twin_control",
        "str",
        "the twin control: passed, failed, not run, or not applicable (no Llama-family model)",
    ),
    Column("twin_control_dev", "float", "largest ||R - Q||_F / sqrt(d) of the twin's maps (Q: the twin's rotation)"),
    Column("twin_control_span_dev", "float", "the twin's maps: ||V^T (R - Q)||_F / sqrt(r) on their span, largest"),
    Column("twin_control_expected_dev", "float", "what the estimator must give there: 0, or ridge's shrinkage of Q"),
    Column("twin_control_p1", "float", "the twin control's patch-site P@1, worst cell"),
    Column("twin_control_note", "str", "what the twin control failed on"),
    Column("twin_model", "str", "the Llama-family model rotated into its twin"),
    Column("twin_seed", "int", "seed of the twin's rotation Q (patching.twin_seed)"),
    Column(
        "twin_max_logit_diff",
        "float",
        "largest |logit difference| between the model and its twin on the check sentences (the same function: "
        "rounding only)",
    ),
    Column("chain", "str", "broken when a control failed, intact when every control run passed, empty otherwise"),
)
