"""The columns of ``quality.csv`` (each model's NLL per language side), each with its glossary text, and the
columns the quality section of the report derives.
"""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = ["QUALITY_COLUMNS", "REPORT_COLUMNS"]

QUALITY_COLUMNS: tuple[Column, ...] = (
    Column("model", "str", "model name"),
    Column("language", "str", "the side scored"),
    Column(
        "nll",
        "float",
        "mean NLL in nats per scored token (teacher-forced; first token never predicted; "
        "special-token targets excluded unless special_tokens: include)",
    ),
    Column("chance_nll", "float", "ln V, V = rows of the output layer"),
    Column("vocab", "int", "V"),
    Column("n_tokens", "int", "scored tokens"),
    Column("n_sentences", "int", "sentences"),
    Column("truncated", "int", "sentences cut at max_length"),
    Column("verdict", "str", "ok, or 'not a language model' within 0.5 nats of chance"),
)

#: Columns of the quality section that are no file's column.
REPORT_COLUMNS: tuple[Column, ...] = (
    Column("chance ln V", "float", "NLL of a uniform guess over the model's V output rows (nats per token)"),
)
