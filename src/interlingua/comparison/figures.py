"""The figures of compare's report sections: layer-by-layer curves (or a pairs x depth heatmap at scale)
and the last-layer triangles.

Drawn with the report toolkit's helpers (:mod:`interlingua.report.figures`); each is ``cached``, so a rerun
copies a figure drawn from the same inputs by the same code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.lines  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from interlingua.report import figures as toolkit  # its finish: every figure's one exit
from interlingua.report.figures import (  # noqa: E402
    MAX_CURVES,
    MAX_FIGURE_HEIGHT,
    MAX_ROW_LABELS,
    _limits,
    _pair_colours,
    cached,
    colorbar,
    compact_labels,
    depth_image,
    heat,
    heat_height,
    label_width,
    legend_columns,
    panel_title,
    panels,
    row_labels,
    shorten,
    suptitle,
)

__all__ = ["layerwise_panels", "triangle_panels"]


@cached
def layerwise_panels(diag: pd.DataFrame, measures: list[str], poolings: list[str], title: str, path: Path) -> Path:
    """Matched value against relative depth, a panel per measure (row) x pooling (column).

    Up to :data:`MAX_CURVES` pairs: a curve each (solid = matched, dashed = shuffled, one colour per pair in
    every panel; ringed: top-3 coordinates hold >= 50% of the variance). More: a heatmap with a row per pair
    (by kind, then name) and a dot at each pair's peak, so 300 pairs are as readable as 3.
    """
    pairs = list(dict.fromkeys(diag.sort_values(["kind", "pair"], kind="stable")["pair"]))
    labels = compact_labels(pairs)
    if len(pairs) > MAX_CURVES:
        return _layerwise_heat(diag, measures, poolings, pairs, labels, title, path)
    colour = _pair_colours(pairs)
    fig, axes = panels(len(measures), len(poolings), 4.2, 2.8)
    for i, measure in enumerate(measures):
        for j, pooling in enumerate(poolings):
            ax = axes[i, j]
            sel = diag[(diag["measure"] == measure) & (diag["pooling"] == pooling)]
            for pair, g in sel.groupby("pair", sort=False):
                g = g.sort_values("depth_a")
                ax.plot(g["depth_a"], g["matched"], "-o", color=colour[pair], ms=3, lw=1.4)
                ax.plot(g["depth_a"], g["shuffled"], "--", color=colour[pair], lw=1, alpha=0.7)
                dominated = g[np.fmax(g["top3_share_a"], g["top3_share_b"]) >= 0.5]
                ax.plot(dominated["depth_a"], dominated["matched"], "o", mfc="none", mec="black", ms=7, lw=0)
            if sel.empty:
                ax.text(0.5, 0.5, "no layered pairs", ha="center", va="center", fontsize=8, transform=ax.transAxes)
            panel_title(ax, f"{measure}, {pooling}")
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            if i == len(measures) - 1:
                ax.set_xlabel("relative depth (0 = embeddings, 1 = last layer)", fontsize=7)
            if j == 0:
                ax.set_ylabel("value", fontsize=7)
    handles = [matplotlib.lines.Line2D([], [], color=colour[p], marker="o", ms=3, lw=1.4) for p in pairs]
    fig.legend(
        handles,
        [shorten(labels[p]) for p in pairs],
        loc="outside lower center",
        ncol=legend_columns(fig, [shorten(labels[p]) for p in pairs]),
        fontsize=7,
        frameon=False,
    )
    suptitle(fig, title, "solid = matched, dashed = shuffled; ringed: top-3 coordinates hold >= 50% of variance")
    return toolkit.finish(fig, path)


def _layerwise_heat(
    diag: pd.DataFrame,
    measures: list[str],
    poolings: list[str],
    pairs: list[str],
    labels: dict[str, str],
    title: str,
    path: Path,
) -> Path:
    """:func:`layerwise_panels` for many pairs: a row per pair, colour = matched, white dot = the pair's peak."""
    width = 4.2 + label_width([labels[p] for p in pairs], len(pairs)) / len(poolings)
    fig, axes = panels(len(measures), len(poolings), width, heat_height(len(pairs), len(measures)))
    vmin, vmax = _limits(diag["matched"])
    im = None
    shuffled = (
        float(np.nanmax(np.abs(diag["shuffled"].to_numpy(dtype=float)))) if diag["shuffled"].notna().any() else np.nan
    )
    for i, measure in enumerate(measures):
        for j, pooling in enumerate(poolings):
            ax = axes[i, j]
            sel = diag[(diag["measure"] == measure) & (diag["pooling"] == pooling)]
            im = heat(ax, depth_image(sel, "pair", "depth_a", "matched", pairs), vmin, vmax)
            peaks = sel.dropna(subset=["matched"])
            peaks = peaks.loc[peaks.groupby("pair", sort=False)["matched"].idxmax()]
            index = {p: k for k, p in enumerate(pairs)}
            ax.plot(peaks["depth_a"], [index[p] for p in peaks["pair"]], "o", ms=2, mfc="white", mec="none")
            row_labels(ax, [labels[p] for p in pairs], show=j == 0)
            panel_title(ax, f"{measure}, {pooling}")
            ax.tick_params(axis="x", labelsize=7)
            if i == len(measures) - 1:
                ax.set_xlabel("relative depth (0 = embeddings, 1 = last layer)", fontsize=7)
    if im is not None:
        colorbar(fig, im, axes, "matched")
    suptitle(
        fig,
        title,
        f"a row per pair ({len(pairs)}, by kind then name); colour = matched, white dot = peak; "
        f"shuffled control at most {shuffled:.2f} in absolute value (every value in results.csv)",
    )
    return toolkit.finish(fig, path)


def _triangle(ax: plt.Axes, matrix: pd.DataFrame, annotate: bool) -> Any:
    vals = matrix.to_numpy(dtype=float)
    k = len(matrix)
    im = ax.imshow(vals, vmin=0.0, vmax=1.0, cmap="viridis")
    if annotate:
        for i in range(k):
            for j in range(k):
                if np.isfinite(vals[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{vals[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if vals[i, j] < 0.6 else "black",
                        style="italic" if j > i else "normal",
                    )
    step = 1 if k <= MAX_ROW_LABELS else int(np.ceil(k / 30))
    size = max(4.5, min(6.0, 240 / k))
    ax.set_xticks(
        range(0, k, step), [shorten(c, 32) for c in matrix.columns[::step]], rotation=60, ha="right", fontsize=size
    )
    ax.set_yticks(range(0, k, step), [shorten(c, 32) for c in matrix.index[::step]], fontsize=size)
    return im


#: Above this many sides the triangles stack one a row (side by side their labels would be unreadable).
STACK_SIDES = 20


@cached
def triangle_panels(
    cells: dict[tuple[str, str], pd.DataFrame], measures: list[str], poolings: list[str], title: str, path: Path
) -> Path:
    """Last-layer sides x sides, a panel per measure (row) x pooling (column): lower triangle matched, upper
    (italic) shuffled; one colour scale."""
    k = max((len(m) for m in cells.values()), default=1)
    # more than STACK_SIDES sides: one panel a row, so each is as wide as the page and its labels stay legible
    # (41 sides x 3 poolings side by side came out at ~2 pt on a 1280 px page)
    combos = [(m, p) for m in measures for p in poolings]
    n_cols = 1 if k > STACK_SIDES else max(len(poolings), 1)
    n_rows = -(-len(combos) // n_cols)
    cell = min(0.42, 6.0 / k, MAX_FIGURE_HEIGHT / max(n_rows, 1) / k)  # inches: bounded for many sides
    fig, axes = panels(n_rows, n_cols, 1.6 + cell * k, 1.4 + cell * k)
    for extra in range(len(combos), n_rows * n_cols):
        axes[extra // n_cols, extra % n_cols].axis("off")
    im = None
    for c, (measure, pooling) in enumerate(combos):
        ax = axes[c // n_cols, c % n_cols]
        matrix = cells.get((measure, pooling))
        if matrix is None:
            ax.axis("off")
            continue
        im = _triangle(ax, matrix, annotate=k <= 8)
        panel_title(ax, f"{measure}, {pooling}")
    if im is not None:
        colorbar(fig, im, axes, "value")
    suptitle(fig, title, "lower = matched, upper (italic) = shuffled")
    return toolkit.finish(fig, path)
