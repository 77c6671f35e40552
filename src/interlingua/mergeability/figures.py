"""The mergeability section's figures: barrier curves and the checkpoint arm's correlations.

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

__all__ = ["barrier_figure", "correlation_heatmap"]


@cached
def correlation_heatmap(table: pd.DataFrame, title: str, path: Path) -> Path:
    """Result columns x predictors, coloured by rho (-1..1), each cell annotated with rho and q."""
    columns = list(dict.fromkeys(table["column"]))
    predictors = list(dict.fromkeys(table["predictor"]))
    rho = np.full((len(columns), len(predictors)), np.nan)
    labels = [["" for _ in predictors] for _ in columns]
    for r in table.itertuples():
        i, j = columns.index(r.column), predictors.index(r.predictor)
        rho[i, j] = r.rho
        labels[i][j] = "–" if not np.isfinite(r.rho) else f"{r.rho:.2f}\nq {r.q:.2g}"
    fig, ax = plt.subplots(figsize=(1.3 + 1.25 * len(predictors), 1.0 + 0.8 * len(columns)), layout="constrained")
    im = ax.imshow(np.ma.masked_invalid(rho), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(predictors)), predictors, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(columns)), columns, fontsize=8)
    for i in range(len(columns)):
        for j in range(len(predictors)):
            ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.04, label="rho")
    set_title(fig, ax, title)
    return toolkit.finish(fig, path, dpi=110)


@cached
def barrier_figure(curves: pd.DataFrame, title: str, path: Path) -> Path:
    """NLL along the interpolation (1 - t) A + t B of each pair x language: a line each with the straight line
    dashed for up to :data:`MAX_CURVES`, else a heatmap of the NLL above the straight line, a row each."""
    labels = compact_labels(list(dict.fromkeys(curves["pair"])))
    curves = curves.assign(series=[f"{labels[p]} ({lang})" for p, lang in zip(curves["pair"], curves["language"])])
    series = list(dict.fromkeys(curves["series"]))
    if len(series) > MAX_CURVES:
        fig, axes = panels(1, 1, 5.5 + label_width(series, len(series)), heat_height(len(series)))
        ax = axes[0, 0]
        above = curves.assign(above=curves["nll"] - curves["line"])
        spread = np.abs(above["above"].to_numpy(dtype=float))
        bound = float(np.nanmax(spread)) if np.isfinite(spread).any() else 1.0
        bound = max(bound, 1e-9)
        im = heat(ax, depth_image(above, "series", "t", "above", series), -bound, bound, cmap="RdBu_r")
        row_labels(ax, series)
        ax.set_xlabel("t (weight of B)", fontsize=8)
        colorbar(fig, im, axes, "NLL minus the straight line (nats / token)")
        suptitle(fig, title, "a row per pair and language; red = above the straight line between the endpoints")
        return toolkit.finish(fig, path, dpi=110)
    fig, ax = plt.subplots(figsize=(7.0, 4.0), layout="constrained")
    colours = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, (name, rows) in enumerate(curves.groupby("series", sort=False)):
        rows = rows.sort_values("t")
        c = colours[i % 10]
        ax.plot(rows["t"], rows["nll"], marker="o", ms=3, color=c, label=shorten(str(name)))
        ax.plot(rows["t"], rows["line"], ls="--", lw=0.8, color=c)
    ax.set_xlabel("t (weight of B)")
    ax.set_ylabel("mean NLL (nats / token)")
    set_title(fig, ax, title, "dashed = the straight line between the endpoints")
    fig.legend(
        loc="outside lower center", ncol=legend_columns(fig, [shorten(x) for x in series]), fontsize=7, frameon=False
    )
    return toolkit.finish(fig, path, dpi=110)
