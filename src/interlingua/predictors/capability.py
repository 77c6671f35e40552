"""The ``predictors`` and ``contrasts`` capabilities: tables computed from a run's results, no tasks of their own.

``predictors`` (:class:`~interlingua.predictors.config.PredictorsSpec`): what predicts alignment, the
correlation table of last-layer results against model quality and typology. ``contrasts`` (a list of
:class:`~interlingua.predictors.config.ContrastSpec`): paired contrasts of two arms (sweeps or models).
Both are assembled after the run (:mod:`interlingua.pipeline.assemble`); here are their sections and cross-checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import Capability, section_options
from interlingua.predictors.columns import (
    CONTRAST_COLUMNS,
    PREDICTOR_COLUMNS,
    PREDICTOR_PAIR_COLUMNS,
    SWEEP_COLUMNS,
    TREND_COLUMNS,
    TYPOLOGY_COLUMNS,
)
from interlingua.predictors.config import ContrastSpec, PredictorsSpec

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.plan import Plan

__all__ = ["CONTRASTS", "PREDICTORS", "contrasts_of", "options"]


options = section_options("predictors", PredictorsSpec)


def contrasts_of(spec: RunSpec) -> list[ContrastSpec]:
    """The run's ``contrasts:`` (empty: none)."""
    found = getattr(spec, "contrasts", [])
    assert all(isinstance(c, ContrastSpec) for c in found)
    return list(found)


def check_predictors(spec: RunSpec) -> None:
    """Known predictors and numeric result columns; ``nll`` needs the ``quality:`` section."""
    from interlingua.predictors import KNOWN_PREDICTORS, RESULT_PREDICTOR_COLUMNS

    opts = options(spec)
    if opts is None:
        return
    bad = [p for p in opts.predictors if p not in KNOWN_PREDICTORS]
    if bad:
        raise ValueError(f"unknown predictor(s) {bad}; choose from {sorted(KNOWN_PREDICTORS)}")
    bad = [c for c in opts.columns if c not in RESULT_PREDICTOR_COLUMNS]
    if bad:
        raise ValueError(
            f"predictors.columns {bad} are not numeric result columns; choose from {RESULT_PREDICTOR_COLUMNS}"
        )
    if "calibrated" in opts.columns and spec.inference.permutations == 0:
        raise ValueError(
            "predictors.columns reads `calibrated` (the default), which needs a permutation null: set "
            "inference.permutations > 0 (e.g. 1000), or name raw columns, e.g. predictors.columns: [matched]"
        )
    if any(p.startswith("nll") for p in opts.predictors) and getattr(spec, "quality", None) is None:
        raise ValueError("predictor 'nll' needs the NLL of each side: add a `quality:` section")


def preflight_predictors(spec: RunSpec, corpus: ParallelCorpus, *, placeholder: bool = False) -> None:
    """URIEL distances under ``predictors:`` need every corpus language in URIEL."""
    from interlingua.core.errors import ConfigError
    from interlingua.predictors import TYPOLOGY_PREDICTORS

    opts = options(spec)
    if opts is None:
        return
    wanted = [p for p in opts.predictors if p in TYPOLOGY_PREDICTORS]
    if not wanted:
        return
    from interlingua.analysis.typology.uriel import uriel_code
    from interlingua.core.errors import InterlinguaError

    for lang in corpus.languages:
        try:
            uriel_code(lang)
        except InterlinguaError as err:
            raise ConfigError(
                f"predictors.predictors: {', '.join(wanted)} need URIEL vectors of every language, and {err} ; "
                f"drop those predictors or the language {lang}"
            ) from None


def check_contrasts(spec: RunSpec) -> None:
    """Both arms of every contrast are models or sweeps, and differ."""
    arms = set(spec.model_names()) | {m.sweep for m in spec.models if m.sweep}
    asks = contrasts_of(spec) or any(m.sweep for m in spec.models)
    if asks and spec.inference.score == "calibrated" and spec.inference.permutations == 0:
        raise ValueError(
            "trends and contrasts read the calibrated score (inference.score: calibrated, the default), which needs "
            "a permutation null: set inference.permutations > 0 (e.g. 1000), or inference.score: raw to read matched"
        )
    for c in contrasts_of(spec):
        for arm in (c.a, c.b):
            if arm not in arms:
                raise ValueError(f"contrast arm {arm!r} is neither a model nor a sweep; known: {sorted(arms)}")
        if c.a == c.b:
            raise ValueError(f"contrast {c.a!r} vs itself compares nothing")


def predictors_tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``predictors`` (the correlation table), ``predictor_pairs`` (its per-pair frame) and, for URIEL
    predictors, ``typology`` (the distances between the corpus languages)."""
    from interlingua.predictors import TYPOLOGY_PREDICTORS, predictor_table

    opts = options(plan.spec)
    if opts is None:
        return {}
    table, frame = predictor_table(
        built["results"],
        columns=opts.columns,
        predictors=opts.predictors,
        quality=built.get("quality"),
        kinds=opts.kinds,
        method=opts.method,
        permutations=opts.permutations,
        bootstrap=opts.bootstrap,
        level=opts.level,
        seed=plan.spec.seeds.test,
    )
    out = {"predictors": table, "predictor_pairs": frame}
    kinds = [k for k in opts.predictors if k in TYPOLOGY_PREDICTORS]
    if kinds:
        from interlingua.analysis.typology import uriel_distances

        out["typology"] = uriel_distances(list(plan.corpus.languages), kinds=kinds)
    return out


def predictors_report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The typology table, then what predicts alignment."""
    from interlingua.predictors.report import predictors_section, typology_section

    lines = typology_section(tables["typology"]) if "typology" in tables else []
    if "predictors" in tables:
        lines += predictors_section(tables["predictors"], tables["predictor_pairs"], fig_dir)
    return lines


def contrasts_tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Degeneracy (``sweeps``) and ``trends`` along each sweep, and the configured ``contrasts``."""
    from interlingua.predictors.sweeps import contrast_table, degeneracy_table, trend_table, value_column

    results = built["results"]
    value = value_column(plan.spec.inference.score)
    out: dict[str, pd.DataFrame] = {}
    if any(m.sweep for m in plan.models.values()):
        out["sweeps"] = degeneracy_table(results, plan.models, audit=built.get("audit"), fingerprints=plan.fingerprints)
        out["trends"] = trend_table(results, plan.models, value=value)
    contrasts = contrasts_of(plan.spec)
    if contrasts:
        out["contrasts"] = contrast_table(results, plan.models, [(c.a, c.b) for c in contrasts], value=value)
    return out


def contrasts_report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """Sweeps (degeneracy, trends) and contrasts."""
    import pandas as pd

    from interlingua.predictors.report import sweeps_section

    empty = pd.DataFrame()
    return sweeps_section(tables.get("sweeps", empty), tables.get("trends", empty), tables.get("contrasts", empty))


PREDICTORS = Capability(
    "predictors",
    section=PredictorsSpec,
    description="correlation tables of results vs predictors",
    check=check_predictors,
    preflight=preflight_predictors,
    tables=predictors_tables,
    report=predictors_report,
    columns={"predictors": PREDICTOR_COLUMNS, "predictor_pairs": PREDICTOR_PAIR_COLUMNS, "typology": TYPOLOGY_COLUMNS},
)

CONTRASTS = Capability(
    "contrasts",
    section=list[ContrastSpec],
    default_factory=list,
    description="paired contrasts of arms",
    check=check_contrasts,
    tables=contrasts_tables,
    report=contrasts_report,
    columns={"sweeps": SWEEP_COLUMNS, "trends": TREND_COLUMNS, "contrasts": CONTRAST_COLUMNS},
)
