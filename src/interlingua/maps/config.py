"""The ``maps:`` section: which maps are fitted between which sides, and how they are scored."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from interlingua.core.spec_base import PairSpec, Strict

__all__ = ["Direction", "MapsSpec"]

Direction = Literal["a->b", "b->a"]
_DIRECTIONS: tuple[Direction, ...] = ("a->b", "b->a")


class MapsSpec(Strict):
    """Maps between sides fitted on training sentences and scored on held-out ones (docs/protocol.md, "Maps").

    ``pairs``: ``cross_model`` (every cross-model pair of the run), ``all``
    (every pair of the run), or explicit pairs (which need not be compared).
    """

    estimators: list[str] = Field(default_factory=lambda: ["procrustes", "ridge"], min_length=1)
    folds: int = Field(default=5, ge=2, description="sentence-level k-fold; folds drawn with seeds.folds")
    layers: Literal["auto", "last", "grid"] = Field(
        default="auto", description="auto: one-to-one or by relative depth; last; grid: auto + Procrustes P@1 grid"
    )
    directions: list[Direction] = Field(default_factory=lambda: list(_DIRECTIONS), min_length=1)
    bootstrap: int = Field(default=1000, ge=0, description="resamples of held-out sentences for intervals")
    level: float = Field(default=0.95, gt=0, lt=1)
    csls_k: int = Field(default=10, ge=1)
    pooling: Literal["mean", "sgpt", "last"] | None = Field(default=None, description="default: the run's first")
    pairs: Literal["cross_model", "all"] | list[PairSpec] = "cross_model"
    save_maps: bool = Field(default=False, description="save each fitted A->B map (safetensors) in the store")
    permutations: int | None = Field(
        default=None,
        ge=0,
        description="draws K of the permutation null of held-out p1 (each refits every map but mlp on training rows "
        "paired through a seeded permutation, seeds.test); gives p_value, tau and calibrated at inference.alpha. "
        "Default: inference.permutations, at most 100; 0 disables",
    )
    twin_control: bool | None = Field(
        default=None,
        description="the rotated-twin control on every row: a Llama-family side of the pair (B if it is one, else "
        "A) mapped onto its twin (its rows times a random orthogonal Q) by the row's estimator, layer and direction; "
        "the answer is Q (Q^T for b->a), not the identity. Default (null): on when a side's model is Llama-family; "
        "true: required (an error otherwise); false: off",
    )
    twin_seed: int = Field(default=0, ge=0, description="seed of the twin's rotation Q (as patching.twin_seed)")

    @field_validator("estimators")
    @classmethod
    def _known_estimators(cls, v: list[str]) -> list[str]:
        from interlingua.maps.estimators import list_maps

        unknown = [e for e in v if e not in list_maps()]
        if unknown:
            raise ValueError(f"unknown map estimator(s) {unknown}; choose from {list_maps()}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicates in {v}")
        return v
