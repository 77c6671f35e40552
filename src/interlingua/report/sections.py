"""Report sections of the audit and of sweeps (degeneracy, within-group trends, paired contrasts)."""

from __future__ import annotations

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["audit_section", "sweeps_section"]


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
    cols = ["model", "verdict", "adapter_verdict", "max_abs_delta", "tokenizer_verdict", "agree", "compared",
            "nll", "chance_nll", "weights_group", "tokenizer_group"]
    shown = audit[[c for c in cols if c in audit]].copy()
    for c in ("agree", "compared"):
        shown[c] = shown[c].where(shown[c] >= 0, other=pd.NA).astype("Int64").astype(str).replace("<NA>", "–")
    md += [md_table(shown, digits=3), ""]
    if "quality_language" in audit and (audit["quality_language"] != "").any():
        md += [f"NLL: nats per token on the `{audit['quality_language'].iloc[0]}` side, teacher-forced, the "
               "first token of each sentence never predicted, special-token targets not scored.", ""]
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
        cols = ["sweep", "lang_a", "lang_b", "pooling", "measure", "estimator", "n_models", "n_distinct", "verdict",
                "min", "max", "explanation"]
        md += [md_table(degeneracy[cols], digits=4), ""]
    if not trends.empty:
        md += [
            "### Trends within groups",
            "",
            "Spearman rho of the last-layer matched value against each setting, computed inside each group of "
            "cells that share everything else (language pair, the other settings) and then averaged: the cells "
            "of one group are perturbations of one model, not independent samples, so no pooled p is given. "
            "`smallest_p` is the smallest p a rho can reach at the group's n; rho is monotone, so an interior "
            "optimum shows in `argmax`, not in rho.",
            "",
            md_table(trends[["sweep", "variable", "pooling", "measure", "estimator", "groups", "n_per_group",
                             "mean_within_rho", "min_rho", "max_rho", "smallest_p", "argmax"]], digits=3),
            "",
        ]
    if not contrasts.empty:
        md += [
            "### Paired contrasts",
            "",
            "Arm a minus arm b over the cells both have (same settings, same language pair), last layer: "
            "the paired t test and the Wilcoxon signed-rank test, with the t interval of the mean difference.",
            "",
            md_table(contrasts[["a", "b", "pooling", "measure", "estimator", "n", "mean_diff", "ci_low", "ci_high",
                                "t_p", "wilcoxon_p", "wilcoxon_min_p", "note"]], digits=4),
            "",
        ]
    return md
