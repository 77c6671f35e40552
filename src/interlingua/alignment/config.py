"""The ``alignment:`` section: how the words of two sides are aligned (for word_aligned rows)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from interlingua.core.spec_base import PairSpec, Strict
from interlingua.data.models.spec import ModelSpec

__all__ = ["AlignmentSpec", "middle_layer"]


class AlignmentSpec(Strict):
    """The run's ``alignment:`` section: word alignment for ``pooling: [..., word_aligned]``.

    For each compared pair across two languages the first ``n`` corpus
    sentences (all by default) are word-aligned SimAlign-style (cosine of the
    ``encoder``'s contextual word vectors at ``layer``; ``method``); a pair on
    one language aligns every word to itself. Each model then pools its
    sub-word states within each aligned word's character span at every layer:
    rows are aligned word pairs, the shuffled control permutes word rows
    (docs/protocol.md, "Word-aligned pooling").
    """

    encoder: str | ModelSpec | None = Field(
        default=None, description="a run model's name, or a model spec; default: the run's first model"
    )
    layer: int | None = Field(default=None, ge=0, description="encoder hidden state (0 = embeddings); default: middle")
    method: Literal["inter", "argmax", "itermax", "match"] = "itermax"
    n: int | None = Field(default=None, ge=2, description="align the first n corpus sentences; default: all")
    pairs: Literal["all"] | list[PairSpec] = Field(
        default="all", description="which compared pairs get word-aligned rows: all, or these (each must be compared)"
    )
    first_position: Literal["exclude", "include"] = Field(
        default="exclude",
        description="pool the sentence's first position into its word or not: without a BOS token it is the "
        "attention sink, whose massive activation dominates word rows (a word of that token alone is dropped)",
    )


def middle_layer(n_blocks: int) -> int:
    """The hidden state an aligner reads by default: the middle one, ``n_blocks // 2`` (0 = embeddings)."""
    return int(n_blocks) // 2
