"""Which sides are compared, at which layers, and each pair's one shuffled-control permutation.

A *side* is one model reading one language; a *pair* is two sides over the
same sentence ids. Every pair gets ONE seeded permutation (the shuffled
control), reused at every layer, for every pooling and every measure, and
stored with the results (docs/protocol.md, "Controls").
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from interlingua.analysis.inference import pair_seed, shuffle_permutation
from interlingua.core.errors import ConfigError


@dataclass(frozen=True, order=True)
class Side:
    """One model reading one language."""

    model: str
    language: str

    @property
    def label(self) -> str:
        return f"{self.model}:{self.language}"


@dataclass(frozen=True)
class Pair:
    """Two sides compared over the same sentence ids."""

    a: Side
    b: Side

    @property
    def relation(self) -> str:
        """``"within_model"`` (one model, two languages) or ``"cross_model"``: the results' ``kind`` column."""
        return "within_model" if self.a.model == self.b.model else "cross_model"

    @property
    def label(self) -> str:
        return f"{self.a.label}|{self.b.label}"


@dataclass(frozen=True)
class SideData:
    """What one side contributes to a comparison, for one pooling.

    ``reps``: ``(n_hidden_states, n, d)``; ``lengths``: ``(n, 2)`` token and
    character counts per sentence; ``special_share``: per layer, the share of
    the pooled representation's centred variance carried by special tokens.
    """

    reps: np.ndarray
    lengths: np.ndarray
    special_share: np.ndarray


def enumerate_pairs(
    models: Sequence[str],
    languages: Sequence[str],
    *,
    within_model: bool = True,
    cross_model: str = "same_language",
    explicit: Iterable[tuple[Side, Side]] = (),
) -> list[Pair]:
    """All pairs the run compares, without duplicates, in a stable order."""
    pairs: list[Pair] = []
    seen: set[frozenset[Side]] = set()

    def add(a: Side, b: Side) -> None:
        if a == b:
            raise ConfigError(f"pair compares {a.label} with itself; remove it from pairs.explicit")
        key = frozenset((a, b))
        if key not in seen:
            seen.add(key)
            pairs.append(Pair(a, b))

    if within_model:
        for m in models:
            for la, lb in itertools.combinations(languages, 2):
                add(Side(m, la), Side(m, lb))
    if cross_model not in ("same_language", "all", "none"):
        raise ConfigError(f"cross_model must be same_language, all or none, not {cross_model!r}")
    if cross_model != "none":
        for ma, mb in itertools.combinations(models, 2):
            for la in languages:
                for lb in languages:
                    if cross_model == "same_language" and la != lb:
                        continue
                    add(Side(ma, la), Side(mb, lb))
    for a, b in explicit:
        add(a, b)
    return pairs


def layer_pairs(n_states_a: int, n_states_b: int) -> list[tuple[int, int]]:
    """Layers compared one-to-one: every layer when depths agree, else the last.

    Index 0 is the embedding output, index k the output of block k. Models of
    different depth have no layer-by-layer correspondence, so only their last
    hidden states are paired (the full grid is :func:`compare_grid`).
    """
    if n_states_a == n_states_b:
        return [(k, k) for k in range(n_states_a)]
    return [(n_states_a - 1, n_states_b - 1)]


def pair_permutation(pair: Pair, n: int, control_seed: int) -> tuple[np.ndarray, int]:
    """The pair's one shuffled-control permutation and the seed that drew it."""
    seed = pair_seed(control_seed, pair.a.label, pair.b.label)
    return shuffle_permutation(n, seed), seed
