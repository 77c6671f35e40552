"""The ``predictors:`` and ``contrasts:`` sections: what predicts alignment, and paired contrasts of arms."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from interlingua.core.spec_base import Strict

__all__ = ["ContrastSpec", "PairKind", "PredictorsSpec"]

PairKind = Literal["within_model", "cross_model"]
_PAIR_KINDS: tuple[PairKind, ...] = ("within_model", "cross_model")


class ContrastSpec(Strict):
    """A paired contrast of two arms (sweeps or models) over the cells they share.

    Cells are matched on the sweep values (``alpha``, ``top_k``, ...) and the
    language pair of within-model pairs, per pooling and measure, at each
    model's last layer; ``a - b`` is tested with the Wilcoxon signed-rank test and
    the paired t test (``contrasts.csv``).
    """

    a: str
    b: str


class PredictorsSpec(Strict):
    """The run's ``predictors:`` section: what predicts alignment, with honest inference.

    One row per (result column, predictor) per pooling and measure over the
    last-layer pairs of ``kinds``: Spearman (or Pearson) rho, a permutation p
    (``permutations`` label shuffles), a bootstrap interval, Benjamini-Hochberg q
    across the table, and the smallest p the pairs' n can attain.
    Predictors: ``nll`` (mean of the two sides' NLL; needs ``quality:``),
    ``nll_gap`` (|difference|), ``length_control`` and the URIEL distances
    ``syntactic``, ``genetic``, ``geographic``, ``phonological``, ``inventory``,
    ``featural`` (the `typology` extra).
    """

    columns: list[str] = Field(
        default_factory=lambda: ["calibrated"],
        min_length=1,
        description="results columns to correlate: calibrated (default; needs inference.permutations > 0), or raw "
        "ones such as matched and matched_length_removed",
    )
    predictors: list[str] = Field(default_factory=lambda: ["nll", "syntactic"], min_length=1)
    kinds: list[PairKind] = Field(default_factory=lambda: list(_PAIR_KINDS))
    method: Literal["spearman", "pearson"] = "spearman"
    permutations: int = Field(default=20000, ge=0)
    bootstrap: int = Field(default=2000, ge=0)
    level: float = Field(default=0.95, gt=0, lt=1)
