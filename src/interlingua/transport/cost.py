"""What a fusion task costs (``Kind.cost``) and a sample one (``Kind.example``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import CostPhase, TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["FUSION", "transport_cost"]

#: The fusion line of the estimate (forward passes and Sinkhorn only: rough).
FUSION = CostPhase(
    "fusion",
    60,
    rough=True,
    advice=(
        "fewer transport pairs or transport.alphas",
        "smaller transport.probe_n / eval_n",
        "device: cuda for the models (forward passes)",
    ),
)


def transport_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One directed fusion: two models loaded, both probed on ``probe_n`` sentences, the fused target scored at
    every alpha and on the shuffled plan's control (``eval_n`` sentences with the LM head), and the Sinkhorn
    iterations of each layer's plan."""
    opts = t.options
    alphas = len(opts.alphas) + 1  # and the shuffled plan's control
    seconds = (
        2 * ctx.load_fixed_seconds
        + ctx.forward_seconds(t.target, t.target_language, opts.probe_n)
        + ctx.forward_seconds(t.donor, t.donor_language, opts.probe_n)
        + alphas * ctx.forward_seconds(t.target, t.target_language, opts.eval_n, lm_head=True)
        + ctx.shapes[t.target].layers * 1000 * opts.m * opts.m * 4 / ctx.rate64
    )  # Sinkhorn iterations
    return TaskCost((seconds,))
