"""The predictors section's figure: each result column against each predictor.

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

__all__ = ["predictor_panels"]


@cached
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
    return toolkit.finish(fig, path)
