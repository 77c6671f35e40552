"""Report sections of the audit and of sweeps (degeneracy, within-group trends, paired contrasts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = [
    "audit_section",
    "mergeability_section",
    "patching_section",
    "transport_section",
    "predictors_section",
    "quality_section",
    "sweeps_section",
    "typology_section",
]


def audit_section(audit: pd.DataFrame) -> list[str]:
    """What each model is: adapter, tokenizer, NLL against chance, identity groups and confounds."""
    md = ["## Audit: is each model what it claims to be?", ""]
    n_bad = int(audit["bad"].sum())
    md += [
        f"{len(audit)} models audited before any representation was extracted; {n_bad} with a bad verdict "
        "(`audit.csv` has every field and reason). An adapter whose every `lora_B` is zero is an **identity** "
        "(it changes nothing); a tokenizer whose ids do not index the rows the embedding was trained with is "
        "**mismatched**; a mean NLL within the margin of chance ln V is **not a language model**. Models in "
        "one weights group compute the same function (an identity adapter groups with its base).",
        "",
    ]
    from interlingua.audit.core import SUMMARY_COLUMNS

    shown = audit[[c for c in SUMMARY_COLUMNS if c in audit]].copy()
    for c in ("agree", "compared"):
        shown[c] = shown[c].where(shown[c] >= 0, other=pd.NA).astype("Int64").astype(str).replace("<NA>", "–")
    md += [md_table(shown, digits=3), ""]
    if "quality_language" in audit and (audit["quality_language"] != "").any():
        md += [
            f"NLL: nats per token on the `{audit['quality_language'].iloc[0]}` side, teacher-forced, the "
            "first token of each sentence never predicted, special-token targets not scored.",
            "",
        ]
    confounded = audit[audit["confounds"] != ""]
    if not confounded.empty:
        md += ["**Confounds.** " + "; ".join(f"{r.model}: {r.confounds}" for r in confounded.itertuples()), ""]
    return md


def sweeps_section(degeneracy: pd.DataFrame, trends: pd.DataFrame, contrasts: pd.DataFrame) -> list[str]:
    """Distinct values along each sweep, within-group trends and paired contrasts of arms."""
    md: list[str] = []
    if not degeneracy.empty:
        md += ["## Sweeps: does the setting change anything?", ""]
        flagged = degeneracy[degeneracy["degenerate"]]
        if flagged.empty:
            md += ["Every model of every sweep gives its own last-layer value.", ""]
        else:
            md += [
                f"**{len(flagged)} sweep cells are degenerate**: models said to differ give bit-identical values, "
                "so along those sweeps the curve is a measurement of a constant, not of the setting.",
                "",
            ]
        cols = [
            "sweep",
            "lang_a",
            "lang_b",
            "pooling",
            "measure",
            "estimator",
            "n_models",
            "n_distinct",
            "verdict",
            "min",
            "max",
            "explanation",
        ]
        md += [md_table(degeneracy[cols], digits=4), ""]
    if not trends.empty:
        md += [
            "### Trends within groups",
            "",
            "Spearman rho of the last-layer value (`value`: calibrated by default, matched with inference.score: "
            "raw) against each setting, computed inside each group of "
            "cells that share everything else (language pair, the other settings) and then averaged: the cells "
            "of one group are perturbations of one model, not independent samples, so no pooled p is given. "
            "`smallest_p` is the smallest p a rho can reach at the group's n; rho is monotone, so an interior "
            "optimum shows in `argmax`, not in rho.",
            "",
            md_table(
                trends[
                    [
                        "sweep",
                        "variable",
                        "pooling",
                        "measure",
                        "estimator",
                        "value",
                        "groups",
                        "n_per_group",
                        "mean_within_rho",
                        "min_rho",
                        "max_rho",
                        "smallest_p",
                        "argmax",
                    ]
                ],
                digits=3,
            ),
            "",
        ]
    if not contrasts.empty:
        md += [
            "### Paired contrasts",
            "",
            "Arm a minus arm b of the last-layer `value` (calibrated by default) over the cells both have "
            "(same settings, same language pair): "
            "the paired t test and the Wilcoxon signed-rank test, with the t interval of the mean difference.",
            "",
            md_table(
                contrasts[
                    [
                        "a",
                        "b",
                        "pooling",
                        "measure",
                        "estimator",
                        "value",
                        "n",
                        "mean_diff",
                        "ci_low",
                        "ci_high",
                        "t_p",
                        "wilcoxon_p",
                        "wilcoxon_min_p",
                        "note",
                    ]
                ],
                digits=4,
            ),
            "",
        ]
    return md


def quality_section(quality: pd.DataFrame) -> list[str]:
    """Each model's NLL on each side it reads, against chance."""
    wide = quality.pivot_table(index="model", columns="language", values="nll", sort=False)
    chance = quality.groupby("model", sort=False)["chance_nll"].first()
    wide.insert(0, "chance ln V", chance)
    md = [
        "## Model quality",
        "",
        "Mean NLL in nats per scored token on each language side (`quality.csv`): teacher-forced, each "
        "sentence alone with the tokenizer's own special tokens, the first token never predicted, special-token "
        "targets not scored. Tokenizers differ, so NLL per token compares a model across languages, not two "
        "models with different vocabularies.",
        "",
        md_table(wide.reset_index(), digits=3),
        "",
    ]
    bad = quality[quality["verdict"] == "not a language model"]
    if not bad.empty:
        md += ["**Near chance**: " + ", ".join(f"{r.model} on {r.language}" for r in bad.itertuples()), ""]
    return md


def predictors_section(table: pd.DataFrame, frame: pd.DataFrame, fig_dir: Path) -> list[str]:
    """Correlation table of results vs predictors, and one figure.

    The figure: a scatter per (column, predictor) of the first cell.
    """
    from interlingua.report.figures import _safe

    md = [
        "## What predicts alignment",
        "",
        f"{frame['pair'].nunique()} last-layer pairs ({table['kinds'].iat[0] if len(table) else ''}), one "
        "correlation per result column, predictor, pooling and measure: a permutation p (exact when n! is "
        "small), a bootstrap interval of rho, Benjamini-Hochberg q across the whole table "
        "(`predictors.csv`; the pairs with their values: `predictor_pairs.csv`). Pairs share models and "
        "languages, so they are not independent draws; `min_attainable_p` is the best the n can give. "
        "Columns (`column`): `calibrated` by default, the score above its own permutation null, so a predictor "
        "that covaries with width, depth or n is not correlated with chance; raw columns when "
        "predictors.columns names them.",
        "",
    ]
    unreachable = table[~table["reachable"]]
    if len(table) and len(unreachable) == len(table):
        md += [
            f"**Small n**: with n = {int(table['n'].max())} pairs no p can reach 0.05; read the table as "
            "a description, not a test.",
            "",
        ]
    md += [
        md_table(
            table[
                [
                    "pooling",
                    "measure",
                    "column",
                    "predictor",
                    "n",
                    "rho",
                    "ci_low",
                    "ci_high",
                    "p",
                    "q",
                    "min_attainable_p",
                    "note",
                ]
            ],
            digits=3,
        ),
        "",
    ]
    if not len(table):
        return md
    first = table.iloc[0]
    from interlingua.report.figures import predictor_panels

    cell_table = table[(table["pooling"] == first["pooling"]) & (table["measure"] == first["measure"])]
    cell = frame[(frame["pooling"] == first["pooling"]) & (frame["measure"] == first["measure"])]
    name = f"predictors_{_safe(first['measure'])}_{_safe(first['pooling'])}.png"
    predictor_panels(
        cell,
        cell_table,
        f"what predicts alignment: {first['measure']}, {first['pooling']} pooling, last layer",
        fig_dir / name,
    )
    md += [
        f"The pairs behind the first pooling and measure's correlations (`{first['measure']}`, "
        f"{first['pooling']}), a panel per result column (row) and predictor (column):",
        "",
        f"![predictors](figures/{name})",
        "",
    ]
    return md


def typology_section(typology: pd.DataFrame) -> list[str]:
    """URIEL distances between the run's languages (``typology.csv``)."""
    kinds = [c for c in typology.columns if c not in ("lang_a", "lang_b", "uriel_a", "uriel_b", "source")]
    source = typology["source"].iat[0] if "source" in typology and len(typology) else ""
    return [
        "## Typology",
        "",
        f"URIEL cosine distances between the run's languages ({source}; `typology.csv`; docs/protocol.md, "
        '"Quality, typology and what predicts alignment").',
        "",
        md_table(typology[["lang_a", "lang_b", *kinds]], digits=4),
        "",
    ]


def mergeability_section(sections: dict[str, pd.DataFrame], fig_dir: Path) -> list[str]:
    """Coverage (route and why), weight diagnostics, barriers and the checkpoint arm's correlations."""
    table = sections["mergeability"]
    md = [
        "## Mergeability: what the weights share",
        "",
        "One row per pair of models (`mergeability.csv`; every tensor of both with its status and reason: "
        "`coverage.csv`). Route **native**: same family and every block tensor shared (comparable, mergeable, "
        "interpolable tensor by tensor); **transport**: a change of basis is needed; **none**: no route. "
        "Diagnostics are over the shared tensors, float64, streamed one tensor at a time; task-vector cosine "
        "and TIES sign agreement need a base.",
        "",
        md_table(
            table[
                [
                    "pair",
                    "base",
                    "route",
                    "shared_share",
                    "cosine",
                    "rel_l2",
                    "norm_ratio",
                    "tv_cosine",
                    "ties_sign_agreement",
                    "barrier",
                    "best_gain",
                    "cka_last",
                ]
            ],
            digits=4,
        ),
        "",
    ]
    reasons = table[table["route"] != "native"]
    if not reasons.empty:
        md += [
            "**Why no native route.** " + " ".join(f"{r.pair}: {r.route}, {r.reason}." for r in reasons.itertuples()),
            "",
        ]
    notes = table[table["note"] != ""]
    if not notes.empty:
        md += ["Notes: " + "; ".join(f"{r.pair}: {r.note}" for r in notes.itertuples()), ""]
    barriers = sections.get("barriers")
    curves = sections.get("barrier_curves")
    if barriers is not None and not barriers.empty:
        scored = barriers[barriers["note"] == ""]
        md += [
            "### Loss barriers",
            "",
            "Mean NLL of the interpolated weights (1 - t) A + t B on each corpus side (A's tokenizer and config; "
            "`barriers.csv`, the curves in `barrier_curves.csv`). The barrier is the largest excess over the "
            "straight line between the endpoints; the best gain is how much the best interpolation beats the "
            "better endpoint.",
            "",
        ]
        if not scored.empty:
            md += [
                md_table(
                    scored[["pair", "language", "nll_a", "nll_b", "barrier", "t_barrier", "best_t", "best_gain"]],
                    digits=4,
                ),
                "",
            ]
        if curves is not None and not curves.empty:
            from interlingua.report.figures import barrier_figure

            barrier_figure(curves, "loss along the linear path", fig_dir / "barrier_curves.png")
            md += ["![barrier curves](figures/barrier_curves.png)", ""]
    corr = sections.get("checkpoint_correlations")
    if corr is not None:
        arm = table[table["checkpoint_arm"]]
        md += [
            "### Checkpoint arm: which diagnostics say the same thing?",
            "",
            f"{len(arm)} pairs of checkpoints of one run; trajectory distance log10(step_b / step_a). Spearman "
            "rho of each pair of diagnostics across those pairs, permutation p (exact enumeration when n! is "
            "small), Benjamini-Hochberg q across the table (`checkpoint_correlations.csv`). Pairs share "
            "checkpoints, so they are not independent draws.",
            "",
        ]
        if corr.empty:
            md += ["Too few varying diagnostics to correlate.", ""]
        else:
            md += [md_table(corr[["column", "predictor", "n", "rho", "p", "q", "redundant", "note"]], digits=3), ""]
            red = corr[corr["redundant"]]
            md += [
                "**Redundant** (|rho| above the threshold): "
                + (
                    ", ".join(f"{r.column} ~ {r.predictor} ({r.rho:+.2f})" for r in red.itertuples())
                    if not red.empty
                    else "none"
                )
                + ".",
                "",
            ]
            from interlingua.report.figures import correlation_heatmap

            mirrored = pd.concat([corr, corr.rename(columns={"column": "predictor", "predictor": "column"})])
            correlation_heatmap(
                mirrored, "checkpoint arm: diagnostic x diagnostic rho (q)", fig_dir / "checkpoint_correlations.png"
            )
            md += ["![checkpoint correlations](figures/checkpoint_correlations.png)", ""]
    return md


def _patch_maps_note(eg: pd.DataFrame) -> list[str]:
    """What the maps behind the mapped rows were fitted on; a loud line when they are under-determined."""
    if "map_underdetermined" not in eg:  # rows stored before the maps' facts were recorded
        return []
    used = eg[eg["map_n_fit"].fillna(-1) >= 0]
    if used.empty:
        return []
    n_fit, rank = int(used["map_n_fit"].min()), int(used["map_rank"].min())
    rows = (
        str(eg["fit_rows"].iat[0])
        if "fit_rows" in eg and str(eg["fit_rows"].iat[0]) not in ("", "nan")
        else ("sentences")
    )
    if not used["map_underdetermined"].astype(bool).any():
        return [
            f"The maps behind `mapped`, `shuffled` and `noise` were fitted on {n_fit} rows of {rows} (centred "
            f"rank {rank} or more): they span both sides' widths.",
            "",
        ]
    return [
        f"**Under-determined maps**: the maps behind `mapped`, `shuffled` and `noise` were fitted on {n_fit} "
        f"rows of {rows} of centred rank {rank}, which do not span a side's width (`map_underdetermined` in "
        "`patching.csv`). Such a map is not fixed on every direction, and a token residual at the patch site may "
        "lie largely in the unfixed ones: a null here (mapped = shuffled = noise) is not a finding. Fit the maps "
        "on more rows (`patching.fit: words`, `corpus.n`; n - 1 >= the larger width, 4 x width is safer) or choose "
        "`patching.estimator: ridge`, or `procrustes_span` within one model, and check the maps section's "
        'identity control (docs/protocol.md, "Maps").',
        "",
    ]


def _fit_tag(table: pd.DataFrame, head: Any) -> str:
    """`` [fit: X]`` when the table holds several fits side by side (``patching.fit`` a list), else nothing."""
    if "fit" not in table or table["fit"].astype(str).nunique() < 2:
        return ""
    return f" [fit: {head['fit']}]"


def _patch_control_lines(table: pd.DataFrame) -> list[str]:
    """The identity controls first: each target side patched with itself through its own self-map.

    A failed control is said before any result (the chain is broken, so no null below is a finding); a passed
    one gives its numbers. Rows stored before the control existed give nothing.
    """
    if "identity_control" not in table:
        return []
    verdicts = table["identity_control"].astype(str)
    if "control" in table:
        verdicts = verdicts[table["control"].astype(str) != "twin"]
    if (verdicts == "not run").all() or (verdicts.isin(["", "nan"])).all():
        return [
            "The identity control was not run (`patching.identity_control: false`): without it a null from "
            "the maps cannot be told from a broken chain.",
            "",
        ]
    md = [
        "### Identity control",
        "",
        "Donor = target model and language, through the map fitted from the target side's rows onto themselves: "
        "it must be the identity (`identity_control_dev` = ||R - I||_F / sqrt(d) near 0, the mapped patch-site "
        "states at cosine 1 with the true ones, P@1 1) and `mapped` must patch like `within` (here also "
        "`unprojected`: the same vector) within their 95% Wilson intervals in every cell.",
        "",
    ]
    kinds = table.get("control", pd.Series("", index=table.index)).astype(str)
    control = table[kinds == "identity"]
    for _experiment, g in (control if not control.empty else table[kinds != "twin"]).groupby("experiment", sort=False):
        head = g.iloc[0]
        numbers = (
            f"||R - I||_F / sqrt(d) = {float(head['identity_control_dev']):.3g}, patch-site cosine "
            f"{float(head['identity_control_cos']):.4f}, P@1 {float(head['identity_control_p1']):.2f}"
        )
        where = f"{head['target']} ({head['target_language']}){_fit_tag(table, head)}"
        if str(head["identity_control"]) == "failed":
            md += [
                f"**IDENTITY CONTROL FAILED** for {where}: {numbers}; {head.get('identity_control_note', '')}. "
                "The chain from fitted map to patch is broken for this target, so the patching results below "
                "through its maps (`mapped`, `shuffled`, `noise`) are **not findings**, null or not. Fit the maps "
                "on more rows (`patching.fit: words`, `corpus.n`) or choose another estimator.",
                "",
            ]
        else:
            md += [
                f"Identity control **passed** for {where}: {numbers}; `mapped` = `within` within their "
                "intervals at every start layer and relation.",
                "",
            ]
    return md


def _patch_twin_lines(table: pd.DataFrame) -> list[str]:
    """The twin controls: a Llama-family model patched into its rotated twin (the map's known answer is Q)."""
    if "control" not in table or "twin_control" not in table:
        return []
    twin = table[table["control"].astype(str) == "twin"]
    if twin.empty:
        return []
    md = [
        "### Twin control",
        "",
        "A Llama-family model patched into its rotated twin (the same function, residual stream times a random "
        "orthogonal Q): the map fitted between them must be Q (`twin_control_dev` = ||R - Q||_F / sqrt(d) near 0; "
        "a transposed or reversed map is ~1.4 away, which the identity control cannot see), the mapped patch-site "
        "states nearest to the twin's own (P@1 1) and `mapped` must patch like `within`.",
        "",
    ]
    for _experiment, g in twin.groupby("experiment", sort=False):
        head = g.iloc[0]
        numbers = (
            f"||R - Q||_F / sqrt(d) = {float(head['twin_control_dev']):.3g}, patch-site P@1 "
            f"{float(head['twin_control_p1']):.2f}, twin max logit difference "
            f"{float(head.get('twin_max_logit_diff', float('nan'))):.3g} (seed {head.get('twin_seed', '')})"
        )
        if str(head["twin_control"]) == "failed":
            md += [
                f"**TWIN CONTROL FAILED** for {head['donor']}{_fit_tag(table, head)}: {numbers}; "
                f"{head.get('twin_control_note', '')}. "
                "The chain is broken: the experiment's rows say `chain: broken` and are **not findings**.",
                "",
            ]
        else:
            md += [f"Twin control **passed** for {head['donor']}{_fit_tag(table, head)}: {numbers}.", ""]
    return md


def _unpatched_accuracy(table: pd.DataFrame) -> list[str]:
    """The target's unpatched accuracy per relation and language: a flip needs a target that knew B's answer."""
    if "clean_accuracy" not in table:
        return []
    none = table[(table["condition"].astype(str) == "none") & table["applicable"].astype(str).isin(["True", "1"])]
    if "control" in none:
        none = none[~none["control"].astype(str).isin(["identity", "twin"])]
    if none.empty:
        return []
    none = none.assign(target_side=none["target"].astype(str) + " (" + none["target_language"].astype(str) + ")")
    acc = none.groupby(["relation", "target_side"], sort=False)["clean_accuracy"].first().unstack("target_side")
    acc = acc.reset_index()
    return [
        "Unpatched accuracy (top-1 is the first token of B's answer, over each cell's trials): where it is "
        "low the target never knew the answer, and a flip toward A cannot be read as carried knowledge.",
        "",
        md_table(acc, digits=2),
        "",
    ]


def patching_section(table: pd.DataFrame, fig_dir: Path) -> list[str]:
    """Flip rates per condition and start layer, the within-model ceiling and the controls."""
    from interlingua.report.figures import _safe, patching_figure

    md = [
        "## Cross-model patching",
        "",
        "The target reads a prompt about country B; at the country's tokens, from start layer j to the last, "
        "its residual is replaced by a residual about country A: its own (`within`, the ceiling), the donor's "
        "mapped into its basis (`mapped`), the donor's unmapped (`unprojected`, equal widths only), the donor's "
        "for another country through the same map (`shuffled`), or Gaussian noise matched to the mapped donor's "
        "mean and per-dimension variance (`noise`). A flip: the target's top-1 next token becomes the first token "
        "of A's answer. Directional success: log p of A's answer's first token rose over the unpatched run; "
        "`success_answer`: the same for A's whole answer (every token, teacher-forced after the patched prompt). "
        'Intervals are Wilson 95% (`patching.csv`; docs/protocol.md, "Patching").',
        "",
    ]
    cols = [
        "relation",
        "donor_language",
        "target_language",
        "layer",
        "condition",
        "n",
        "flip_rate",
        "flip_low",
        "flip_high",
        "success_rate",
        "success_low",
        "success_high",
        "success_answer_rate",
        "success_answer_low",
        "success_answer_high",
        "mean_norm_ratio",
        "clean_accuracy",
        "map_site_cos",
        "unprojected_gap_flip",
        "reason",
    ]
    table = table.copy()
    if "experiment" not in table or table["experiment"].isna().any():  # rows stored before experiments had labels
        table["experiment"] = table["donor"].astype(str) + "->" + table["target"].astype(str)
    md += _patch_control_lines(table)
    md += _patch_twin_lines(table)
    md += _unpatched_accuracy(table)
    several = table["experiment"].nunique() > 1
    for experiment, eg in table.groupby("experiment", sort=False):
        head = eg.iloc[0]
        if several:
            md += [
                f"### {head['donor']} ({head['donor_language']}) -> {head['target']} ({head['target_language']})"
                f"{_fit_tag(table, head)}",
                "",
            ]
        n_pairs = (
            f"; trials per cell: {head['pairs']}" if "pairs" in eg and str(head["pairs"]) not in ("", "nan") else ""
        )
        md += [f"Donor `{head['donor']}`, target `{head['target']}` (`{experiment}`{n_pairs}).", ""]
        md += [md_table(eg[[c for c in cols if c in eg]], digits=3), ""]
        md += _patch_maps_note(eg)
        stem = f"{head['donor']}_{head['donor_language']}_{head['target']}_{head['target_language']}"
        name = f"patching_{_safe(stem)}.png" if several else "patching.png"
        title = f"{head['donor']} ({head['donor_language']}) -> {head['target']} ({head['target_language']})"
        patching_figure(eg, title, fig_dir / name)
        md += [f"![patching](figures/{name})", ""]
    return md


def _transport_control_lines(table: pd.DataFrame) -> list[str]:
    """The correspondence controls first, per directed pair: the self-plan verdict, then stability vs chance.

    A failed self-plan control is said before any NLL (no correspondence could have been recovered, so no
    delta below is a finding); a passed one gives its worst numbers. Rows stored before the controls existed
    give nothing.
    """
    if "self_control" not in table:
        return []
    pairs = table.drop_duplicates(subset=["target", "donor"])
    ran = pairs[pairs["self_control"].astype(str).isin(["passed", "failed"])]
    if ran.empty:
        return [
            "The correspondence controls were not run (`transport.controls: false`): nothing below says whether "
            "a neuron correspondence could have been recovered at all.",
            "",
        ]
    ifaces = [f for f in ("mlp", "attn", "residual") if f"self_match_{f}" in table]
    md = [
        "### Correspondence controls",
        "",
        "Self-plan: the target's plan with itself (its own probe activations on both sides, middle block, the "
        "fusion's epsilon) must be the identity: `self_match` = fraction of units that are their own row-argmax "
        "(the control fails below 0.9 on any interface), `self_diag` = mean diagonal mass of the row-normalised "
        "plan. Stability: the plans of one block pair fitted on the even and on the odd probe sentences, "
        "`stability` = mean top-k overlap of each target unit's donor units (k = `stability_k`; 1: the same "
        "argmax), beside `stability_chance`, the same with one half's units permuted (`transport.csv`).",
        "",
    ]
    for _, head in ran.iterrows():
        where = f"{head['target']} <- {head['donor']}"
        vals = {f: float(head[f"self_match_{f}"]) for f in ifaces if pd.notna(head[f"self_match_{f}"])}
        worst = min(vals, key=lambda f: vals[f]) if vals else ""
        numbers = (
            f"worst interface {worst}: self_match {vals[worst]:.3f}, self_diag {float(head[f'self_diag_{worst}']):.3f}"
            if worst
            else "no interface"
        )
        stab = [
            f"{f} {float(head[f'stability_{f}']):.3f} (chance {float(head[f'stability_chance_{f}']):.3f})"
            for f in ifaces
            if f"stability_{f}" in head and pd.notna(head[f"stability_{f}"])
        ]
        stab_text = (
            f"Half-split stability (k = {int(head['stability_k'])}): " + ", ".join(stab) + "."
            if stab
            else "Half-split stability not computed (too few probe sentences)."
        )
        if str(head["self_control"]) == "failed":
            md += [
                f"**SELF-PLAN CONTROL FAILED** for {where} (target block {int(head['controls_target_block'])}): "
                f"{numbers}. The cost and epsilon cannot recover even an exact copy of the target, so the NLL "
                f"deltas below are **not findings** about a correspondence, whatever their sign. {stab_text}",
                "",
            ]
        else:
            md += [
                f"Self-plan control **passed** for {where} (target block {int(head['controls_target_block'])}): "
                f"{numbers}. {stab_text}",
                "",
            ]
    return md


def transport_section(table: pd.DataFrame, fig_dir: Path) -> list[str]:
    """OT fusion against its shuffled-plan control, per directed pair, language and alpha, with plan diagnostics."""
    from interlingua.transport import plot_fusion

    name = "transport.png"
    plot_fusion(table, fig_dir / name)
    cols = [
        c
        for c in (
            "target",
            "donor",
            "language",
            "alpha",
            "nll_target",
            "nll_ot",
            "nll_shuffled",
            "delta_ot",
            "ot_minus_rand",
        )
        if c in table
    ]
    diag = [c for c in table.columns if c.startswith(("eps_", "cost_ratio_", "rowmax_uniform_"))]
    return [
        "## Fusion by optimal transport",
        "",
        *_transport_control_lines(table),
        "The donor's MLP and attention-output weights carried into the target's coordinates through row-stochastic "
        "entropic OT plans between neurons (cost 1 - Pearson rho on the probe sentences) and a layer-level plan; "
        "the target keeps its architecture, tokenizer, embeddings, head and q/k/v. `delta_ot` is the fused "
        "target's NLL minus the unfused one (negative: fusion helped); `ot_minus_rand` the same fusion minus one "
        "through row-shuffled plans (negative: the correspondence beat a shuffled one). A plan whose row maximum "
        "is near uniform is indistinguishable from a shuffled one (`transport.csv`; docs/protocol.md).",
        "",
        md_table(table[cols], digits=4),
        "",
        md_table(table.drop_duplicates(subset=["target", "donor"])[["target", "donor", *diag]], digits=3)
        if diag
        else "",
        "",
        f"![fusion](figures/{name})",
        "",
    ]
