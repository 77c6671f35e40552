"""The ``audit:`` section: checks of each checkpoint before any representation is extracted."""

from __future__ import annotations

from pydantic import Field

from interlingua.core.spec_base import Strict

__all__ = ["AuditSpec"]


class AuditSpec(Strict):
    """The run's ``audit:`` section: every model audited before any representation is extracted.

    Adapters (identity / tiny / active), the tokenizer each model reads with
    against its embedding and its own tokenizer, mean NLL on ``language``'s
    sentences against chance, identity groups and confounds: ``audit.csv`` and a
    report section. ``strict: true`` stops the run (exit 2) when any model's
    verdict is bad.
    """

    quality: bool = Field(default=True, description="measure each model's mean NLL on the corpus side `language`")
    language: str | None = Field(
        default=None, description="the side NLL is measured on; default: the first corpus language"
    )
    tiny_threshold: float = Field(default=1e-6, ge=0, description="max|scaling*B@A| below this is a tiny adapter")
    min_agreement: float = Field(
        default=0.99, ge=0, le=1, description="tokenizer id agreement below this is a mismatch"
    )
    margin: float = Field(default=0.5, ge=0, description="NLL within this of ln V is 'not a language model'")
    strict: bool = Field(default=False, description="stop the run when any verdict is bad")
