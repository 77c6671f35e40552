"""The quality section of the report: each model's NLL on each side it reads, against chance."""

from __future__ import annotations

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["quality_section"]


def quality_section(quality: pd.DataFrame) -> list[str]:
    """Each model's NLL on each side it reads, against chance."""
    wide = quality.pivot_table(index="model", columns="language", values="nll", sort=False)
    chance = quality.groupby("model", sort=False)["chance_nll"].first()
    wide.insert(0, "chance ln V", chance)
    md = [
        "## Model quality",
        "",
        "Mean NLL in nats per scored token on each language side (`quality.csv`): teacher-forced, each "
        "sentence alone with the tokenizer's own special tokens, the first token never predicted, special-token "
        "targets not scored. Tokenizers differ, so NLL per token compares a model across languages, not two "
        "models with different vocabularies.",
        "",
        md_table(wide.reset_index(), digits=3),
        "",
    ]
    bad = quality[quality["verdict"] == "not a language model"]
    if not bad.empty:
        md += ["**Near chance**: " + ", ".join(f"{r.model} on {r.language}" for r in bad.itertuples()), ""]
    return md
