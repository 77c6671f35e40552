"""The ``mergeability:`` section: weight coverage, diagnostics, loss barriers and the checkpoint arm."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from interlingua.core.spec_base import Strict

__all__ = ["BarrierSpec", "CheckpointArmSpec", "MergeabilitySpec", "WeightPairSpec"]


class WeightPairSpec(Strict):
    """One pair of models whose weights are compared; ``base``: their shared ancestor (a run model)."""

    a: str
    b: str
    base: str | None = None


class BarrierSpec(Strict):
    """Loss barriers: NLL of the interpolated weights ``(1 - t) A + t B`` on corpus sides."""

    grid: list[float] = Field(
        default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0],
        min_length=1,
        description="t values in [0, 1] (0 and 1 always added)",
    )
    languages: Literal["all"] | list[str] = Field(default="all", description="corpus sides scored")
    n: int | None = Field(default=None, ge=1, description="score the first n sentences of the sample (default all)")

    @field_validator("grid")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        bad = [t for t in v if not 0.0 <= t <= 1.0]
        if bad:
            raise ValueError(f"barrier grid values must lie in [0, 1], got {bad}")
        return v


class CheckpointArmSpec(Strict):
    """Revisions of one training run, in step order: every pair of them is compared.

    ``models``: names of run models (zoo checkpoints, local checkpoint folders
    or Hub ``revision`` s, each declared under ``models:``); ``steps``: their
    training steps (same length, increasing). Each pair gets the trajectory
    distance ``log10(step_b / step_a)`` (NaN when ``step_a`` is 0).
    """

    models: list[str] = Field(min_length=3)
    steps: list[int] = Field(min_length=3)

    @model_validator(mode="after")
    def _steps(self) -> CheckpointArmSpec:
        if len(self.models) != len(self.steps):
            raise ValueError(
                f"checkpoints: {len(self.models)} models but {len(self.steps)} steps; give one step per model"
            )
        if any(s < 0 for s in self.steps) or any(b <= a for a, b in zip(self.steps, self.steps[1:])):
            raise ValueError(f"checkpoints.steps must be non-negative and increasing, got {self.steps}")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"checkpoints.models lists a model twice: {self.models}")
        return self


class MergeabilitySpec(Strict):
    """The run's ``mergeability:`` section (``merge:`` is the model field that builds a merged model).

    ``pairs``: ``cross_model`` (every pair of run models), ``none``, or explicit
    ``{a, b, base?}``; each pair gets a coverage table (route native /
    transport / none and why, headers only) and, when they share tensors, the
    streamed weight diagnostics (``diagnostics``; TIES agreement at
    ``density`` when a base is given). ``barriers``: loss barriers on corpus
    sides for native pairs. ``checkpoints``: the checkpoint arm (its pairs are
    added; a diagnostic x diagnostic Spearman table with permutation nulls and
    BH q, a heatmap, a redundancy summary of |rho| > ``redundant``).
    Outputs: ``coverage.csv``, ``mergeability.csv``, ``barrier_curves.csv``,
    ``checkpoint_correlations.csv`` and a report section.
    """

    pairs: Literal["cross_model", "none"] | list[WeightPairSpec] = "cross_model"
    diagnostics: bool = True
    density: float = Field(default=0.2, gt=0, le=1, description="TIES trimming density (with a base)")
    barriers: BarrierSpec | None = None
    checkpoints: CheckpointArmSpec | None = None
    permutations: int = Field(default=20000, ge=0, description="label shuffles per cell of the checkpoint table")
    redundant: float = Field(default=0.95, gt=0, le=1, description="|rho| above this: redundant diagnostics")
