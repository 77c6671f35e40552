"""Figures of a run: one figure per question, small multiples where a grid of combinations is the point.

Every figure is drawn from the tidy result table the run wrote, so each number a figure shows can be found
in ``results.csv`` (or the section's table). A question asked of every measure and pooling (how does the
value change with depth? which layers correspond across models?) is one figure with a panel per combination,
not a figure per combination; titles are wrapped to the figure's width and the layout engine makes room for
them, so no text is cut (:func:`clipped_texts` says which text would be).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import matplotlib

matplotlib.use("Agg")  # headless: reports are written on servers and in CI
import matplotlib.lines  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.text  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.colors import ListedColormap


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def title_width(width_inches: float, fontsize: float = 9) -> int:
    """Characters of a title line that fit a figure ``width_inches`` wide (see :func:`title_lines`)."""
    return max(20, int(0.9 * width_inches * 72 / (0.6 * fontsize)))


def title_lines(width_inches: float, *lines: str, fontsize: float = 9) -> str:
    """The title ``lines`` wrapped to what fits a figure ``width_inches`` wide at ``fontsize`` (never cut off).

    The axes (over which a title is centred) take about 90% of the figure's width, and a character of the
    default sans-serif font about 0.6 em; a longer line is broken at spaces (or, for a label without spaces
    such as a pair, inside it).
    """
    chars = title_width(width_inches, fontsize)
    return "\n".join(part for line in lines for part in (textwrap.wrap(line, chars) or [""]))


def _set_title(fig: plt.Figure, ax: plt.Axes, *lines: str, fontsize: float = 9) -> None:
    ax.set_title(title_lines(fig.get_figwidth(), *lines, fontsize=fontsize), fontsize=fontsize)


def map_layers_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """Held-out P@1 per layer pair (x: relative depth of side A), one colour per pair and estimator;
    dashed = the shuffled-fit control, dotted = chance."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    colours = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, ((pair, est), g) in enumerate(rows.groupby(["pair", "estimator"], sort=True)):
        g = g.sort_values("depth_a")
        c = colours[i % 10]
        ax.plot(g["depth_a"], g["p1"], "-o", color=c, ms=3, lw=1.5, label=f"{pair} {est}")
        ax.plot(g["depth_a"], g["shuffled_p1"], "--", color=c, lw=1, alpha=0.7)
    ax.axhline(float(rows["chance_p1"].max()), color="grey", ls=":", lw=1)
    ax.set_xlabel("relative depth of side A (0 = embeddings, 1 = last layer)")
    ax.set_ylabel("held-out P@1 (A->B)")
    ax.set_ylim(0, 1)
    _set_title(fig, ax, title, "solid = fitted map, dashed = map fitted on shuffled pairs, dotted = chance")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=1, loc="best")
    return _finish(fig, path)


__all__ = [
    "map_layers_figure",
    "_safe",
    "clipped_texts",
    "panels",
    "layerwise_panels",
    "triangle_panels",
    "grid_panels",
    "predictor_panels",
    "correlation_heatmap",
    "barrier_figure",
    "patching_figure",
]


# -- small multiples: one figure per question, one panel per combination ----------------------------------------


def panels(n_rows: int, n_cols: int, panel_w: float, panel_h: float) -> tuple[plt.Figure, np.ndarray]:
    """A figure of ``n_rows`` x ``n_cols`` panels laid out by matplotlib's constrained layout.

    Constrained layout makes room for the wrapped suptitle, the panels' titles and labels and a legend placed
    ``"outside"``, so nothing is cut at the figure's edge (:func:`clipped_texts` checks it).
    """
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(panel_w * n_cols, panel_h * n_rows + 0.6), squeeze=False, layout="constrained"
    )
    return fig, axes


def suptitle(fig: plt.Figure, *lines: str, fontsize: float = 10) -> None:
    """The figure's title, wrapped to its width (never cut off)."""
    fig.suptitle(title_lines(fig.get_figwidth(), *lines, fontsize=fontsize), fontsize=fontsize)


def panel_title(ax: plt.Axes, *lines: str, fontsize: float = 8) -> None:
    """A panel's title, wrapped to the panel's width."""
    fig = ax.get_figure()
    # the report's axes live on a Figure (panels), never on a SubFigure
    width = fig.get_figwidth() * ax.get_position().width / 0.9 if fig is not None else 4.0  # type: ignore[union-attr]
    ax.set_title(title_lines(max(width, 1.5), *lines, fontsize=fontsize), fontsize=fontsize)


def clipped_texts(fig: plt.Figure, tolerance: float = 1.0) -> list[str]:
    """Every visible, non-empty text of ``fig`` that reaches beyond the figure's edge (what a reader would see cut)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    w, h = fig.bbox.width, fig.bbox.height
    # tick labels of ticks outside an axis' view limits exist but are never drawn
    undrawn: set[int] = set()  # their ids
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            slack = 1e-9 * max(1.0, abs(hi - lo))
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                if not lo - slack <= tick.get_loc() <= hi + slack:
                    undrawn.update(map(id, (tick.label1, tick.label2)))
    out = []
    for text in fig.findobj(matplotlib.text.Text):
        if id(text) in undrawn or not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if box.x0 < -tolerance or box.y0 < -tolerance or box.x1 > w + tolerance or box.y1 > h + tolerance:
            out.append(text.get_text())
    return out


def _finish(fig: plt.Figure, path: Path, dpi: int = 120) -> Path:
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _colorbar(fig: plt.Figure, im: Any, axes: np.ndarray, label: str) -> None:
    bar = fig.colorbar(im, ax=axes, shrink=0.6)
    bar.set_label(label, fontsize=8)
    bar.ax.tick_params(labelsize=7)


def tab10_colours() -> Sequence[tuple[float, float, float]]:
    """The ten RGB colours of matplotlib's qualitative ``tab10`` (a ListedColormap; its stubs type them loosely)."""
    return cast("Sequence[tuple[float, float, float]]", cast("ListedColormap", plt.cm.tab10).colors)


def _pair_colours(pairs: list[str]) -> dict[str, Any]:
    colours = tab10_colours()
    return {p: colours[i % 10] for i, p in enumerate(pairs)}


def layerwise_panels(diag: pd.DataFrame, measures: list[str], poolings: list[str], title: str, path: Path) -> Path:
    """Matched (solid) and shuffled (dashed) value against relative depth: a panel per measure (row) x pooling
    (column), one colour per pair in every panel; ringed: top-3 coordinates hold >= 50% of the variance."""
    pairs = list(dict.fromkeys(diag["pair"]))
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
    fig.legend(handles, pairs, loc="outside lower center", ncol=min(len(pairs), 3), fontsize=7, frameon=False)
    suptitle(fig, title, "solid = matched, dashed = shuffled; ringed: top-3 coordinates hold >= 50% of variance")
    return _finish(fig, path)


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
    ax.set_xticks(range(k), matrix.columns, rotation=60, ha="right", fontsize=6)
    ax.set_yticks(range(k), matrix.index, fontsize=6)
    return im


def triangle_panels(
    cells: dict[tuple[str, str], pd.DataFrame], measures: list[str], poolings: list[str], title: str, path: Path
) -> Path:
    """Last-layer sides x sides, a panel per measure (row) x pooling (column): lower triangle matched, upper
    (italic) shuffled; one colour scale."""
    k = max((len(m) for m in cells.values()), default=1)
    fig, axes = panels(len(measures), len(poolings), 1.6 + 0.42 * k, 1.4 + 0.42 * k)
    im = None
    for i, measure in enumerate(measures):
        for j, pooling in enumerate(poolings):
            ax = axes[i, j]
            matrix = cells.get((measure, pooling))
            if matrix is None:
                ax.axis("off")
                continue
            im = _triangle(ax, matrix, annotate=k <= 8)
            panel_title(ax, f"{measure}, {pooling}")
    if im is not None:
        _colorbar(fig, im, axes, "value")
    suptitle(fig, title, "lower = matched, upper (italic) = shuffled")
    return _finish(fig, path)


def grid_panels(
    grid: pd.DataFrame,
    columns: list[str],
    title: str,
    path: Path,
    value: str = "matched",
    legend: str = "red star = grid maximum",
) -> Path:
    """Layer x layer heatmaps of ``value``: a row per pair, a column per combination of ``columns`` (e.g.
    measure and pooling), the maximum of each marked."""
    pairs = list(dict.fromkeys(grid["pair"]))
    combos = list(dict.fromkeys(map(tuple, grid[columns].astype(str).to_numpy()))) if columns else [()]
    fig, axes = panels(len(pairs), len(combos), 3.2, 2.7)
    im = None
    for i, pair in enumerate(pairs):
        for j, combo in enumerate(combos):
            ax = axes[i, j]
            g = grid[grid["pair"] == pair]
            for c, v in zip(columns, combo):
                g = g[g[c].astype(str) == v]
            piv = g.pivot_table(index="layer_a", columns="layer_b", values=value)
            if piv.empty or not np.isfinite(piv.to_numpy()).any():
                ax.text(0.5, 0.5, "undefined", ha="center", va="center", fontsize=8, transform=ax.transAxes)
                ax.set_xticks([])
                ax.set_yticks([])
            else:
                im = ax.imshow(piv.to_numpy(), origin="lower", aspect="auto", vmin=0, vmax=1, cmap="viridis")
                r, col = np.unravel_index(np.nanargmax(piv.to_numpy()), piv.shape)
                ax.plot(col, r, "r*", ms=9)
                ax.set_xticks(range(piv.shape[1]), [str(v) for v in piv.columns])
                ax.set_yticks(range(piv.shape[0]), [str(v) for v in piv.index])
                ax.tick_params(labelsize=6)
                ax.set_xlabel(f"layer of {g['model_b'].iat[0]} ({g['lang_b'].iat[0]})", fontsize=7)
                ax.set_ylabel(f"layer of {g['model_a'].iat[0]} ({g['lang_a'].iat[0]})", fontsize=7)
            panel_title(ax, pair, ", ".join(combo), fontsize=7)
    if im is not None:
        _colorbar(fig, im, axes, value)
    suptitle(fig, title, legend)
    return _finish(fig, path)


def predictor_panels(frame: pd.DataFrame, table: pd.DataFrame, title: str, path: Path) -> Path:
    """A scatter per result column (row) x predictor (column) of one pooling and measure; rho, its interval, p
    and q in each panel's title."""
    columns = list(dict.fromkeys(table["column"]))
    predictors = list(dict.fromkeys(table["predictor"]))
    fig, axes = panels(len(columns), len(predictors), 3.0, 2.6)
    kinds = {"within_model": "o", "cross_model": "s"}

    def f(v: float) -> str:
        return "–" if not np.isfinite(v) else (f"{v:.2g}" if abs(v) < 0.001 else f"{v:.3f}")

    for r in table.itertuples():
        ax = axes[columns.index(r.column), predictors.index(r.predictor)]
        if r.column in frame and r.predictor in frame:
            for kind, g in frame.groupby("kind", sort=True):
                ax.scatter(g[r.predictor], g[r.column], marker=kinds.get(str(kind), "o"), s=18, alpha=0.8)
        ax.set_xlabel(str(r.predictor), fontsize=7)
        ax.set_ylabel(f"{r.column} (last layer)", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.grid(alpha=0.3)
        panel_title(
            ax, f"rho {f(r.rho)} [{f(r.ci_low)}, {f(r.ci_high)}]", f"p {f(r.p)}, q {f(r.q)}, n {int(r.n)}", fontsize=7
        )
    suptitle(fig, title, "circle = within-model pair, square = cross-model pair")
    return _finish(fig, path)


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
    _set_title(fig, ax, title)
    return _finish(fig, path, dpi=110)


def barrier_figure(curves: pd.DataFrame, title: str, path: Path) -> Path:
    """NLL along the interpolation (1 - t) A + t B, one line per pair x language, with the straight line dashed."""
    fig, ax = plt.subplots(figsize=(7.0, 4.0), layout="constrained")
    colours = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, ((pair, lang), rows) in enumerate(curves.groupby(["pair", "language"], sort=False)):
        rows = rows.sort_values("t")
        c = colours[i % 10]
        ax.plot(rows["t"], rows["nll"], marker="o", ms=3, color=c, label=f"{pair} ({lang})")
        ax.plot(rows["t"], rows["line"], ls="--", lw=0.8, color=c)
    ax.set_xlabel("t (weight of B)")
    ax.set_ylabel("mean NLL (nats / token)")
    _set_title(fig, ax, title, "dashed = the straight line between the endpoints")
    ax.legend(fontsize=6, loc="best")
    return _finish(fig, path, dpi=110)


def patching_figure(table: pd.DataFrame, title: str, path: Path) -> Path:
    """Flip rate and directional success by start layer, one line per condition, Wilson intervals as error bars;
    a row of panels per relation and language pair of the experiment.

    Both panels, because a flip is the specific outcome but is rare when the target seldom answers the
    probe at all; success is read against the shuffled and noise lines (any disruption raises it).
    """
    panels_ = [("flip", "flip rate (top-1 becomes A's answer)")]
    if {"success_rate", "success_low", "success_high"} <= set(table.columns):
        panels_.append(("success", "directional success (log p(A's first token) rose)"))
    if {"success_answer_rate", "success_answer_low", "success_answer_high"} <= set(table.columns):
        panels_.append(("success_answer", "whole-answer success (log p(A's answer) rose)"))
    ok = table[table["applicable"].astype(str).isin(["True", "true", "1"])]
    keys = ["relation", "donor_language", "target_language"]
    groups = list(dict.fromkeys(map(tuple, table[keys].astype(str).to_numpy())))
    fig, axes = panels(len(groups), len(panels_), 4.6, 3.0)
    for row, (relation, dl, tl) in enumerate(groups):
        sel = ok[
            (ok["relation"].astype(str) == relation)
            & (ok["donor_language"].astype(str) == dl)
            & (ok["target_language"].astype(str) == tl)
        ]
        for ax, (what, label) in zip(axes[row], panels_):
            for condition, g in sel.groupby("condition", sort=False):
                g = g.sort_values("layer")
                rate, low, high = (g[f"{what}_{c}"].astype(float) for c in ("rate", "low", "high"))
                err = np.vstack([rate - low, high - rate])
                ax.errorbar(
                    g["layer"],
                    rate,
                    yerr=err,
                    marker="o",
                    ms=4,
                    capsize=3,
                    lw=1.3,
                    ls="--" if condition == "within" else "-",
                    label=str(condition),
                )
            ax.set_xlabel("start layer j (patched j..L)", fontsize=7)
            ax.set_ylabel(label, fontsize=7)
            ax.set_ylim(-0.02, 1.02)
            ax.tick_params(labelsize=7)
            panel_title(ax, f"{relation} ({dl} -> {tl})")
            ax.legend(fontsize=6, frameon=False)
            ax.grid(alpha=0.3)
    suptitle(fig, title, "Wilson 95% intervals; dashed = within (the ceiling)")
    return _finish(fig, path, dpi=110)
