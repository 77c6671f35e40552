"""What an alignment task costs (``Kind.cost``) and a sample one (``Kind.example``); how many sentences are aligned."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import TaskCost

if TYPE_CHECKING:
    from interlingua.pipeline.cost import CostContext

__all__ = ["align_cost", "aligned_rows"]


def aligned_rows(spec: Any, n: int) -> int:
    """The sentences word alignment reads: ``alignment.n`` of the corpus's ``n`` (all when unset)."""
    from interlingua.alignment.config import AlignmentSpec

    found = spec.section("alignment", AlignmentSpec)  # absent: the defaults (word rows asked for without it)
    limit = (AlignmentSpec() if found is None else found).n
    return n if limit is None else min(limit, n)


def align_cost(t: Any, ctx: CostContext) -> TaskCost:
    """One language pair's alignment: the encoder reads both languages' aligned sentences up to its alignment
    layer (the forward stops there: blocks 1..layer run), x 1.5 for the similarity and the argmax over subword
    pairs; equal languages link words to themselves (no encoder, free)."""
    from interlingua.alignment.config import AlignmentSpec, middle_layer

    enc = t.model if t.model is not None and t.model in ctx.shapes else None
    if enc is None:
        return TaskCost()
    found = ctx.spec.section("alignment", AlignmentSpec)
    layer = (AlignmentSpec() if found is None else found).layer
    depth = ctx.shapes[enc].layers
    blocks = middle_layer(depth) if layer is None else min(layer, depth)
    seconds = sum(ctx.forward_seconds(enc, lang, t.n, blocks=blocks) for lang in t.languages) * 1.5
    return TaskCost((seconds,), loads=(enc,))
