"""The columns of ``predictors.csv``, ``predictor_pairs.csv``, ``typology.csv`` and of the sweeps' tables
(``sweeps.csv``, ``trends.csv``, ``contrasts.csv``), each with its glossary text.
"""

from __future__ import annotations

from interlingua.core.schema import RESULT_COLUMNS, Column

__all__ = [
    "CONTRAST_COLUMNS",
    "DISTANCE_COLUMNS",
    "PREDICTOR_COLUMNS",
    "PREDICTOR_PAIR_COLUMNS",
    "SWEEP_COLUMNS",
    "TREND_COLUMNS",
    "TYPOLOGY_COLUMNS",
]

SWEEP_COLUMNS: tuple[Column, ...] = (
    Column("sweep", "str", "the sweep's name (models with the same `sweep`)"),
    Column("variables", "str", "the swept settings, comma-separated"),
    Column("lang_a", "str", "side A's language (within-model pairs)"),
    Column("lang_b", "str", "side B's language"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("estimator", "str", "the measure's estimator"),
    Column("n_models", "int", "models of the sweep with a last-layer matched value in this cell"),
    Column("n_distinct", "int", "distinct matched values among them (exact float equality)"),
    Column("degenerate", "bool", "some models of the sweep give bit-identical values"),
    Column("verdict", "str", "ok, partly degenerate, or 'a measurement of a constant' (one value for all)"),
    Column("min", "float", "smallest last-layer matched value along the sweep"),
    Column("max", "float", "largest last-layer matched value along the sweep"),
    Column("identical", "str", "groups of models with bit-identical values (JSON)"),
    Column("explanation", "str", "what the identical models share: audit identity groups or fingerprints"),
)

TREND_COLUMNS: tuple[Column, ...] = (
    Column("sweep", "str", "the sweep's name"),
    Column("variable", "str", "the swept setting the rank correlation is taken against"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("estimator", "str", "the measure's estimator"),
    Column("value", "str", "the results column correlated: calibrated (default) or matched (inference.score: raw)"),
    Column("groups", "int", "groups of cells sharing everything but this variable (language pair, other settings)"),
    Column("groups_defined", "int", "groups where rho is defined (n >= 3, neither side constant)"),
    Column("mean_within_rho", "float", "mean of the within-group Spearman rhos: the repeated-measures-safe summary"),
    Column("min_rho", "float", "smallest within-group rho"),
    Column("max_rho", "float", "largest within-group rho"),
    Column("n_per_group", "int", "settings per group (the n of each rho)"),
    Column("p", "float", "permutation p of the mean within-group rho (y permuted within groups)"),
    Column("p_method", "str", "exact (every within-group permutation) or monte carlo"),
    Column("smallest_p", "float", "smallest two-sided p this design can attain: what the data could show at best"),
    Column("argmax", "str", "per group, the setting with the largest value (JSON)"),
    Column("detail", "str", "per group: n, rho, smallest attainable p, included or why not (JSON)"),
    Column("note", "str", "undefined rhos, unreachable significance levels"),
)

CONTRAST_COLUMNS: tuple[Column, ...] = (
    Column("a", "str", "arm a (a sweep or a model)"),
    Column("b", "str", "arm b"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("estimator", "str", "the measure's estimator"),
    Column("value", "str", "the results column compared: calibrated (default) or matched (inference.score: raw)"),
    Column("n", "int", "paired cells (same sweep values, same language pair), last layer"),
    Column("mean_a", "float", "mean value of arm a over the cells"),
    Column("mean_b", "float", "mean value of arm b"),
    Column("mean_diff", "float", "mean of a - b"),
    Column("ci_low", "float", "t interval of the mean difference, lower bound"),
    Column("ci_high", "float", "t interval of the mean difference, upper bound"),
    Column("level", "float", "confidence level of the interval"),
    Column("t", "float", "paired t statistic"),
    Column("t_p", "float", "paired t test, two-sided p"),
    Column("wilcoxon_stat", "float", "Wilcoxon signed-rank statistic"),
    Column("wilcoxon_p", "float", "Wilcoxon signed-rank test, two-sided p"),
    Column("wilcoxon_method", "str", "exact, permutation or asymptotic (scipy's choice for this n)"),
    Column("n_nonzero", "int", "cells with a non-zero difference"),
    Column("wilcoxon_min_p", "float", "smallest two-sided Wilcoxon p attainable at this n (2 / 2**n_nonzero)"),
    Column("cells", "str", "the paired cells (JSON)"),
    Column("note", "str", "degenerate cases (all differences zero, too few cells)"),
)


PREDICTOR_COLUMNS: tuple[Column, ...] = (
    Column("pooling", "str", "mean, sgpt or last"),
    Column("measure", "str", "measure id"),
    Column("kinds", "str", "the pair kinds the rows come from"),
    Column("column", "str", "the result column correlated (last layer)"),
    Column("predictor", "str", "nll, nll_gap, length_control or a URIEL distance"),
    Column("method", "str", "spearman or pearson"),
    Column("n", "int", "pairs with both values"),
    Column("n_dropped", "int", "pairs without a value for this predictor"),
    Column("rho", "float", "the correlation"),
    Column("p", "float", "two-sided permutation p (|rho| at least as large; exact enumeration when n! is small)"),
    Column("q", "float", "Benjamini-Hochberg q across the whole table"),
    Column("p_method", "str", "exact, monte carlo, or none (rho undefined)"),
    Column("permutations", "int", "permutations scored"),
    Column("ci_low", "float", "percentile bootstrap interval of rho, lower bound"),
    Column("ci_high", "float", "percentile bootstrap interval of rho, upper bound"),
    Column("min_attainable_p", "float", "smallest p this n can give (2/n! for Spearman)"),
    Column("reachable", "bool", "min_attainable_p <= 0.05"),
    Column("note", "str", "undefined rho (constant column), unreachable level, too few pairs"),
)

#: The URIEL distance kinds (``interlingua.analysis.typology.KINDS``): ``typology.csv`` and ``predictor_pairs.csv``
#: have a column for each that the run's predictors name.
_TYPOLOGY_KINDS = ("syntactic", "genetic", "geographic", "phonological", "inventory", "featural")

#: One column per URIEL distance kind (the run's predictors name which are written).
DISTANCE_COLUMNS: tuple[Column, ...] = tuple(
    Column(kind, "float", f"URIEL {kind} distance between the two languages (cosine; 0 = same)")
    for kind in _TYPOLOGY_KINDS
)

_BY_NAME = {c.name: c for c in RESULT_COLUMNS}

#: ``typology.csv``: one row per unordered pair of the corpus languages, a column per distance kind the
#: predictors name (``analysis.typology.uriel_distances``). The pair's languages are described as results' are.
TYPOLOGY_COLUMNS: tuple[Column, ...] = (
    _BY_NAME["lang_a"],
    _BY_NAME["lang_b"],
    Column("uriel_a", "str", "the URIEL (ISO 639-3) code lang_a was read as"),
    Column("uriel_b", "str", "the URIEL (ISO 639-3) code lang_b was read as"),
    *DISTANCE_COLUMNS,
    Column("source", "str", "where the distances come from (e.g. URIEL via lang2vec 1.1.2)"),
)

#: ``predictor_pairs.csv``: the last-layer rows of ``results.csv`` the correlations were computed on, with one
#: column per predictor the run names (``length_control`` is already a results column).
PREDICTOR_PAIR_COLUMNS: tuple[Column, ...] = (
    *RESULT_COLUMNS,
    Column("nll", "float", "mean of the two sides' nll in quality.csv (each side's model on its language)"),
    Column("nll_gap", "float", "|side A's nll - side B's nll| (quality.csv)"),
    *DISTANCE_COLUMNS,
)
