"""The ``predictors`` and ``contrasts`` capabilities: tables computed from a run's results, no tasks of their own.

``predictors`` (:class:`~interlingua.predictors.config.PredictorsSpec`): what predicts alignment, the
correlation table of last-layer results against model quality and typology. ``contrasts`` (a list of
:class:`~interlingua.predictors.config.ContrastSpec`): paired contrasts of two arms (sweeps or models).
Both are assembled after the run (:mod:`interlingua.pipeline.assemble`); here are their sections and cross-checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlingua.pipeline.capability import Capability
from interlingua.predictors.config import ContrastSpec, PredictorsSpec

if TYPE_CHECKING:
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.config import RunSpec

__all__ = ["CONTRASTS", "PREDICTORS", "contrasts_of", "options"]


def options(spec: RunSpec) -> PredictorsSpec | None:
    """The run's ``predictors:`` section (None: no predictor table)."""
    return spec.section("predictors", PredictorsSpec)


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
    for c in contrasts_of(spec):
        for arm in (c.a, c.b):
            if arm not in arms:
                raise ValueError(f"contrast arm {arm!r} is neither a model nor a sweep; known: {sorted(arms)}")
        if c.a == c.b:
            raise ValueError(f"contrast {c.a!r} vs itself compares nothing")


PREDICTORS = Capability(
    "predictors",
    section=PredictorsSpec,
    description="correlation tables of results vs predictors",
    check=check_predictors,
    preflight=preflight_predictors,
)

CONTRASTS = Capability(
    "contrasts",
    section=list[ContrastSpec],
    default_factory=list,
    description="paired contrasts of arms",
    check=check_contrasts,
)
