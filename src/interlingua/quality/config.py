"""The ``quality:`` section: which sides each model's NLL is scored on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from interlingua.core.spec_base import Strict

__all__ = ["QualitySpec"]


class QualitySpec(Strict):
    """The run's ``quality:`` section: each model's mean NLL on each language side it reads.

    Teacher-forced, nats per scored token (docs/protocol.md, "Audit"), against
    chance ln V; ``quality.csv`` and a report section. The values also serve as
    predictors (``predictors:``).
    """

    languages: Literal["all"] | list[str] = Field(
        default="all", description="sides to score; all: every corpus language"
    )
    n: int | None = Field(
        default=None, ge=1, description="score the first n sentences of the run's sample (default all)"
    )
