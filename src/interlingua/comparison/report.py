"""Compare's part of the report: the headline, every pair's last layer, the triangles, the layerwise curves and
their peaks, the cross-model grids, the poolings compared and the dominant dimensions (all from ``results.csv``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interlingua.comparison.figures import layerwise_panels, triangle_panels
from interlingua.comparison.poolings import poolings_section
from interlingua.report.figures import grid_panels
from interlingua.report.markdown import last_layer_table, md_table, value_range

__all__ = ["MAX_TRIANGLE_SIDES", "appendix", "headline", "report", "triangle_matrix"]


def triangle_matrix(last: pd.DataFrame) -> pd.DataFrame:
    """Sides x sides: lower triangle matched, upper triangle shuffled."""
    sides = sorted(set(zip(last["model_a"], last["lang_a"])) | set(zip(last["model_b"], last["lang_b"])))
    labels = [f"{m}:{lang}" for m, lang in sides]
    idx = {s: i for i, s in enumerate(sides)}
    mat = np.full((len(sides), len(sides)), np.nan)
    for r in last.itertuples(index=False):
        i, j = idx[(r.model_a, r.lang_a)], idx[(r.model_b, r.lang_b)]
        lo, hi = max(i, j), min(i, j)
        mat[lo, hi] = r.matched
        mat[hi, lo] = r.shuffled
    return pd.DataFrame(mat, index=labels, columns=labels)


#: More sides than this, with most of their cells not compared: no triangle figure (it would be mostly blank).
MAX_TRIANGLE_SIDES = 30

_range = value_range


def _calibrated_clause(g: pd.DataFrame, alpha: float) -> str:
    """``calibrated a–b (median m), above chance in k/n (alpha = ...)``; empty without calibrated values."""
    if "calibrated" not in g or not g["calibrated"].notna().any():
        return ""
    c = g["calibrated"].dropna()
    return (
        f"calibrated {c.min():.3f}–{c.max():.3f} (median {c.median():.3f}), above chance (> 0 at alpha = "
        f"{alpha:g}) in {int((c > 0).sum())}/{len(g)}; among the raw values, "
    )


def _shown(spec: dict[str, Any]) -> str:
    """Which value the headline and the questions read (inference.score), in one sentence."""
    inf = spec.get("inference", {})
    if inf.get("score", "calibrated") == "raw":
        return "Values shown: raw `matched` (inference.score: raw); `calibrated` is in results.csv."
    if not inf.get("permutations", 0):
        return (
            "Values shown: raw `matched`: no permutation null was drawn (inference.permutations: 0), "
            "so no score is calibrated."
        )
    return (
        f"Values shown: the `calibrated` score first (the excess of `matched` over `tau`, the permutation null's "
        f"{1 - float(inf.get('alpha', 0.05)):g} order statistic, scaled by the room above it: 0 = not above chance, "
        "comparable across widths, depths and n; see the glossary), then the raw `matched`."
    )


def _headline(
    last: pd.DataFrame, table: pd.DataFrame, measure: str, pooling: str, alpha: float = 0.05, score: str = "calibrated"
) -> list[str]:
    """One line per kind of pair: the calibrated score (unless the run reads raw values), which raw value is the
    answer (the length-removed one when the run has it), how it compares with the shuffled control, and whether
    length alone scores as high as the matched value."""
    sel = last[(last["measure"] == measure) & (last["pooling"] == pooling)]
    lines: list[str] = []
    for kind, g in sel.groupby("kind"):
        above = int((g["matched"] > g["shuffled"]).sum())
        lead = _calibrated_clause(g, alpha) if score == "calibrated" else ""
        head = f"- **{kind.replace('_', ' ')}** ({len(g)} pairs, last layer, {pooling} pooling, `{measure}`): {lead}"
        removed = g["matched_length_removed"]
        if removed.notna().any():
            txt = (
                f"the answer is the length-removed value, {_range(removed)} (median {removed.median():.3f}): "
                f"what the two sides share beyond sentence length. The raw matched value is "
                f"{_range(g['matched'])}"
            )
        else:
            txt = f"the answer is the matched value, {_range(g['matched'])} (median {g['matched'].median():.3f})"
        txt += f", against {_range(g['shuffled'])} shuffled (matched > shuffled in {above}/{len(g)})"
        control = g["length_control"]
        if control.notna().any():
            larger = int((control >= g["matched"]).sum())
            txt += f". Length features alone score {_range(control)}"
            if larger:
                txt += (
                    f", at least the matched value in {larger}/{len(g)} pairs: there length explains as much "
                    "as the raw value, so read only the length-removed one"
                )
            else:
                txt += ", below the matched value in every pair"
        if "p_value" in g and g["p_value"].notna().any():
            k = int(g["n_permutations"].max())
            sig = int((g["p_value"] <= 0.05).sum())
            txt += f"; permutation p <= 0.05 in {sig}/{len(g)} (K = {k})"
        lines.append(head + txt + ".")
    diag = table[(~table["grid"].astype(bool)) & (table["measure"] == measure) & (table["pooling"] == pooling)]
    multi = diag.groupby("pair").filter(lambda g: len(g) > 2 and g["matched"].notna().any())
    if not multi.empty:
        peaks = multi.loc[multi.dropna(subset=["matched"]).groupby("pair")["matched"].idxmax()]
        lines.append(
            f"- Layerwise pairs peak at relative depth {peaks['depth_a'].min():.2f}–{peaks['depth_a'].max():.2f} "
            f"(median {peaks['depth_a'].median():.2f}); the embedding layer (0) scores "
            f"{multi[multi['layer_a'] == 0]['matched'].median():.3f} median matched."
        )
    return lines


def _diagnostics_section(diag: pd.DataFrame, pooling: str, standardize: bool = False) -> list[str]:
    """Per model side and layer: variance share of the top-1/top-3 coordinates and of pooled special tokens."""
    sel = diag[diag["pooling"] == pooling]
    if sel.empty:
        return []
    sides = pd.concat(
        [
            sel[["model_a", "lang_a", "layer_a", "top1_share_a", "top3_share_a", "special_share_a"]].set_axis(
                ["model", "language", "layer", "top1", "top3", "special"], axis=1
            ),
            sel[["model_b", "lang_b", "layer_b", "top1_share_b", "top3_share_b", "special_share_b"]].set_axis(
                ["model", "language", "layer", "top1", "top3", "special"], axis=1
            ),
        ]
    ).drop_duplicates(subset=["model", "language", "layer"])
    per_model = sides.groupby(["model", "layer"])[["top1", "top3", "special"]].max().reset_index()
    flagged = per_model[per_model["top3"] >= 0.5]
    lines = [
        f"## Dominant dimensions and special tokens ({pooling} pooling)",
        "",
        "Share of each layer's variance held by its largest one and three coordinates (largest over the "
        "model's languages), and the share of centred variance carried by pooled special tokens. Where a "
        "few coordinates hold most of the variance, linear measures mostly compare those coordinates; "
        "`standardize: true` z-scores every coordinate first (this run: "
        f"{'on' if standardize else 'off'}).",
        "",
    ]
    if flagged.empty:
        lines += ["No layer has half or more of its variance in three coordinates.", ""]
    else:
        lines += [
            md_table(
                flagged.rename(
                    columns={"top1": "top-1 share", "top3": "top-3 share", "special": "special-token share"}
                ),
                source="results.csv",
            ),
            "",
        ]
    return lines


def _peak_columns(peaks: pd.DataFrame) -> tuple[list[str], str]:
    """The value columns of a peak-layer table and the words that say which value is shown: the calibrated score
    beside the raw ``matched`` where the run drew a null at those layers, the raw values alone where it did not."""
    if "calibrated" in peaks and peaks["calibrated"].notna().any():
        return ["calibrated", "matched", "shuffled"], (
            " (the layer of largest raw `matched`; `calibrated`: that layer's score calibrated against its own "
            "permutation null, not against the search over layers; – where the layer has no null)"
        )
    return ["matched", "shuffled"], " (raw `matched`: the run drew no permutation null at these layers)"


def headline(tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> list[str]:
    """The headline's first lines: which value is shown, then one line per kind of pair (and the layerwise peaks)."""
    spec = info["spec"]
    table = tables["results"]
    inference = spec.get("inference", {})
    return [
        _shown(spec),
        "",
        *_headline(
            last_layer_table(table),
            table,
            list(spec["measures"])[0],
            list(spec["pooling"])[0],
            float(inference.get("alpha", 0.05)),
            str(inference.get("score", "calibrated")),
        ),
    ]


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """Every pair's last layer, the triangles, the layerwise curves, the grids and the poolings compared (none
    without a results table)."""
    if "results" not in tables:
        return []
    spec = info["spec"]
    table = tables["results"]
    measures = list(spec["measures"])
    poolings = list(spec["pooling"])
    last = last_layer_table(table)
    md: list[str] = []
    md += ["## Last layer, every pair", ""]
    keys = ["pair", "pooling", "measure"]
    values = ["calibrated", "tau", "matched", "shuffled", "p_value", "matched_length_removed", "length_control"]
    extra = [
        c
        for c in ("jackknife_low", "jackknife_high", "bootstrap_low", "bootstrap_high")
        if c in last and last[c].notna().any()
    ]
    optional = {"p_value", "calibrated", "tau"}
    cols = [c for c in values if c not in optional or (c in last and last[c].notna().any())] + extra
    shown = last.sort_values(["measure", "pooling", "kind", "pair"])[keys + cols + ["layer_a", "layer_b"]]
    md += [md_table(shown, source="results.csv"), ""]

    cells = {}
    for measure in measures:
        for pooling in poolings:
            sel = last[(last["measure"] == measure) & (last["pooling"] == pooling)]
            if not sel.empty:
                cells[(measure, pooling)] = triangle_matrix(sel)
    sides = max((len(m) for m in cells.values()), default=0)
    filled = max((float(np.isfinite(m.to_numpy()).mean()) for m in cells.values()), default=0.0)
    if cells and sides > MAX_TRIANGLE_SIDES and filled < 0.5:
        md += [
            "## Last-layer triangles",
            "",
            f"Not drawn: {sides} sides of which the run compares {filled:.0%} of the cells, so a sides x sides "
            "picture would be mostly blank; every pair's values are in the table above and in `results.csv`.",
            "",
        ]
        cells = {}
    if cells:
        name = "triangles.png"
        triangle_panels(
            cells,
            [m for m in measures if any(k[0] == m for k in cells)],
            [p for p in poolings if any(k[1] == p for k in cells)],
            "last layer: the pairs the run compared (blank = not compared)",
            fig_dir / name,
        )
        md += [
            "## Last-layer triangles",
            "",
            "The sides of the run against each other at the last layer, a panel per measure (row) and pooling "
            "(column): lower triangle = matched, upper triangle = shuffled control; a blank cell is a pair the "
            "config did not ask for (the values are in the table above).",
            "",
            f"![last-layer triangles](figures/{name})",
            "",
        ]

    diag = table[~table["grid"].astype(bool)]
    layered = diag.groupby(["pair", "measure", "pooling"]).filter(lambda x: len(x) > 1)
    if not layered.empty:
        name = "layers.png"
        lm = [m for m in measures if m in set(layered["measure"])]
        lp = [p for p in poolings if p in set(layered["pooling"])]
        layerwise_panels(layered, lm, lp, "layer by layer: matched vs shuffled", fig_dir / name)
        valid = layered.dropna(subset=["matched"])
        peaks = valid.loc[valid.groupby(["pair", "measure", "pooling"], sort=False)["matched"].idxmax()]
        peak_cols, peak_note = _peak_columns(peaks)
        md += [
            "## Layerwise matched vs shuffled",
            "",
            "Pairs compared at every layer (within a model), a panel per measure (row) and pooling (column); "
            "x is relative depth so models of different depth share an axis"
            + (
                "; cross-model pairs are compared layer by layer in the grids below."
                if "grid" in table and table["grid"].astype(bool).any()
                else "."
            ),
            "",
            f"![layerwise](figures/{name})",
            "",
            "Peak layer per pair" + peak_note + ":",
            "",
            md_table(
                peaks[["pair", "measure", "pooling", "layer_a", "depth_a", *peak_cols]].rename(
                    columns={"layer_a": "peak layer", "depth_a": "peak depth"}
                ),
                source="results.csv",
            ),
            "",
        ]

    grid = table[table["grid"].astype(bool)] if "grid" in table else table.iloc[0:0]
    if not grid.empty:
        name = "grids.png"
        grid_panels(grid, ["measure", "pooling"], "cross-model layer x layer grids: matched value", fig_dir / name)
        best = grid[grid["grid_max"].astype(bool)].drop_duplicates(subset=["pair", "measure", "pooling"])
        maxima = best[
            [
                "pair",
                "measure",
                "pooling",
                "layer_a",
                "layer_b",
                "matched",
                "shuffled",
                "n_permutations",
                "p_grid_max",
                "tau_grid_max",
                "calibrated_grid_max",
                "calibrated_grid_mean",
            ]
        ]
        undefined = grid.groupby(["pair", "measure", "pooling"], sort=False).filter(
            lambda g: not g["grid_max"].astype(bool).any()
        )
        md += [
            "## Cross-model layer x layer grids",
            "",
            "Every layer of one model against every layer of the other, a column of panels per measure and "
            "pooling"
            + (
                ", a row per pair. "
                if grid["pair"].nunique() <= 4
                else ", each the mean over pairs on a common relative-depth scale with every pair's maximum starred. "
            )
            + "`p_grid_max`: permutation p of each grid's maximum, the null taking the "
            "same maximum over each permuted grid (K = `n_permutations`); `calibrated_grid_max` calibrates the "
            "maximum against `tau_grid_max`, from the maxima of the permuted grids, so the search over layer "
            "pairs is paid for (`calibrated_grid_mean`: the grid's mean alike; each layer's best match in the "
            "other model: `calibrated_best_b` / `_best_a` in results.csv).",
            "",
            f"![grids](figures/{name})",
            "",
            "Grid maxima:",
            "",
            md_table(maxima, source="results.csv"),
            "",
        ]
        if not undefined.empty:
            md += [
                "Every cell undefined (see the notes): "
                + ", ".join(
                    f"{p}: `{m}`, {q}"
                    for p, m, q in undefined[["pair", "measure", "pooling"]].drop_duplicates().itertuples(index=False)
                )
                + ".",
                "",
            ]

    if len(poolings) > 1:
        md += poolings_section(diag, tables.get("alignments"), fig_dir)

    return md


def appendix(tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> list[str]:
    """The dominant dimensions and special tokens of the first pooling (after every capability's section)."""
    spec = info["spec"]
    table = tables["results"]
    diag = table[~table["grid"].astype(bool)]
    return _diagnostics_section(diag, list(spec["pooling"])[0], bool(spec.get("standardize")))
