"""The report's pooling comparison: the same pairs under each pooling, layer by layer.

Seed question: does the alignment two sides show depend on how a sentence (or a
word) is summarised? Mean and SGPT pooling give one row per sentence;
``word_aligned`` one row per aligned word pair, so its values compare words
that translate each other, not whole sentences. The figure draws, per measure
and pair kind, the mean over pairs of the matched value (solid) and the
shuffled control (dashed) against relative depth, one colour per pooling.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from interlingua.report.markdown import md_table  # noqa: E402
from interlingua.report.figures import _set_title  # noqa: E402
from interlingua.schema import last_layer_rows  # noqa: E402

__all__ = ["pooling_figure", "poolings_section"]


def _group(rows: pd.DataFrame) -> pd.Series:
    return rows["kind"].where(rows["kind"] == "cross_model", "within " + rows["model_a"].astype(str))


def pooling_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """Mean matched (solid) and shuffled (dashed) value over pairs against relative depth, per pooling."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colours = plt.cm.tab10.colors
    for i, (pooling, g) in enumerate(rows.groupby("pooling", sort=False)):
        mean = g.groupby("depth_a", sort=True)[["matched", "shuffled"]].mean()
        c = colours[i % 10]
        ax.plot(mean.index, mean["matched"], "-o", color=c, ms=3, lw=1.5, label=f"{pooling} ({g['pair'].nunique()} pairs)")
        ax.plot(mean.index, mean["shuffled"], "--", color=c, lw=1, alpha=0.7)
    ax.set_xlabel("relative depth of side a (0 = embeddings, 1 = last layer)")
    ax.set_ylabel(str(rows["measure"].iat[0]))
    _set_title(fig, ax, title, "solid = matched, dashed = shuffled (mean over pairs)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def poolings_section(diag: pd.DataFrame, alignments: pd.DataFrame | None, fig_dir: Path) -> list[str]:
    """Per measure and pair kind: the poolings side by side over the pairs that have all of them.

    ``diag``: the result rows on each pair's layer diagonal (no grid rows); ``alignments``: the
    ``alignments.csv`` table when the run has word-aligned pooling.
    """
    from interlingua.report.figures import _safe

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
    for measure, m in diag.groupby("measure", sort=False):
        complete = m.groupby("pair").filter(lambda g: g["pooling"].nunique() == len(poolings))
        if complete.empty:
            continue
        for group_name, g in complete.groupby(_group(complete), sort=False):
            name = f"poolings_{_safe(str(group_name))}_{_safe(str(measure))}.png"
            pooling_figure(g, f"{group_name}: {measure}", fig_dir / name)
            last = last_layer_rows(g)
            scored = g.dropna(subset=["matched"])  # a measure may be NaN at every layer (with its reason)
            peak = scored.loc[scored.groupby(["pair", "pooling"])["matched"].idxmax()]
            summary = (
                last.pivot_table(index="pair", columns="pooling", values="matched", sort=False)
                .reindex(columns=poolings).add_prefix("last: ")
                .join(peak.pivot_table(index="pair", columns="pooling", values="matched", sort=False)
                      .reindex(columns=poolings).add_prefix("peak: "))
                .join(last.pivot_table(index="pair", columns="pooling", values="n", sort=False)
                      .reindex(columns=poolings).astype("Int64").add_prefix("n: "))
                .reset_index()
            )
            md += [f"### {group_name}: `{measure}`", "", f"![poolings](figures/{name})", "",
                   "Matched value at the last layer and at the peak layer, and rows (`n`), per pooling:", "",
                   md_table(summary), ""]
    return md
