"""The ``inference:`` section: the statistical inference attached to every matched value."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from interlingua.core.spec_base import Strict

__all__ = ["InferenceSpec", "MAX_PERMUTATIONS"]

#: Most permutation draws a config may ask for (``permutations``, ``grid_permutations``). A p-value's
#: resolution is 1 / (K + 1), and 1e-6 already resolves a Bonferroni threshold of alpha = 0.05 over 50,000
#: tests; beyond it the draws only cost: K per-draw evaluations per pair, layer and measure (about 17 min
#: per pair and layer for linear CKA at n = 1,000 at 1 ms a draw), and the grid null keeps K x La x Lb
#: float64 (8.2 GB at 1e6 draws on 32 x 32 layers).
MAX_PERMUTATIONS = 1_000_000


class InferenceSpec(Strict):
    """Statistical inference attached to every matched value."""

    permutations: int = Field(default=1000, ge=0, description="permutation-test draws; 0 disables")
    null_method: Literal["monte_carlo", "moments"] = Field(
        default="monte_carlo",
        description="moments: analytic permutation p of biased linear CKA (Pearson III on the exact mean, variance "
        "and skewness); other measures stay Monte-Carlo",
    )
    grid_permutations: int | None = Field(
        default=None, ge=0, description="draws for the layer-grid maximum's test; default: permutations"
    )
    alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="level of the calibrated scores: tau is the null's (1 - alpha) order statistic with the observed "
        "value included; calibrated = (s - tau) / (s_max - tau) clipped to [0, 1] (bounded measures) "
        "or max(s - tau, 0)",
    )
    score: Literal["calibrated", "raw"] = Field(
        default="calibrated",
        description="which value the questions read (trends, contrasts, the report's headline): the calibrated score "
        "(needs permutations > 0) or the raw matched value; predictors name their columns in predictors.columns",
    )
    layers: Literal["all", "last"] = Field(
        default="all", description="attach p-values and intervals at every layer, or only at each pair's last layer"
    )
    jackknife_groups: int = Field(default=0, ge=0, description="delete-a-group jackknife groups; 0 disables")
    bootstrap: int = Field(
        default=0,
        ge=0,
        description="bootstrap resamples (percentile interval; recentred for the CCA family); 0 disables",
    )
    level: float = Field(default=0.95, gt=0, lt=1)

    @field_validator("permutations", "grid_permutations")
    @classmethod
    def _at_most(cls, v: int | None) -> int | None:
        if v is not None and v > MAX_PERMUTATIONS:
            raise ValueError(
                f"{v:,} draws is above the limit of {MAX_PERMUTATIONS:,}: a p-value resolves 1 / (draws + 1), and "
                "1e-6 already resolves alpha = 0.05 Bonferroni-corrected over 50,000 tests, while every draw costs "
                "time per pair, layer and measure and the grid null keeps draws x La x Lb float64 (8 GB at 1e6 "
                "draws on 32 x 32 layers); use at most 1,000,000 (10,000 resolves p to 1e-4)"
            )
        return v
