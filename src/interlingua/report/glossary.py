"""The report's glossary: every column its tables show, explained, generated from the declared schemas.

The descriptions are the ``doc`` of each declared :class:`~interlingua.core.schema.Column` (``schema.py`` and the
sections' own schemas), so the glossary cannot drift from the files a run writes. Columns the report derives
(``peak layer``, the model facts, the map controls summary, ...) are declared here, in :data:`REPORT_COLUMNS`,
the same way. A name that files describe differently (``n``: aligned sentences in ``results.csv``, pairs in
``predictors.csv``) is given each file's description.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from interlingua.core.schema import (
    ALIGNMENT_COLUMNS,
    AUDIT_COLUMNS,
    BARRIER_COLUMNS,
    BARRIER_CURVE_COLUMNS,
    CHECKPOINT_CORRELATION_COLUMNS,
    CONTRAST_COLUMNS,
    MAP_COLUMNS,
    MERGEABILITY_COLUMNS,
    PREDICTOR_COLUMNS,
    QUALITY_COLUMNS,
    RESULT_COLUMNS,
    SWEEP_COLUMNS,
    TREND_COLUMNS,
    Column,
)

__all__ = ["REPORT_COLUMNS", "PATCHING_COLUMNS", "sources", "table_headers", "describe", "glossary_section"]

_C = Column

#: Columns of report tables that are not a file's column: derived in the report itself.
REPORT_COLUMNS: tuple[Column, ...] = (
    # models
    _C("name", "str", "the model's label in the config"),
    _C("model_type", "str", "the Hugging Face model_type of its config"),
    _C("hidden", "int", "hidden size (width of every hidden state)"),
    _C("layers", "int", "transformer blocks; hidden states are 0 (embeddings) to this number"),
    _C("heads", "int", "attention heads"),
    _C("vocab", "int", "vocabulary size (rows of the input embedding)"),
    _C("params", "str", "parameter count, millions"),
    _C("weights", "str", "the first 12 characters of the weights' sha256 (or the revision)"),
    # layer curves and peaks
    _C("peak layer", "int", "the layer (side A's hidden-state index) with the largest matched value"),
    _C("peak depth", "float", "the peak layer over side A's number of blocks (0 = embeddings, 1 = last layer)"),
    _C("last", "float", "matched value at the pair's last layer"),
    _C("peak", "float", "largest matched value over the pair's layers"),
    # diagnostics
    _C("model", "str", "model name"),
    _C("language", "str", "the corpus side (language)"),
    _C("layer", "int", "hidden-state index (0 = embeddings)"),
    _C(
        "top-1 share",
        "float",
        "share of the layer's variance in its largest-variance coordinate (largest over the model's languages)",
    ),
    _C("top-3 share", "float", "share of the layer's variance in its three largest-variance coordinates"),
    _C("special-token share", "float", "share of centred variance carried by pooled special tokens"),
    # warnings
    _C("table", "str", "the file whose rows carry the note"),
    _C("rows", "str", "rows of that table carrying the note, of all its rows"),
    _C("where", "str", "the pairs, poolings and measures (or map estimators) of those rows"),
    # maps: controls summary and best layer pairs
    _C("layer pairs", "int", "layer pairs the map was evaluated at"),
    _C("widths", "str", "width of the side the map reads -> width of the side it writes"),
    _C("under-determined", "str", "layer pairs whose training rows do not span a side's width, of all"),
    _C(
        "identity control",
        "str",
        "the estimator fitted from the source side onto itself: passed or FAILED at k of the layer pairs, or not run",
    ),
    _C(
        "worst identity deviation",
        "float",
        "largest ||R - I||_F / sqrt(d) of the self-map's matrix over the layer "
        "pairs: how far it is from the identity (limit 0.1)",
    ),
    _C("worst self cosine", "float", "smallest held-out cosine of self-mapped and true rows (limit 0.99)"),
    _C("worst self P@1", "float", "smallest held-out precision@1 of the self-map"),
    _C("residual eff. rank", "float", "effective rank of the held-out residual Y - f(X) (resid_erank in maps.csv)"),
    _C(
        "residual outside top-50",
        "float",
        "share of residual energy outside the target's top-50 principal directions (resid_out50 in maps.csv)",
    ),
    # quality
    _C("chance ln V", "float", "NLL of a uniform guess over the model's V output rows (nats per token)"),
    # typology
    *(
        _C(kind, "float", f"URIEL {kind} distance between the two languages (cosine; 0 = same)")
        for kind in ("syntactic", "genetic", "geographic", "phonological", "inventory", "featural")
    ),
)

#: ``patching.csv``'s columns the report shows (the patching summary has no declared schema of its own).
PATCHING_COLUMNS: tuple[Column, ...] = (
    _C("relation", "str", "the probe's relation (e.g. capital): what the prompt asks about the country"),
    _C("donor_language", "str", "the language of the donor's prompt"),
    _C("target_language", "str", "the language of the target's prompt"),
    _C("layer", "int", "start layer j: the residual is replaced from block j to the last"),
    _C("condition", "str", "within (the target's own residual, the ceiling), mapped, unprojected, shuffled, noise"),
    _C("n", "int", "trials (prompt pairs) of the cell"),
    _C("flip_rate", "float", "share of trials whose top-1 next token became the first token of A's answer"),
    _C("flip_low", "float", "Wilson 95% interval of flip_rate, lower bound"),
    _C("flip_high", "float", "Wilson 95% interval of flip_rate, upper bound"),
    _C("success_rate", "float", "share of trials where log p of A's answer's first token rose over the unpatched run"),
    _C("success_low", "float", "Wilson interval of success_rate, lower bound"),
    _C("success_high", "float", "Wilson interval of success_rate, upper bound"),
    _C("success_answer_rate", "float", "share of trials where log p of A's whole answer rose"),
    _C("success_answer_low", "float", "Wilson interval of success_answer_rate, lower bound"),
    _C("success_answer_high", "float", "Wilson interval of success_answer_rate, upper bound"),
    _C("mean_norm_ratio", "float", "mean norm of the patched-in residual over the target's own"),
    _C("clean_accuracy", "float", "share of trials the unpatched target answers B correctly"),
    _C("reason", "str", "why a condition does not apply (e.g. unprojected needs equal widths)"),
)


def sources() -> dict[str, tuple[Column, ...]]:
    """File stem -> its declared columns, for every table a run can write that the report shows."""
    out: dict[str, tuple[Column, ...]] = {
        "results": RESULT_COLUMNS,
        "maps": MAP_COLUMNS,
        "audit": AUDIT_COLUMNS,
        "sweeps": SWEEP_COLUMNS,
        "trends": TREND_COLUMNS,
        "contrasts": CONTRAST_COLUMNS,
        "quality": QUALITY_COLUMNS,
        "predictors": PREDICTOR_COLUMNS,
        "mergeability": MERGEABILITY_COLUMNS,
        "barriers": BARRIER_COLUMNS,
        "barrier_curves": BARRIER_CURVE_COLUMNS,
        "checkpoint_correlations": CHECKPOINT_CORRELATION_COLUMNS,
        "alignments": ALIGNMENT_COLUMNS,
        "patching": PATCHING_COLUMNS,
    }
    try:
        from interlingua.transport import FUSION_COLUMNS

        out["transport"] = FUSION_COLUMNS
    except ImportError:  # pragma: no cover - the transport extra is optional
        pass
    return out


def table_headers(md: Iterable[str]) -> list[str]:
    """The header names of every Markdown table in ``md`` (lines), in order of first appearance."""
    lines = "\n".join(md).splitlines()
    names: dict[str, None] = {}
    for head, rule in zip(lines, lines[1:]):
        if head.startswith("| ") and rule.startswith("|---"):
            for name in re.split(r"(?<!\\) \| ", head.strip()[2:-2]):
                names.setdefault(name.strip().replace("\\|", "|"), None)
    return list(names)


def describe(name: str, files: Iterable[str], extra: Mapping[str, str] | None = None) -> str:
    """What column ``name`` holds: the report's own declaration, else each of ``files``' (file stems) declarations
    (with the file's name when they differ); empty when nothing declares it."""
    if extra and name in extra:
        return extra[name]
    for c in REPORT_COLUMNS:
        if c.name == name:
            return c.doc
    declared = sources()
    docs: dict[str, list[str]] = {}
    for stem in files:
        for c in declared.get(stem, ()):
            if c.name == name:
                docs.setdefault(c.doc, []).append(f"{stem}.csv")
    if len(docs) == 1:
        return next(iter(docs))
    return "; ".join(f"{', '.join(f'`{f}`' for f in where)}: {doc}" for doc, where in docs.items())


def glossary_section(md: Iterable[str], files: Iterable[str], extra: Mapping[str, str] | None = None) -> list[str]:
    """``## Glossary``: every column the tables of ``md`` show, with what it holds (see :func:`describe`).

    ``files``: the stems of the run's tables (``results``, ``maps``, ...), whose declarations are read;
    ``extra``: descriptions of this run's own column names (e.g. a language code heading the quality table).
    """
    import pandas as pd

    from interlingua.report.markdown import md_table

    files = list(files)
    rows = [
        {"column": f"`{name}`", "meaning": describe(name, files, extra) or "(not described)"}
        for name in table_headers(md)
    ]
    if not rows:
        return []
    return [
        "## Glossary: the columns shown",
        "",
        "Every column of the tables above, as the run's files declare it (`results.csv` and the others have "
        "the same columns under the same names).",
        "",
        md_table(pd.DataFrame(rows)),
        "",
    ]
