"""What an audit costs (``Kind.cost``), sample tasks (``Kind.example``), and the estimate's line that audits,
quality scores, weight diagnostics and barriers share (:data:`CHECKS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["audit_cost", "gate_cost"]


#: The checks of models before extraction: audits, quality (NLL), weight diagnostics and barriers (rough).
def audit_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One model audited on one language: a forward pass over the corpus with the LM head; the model loads."""
    return TaskCost((ctx.forward_seconds(t.model, t.language, ctx.n, lm_head=True),), loads=(t.model,))


def gate_cost(t: Any, ctx: CostContext) -> TaskCost:
    """The gate reads the audits' rows in the driver: nothing to price."""
    return TaskCost()
