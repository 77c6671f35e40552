"""One statistics API for every part of interlingua (numpy/scipy only).

Paired contrasts of model arms, correlations of results against predictors,
multiple-testing and proportion intervals:

- :func:`paired_contrast` (a, b) -> :class:`PairedContrast`: mean difference
  with a t interval, paired t-test (= scipy ``ttest_rel``), Wilcoxon
  signed-rank test (= scipy ``wilcoxon`` defaults), smallest attainable
  Wilcoxon p, and a note for degenerate cases;
- :func:`correlation` (x, y) -> :class:`Correlation`: Spearman/Pearson rho,
  two-sided permutation p (exact enumeration when n! <= permutations,
  otherwise seeded Monte Carlo), percentile bootstrap interval, smallest
  attainable p and whether ``alpha`` is reachable;
- :func:`within_group_correlation` (x, y, groups) -> :class:`WithinGroup`:
  per-group rhos and their mean (repeated-measures safe), tested by
  permuting within groups;
- :func:`correlation_table` (frame, columns, predictors) -> DataFrame: every
  cell on the same seeded permutations, with Benjamini-Hochberg q's;
- :func:`benjamini_hochberg` (p) -> q-values; :func:`wilson_interval` (k, n) -> (low, high);
- :func:`permutation_indices`, :func:`smallest_attainable_p`: the seeded null
  and the p floor, for reproducing results;
- :class:`StatsError` (bad input: an InterlinguaError and ValueError) and
  :class:`StatsWarning` (a p-value that cannot reach the level).

Example::

    from interlingua.analysis.stats import correlation, paired_contrast
    res = correlation(depth, accuracy, permutations=20000, seed=0)
    res.rho, res.p, (res.ci_low, res.ci_high), res.reachable, res.note
"""

from __future__ import annotations

from interlingua.analysis.stats.correlation import (
    Correlation,
    GroupRow,
    WithinGroup,
    correlation,
    correlation_table,
    permutation_indices,
    smallest_attainable_p,
    within_group_correlation,
)
from interlingua.analysis.stats.errors import StatsError, StatsWarning
from interlingua.analysis.stats.multiple import benjamini_hochberg
from interlingua.analysis.stats.paired import PairedContrast, paired_contrast
from interlingua.analysis.stats.proportions import wilson_interval

__all__ = [
    "StatsError",
    "StatsWarning",
    "PairedContrast",
    "paired_contrast",
    "Correlation",
    "GroupRow",
    "WithinGroup",
    "correlation",
    "within_group_correlation",
    "correlation_table",
    "permutation_indices",
    "smallest_attainable_p",
    "benjamini_hochberg",
    "wilson_interval",
]
