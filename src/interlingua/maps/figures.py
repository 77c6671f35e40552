"""The maps section's figure: held-out retrieval by layer, per pair and estimator.

Drawn with the report toolkit's helpers (:mod:`interlingua.report.figures`); each is ``cached``, so a rerun
copies a figure drawn from the same inputs by the same code.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.lines  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from interlingua.report import figures as toolkit  # its finish: every figure's one exit
from interlingua.report.figures import (  # noqa: E402
    MAX_CURVES,
    cached,
    colorbar,
    compact_labels,
    depth_image,
    heat,
    heat_height,
    label_width,
    legend_columns,
    panels,
    row_labels,
    set_title,
    shorten,
    suptitle,
)

__all__ = ["map_layers_figure"]


@cached
def map_layers_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """Held-out P@1 per layer pair (x: relative depth of side A) of each pair and estimator: curves (dashed =
    the shuffled-fit control, dotted = chance) for up to :data:`MAX_CURVES` of them, else a heatmap with a row
    each (the controls are in ``maps.csv``)."""
    labels = compact_labels(list(dict.fromkeys(rows["pair"])))
    rows = rows.assign(series=[f"{labels[p]}, {e}" for p, e in zip(rows["pair"], rows["estimator"])])
    series = list(dict.fromkeys(rows.sort_values(["pair", "estimator"])["series"]))
    if len(series) > MAX_CURVES:
        fig, axes = panels(1, 1, 6.0 + label_width(series, len(series)), heat_height(len(series)))
        ax = axes[0, 0]
        im = heat(ax, depth_image(rows, "series", "depth_a", "p1", series), 0.0, 1.0)
        row_labels(ax, series)
        ax.set_xlabel("relative depth of side A (0 = embeddings, 1 = last layer)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        colorbar(fig, im, axes, "held-out P@1 (A->B)")
        chance = float(rows["chance_p1"].max())
        suptitle(fig, title, f"a row per pair and estimator; chance {chance:.3f}; shuffled-fit control in maps.csv")
        return toolkit.finish(fig, path)
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    colours = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, (name, g) in enumerate(rows.groupby("series", sort=True)):
        g = g.sort_values("depth_a")
        c = colours[i % 10]
        ax.plot(g["depth_a"], g["p1"], "-o", color=c, ms=3, lw=1.5, label=shorten(str(name)))
        ax.plot(g["depth_a"], g["shuffled_p1"], "--", color=c, lw=1, alpha=0.7)
    ax.axhline(float(rows["chance_p1"].max()), color="grey", ls=":", lw=1)
    ax.set_xlabel("relative depth of side A (0 = embeddings, 1 = last layer)")
    ax.set_ylabel("held-out P@1 (A->B)")
    ax.set_ylim(0, 1)
    set_title(fig, ax, title, "solid = fitted map, dashed = map fitted on shuffled pairs, dotted = chance")
    ax.grid(alpha=0.3)
    fig.legend(
        loc="outside lower center", ncol=legend_columns(fig, [shorten(x) for x in series]), fontsize=7, frameon=False
    )
    return toolkit.finish(fig, path)
