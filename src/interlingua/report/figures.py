"""Figures of a run: layerwise matched vs shuffled, last-layer triangle, grids.

Every figure is drawn from the tidy result table the run wrote, so each
number a figure shows can be found in ``results.csv``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: reports are written on servers and in CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


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


def layerwise_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """Matched (solid) and shuffled (dashed) value per layer, one colour per pair."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colours = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, (pair, g) in enumerate(rows.groupby("pair", sort=True)):
        g = g.sort_values("layer_a")
        c = colours[i % 10]
        label = pair if rows["model_a"].nunique() > 1 or (rows["kind"] == "cross_model").any() else (
            f"{g['lang_a'].iat[0]}-{g['lang_b'].iat[0]}"
        )
        ax.plot(g["layer_a"], g["matched"], "-o", color=c, ms=3, lw=1.5, label=label)
        ax.plot(g["layer_a"], g["shuffled"], "--", color=c, lw=1, alpha=0.7)
        if g["length_control"].notna().any():
            ax.axhline(float(g["length_control"].iat[0]), color=c, ls=":", lw=1, alpha=0.7)
        dominated = g[np.fmax(g["top3_share_a"], g["top3_share_b"]) >= 0.5]
        ax.plot(dominated["layer_a"], dominated["matched"], "o", mfc="none", mec="black", ms=8, lw=0)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel(str(rows["measure"].iat[0]))
    legend = ("solid = matched, dashed = shuffled, dotted = length control; "
              "ringed: top-3 coordinates hold >= 50% of variance")
    _set_title(fig, ax, title, legend)  # wrapped: never cut at the figure's edge
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def triangle_figure(matrix: pd.DataFrame, title: str, path: Path) -> Path:
    """Lower triangle = matched, upper triangle = shuffled, the usual layout for such comparisons."""
    vals = matrix.to_numpy(dtype=float)
    k = len(matrix)
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * k, 0.8 + 0.7 * k))
    im = ax.imshow(vals, vmin=0.0, vmax=1.0, cmap="viridis")
    for i in range(k):
        for j in range(k):
            if np.isfinite(vals[i, j]):
                style = "italic" if j > i else "normal"
                ax.text(j, i, f"{vals[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if vals[i, j] < 0.6 else "black", style=style)
    ax.set_xticks(range(k), matrix.columns, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(k), matrix.index, fontsize=7)
    _set_title(fig, ax, title, "lower = matched, upper (italic) = shuffled")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def grid_figure(rows: pd.DataFrame, title: str, path: Path, value: str = "matched") -> Path:
    """Layer x layer heatmap of ``value`` (matched CKA, or held-out P@1) with the maximum marked."""
    piv = rows.pivot_table(index="layer_a", columns="layer_b", values=value)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    im = ax.imshow(piv.to_numpy(), origin="lower", aspect="auto", vmin=0, vmax=1, cmap="viridis")
    i, j = np.unravel_index(np.nanargmax(piv.to_numpy()), piv.shape)
    ax.plot(j, i, "r*", ms=12)
    ax.set_xlabel(f"layer of {rows['model_b'].iat[0]} ({rows['lang_b'].iat[0]})")
    ax.set_ylabel(f"layer of {rows['model_a'].iat[0]} ({rows['lang_a'].iat[0]})")
    _set_title(fig, ax, title, "red star = grid maximum")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def map_layers_figure(rows: pd.DataFrame, title: str, path: Path) -> Path:
    """Held-out P@1 per layer pair (x: relative depth of side A), one colour per pair and estimator;
    dashed = the shuffled-fit control, dotted = chance."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["layerwise_figure", "triangle_figure", "grid_figure", "map_layers_figure", "_safe"]


def predictor_figure(frame: pd.DataFrame, column: str, predictor: str, stats_row: pd.Series, path: Path) -> Path:
    """One scatter of a last-layer result against a predictor; rho, interval, p and q in the title."""
    fig, ax = plt.subplots(figsize=(4.6, 3.8))
    kinds = {"within_model": "o", "cross_model": "s"}
    for kind, g in frame.groupby("kind", sort=True):
        ax.scatter(g[predictor], g[column], marker=kinds.get(str(kind), "o"), s=28, alpha=0.8, label=str(kind))
    ax.set_xlabel(predictor)
    ax.set_ylabel(f"{column} (last layer)")

    def f(v: float) -> str:
        return "–" if not np.isfinite(v) else (f"{v:.2g}" if abs(v) < 0.001 else f"{v:.3f}")

    ax.set_title(
        f"{stats_row['method']} rho {f(stats_row['rho'])} [{f(stats_row['ci_low'])}, {f(stats_row['ci_high'])}]\n"
        f"p {f(stats_row['p'])}, q {f(stats_row['q'])}, n {int(stats_row['n'])}",
        fontsize=9,
    )
    ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    fig, ax = plt.subplots(figsize=(1.3 + 1.25 * len(predictors), 1.0 + 0.8 * len(columns)))
    im = ax.imshow(np.ma.masked_invalid(rho), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(predictors)), predictors, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(columns)), columns, fontsize=8)
    for i in range(len(columns)):
        for j in range(len(predictors)):
            ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.04, label="rho")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def barrier_figure(curves: pd.DataFrame, title: str, path: Path) -> Path:
    """NLL along the interpolation (1 - t) A + t B, one line per pair x language, with the straight line dashed."""
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    colours = plt.cm.tab10(np.linspace(0, 1, 10))
    for i, ((pair, lang), rows) in enumerate(curves.groupby(["pair", "language"], sort=False)):
        rows = rows.sort_values("t")
        c = colours[i % 10]
        ax.plot(rows["t"], rows["nll"], marker="o", ms=3, color=c, label=f"{pair} ({lang})")
        ax.plot(rows["t"], rows["line"], ls="--", lw=0.8, color=c)
    ax.set_xlabel("t (weight of B)")
    ax.set_ylabel("mean NLL (nats / token)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def patching_figure(table: pd.DataFrame, title: str, path: Path) -> Path:
    """Flip rate and directional success by start layer, one line per condition, Wilson intervals as error bars.

    Both panels, because a flip is the specific outcome but is rare when the target seldom answers the
    probe at all; success is read against the shuffled and noise lines (any disruption raises it).
    """
    panels = [("flip", "flip rate (top-1 becomes A's answer)")]
    if {"success_rate", "success_low", "success_high"} <= set(table.columns):
        panels.append(("success", "directional success (log p(A's first token) rose)"))
    if {"success_answer_rate", "success_answer_low", "success_answer_high"} <= set(table.columns):
        panels.append(("success_answer", "whole-answer success (log p(A's answer) rose)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 3.8), squeeze=False)
    ok = table[table["applicable"].astype(str).isin(["True", "true", "1"])]
    for ax, (what, label) in zip(axes[0], panels):
        for condition, g in ok.groupby("condition", sort=False):
            g = g.sort_values("layer")
            rate, low, high = (g[f"{what}_{c}"].astype(float) for c in ("rate", "low", "high"))
            err = np.vstack([rate - low, high - rate])
            ax.errorbar(g["layer"], rate, yerr=err, marker="o", ms=4, capsize=3, lw=1.3,
                        ls="--" if condition == "within" else "-", label=str(condition))
        ax.set_xlabel("start layer j (patched j..L)")
        ax.set_ylabel(label)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, frameon=False)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
