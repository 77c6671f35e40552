"""A picture of a map: the mapped source cloud over the target cloud, in the target's 2-D PCA basis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from interlingua.maps._checks import check_pair
from interlingua.maps.errors import MapInputError
from interlingua.maps.estimators import Map, get_map
from interlingua.maps.folds import Folds, make_folds

__all__ = ["plot_map_clouds"]


def plot_map_clouds(
    X: Any,
    Y: Any,
    path: str | Path,
    *,
    estimator: str | Map = "procrustes",
    folds: int | float | Folds | None = 5,
    seed: int = 0,
    max_points: int = 500,
    links: int = 25,
    title: str | None = None,
    labels: tuple[str, str] = ("mapped source", "target"),
) -> dict[str, Any]:
    """Draw ``f(X)`` and ``Y`` (one pair, one layer) in the target's first two principal directions; save to ``path``.

    ``folds`` (default 5-fold, seeded): each point of ``f(X)`` is mapped by the
    fold map that did not see it (held-out picture); ``None`` fits once on
    every row (in-sample, said in the title). The basis is the top two right
    singular vectors of the centred ``Y``; both clouds are centred with Y's
    mean before projecting. At most ``max_points`` sentences are drawn (a
    seeded subset) and ``links`` of them are joined to their own target by a
    line. The format follows the suffix (``.png``, ``.pdf``, ``.svg``);
    matplotlib's Agg canvas is used, no window or global pyplot state.
    Returns ``{"path", "n_points", "explained": (share of PC1, share of PC2)}``.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    x, y = check_pair(X, Y, ("X (source)", "Y (target)"), min_rows=4)
    n = x.shape[0]
    est = get_map(estimator)
    if folds is None:
        mapped = est.clone().fit(x, y).transform(x)
        held = "in-sample fit"
    else:
        fs = make_folds(n, folds, seed)
        mapped = np.full_like(y, np.nan)
        for tr, te in fs:
            mapped[te] = est.clone().fit(x[tr], y[tr]).transform(x[te])
        drawn = np.concatenate(fs.tests)
        x, y, mapped = x[drawn], y[drawn], mapped[drawn]
        held = f"held out, {fs.k}-fold" if fs.scheme == "kfold" else "held out, one split"
    if max_points < 2:
        raise MapInputError(f"max_points must be at least 2; got {max_points}.")
    mean = y.mean(axis=0)
    yc = y - mean
    _, s, vt = np.linalg.svd(yc, full_matrices=False)
    if vt.shape[0] < 2:
        raise MapInputError("the target has fewer than two directions; there is no 2-D PCA basis to draw in.")
    basis = vt[:2].T
    energy = float(np.sum(s**2))
    explained = tuple(float(v**2 / energy) if energy > 0 else float("nan") for v in s[:2])
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(y.shape[0], size=min(max_points, y.shape[0]), replace=False))
    py, pm = yc[pick] @ basis, (mapped[pick] - mean) @ basis
    fig = Figure(figsize=(6.0, 5.5), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for i in range(min(links, pick.size)):
        ax.plot([pm[i, 0], py[i, 0]], [pm[i, 1], py[i, 1]], color="0.7", linewidth=0.6, zorder=1)
    ax.scatter(py[:, 0], py[:, 1], s=9, alpha=0.6, label=labels[1], color="tab:blue", zorder=2)
    ax.scatter(pm[:, 0], pm[:, 1], s=9, alpha=0.6, label=labels[0], color="tab:orange", zorder=3)
    ax.set_xlabel(f"target PC1 ({explained[0]:.1%} of variance)")
    ax.set_ylabel(f"target PC2 ({explained[1]:.1%} of variance)")
    ax.set_title(f"{title + ': ' if title else ''}{est.name}, {held}, {pick.size} sentences", fontsize=10)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return {"path": str(path), "n_points": int(pick.size), "explained": explained}
