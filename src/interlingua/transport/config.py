"""The ``transport:`` section: optimal-transport fusion of model pairs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from interlingua.core.spec_base import Strict

__all__ = ["TransportPairSpec", "TransportSpec"]


class TransportPairSpec(Strict):
    """One directed fusion: the ``donor``'s weights carried into the ``target``'s coordinates."""

    target: str
    donor: str
    target_language: str | None = Field(
        default=None, description="the side the target reads; default: first corpus language"
    )
    donor_language: str | None = Field(default=None, description="the side the donor reads; default: the target's")


class TransportSpec(Strict):
    """The run's ``transport:`` section: cross-architecture fusion by optimal transport, with its control.

    Neuron correspondences from the first ``probe_n`` corpus sentences (each
    model on its own side), entropic OT plans (row-stochastic), fusion of the
    MLP and attention-output weights on a top-k mask at each ``alpha``, the same
    fusion through row-shuffled plans, and NLL of every fused target on the last
    ``eval_n`` sentences of both sides (the target's tokenizer): ``transport.csv``
    (delta NLL, ``ot_minus_rand``, plan diagnostics) and a figure.
    """

    pairs: list[TransportPairSpec] = Field(min_length=1)
    alphas: list[float] = Field(default_factory=lambda: [0.0, 0.1, 0.25, 0.5], min_length=1)
    top_k: int = Field(default=128, ge=1)
    m: int = Field(default=3, ge=1, description="donor layers per target layer (layer-level OT)")
    epsilon: Literal["auto"] | float = "auto"
    probe_n: int = Field(default=128, ge=10)
    eval_n: int = Field(default=64, ge=4)
    seed: int = Field(default=0, ge=0)
    controls: bool = Field(
        default=True,
        description="the self-plan control (the target's plan with itself must be the identity: self_match_*, "
        "self_diag_*; failed below 90% self-matched units) and the plans' stability between the even and odd probe "
        "halves beside its chance level (stability_*, stability_chance_*), one block, before any fusion",
    )
    stability_k: int = Field(
        default=1,
        ge=1,
        description="k of the stability control's top-k overlap (1: the share of target units whose argmax donor "
        "unit is the same in both probe halves)",
    )

    planted_levels: list[float] = Field(
        default_factory=lambda: [0.3, 0.2, 0.1],
        description="planted-correspondence control (with controls): correlations of a permuted noisy copy of the "
        "target's units whose recovery rate is reported per level (planted_recovery_*, planted_found_*: the weakest "
        "correspondence the run could find); [] to skip",
    )

    @field_validator("planted_levels")
    @classmethod
    def _levels(cls, v: list[float]) -> list[float]:
        bad = [r for r in v if not 0.0 < r <= 1.0]
        if bad:
            raise ValueError(f"transport.planted_levels must lie in (0, 1], got {bad}")
        return v

    @field_validator("alphas")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        bad = [a for a in v if not 0.0 <= a <= 1.0]
        if bad:
            raise ValueError(f"transport.alphas must lie in [0, 1], got {bad}")
        return v
