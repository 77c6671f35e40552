"""The transport section of the report: OT fusion against its shuffled-plan control, with the correspondence
controls first.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["transport_section"]


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
