"""What an audit costs (``Kind.cost``), sample tasks (``Kind.example``), and the estimate's line that audits,
quality scores, weight diagnostics and barriers share (:data:`CHECKS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.pipeline.capability import CostPhase, TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["CHECKS", "audit_cost", "audit_example", "gate_cost", "gate_example"]

#: The checks of models before extraction: audits, quality (NLL), weight diagnostics and barriers (rough).
CHECKS = CostPhase(
    "audits, quality, weights, barriers",
    70,
    rough=True,
    advice=(
        "a coarser mergeability.barriers.grid or a smaller barriers.n (each grid point is a forward pass per language)",
        "fewer checkpoint pairs (each pair gets its barriers)",
        "device: cuda for the models (forward passes)",
    ),
)


def audit_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One model audited on one language: a forward pass over the corpus with the LM head; the model loads."""
    return TaskCost((ctx.forward_seconds(t.model, t.language, ctx.n, lm_head=True),), loads=(t.model,))


def gate_cost(t: Any, ctx: CostContext) -> TaskCost:
    """The gate reads the audits' rows in the driver: nothing to price."""
    return TaskCost()


def audit_example() -> tuple[Any, Any]:
    """A sample audit and what a finished one holds."""
    from interlingua.audit.capability import AuditTask

    return AuditTask("k-audit", "m", "eng_Latn"), {"row": {}}


def gate_example() -> tuple[Any, Any]:
    """A sample gate (it stores nothing)."""
    from interlingua.audit.capability import AuditGateTask

    return AuditGateTask("k-gate"), None
