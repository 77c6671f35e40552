"""The ``maps`` capability: maps between two sides fitted on training folds and scored on held-out sentences.

Its section is :class:`~interlingua.maps.config.MapsSpec`; it asks for both sides of every pair it maps
(``maps.pairs``: the run's cross-model pairs, all of them, or listed ones) and plans one task per pair
(kind ``map``), whose rows (every estimator, direction and layer pair, with the fit's ``n_fit``, ``rank``
and under-determination flag) feed ``maps.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.core.store import content_key
from interlingua.maps.config import MapsSpec
from interlingua.maps.cost import MAPS_PHASE, map_cost, map_example, map_figures
from interlingua.pipeline.capability import Capability, Kind, section_options

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.compare import Pair
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.capability import PlanContext
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime

__all__ = ["MAPS", "MAP_FORMAT_VERSION", "MapTask", "map_pairs", "options"]

#: Bumped whenever stored map rows would change for the same inputs (2: n_fit, rank, underdetermined, identity control).
MAP_FORMAT_VERSION = 2


@dataclass(frozen=True)
class MapTask:
    """One pair x pooling: maps fitted on training folds, scored on held-out sentences (every layer pair)."""

    kind: ClassVar[str] = "maps"
    key: str
    pair: Pair
    pooling: str
    sides: tuple[str, str]
    control_seed: int
    depends: tuple[str, ...] = ()
    options: MapsSpec | None = field(default=None, compare=False, repr=False)
    folds_seed: int = field(default=0, compare=False)
    control_base: int = field(default=0, compare=False)  # seeds.control, from which the pair's control is drawn
    standardize: bool = field(default=False, compare=False)


options = section_options("maps", MapsSpec)


def preflight(spec: RunSpec, corpus: ParallelCorpus, *, placeholder: bool = False) -> None:
    """Fold counts the sample's n sentences can hold (else NaN columns or a failure after models ran)."""
    from interlingua.core.errors import ConfigError

    opts, n = options(spec), len(corpus)
    if opts is not None and opts.folds > n // 2:
        raise ConfigError(
            f"maps.folds: {opts.folds} folds need at least {2 * opts.folds} sentences (2 held out per "
            f"fold), the run has n={n} ; lower maps.folds to at most {max(n // 2, 2)} or sample more sentences "
            "(corpus.n)"
        )


def check(spec: RunSpec) -> None:
    """Maps need a sentence pooling; listed pairs name run models and corpus languages."""
    opts = options(spec)
    if opts is None:
        return
    if opts.pooling is None and spec.pooling[0] == "word_aligned":
        raise ValueError(
            "maps need a sentence pooling: set maps.pooling, or list word_aligned after a sentence pooling"
        )
    if isinstance(opts.pairs, list):
        spec.check_sides(opts.pairs)


def map_pairs(spec: RunSpec, pairs: list[Pair]) -> list[Pair]:
    """The pairs the ``maps:`` section asks for (none when it is absent)."""
    from interlingua.compare import Pair, Side
    from interlingua.data.corpora import normalize_language

    opts = options(spec)
    if opts is None:
        return []
    if opts.pairs == "cross_model":
        return [p for p in pairs if p.kind == "cross_model"]
    if opts.pairs == "all":
        return list(pairs)
    return [
        Pair(Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language)))
        for p in opts.pairs
    ]


def request(ctx: PlanContext) -> None:
    """Both sides of every mapped pair."""
    for p in map_pairs(ctx.spec, ctx.pairs):
        ctx.need(p.a.model, p.a.language)
        ctx.need(p.b.model, p.b.language)


def plan(ctx: PlanContext) -> None:
    """One task per mapped pair, keyed by its two stored entries, the section and the seeds."""
    from interlingua.compare import pair_permutation

    spec, corpus = ctx.spec, ctx.corpus
    opts = options(spec)
    if opts is None:
        return
    sentence_poolings = spec.sentence_poolings()
    extract_keys, entry_keys = ctx.extract_keys, ctx.entry_keys
    pooling = opts.pooling or sentence_poolings[0]
    stored = ctx.versioned(
        {
            "format": MAP_FORMAT_VERSION,
            "maps": opts.model_dump(mode="json", exclude={"pairs"}),
            "folds_seed": spec.seeds.folds,
            "standardize": spec.standardize,
        }
    )
    for pair in map_pairs(spec, ctx.pairs):
        _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
        sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
        key = content_key(
            {
                **stored,
                "pair": pair.label,
                "pooling": pooling,
                "control_seed": seed,
                "sides": [entry_keys[(sides[0], pooling)], entry_keys[(sides[1], pooling)]],
            }
        )
        ctx.add(
            MapTask(
                key,
                pair,
                pooling,
                sides,
                seed,
                depends=sides,
                options=opts,
                folds_seed=spec.seeds.folds,
                control_base=spec.seeds.control,
                standardize=spec.standardize,
            )
        )


def run(rt: Runtime, task: MapTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Held-out map rows of one pair, from the store or computed (fitted maps saved when asked)."""
    return rt.stored(task, lambda: _fit_and_score(rt, task, done), valid=lambda v: isinstance(v, list))


def _fit_and_score(rt: Runtime, task: MapTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    from interlingua.compare import pair_permutation
    from interlingua.maps import evaluate_pair, fit_layer_maps
    from interlingua.pipeline import registry

    opts = task.options
    assert opts is not None
    reps_a = done[task.sides[0]].data[task.pooling].reps
    reps_b = done[task.sides[1]].data[task.pooling].reps
    perm, _ = pair_permutation(task.pair, len(rt.plan.corpus), task.control_base)
    pair = task.pair
    labels = {
        "pair": pair.label,
        "model_a": pair.a.model,
        "lang_a": pair.a.language,
        "model_b": pair.b.model,
        "lang_b": pair.b.language,
        "pooling": task.pooling,
        "control_seed": task.control_seed,
    }
    # one BLAS thread (Runtime.run pins it for every task): fastest for these many small decompositions on
    # shared cores, and the same sums in every process
    rows = evaluate_pair(
        reps_a,
        reps_b,
        estimators=list(opts.estimators),
        folds=opts.folds,
        seed=task.folds_seed,
        control_permutation=perm,
        layers=opts.layers,
        directions=list(opts.directions),
        bootstrap=opts.bootstrap,
        level=opts.level,
        csls_k=opts.csls_k,
        standardize=task.standardize,
        labels=labels,
    )
    if opts.save_maps:
        folder = rt.store.folder(registry.namespace("maps")) / "fitted" / task.key[:32]
        for estimator in opts.estimators:
            fit_layer_maps(
                reps_a,
                reps_b,
                folder / estimator,
                estimator=estimator,
                layers="last" if opts.layers == "last" else "auto",
                direction="a->b",
                metadata={"pair": pair.label, "pooling": task.pooling},
            )
    return rows


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The maps section: the best layer pair per pair x estimator x direction, curves, grids, the picture."""
    from interlingua.report.markdown import maps_section

    return maps_section(tables["maps"], info, fig_dir) if "maps" in tables else []


MAPS = Capability(
    "maps",
    section=MapsSpec,
    description="fit and score maps between sides (off when absent)",
    kinds=(
        # also maps/fitted/ when save_maps
        Kind(
            "maps",
            ("maps",),
            runner=run,
            pair=True,
            progress="mapping",
            tables=("maps",),
            label=lambda t: f"maps {t.pair.label} {t.pooling}",
            phase=MAPS_PHASE,
            cost=map_cost,
            example=map_example,
        ),
    ),
    check=check,
    request=request,
    plan=plan,
    preflight=preflight,
    report=report,
    figure_count=map_figures,
)
