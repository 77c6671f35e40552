"""What a quality (NLL) task costs (``Kind.cost``) and a sample one (``Kind.example``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["quality_cost"]


def quality_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One model's NLL on one language: a forward pass over the corpus with the LM head; the model loads."""
    return TaskCost((ctx.forward_seconds(t.model, t.language, ctx.n, lm_head=True),), loads=(t.model,))
