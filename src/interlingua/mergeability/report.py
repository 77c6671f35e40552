"""The mergeability section of the report: coverage (route and why), weight diagnostics, barriers and the
checkpoint arm's correlations.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["mergeability_section"]


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
            from interlingua.mergeability.figures import barrier_figure

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
            from interlingua.mergeability.figures import correlation_heatmap

            mirrored = pd.concat([corr, corr.rename(columns={"column": "predictor", "predictor": "column"})])
            correlation_heatmap(
                mirrored, "checkpoint arm: diagnostic x diagnostic rho (q)", fig_dir / "checkpoint_correlations.png"
            )
            md += ["![checkpoint correlations](figures/checkpoint_correlations.png)", ""]
    return md
