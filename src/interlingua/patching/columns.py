"""The columns of ``patching.csv``, each with its glossary text."""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = ["PATCHING_COLUMNS"]

#: ``patching.csv``'s columns (the summary of the patch trials: one row per relation, languages, layer and condition).
PATCHING_COLUMNS: tuple[Column, ...] = (
    Column("relation", "str", "the probe's relation (e.g. capital): what the prompt asks about the country"),
    Column("donor_language", "str", "the language of the donor's prompt"),
    Column("target_language", "str", "the language of the target's prompt"),
    Column("layer", "int", "start layer j: the residual is replaced from block j to the last"),
    Column("condition", "str", "within (the target's own residual, the ceiling), mapped, unprojected, shuffled, noise"),
    Column("n", "int", "trials (prompt pairs) of the cell"),
    Column("flip_rate", "float", "share of trials whose top-1 next token became the first token of A's answer"),
    Column("flip_low", "float", "Wilson 95% interval of flip_rate, lower bound"),
    Column("flip_high", "float", "Wilson 95% interval of flip_rate, upper bound"),
    Column(
        "success_rate", "float", "share of trials where log p of A's answer's first token rose over the unpatched run"
    ),
    Column("success_low", "float", "Wilson interval of success_rate, lower bound"),
    Column("success_high", "float", "Wilson interval of success_rate, upper bound"),
    Column("success_answer_rate", "float", "share of trials where log p of A's whole answer rose"),
    Column("success_answer_low", "float", "Wilson interval of success_answer_rate, lower bound"),
    Column("success_answer_high", "float", "Wilson interval of success_answer_rate, upper bound"),
    Column("mean_norm_ratio", "float", "mean norm of the patched-in residual over the target's own"),
    Column("clean_accuracy", "float", "share of trials the unpatched target answers B correctly"),
    Column("reason", "str", "why a condition does not apply (e.g. unprojected needs equal widths)"),
)
