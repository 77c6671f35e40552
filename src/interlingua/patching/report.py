"""The patching section of the report: flip rates per condition and start layer, the within-model ceiling and
the controls (identity, twin, unpatched accuracy) first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["patching_section"]


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
        "it must be the identity where the rows determine it (`identity_control_span_dev` = ||V^T (R - I)||_F / "
        "sqrt(r) on the r directions the fit rows span, 0 to rounding, or ridge's shrinkage) and where the patch "
        "is written (the held-out probe states carried to themselves along every principal direction they "
        "occupy, `identity_control_dir` <= 0.1 of the spread there; cosine >= 0.99, P@1 1), and `mapped` must "
        "patch like `within` (here also `unprojected`: the same vector) in every cell: no flip, first-token or "
        "whole-answer success count told apart by Fisher's exact test, Holm-corrected over all the control's "
        "comparisons at family-wise 0.05. The whole-space `identity_control_dev` = ||R - I||_F / sqrt(d) is "
        "reported: off the rows' span an under-determined map is arbitrary.",
        "",
    ]
    kinds = table.get("control", pd.Series("", index=table.index)).astype(str)
    control = table[kinds == "identity"]
    for _experiment, g in (control if not control.empty else table[kinds != "twin"]).groupby("experiment", sort=False):
        head = g.iloc[0]
        numbers = (
            f"on the fit rows' span {float(head.get('identity_control_span_dev', float('nan'))):.3g}, "
            f"patch-site worst direction {float(head.get('identity_control_dir', float('nan'))):.3g}, cosine "
            f"{float(head['identity_control_cos']):.4f}, P@1 {float(head['identity_control_p1']):.2f} "
            f"(whole space ||R - I||_F / sqrt(d) = {float(head['identity_control_dev']):.3g})"
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
        "orthogonal Q): the map fitted between them must be Q where its rows determine it "
        "(`twin_control_span_dev` = ||V^T (R - Q)||_F / sqrt(r) equal to `twin_control_expected_dev`, 0 or "
        "ridge's shrinkage of Q, within 1e-3; a transposed or reversed map is ~1.4 away, which the identity "
        "control cannot see), the mapped patch-site states nearest to the twin's own (P@1 1) and `mapped` must "
        "patch like `within`. The whole-space `twin_control_dev` = ||R - Q||_F / sqrt(d) is reported.",
        "",
    ]
    for _experiment, g in twin.groupby("experiment", sort=False):
        head = g.iloc[0]
        numbers = (
            f"on the fit rows' span {float(head.get('twin_control_span_dev', float('nan'))):.3g} (expected "
            f"{float(head.get('twin_control_expected_dev', float('nan'))):.3g}), whole space ||R - Q||_F / sqrt(d) = "
            f"{float(head['twin_control_dev']):.3g}, patch-site P@1 "
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
    from interlingua.patching.figures import patching_figure
    from interlingua.report.figures import _safe

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
