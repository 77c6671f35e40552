"""The audit's section of the report: what each model is (adapter, tokenizer, NLL against chance, identity groups,
confounds), and its line in the headline.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from interlingua.report.markdown import md_table

__all__ = ["audit_headline", "audit_section"]


def audit_section(audit: pd.DataFrame) -> list[str]:
    """What each model is: adapter, tokenizer, NLL against chance, identity groups and confounds."""
    md = ["## Audit: is each model what it claims to be?", ""]
    n_bad = int(audit["bad"].sum())
    md += [
        f"{len(audit)} models audited before any representation was extracted; {n_bad} with a bad verdict "
        "(`audit.csv` has every field and reason). An adapter whose every `lora_B` is zero is an **identity** "
        "(it changes nothing); a tokenizer whose ids do not index the rows the embedding was trained with is "
        "**mismatched**; a mean NLL within the margin of chance ln V is **not a language model**. Models in "
        "one weights group compute the same function (an identity adapter groups with its base).",
        "",
    ]
    from interlingua.audit.core import SUMMARY_COLUMNS

    shown = audit[[c for c in SUMMARY_COLUMNS if c in audit]].copy()
    for c in ("agree", "compared"):
        shown[c] = shown[c].where(shown[c] >= 0, other=pd.NA).astype("Int64").astype(str).replace("<NA>", "–")
    md += [md_table(shown, digits=3), ""]
    if "quality_language" in audit and (audit["quality_language"] != "").any():
        md += [
            f"NLL: nats per token on the `{audit['quality_language'].iloc[0]}` side, teacher-forced, the "
            "first token of each sentence never predicted, special-token targets not scored.",
            "",
        ]
    confounded = audit[audit["confounds"] != ""]
    if not confounded.empty:
        md += ["**Confounds.** " + "; ".join(f"{r.model}: {r.confounds}" for r in confounded.itertuples()), ""]
    return md


def audit_headline(info: dict[str, Any]) -> list[str]:
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
