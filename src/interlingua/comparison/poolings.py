"""The report's pooling comparison: the same pairs under each pooling, layer by layer.

Seed question: does the alignment two sides show depend on how a sentence (or a
word) is summarised? Mean and SGPT pooling give one row per sentence;
``word_aligned`` one row per aligned word pair, so its values compare words
that translate each other, not whole sentences. The figure draws, per measure
and pair kind, the mean over pairs of the matched value (solid) and the
shuffled control (dashed) against relative depth, one colour per pooling, in one
figure of small multiples.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.lines  # noqa: E402
import pandas as pd  # noqa: E402

from interlingua.core.schema import last_layer_rows  # noqa: E402
from interlingua.report import figures as toolkit  # its finish: every figure's one exit
from interlingua.report.figures import cached  # noqa: E402
from interlingua.report.markdown import md_table  # noqa: E402

__all__ = ["pooling_panels", "poolings_section"]


#: More models than this: their within-model pairs are one group (a column each would not fit a page).
MAX_GROUPS = 4


def _group(rows: pd.DataFrame) -> pd.Series:
    within = rows["kind"] != "cross_model"
    models = rows.loc[within, "model_a"].astype(str).nunique()
    if models > MAX_GROUPS:
        return rows["kind"].where(~within, f"within model ({models} models)")
    return rows["kind"].where(~within, "within " + rows["model_a"].astype(str))


@cached
def pooling_panels(rows: pd.DataFrame, measures: list[str], groups: list[str], title: str, path: Path) -> Path:
    """Mean matched (solid) and shuffled (dashed) value over pairs against relative depth, one colour per pooling;
    a panel per measure (row) and group of pairs (column: the pairs within one model, or across models)."""
    from interlingua.report.figures import legend_columns, panel_title, panels, suptitle, tab10_colours

    poolings = list(dict.fromkeys(rows["pooling"]))
    tab10 = tab10_colours()
    colours = {p: tab10[i % 10] for i, p in enumerate(poolings)}
    fig, axes = panels(len(measures), len(groups), 4.2, 2.8)
    grouped = _group(rows)
    for i, measure in enumerate(measures):
        for j, group in enumerate(groups):
            ax = axes[i, j]
            sel = rows[(rows["measure"] == measure) & (grouped == group)]
            for pooling, g in sel.groupby("pooling", sort=False):
                mean = g.groupby("depth_a", sort=True)[["matched", "shuffled"]].mean()
                ax.plot(mean.index, mean["matched"], "-o", color=colours[pooling], ms=3, lw=1.4)
                ax.plot(mean.index, mean["shuffled"], "--", color=colours[pooling], lw=1, alpha=0.7)
            n = sel["pair"].nunique()
            panel_title(ax, f"{group}: {measure} ({n} pair{'s' if n != 1 else ''})")
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            if i == len(measures) - 1:
                ax.set_xlabel("relative depth of side a (0 = embeddings, 1 = last layer)", fontsize=7)
    handles = [matplotlib.lines.Line2D([], [], color=colours[p], marker="o", ms=3, lw=1.4) for p in poolings]
    fig.legend(
        handles, poolings, loc="outside lower center", ncol=legend_columns(fig, poolings), fontsize=7, frameon=False
    )
    suptitle(fig, title, "solid = matched, dashed = shuffled (mean over pairs)")
    return toolkit.finish(fig, path)


def poolings_section(diag: pd.DataFrame, alignments: pd.DataFrame | None, fig_dir: Path) -> list[str]:
    """The poolings side by side over the pairs that have all of them: one figure (a panel per measure and group
    of pairs compared at several layers) and one table (last and peak value per pair, measure and pooling).

    ``diag``: the result rows on each pair's layer diagonal (no grid rows); ``alignments``: the
    ``alignments.csv`` table when the run has word-aligned pooling. A group whose pairs have one layer each
    (cross-model pairs, compared layer by layer in the grids) would be single dots: it is in the table only.
    """
    poolings = list(dict.fromkeys(diag["pooling"]))
    if len(poolings) < 2:
        return []
    md = [
        "## Poolings compared",
        "",
        "The same pairs under each pooling (seed question: is the alignment a property of the models or of how "
        "a sentence is summarised?). Only pairs compared under every pooling count. `word_aligned` rows are "
        "aligned word pairs, not sentences (their `n` is the number of word rows; the shuffled control permutes "
        "word rows, `word_controls.json`; the length control is each word's token and character count).",
        "",
    ]
    if alignments is not None and not alignments.empty:
        md += ["Word alignments (`alignments.csv`):", "", md_table(alignments, digits=2), ""]
    complete = diag.groupby(["measure", "pair"]).filter(lambda g: g["pooling"].nunique() == len(poolings))
    if complete.empty:
        return md + ["No pair is compared under every pooling.", ""]
    layered = complete.groupby(["measure", "pair", "pooling"]).filter(lambda g: g["layer_a"].nunique() > 1)
    if not layered.empty:
        name = "poolings.png"
        measures = list(dict.fromkeys(layered["measure"]))
        groups = list(dict.fromkeys(_group(layered)))
        pooling_panels(layered, measures, groups, "poolings compared, layer by layer", fig_dir / name)
        md += [f"![poolings](figures/{name})", ""]
    last = last_layer_rows(complete)
    scored = complete.dropna(subset=["matched"])  # a measure may be NaN at every layer (with its reason)
    peak = scored.loc[scored.groupby(["measure", "pair", "pooling"])["matched"].idxmax()]
    keys = ["pair", "measure", "pooling"]
    # the peak's calibrated score beside its raw value where the run drew a null at that layer
    calibrated = ["calibrated"] if "calibrated" in peak and peak["calibrated"].notna().any() else []
    summary = (
        last[keys + ["matched", "n"]]
        .rename(columns={"matched": "last"})
        .merge(
            peak[keys + ["matched", *calibrated, "layer_a"]].rename(
                columns={"matched": "peak", "calibrated": "peak calibrated", "layer_a": "peak layer"}
            ),
            on=keys,
            how="left",
        )
    )
    summary["pooling"] = pd.Categorical(summary["pooling"], poolings, ordered=True)
    summary = summary.sort_values(["measure", "pair", "pooling"]).astype({"pooling": str})
    summary["peak layer"] = summary["peak layer"].astype("Int64").astype(str).replace("<NA>", "–")
    md += [
        "Matched value at the last layer and at the peak layer (the layer of largest raw `matched`), and rows (`n`), "
        "per pair, measure and pooling"
        + (
            "; `peak calibrated`: the peak layer's score calibrated against its own permutation null (not against "
            "the search over layers; – where that layer has no null):"
            if calibrated
            else " (raw values: the run drew no permutation null at these layers):"
        ),
        "",
        md_table(summary[keys + ["last", "peak", *(["peak calibrated"] if calibrated else []), "peak layer", "n"]]),
        "",
    ]
    return md
