"""What a map task costs (``Kind.cost``), a sample one (``Kind.example``) and the figures its report draws."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import CostPhase, TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["MAPS_PHASE", "map_cost", "map_figures", "task_null_seconds"]

#: The maps' line of the estimate (fits only: rough).
MAPS_PHASE = CostPhase(
    "maps",
    40,
    rough=True,
    advice=("maps.layers: last (auto fits every layer pair)", "fewer maps.estimators, maps.folds or maps.bootstrap"),
)


def map_cost(t: Any, ctx: CostContext) -> TaskCost:
    """Seconds of one map pair: three fits per estimator x fold x layer pair x direction (the map, its shuffled-fit
    control and its identity control), scored with bootstrap (rough)."""
    from interlingua.analysis.inference.cost import SVD_PENALTY

    opts = t.options
    a, b = ctx.shapes[t.pair.a.model], ctx.shapes[t.pair.b.model]
    n = ctx.n
    p, q = a.hidden, b.hidden
    layers = {"last": 1, "auto": min(a.layers, b.layers) + 1, "grid": (a.layers + 1) * (b.layers + 1)}[opts.layers]
    fit = 2.0 * n * p * q + SVD_PENALTY * 4.0 * max(p, q) * min(p, q) ** 2 + 2.0 * n * n * q
    fits = 3 * len(opts.estimators) * (opts.folds + 1) * layers * len(opts.directions)
    fitted = fits * (fit / ctx.rate64 + 2e-3) + layers * opts.bootstrap * n * 1e-7
    null = task_null_seconds(t, n, p, q, layers if t.null_layers == "all" else 1, ctx.rate64)
    return TaskCost((fitted,) if null == 0.0 else (fitted, null))


def task_null_seconds(task: Any, n: int, p: int, q: int, layer_pairs: int, rate64: float) -> float:
    """Rough seconds of one map task's permutation null (K refits per estimator x fold x layer pair).

    ``n``: sentences; ``p``, ``q``: the two sides' widths; ``layer_pairs``: the pairs the task fits (as the
    maps phase counts them); ``rate64``: float64 flop/s. See :func:`interlingua.maps.null.null_seconds`.
    """
    from interlingua.maps.null import null_seconds

    opts = task.options
    if opts is None or task.permutations <= 0:
        return 0.0
    return null_seconds(task.permutations, n, p, q, opts, layer_pairs=layer_pairs, rate64=rate64)


def map_figures(plan: Any) -> int:
    """One figure per map pair."""
    return len(plan.of_kind("maps"))
