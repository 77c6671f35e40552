"""The report frame: ``report.md`` (and ``report.html``) of a run, assembled from the registry.

It writes the title and corpus line, the headline (each capability's ``headline`` lines), the models, every
capability's section in registry order (``report_first`` ones before the results'), their ``appendix``
sections, the warnings and notes of every table, the truncated sentences, the conventions and the glossary
(from every capability's declared ``columns`` and ``report_columns``). What a section says is its capability's
(``<package>/report.py``); the toolkit it writes with (tables, figure helpers, notes, HTML) is
:mod:`interlingua.report`, which imports no capability and no pipeline module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from interlingua.core.schema import Column
from interlingua.pipeline import registry
from interlingua.report.figures import drawing
from interlingua.report.glossary import glossary_section
from interlingua.report.markdown import corpus_label, md_table
from interlingua.report.notes import note_warnings

__all__ = ["REPORT_COLUMNS", "declared_columns", "derived_columns", "warnings_section", "write_report"]

#: Columns of the frame's own tables (models, warnings) that are no file's column.
REPORT_COLUMNS: tuple[Column, ...] = (
    # models
    Column("name", "str", "the model's label in the config"),
    Column("model_type", "str", "the Hugging Face model_type of its config"),
    Column("hidden", "int", "hidden size (width of every hidden state)"),
    Column("layers", "int", "transformer blocks; hidden states are 0 (embeddings) to this number"),
    Column("heads", "int", "attention heads"),
    Column("vocab", "int", "vocabulary size (rows of the input embedding)"),
    Column("params", "str", "parameter count, millions"),
    Column(
        "weights",
        "str",
        "the first 12 characters of the weights' sha256 (for a PEFT adapter applied at load, the adapter's: "
        "`adapter:` and its sha256; for a model merged from one, the merged weights'; or the revision)",
    ),
    # warnings
    Column("table", "str", "the file whose rows carry the note"),
    Column("rows", "str", "rows of that table carrying the note, of all its rows"),
    Column("where", "str", "the pairs, poolings and measures (or map estimators) of those rows"),
)


def declared_columns() -> dict[str, tuple[Column, ...]]:
    """File stem -> its declared columns, for every table a registered capability writes."""
    out: dict[str, tuple[Column, ...]] = {}
    for cap in registry.capabilities():
        for stem, columns in cap.columns.items():
            if stem in out:
                raise ValueError(f"table {stem!r} is declared twice (capability {cap.name!r} and an earlier one)")
            out[stem] = columns
    return out


def derived_columns() -> tuple[Column, ...]:
    """The columns report tables derive (no file's column): the frame's, then each capability's, in registry order."""
    return (*REPORT_COLUMNS, *(c for cap in registry.capabilities() for c in cap.report_columns))


def _glossary_extra(tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> dict[str, str] | None:
    """Each capability's descriptions of this run's own column names, when its tables are in the run."""
    extra: dict[str, str] = {}
    for cap in registry.capabilities():
        if cap.glossary_extra is not None and any(stem in tables for stem in cap.columns):
            extra.update(cap.glossary_extra(info))
    return extra or None


def warnings_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Each kind of note of every table once, with the rows it applies to (as ``run.json``'s ``warnings``)."""
    found = note_warnings(tables)
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


def _weights(facts: dict[str, Any]) -> str:
    """The weights a model computes with, in 12 characters: for a PEFT adapter applied at load (its weights are
    its base's, whose hash every adapter of that base would repeat) the adapter's own sha256, as ``adapter:`` + it;
    else the sha256 of the weights loaded (a model merged from an adapter: the merged weights'), else the revision."""
    applied = facts.get("adapter_sha256") and facts.get("loaded_from") == facts.get("adapter_base")
    if applied:
        return f"adapter:{str(facts['adapter_sha256'])[:12]}"
    return (facts.get("weights_sha256") or facts.get("revision") or "–")[:12]


def models_table(info: dict[str, Any]) -> pd.DataFrame:
    """One row per model of the run, from ``run.json``'s model facts."""
    return pd.DataFrame(
        [
            {
                "name": name,
                "model_type": f.get("model_type"),
                "hidden": f.get("hidden_size"),
                "layers": f.get("num_layers"),
                "heads": f.get("num_heads"),
                "vocab": f.get("vocab_size"),
                "params": f"{f['parameter_count'] / 1e6:.1f}M" if f.get("parameter_count") else "–",
                "weights": _weights(f),
            }
            for name, f in info["models"].items()
        ]
    )


def write_report(
    out_dir: Path,
    table: pd.DataFrame,
    info: dict[str, Any],
    maps: pd.DataFrame | None = None,
    sections: dict[str, pd.DataFrame] | None = None,
    previous: Path | None = None,
) -> Path:
    """Write ``report.md``, ``report.html`` and ``figures/*.png`` into ``out_dir``; returns the report path.

    ``table``: ``results.csv``; ``maps``: ``maps.csv`` (None when the run fits no maps); ``sections``: the run's
    other tables by file stem (``audit``, ``quality``, ``patching``, ...). ``previous``: the ``figures/``
    folder of the report this one replaces; a figure drawn there from the same inputs is copied, not drawn
    again (:func:`interlingua.report.figures.cached`). Every text is drawn as plain text (no mathtext).
    """
    tables = {"results": table, **({"maps": maps} if maps is not None else {}), **(sections or {})}
    with drawing(previous):
        return _write_report(out_dir, tables, info)


def _write_report(out_dir: Path, tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> Path:
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    spec = info["spec"]
    measures = list(spec["measures"])
    poolings = list(spec["pooling"])
    caps = registry.capabilities()

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
    ]
    # the results' lines first, then those of the capabilities reported before the results (they qualify them)
    for cap in (*(c for c in caps if not c.report_first), *(c for c in caps if c.report_first)):
        if cap.headline is not None:
            md += cap.headline(tables, info)
    md += ["", "## Models", "", md_table(models_table(info)), ""]
    for cap in caps:  # sections that come before the results (the audit)
        if cap.report is not None and cap.report_first:
            md += cap.report(tables, info, fig_dir)
    for cap in caps:  # each capability's section, in registry order
        if cap.report is not None and not cap.report_first:
            md += cap.report(tables, info, fig_dir)
    for cap in caps:
        if cap.appendix is not None:
            md += cap.appendix(tables, info)
    md += warnings_section(tables)
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
    md += glossary_section(md, tables, declared_columns(), derived_columns(), _glossary_extra(tables, info))
    path = out_dir / "report.md"
    path.write_text("\n".join(md) + "\n", encoding="utf-8")
    from interlingua.report.html import write_html

    write_html(path)
    return path
