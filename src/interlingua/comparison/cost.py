"""What a comparison costs (``Kind.cost``), a sample one (``Kind.example``) and the figures compare's report draws.

Per measure: its direct calls (matched, shuffled, length-removed, at every layer pair), its inference (a
permutation null and resamples on the path the measure takes: a Gram gather, a prepared ``r x r`` step or a
recompute, see :func:`~interlingua.analysis.inference.cost.measure_flops`) and the layer grid; the FLOPs at the
rates the pipeline calibrated, plus each measure's fixed costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import CostPhase, TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["COMPARISONS", "compare_cost", "compare_figures", "compare_peak"]

#: The comparisons' line of the estimate; its shares are the measures.
COMPARISONS = CostPhase(
    "comparisons",
    30,
    advice=(
        "fewer inference.permutations (the null's cost is linear in them)",
        "inference.null_method: moments (biased linear CKA: no draws)",
        "inference.layers: last (one tested layer per pair)",
        "layer_grid: false or a small inference.grid_permutations",
    ),
    parts="measure",
    parts_advice=("fewer sentences (corpus.n: the null's cost grows with n squared)",),
)


def _rows(t: Any, ctx: CostContext) -> int:
    """Rows compared: the sentences, or about 0.6 per token of the aligned sentences for aligned words (rough)."""
    from interlingua.alignment.cost import aligned_rows

    n = ctx.n
    if t.pooling == "word_aligned":
        n = int(aligned_rows(ctx.spec, n) * 12)
    return n


def compare_cost(t: Any, ctx: CostContext) -> TaskCost:
    """Seconds of one pair x pooling: matched, shuffled, length-removed, inference and grid, per measure (the
    phase's parts), and the working set (:func:`compare_peak`)."""
    from interlingua.analysis.inference._gram import feature_null_is_cheaper
    from interlingua.analysis.inference.cost import GATHER_COST, measure_flops
    from interlingua.analysis.measures import get_measure
    from interlingua.contract.pairs import layer_pairs

    spec, inf, rate64 = ctx.spec, ctx.spec.inference, ctx.rate64
    a, b = ctx.shapes[t.pair.a.model], ctx.shapes[t.pair.b.model]
    n = _rows(t, ctx)
    layers = layer_pairs(a.layers + 1, b.layers + 1)
    tested = len(layers) if inf.layers == "all" else 1
    grid_draws = inf.permutations if inf.grid_permutations is None else inf.grid_permutations
    terms: list[float] = []
    names: list[str] = []
    for mid in spec.measures:
        m = get_measure(mid)
        if m.metadata.requires_same_model and t.pair.relation != "within_model":
            continue
        if m.metadata.requires_equal_width and a.hidden != b.hidden:
            continue
        direct, prepare, per = measure_flops(mid, n, a.hidden, b.hidden)
        c_direct, c_setup, c_per = ctx.overheads(mid)
        t_direct = c_direct + direct / rate64
        t_per = c_per + per / rate64
        moments = inf.null_method == "moments" and mid == "cka_linear_biased"
        draws = 0 if moments else inf.permutations
        resamples = inf.jackknife_groups + inf.bootstrap
        seconds = len(layers) * 3 * t_direct  # matched, shuffled, length removed
        setup = (c_setup + direct / rate64 + prepare / rate64) * (int(draws > 0) + int(resamples > 0))
        seconds += tested * (setup + (draws + resamples) * t_per)
        if t.grid and m.metadata.grid:
            cells = (a.layers + 1) * (b.layers + 1)
            seconds += 2 * (a.layers + b.layers + 2) * 2.0 * n * n * max(a.hidden, b.hidden) / rate64
            if feature_null_is_cheaper(n, [a.hidden] * (a.layers + 1), [b.hidden] * (b.layers + 1)):
                per_draw = 2.0 * n * (a.layers + 1) * a.hidden * (b.layers + 1) * b.hidden  # feature form
            else:
                per_draw = cells * GATHER_COST * n * n  # one batched gather per draw
            seconds += grid_draws * (c_per + per_draw / rate64)
        terms.append(seconds)
        names.append(mid)
    return TaskCost(tuple(terms), tuple(names), peak_bytes=compare_peak(t, ctx))


def compare_peak(t: Any, ctx: CostContext) -> float:
    """Bytes of one pair x pooling: both sides' representations (float32, and the shuffled side's copy),
    then the largest of its steps: the layer grid (:func:`~interlingua.analysis.measures.cka.cka_grid_peak_bytes`,
    linear in n), the grid's permutation null (side B's Grams whole: quadratic in n, see
    :func:`~interlingua.analysis.inference._gram.grid_null_peak_bytes`), and a one-cell Gram null (two n x n
    Grams and A's weighted triangle) or a measure's n x n distance matrices."""
    from interlingua.analysis.inference._gram import (
        feature_null_is_cheaper,
        feature_null_peak_bytes,
        grid_null_peak_bytes,
    )
    from interlingua.analysis.measures import get_measure
    from interlingua.analysis.measures.cka import cka_grid_peak_bytes

    spec, inf = ctx.spec, ctx.spec.inference
    a, b = ctx.shapes[t.pair.a.model], ctx.shapes[t.pair.b.model]
    n = _rows(t, ctx)
    la, lb = a.layers + 1, b.layers + 1
    reps = 4.0 * n * (la * a.hidden + 2 * lb * b.hidden)
    steps = [8.0 * 2.5 * n * n]  # a one-cell Gram null / RSA's RDMs
    grid_draws = inf.permutations if inf.grid_permutations is None else inf.grid_permutations
    if t.grid and any(get_measure(m).metadata.grid for m in spec.measures):
        steps.append(float(cka_grid_peak_bytes(n, [a.hidden] * la, [b.hidden] * lb)))
        if grid_draws and feature_null_is_cheaper(n, [a.hidden] * la, [b.hidden] * lb):
            steps.append(float(feature_null_peak_bytes(n, [a.hidden] * la, [b.hidden] * lb)))
        elif grid_draws:
            steps.append(float(grid_null_peak_bytes(n, la, lb, width_a=a.hidden, width_b=b.hidden)))
    return reps + max(steps)


def compare_figures(plan: Any) -> int:
    """About how many figures compare's report draws: per model x measure x pooling its layer profile and pooling
    comparison, per measure x pooling the language triangle, per cross-model pair the layer grids."""
    from interlingua.analysis.measures import get_measure

    spec = plan.spec
    poolings = spec.sentence_poolings()
    within = {p.a.model for p in plan.pairs if p.relation == "within_model"}
    cross = [p for p in plan.pairs if p.relation == "cross_model"]
    count = 0
    for mid in spec.measures:
        meta = get_measure(mid).metadata
        count += len(within) * (len(poolings) + 1) + len(poolings)
        count += 1 if cross and not meta.requires_same_model else 0
        if spec.layer_grid and meta.grid:
            count += len(cross) * len(poolings)
    return count
