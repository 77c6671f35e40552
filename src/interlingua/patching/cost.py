"""What a patch task costs (``Kind.cost``) and a sample one (``Kind.example``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import CostPhase, TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["PATCHING_PHASE", "patch_cost", "patch_seconds"]

#: The patching line of the estimate (forward passes only: rough).
PATCHING_PHASE = CostPhase(
    "patching",
    50,
    rough=True,
    advice=("fewer patching relations, countries or start layers", "patching.pairs: derangement (not all)"),
)


def patch_seconds(t: Any, shapes: dict[str, Any], fwd_rate: float, load_fixed_seconds: float) -> float:
    """One patch task: its patched passes (relations x start layers x patched conditions x trials, and one clean
    pass per trial and relation), each the ~6 tokens from the subject on (the template's prefix is reused) with the
    LM head at ~3 of them (the read-out and the answer's tokens), as in benchmarks/bench_patching_throughput.py;
    two causal LMs loaded. An identity control patches two conditions (within, mapped)."""
    pt = t.options
    layers = len(t.layers or t.experiment.layers or pt.layers)
    patched = 2 if getattr(t, "control", "") else len([c for c in pt.conditions if c != "none"])
    if pt.countries is not None:
        n = len(pt.countries)
    else:
        from interlingua.patching.probes import load_probes

        n = len(load_probes().countries)
    trials = (
        {"derangement": n, "all": n * (n - 1)}.get(pt.pairs)
        if isinstance(pt.pairs, str)
        else min(int(pt.pairs), n * (n - 1))
    )
    passes = len(pt.relations) * (layers * patched + 1) * int(trials or n)
    sh = shapes[t.target]
    per_pass = 6 * sh.flops_per_token(8) + 3 * 2.0 * sh.hidden * sh.vocab
    return 2 * load_fixed_seconds + passes * per_pass / fwd_rate


def patch_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One patch task (:func:`patch_seconds`) at the run's forward rate."""
    return TaskCost((patch_seconds(t, ctx.shapes, ctx.fwd_rate, ctx.load_fixed_seconds),))
