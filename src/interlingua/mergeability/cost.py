"""What a weight comparison and a barrier cost (``Kind.cost``) and sample ones (``Kind.example``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["barrier_cost", "weights_cost"]


def weights_cost(t: Any, ctx: CostContext) -> TaskCost:
    """Both checkpoints' weight files read from disk."""
    return TaskCost(((ctx.shapes[t.a].weight_bytes + ctx.shapes[t.b].weight_bytes) / ctx.disk_bytes_per_second,))


def barrier_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One pair's barrier: at every grid point (and both ends) an interpolated model built and scored with its LM
    head on each language's first ``barriers.n`` sentences."""
    bars = t.options
    n = ctx.n
    points = len(set(bars.grid) | {0.0, 1.0})
    seconds = (
        points * sum(ctx.forward_seconds(t.a, lang, min(bars.n or n, n), lm_head=True) for lang in t.languages)
        + points * ctx.load_fixed_seconds
    )
    return TaskCost((seconds,))
