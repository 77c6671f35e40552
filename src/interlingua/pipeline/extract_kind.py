"""The hooks of the pipeline's own kind, ``extract`` (declared in :mod:`interlingua.pipeline.registry`): its cost and
its example, as every capability's kinds declare theirs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["EXTRACT_TASK_SECONDS", "extract_cost", "extract_example"]

#: Seconds of one extraction task beyond its forward passes (tokenizer, thread tuning, the store's writes).
EXTRACT_TASK_SECONDS = 0.6


def extract_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One side's extraction: a forward pass over the corpus for its sentence poolings (and the task's fixed
    seconds), one more per extra entry a capability added, over that entry's rows (word-aligned rows: the
    aligned sentences); the model loads; its working set (:func:`~interlingua.pipeline.cost.extract_peak`)."""
    from interlingua.alignment.cost import aligned_rows
    from interlingua.pipeline.cost import extract_peak

    n = ctx.n
    sentence_pools = [p for p, _ in t.entries if t.owner(p) is None]
    extra = len(t.entries) - len(sentence_pools)
    seconds: list[float] = []
    tokens = 0.0
    if sentence_pools:
        seconds.append(EXTRACT_TASK_SECONDS + ctx.forward_seconds(t.model, t.language, n))
        tokens = n * (ctx.mean_tokens(t.model, t.language) + 1)
    if extra:
        seconds.append(extra * ctx.forward_seconds(t.model, t.language, aligned_rows(ctx.spec, n)))
    peak = extract_peak(t, ctx.plan, ctx.shapes[t.model])
    return TaskCost(tuple(seconds), peak_bytes=peak, loads=(t.model,), tokens=tokens)


def extract_example() -> tuple[Any, Any]:
    """A sample extract task (two sentence poolings); its entries are arrays, not one JSON payload (None)."""
    from interlingua.pipeline.plan import ExtractTask

    return ExtractTask("k-extract-eng", "m", "eng_Latn", (("mean", "e" * 64), ("last", "f" * 64)), ()), None
