"""The report sections of ``predictors:`` (what predicts alignment, the typology table) and of the sweeps and
contrasts (degeneracy, within-group trends, paired contrasts).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["predictors_section", "sweeps_section", "typology_section"]


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
    from interlingua.predictors.figures import predictor_panels

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
