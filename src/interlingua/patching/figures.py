"""The patching section's figure: flip rate per start layer and condition.

Drawn with the report toolkit's helpers (:mod:`interlingua.report.figures`); each is ``cached``, so a rerun
copies a figure drawn from the same inputs by the same code.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.lines  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from interlingua.report import figures as toolkit  # its finish: every figure's one exit
from interlingua.report.figures import (  # noqa: E402
    cached,
    panel_title,
    panels,
    suptitle,
)

__all__ = ["patching_figure"]


@cached
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
                # a Wilson bound can round a hair past its rate (1 - 1e-16 against 1.0): matplotlib refuses any
                # negative error bar
                err = np.clip(np.vstack([rate - low, high - rate]), 0.0, None)
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
    return toolkit.finish(fig, path, dpi=110)
