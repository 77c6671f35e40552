"""The maps section of the report: the identity controls and under-determination first, each pair's best layer
pair, retrieval by layer, every layer pair's grid and the mapped-vs-target picture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from interlingua.maps.figures import map_layers_figure
from interlingua.report.figures import grid_panels
from interlingua.report.markdown import fmt, md_table

__all__ = ["maps_section"]


def maps_section(maps: pd.DataFrame, info: dict[str, Any], fig_dir: Path) -> list[str]:
    """Held-out maps: the best layer pair per pair x estimator x direction, P@1 curves, grids, the picture."""
    agg = maps[(maps["fold"] == -1) & (~maps["grid"].astype(bool))]
    lines = [
        "## Maps between sides (held-out sentences)",
        "",
        f"Maps fitted on training folds ({int(agg['n_folds'].max()) if not agg.empty else 0}-fold, folds in "
        "`folds.json`) and scored on the held-out sentences: retrieval of the right translation among all "
        "held-out targets by cosine (P@1, MRR) and with CSLS hubness correction, relative MSE, next to chance, "
        "the identity map (equal widths only) and a map fitted on the pair's shuffled control (it must "
        "retrieve at chance). Every number is in `maps.csv`; the rows below are each pair's best layer pair.",
        "",
    ]
    if agg.empty:
        return lines + ["No map could be evaluated (see `note` in maps.csv).", ""]
    lines += _map_controls(agg)
    valid = agg.dropna(subset=["p1"])
    if not valid.empty:
        best = valid.loc[valid.groupby(["pair", "estimator", "direction"])["p1"].idxmax()]
        cols = [
            "pair",
            "estimator",
            "direction",
            "layer_a",
            "layer_b",
            "p1",
            "p1_low",
            "p1_high",
            "p1_csls",
            "mrr",
            "rel_mse",
            "chance_p1",
            "shuffled_p1",
            "identity_p1",
            "resid_erank",
            "resid_out50",
        ]
        lines += [
            md_table(
                best[cols].rename(
                    columns={"resid_erank": "residual eff. rank", "resid_out50": "residual outside top-50"}
                )
            ),
            "",
            "`rel_mse`: held-out squared error of the mapped rows divided by the target rows' squared "
            "distance from their mean (0 = perfect; 1 = no better than predicting the target mean; above 1: "
            "worse than that, e.g. when the sides differ in scale and the map does not rescale). "
            "`p1_low`/`p1_high`: bootstrap interval of P@1; `chance_p1`: 1 / held-out sentences per fold.",
            "",
        ]
    forward = agg[agg["direction"] == "a->b"]
    if forward.groupby(["pair", "estimator"]).size().max() > 1:
        name = "maps_layers.png"
        map_layers_figure(forward, "held-out retrieval by layer", fig_dir / name)
        lines += ["### Retrieval by layer", "", f"![maps by layer](figures/{name})", ""]
    grid = maps[maps["grid"].astype(bool) & (maps["fold"] == -1)]
    if not grid.empty:
        name = "maps_grids.png"
        grid_panels(
            grid,
            ["estimator", "direction"],
            "held-out P@1 of every layer pair",
            fig_dir / name,
            value="p1",
            legend="red star = best layer pair",
        )
        lines += ["### Every layer pair", "", f"![maps grids](figures/{name})", ""]
    fig = info.get("map_figure")
    if fig:
        lines += [
            "### Mapped against target",
            "",
            f"Held-out sentences of {fig['pair']} at layers ({fig['layer_a']}, {fig['layer_b']}), mapped by "
            f"{fig['estimator']} into the target's 2-D principal-component basis, with the targets:",
            "",
            f"![mapped vs target]({fig['path']})",
            "",
        ]
    if agg["note"].astype(str).str.len().any():
        lines += [
            "The notes of map rows are listed once each, with the rows they apply to, under **Warnings and "
            "notes** below.",
            "",
        ]
    return lines


def _map_controls(agg: pd.DataFrame) -> list[str]:
    """The identity control and under-determination of every map, first: whether a null from a map can mean anything."""
    lines = [
        "### Positive control and under-determination (read first)",
        "",
        "Each estimator is also fitted from a row's source side onto ITSELF on the same folds; that map must be "
        "the identity (`identity_control` in `maps.csv`: held-out cosine of self-mapped and true rows >= 0.99 "
        "and ||R - I||_F / sqrt(d) <= 0.1). A map is under-determined when the centred training rows do not span "
        "a side's width (`rank` < width, always when `n_fit` - 1 < width): the data then do not fix it on every "
        "direction.",
        "",
    ]
    t = agg.copy()
    t["ran"] = t["identity_control"].isin(["passed", "failed"])
    t["failed"] = t["identity_control"] == "failed"
    t["widths"] = t["width_source"].astype(str) + " -> " + t["width_target"].astype(str)
    keys = ["pair", "estimator", "direction"]
    summary = (
        t.groupby(keys, sort=False)
        .agg(
            layer_pairs=("layer_a", "size"),
            n_fit=("n_fit", "min"),
            widths=("widths", "first"),
            rank=("rank", "min"),
            underdetermined=("underdetermined", "sum"),
            ran=("ran", "sum"),
            failed=("failed", "sum"),
            dev=("identity_control_dev", "max"),
            cos=("identity_control_cos", "min"),
            p1=("identity_control_p1", "min"),
        )
        .reset_index()
    )
    summary["identity control"] = [
        "not run" if r.ran == 0 else (f"FAILED {r.failed}/{r.ran}" if r.failed else f"passed {r.ran}/{r.ran}")
        for r in summary.itertuples(index=False)
    ]
    summary["underdetermined"] = [f"{u}/{k}" for u, k in zip(summary["underdetermined"], summary["layer_pairs"])]
    show = summary[
        [*keys, "layer_pairs", "n_fit", "widths", "rank", "underdetermined", "identity control", "dev", "cos", "p1"]
    ].rename(
        columns={
            "layer_pairs": "layer pairs",
            "underdetermined": "under-determined",
            "dev": "worst identity deviation",
            "cos": "worst self cosine",
            "p1": "worst self P@1",
        }
    )
    lines += [md_table(show), ""]
    failed = summary[summary["failed"] > 0]
    if not failed.empty:
        which = ", ".join(f"{r.estimator} {r.direction} of {r.pair}" for r in failed.itertuples(index=False))
        lines += [
            f"**IDENTITY CONTROL FAILED** for {which}: the estimator fitted from a side onto itself is not the "
            f"identity (||R - I||_F / sqrt(d) up to {fmt(float(failed['dev'].max()))}, limit 0.1; held-out "
            f"cosine down to {fmt(float(failed['cos'].min()))}, limit 0.99). These maps cannot pass their positive "
            "control, so a null from them (no retrieval, no transfer in patching) is not a finding. A self-map that "
            "is right on the held-out sentences (cosine near 1) but far from the identity still moves every state "
            "with energy in directions the sentences do not visit, such as a token residual at a patch site.",
            "",
        ]
    elif summary["ran"].sum():
        lines += [
            f"The identity control passes for every map that ran it (worst ||R - I||_F / sqrt(d) "
            f"{fmt(float(summary['dev'].max()))}, worst held-out cosine {fmt(float(summary['cos'].min()))}).",
            "",
        ]
    under = t[t["underdetermined"].astype(bool)]
    if not under.empty:

        def span(col: str) -> str:
            lo, hi = int(under[col].min()), int(under[col].max())
            return str(lo) if lo == hi else f"{lo}-{hi}"

        lines += [
            f"**Under-determined maps**: {len(under)} of {len(t)} map rows were fitted on n_fit = {span('n_fit')} "
            f"rows of centred rank {span('rank')}, for widths up to "
            f"{int(max(under['width_source'].max(), under['width_target'].max()))}: the data do not fix these maps on "
            "every direction (Procrustes takes the SVD's arbitrary choice there). What to do: fit on more sentences "
            "(`corpus.n` so that n_fit - 1 >= the larger width, 4 x width is safer; the Bible corpus has about "
            "31,000 parallel verses for most language pairs), or choose a regularised map in `maps.estimators`: "
            "`ridge` (shrinks the unseen directions to zero; any widths) or `procrustes_span` (the identity on the "
            "unseen directions; equal widths, meant for two languages of one model). See docs/protocol.md, Maps.",
            "",
        ]
    return lines
