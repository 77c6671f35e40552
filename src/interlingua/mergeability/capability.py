"""The ``mergeability`` capability: can two models be merged? Weight coverage, diagnostics, loss barriers.

Its section is :class:`~interlingua.mergeability.config.MergeabilitySpec`. Before any extraction it plans one
``weights`` task per pair of models (which tensors line up and why, streamed diagnostics over an optional
base) and, with ``barriers``, one ``barrier`` task per pair (the NLL of interpolated weights on corpus
sides); the checkpoint arm's pairs join the list. The work itself is in :mod:`interlingua.mergeability.pairs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.contract.capability import CHECKS, Capability, Kind, section_options
from interlingua.core.store import content_key
from interlingua.mergeability.columns import (
    BARRIER_COLUMNS,
    BARRIER_CURVE_COLUMNS,
    CHECKPOINT_CORRELATION_COLUMNS,
    COVERAGE_COLUMNS,
    MERGEABILITY_COLUMNS,
)
from interlingua.mergeability.config import BarrierSpec, MergeabilitySpec
from interlingua.mergeability.cost import barrier_cost, weights_cost

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["MERGEABILITY", "WEIGHTS_FORMAT_VERSION", "BarrierTask", "MergeabilityTask", "options", "weight_pairs"]


def weights_example() -> tuple[Any, Any]:
    """A sample weight comparison and what a finished one holds."""

    return MergeabilityTask("k-merge", "m", "n"), {"row": {}}


def barrier_example() -> tuple[Any, Any]:
    """A sample barrier and what a finished one holds."""

    return BarrierTask("k-barrier", "m", "n", ("eng_Latn",)), {"summary": []}


@dataclass(frozen=True)
class MergeabilityTask:
    """One pair of models: coverage (route and why) and the streamed weight diagnostics (over ``base``)."""

    kind: ClassVar[str] = "mergeability"
    key: str
    a: str
    b: str
    base: str | None = None
    depends: tuple[str, ...] = ()
    options: MergeabilitySpec | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class BarrierTask:
    """One pair of models: NLL of the interpolated weights on corpus sides (the loss barrier)."""

    kind: ClassVar[str] = "barrier"
    key: str
    a: str
    b: str
    languages: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()
    options: BarrierSpec | None = field(default=None, compare=False, repr=False)


options = section_options("mergeability", MergeabilitySpec)


def check(spec: RunSpec) -> None:
    """Every model the section names is a run model; barrier sides are corpus languages."""
    mg = options(spec)
    if mg is None:
        return
    for i, p in enumerate(mg.pairs if isinstance(mg.pairs, list) else []):
        spec.check_models(f"mergeability.pairs[{i}]", [p.a, p.b, p.base])
    if mg.checkpoints is not None:
        spec.check_models("mergeability.checkpoints.models", list(mg.checkpoints.models))
    if mg.barriers is not None:
        spec.check_languages("mergeability.barriers.languages", mg.barriers.languages)


#: Bumped whenever a stored weights / barrier entry would change for the same inputs.
WEIGHTS_FORMAT_VERSION = 1


def weight_pairs(spec: RunSpec, names: list[str]) -> list[tuple[str, str, str | None]]:
    """(a, b, base) of the ``mergeability:`` section: its pairs, then the checkpoint arm's (each once)."""
    opts = options(spec)
    if opts is None:
        return []
    out: list[tuple[str, str, str | None]] = []
    if opts.pairs == "cross_model":
        out += [(a, b, None) for i, a in enumerate(names) for b in names[i + 1 :]]
    elif isinstance(opts.pairs, list):
        out += [(p.a, p.b, p.base) for p in opts.pairs]
    if opts.checkpoints is not None:
        arm = opts.checkpoints.models
        out += [(a, b, None) for i, a in enumerate(arm) for b in arm[i + 1 :]]
    seen: set[tuple[str, str, str | None]] = set()
    unique = []
    for a, b, base in out:
        if (a, b, base) in seen or (b, a, base) in seen:
            continue
        seen.add((a, b, base))
        unique.append((a, b, base))
    return unique


def plan(ctx: PlanContext) -> None:
    """One weights task per pair (and base), one barrier task per pair when barriers are asked for; before any
    extraction, so a pair's coverage is known first."""
    from interlingua.contract.keys import threads_key
    from interlingua.data.corpora import normalize_language

    spec, corpus, names, fingerprints = ctx.spec, ctx.corpus, ctx.names, ctx.fingerprints
    opts = options(spec)
    if opts is None:
        return
    common = ctx.versioned({"format": WEIGHTS_FORMAT_VERSION})
    languages: list[str] = []
    if opts.barriers is not None:
        listed = opts.barriers.languages
        languages = [normalize_language(c) for c in (spec.corpus.languages if listed == "all" else listed)]
    interpolated: set[tuple[str, str]] = set()
    for a, b, base in weight_pairs(spec, names):
        inputs = {
            "a": fingerprints[a],
            "b": fingerprints[b],
            "base": fingerprints[base] if base else "",
            "names": [a, b, base or ""],
        }
        key = content_key({**common, "weights": inputs, "diagnostics": opts.diagnostics, "density": opts.density})
        ctx.add(MergeabilityTask(key, a, b, base, options=opts))
        if opts.barriers is not None and (a, b) not in interpolated:  # a barrier needs no base: once per pair
            interpolated.add((a, b))
            inputs = {"a": fingerprints[a], "b": fingerprints[b], "names": [a, b]}
            n = opts.barriers.n
            text = {lang: corpus.fingerprint(lang) for lang in languages}
            key = content_key(
                {
                    **common,
                    "barrier": inputs,
                    "grid": sorted(set(opts.barriers.grid) | {0.0, 1.0}),
                    "text": text,
                    "n": n,
                    "ids_sha256": ctx.ids_sha256(),
                    "special_tokens": spec.special_tokens,
                    "max_length": spec.max_length,
                    "threads": threads_key(spec),
                }
            )
            ctx.add(BarrierTask(key, a, b, tuple(languages), options=opts.barriers))


def run_weights(rt: Runtime, task: MergeabilityTask, done: dict[str, Any]) -> dict[str, Any]:
    """One pair's coverage rows and diagnostics row, from the store or computed (headers, streamed tensors)."""
    return rt.stored(task, lambda: _weights(rt, task), valid=lambda v: isinstance(v, dict) and "row" in v)


def _weights(rt: Runtime, task: MergeabilityTask) -> dict[str, Any]:
    from interlingua.mergeability.pairs import run_weights_pair

    opts = task.options
    assert opts is not None
    return run_weights_pair(
        task.a, task.b, task.base, rt.plan.models, rt.store, diagnostics=opts.diagnostics, density=opts.density
    )


def run_barrier(rt: Runtime, task: BarrierTask, done: dict[str, Any]) -> dict[str, Any]:
    """One pair's loss barrier on the corpus sides, from the store or computed (one model in memory)."""
    return rt.stored(task, lambda: _barrier(rt, task), valid=lambda v: isinstance(v, dict) and "summary" in v)


def _barrier(rt: Runtime, task: BarrierTask) -> dict[str, Any]:
    from interlingua.data.models.loading import hf_progress
    from interlingua.mergeability.pairs import run_barrier_pair

    settings = rt.plan.run_settings()
    opts = task.options
    assert opts is not None
    n = opts.n
    texts = {lang: rt.plan.corpus.sentences(lang)[:n] for lang in task.languages}
    with hf_progress():
        out = run_barrier_pair(
            task.a,
            task.b,
            rt.plan.models,
            rt.store,
            texts,
            grid=list(opts.grid),
            max_length=settings.max_length,
            batch_size=settings.batch_size,
            special_tokens=settings.special_tokens,
        )
    return out


def tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``coverage``, ``mergeability``, ``barriers``, ``barrier_curves``, ``checkpoint_correlations``."""
    from interlingua.mergeability.pairs import mergeability_tables

    opts = options(plan.spec)
    if opts is None:
        return {}
    return mergeability_tables(
        opts,
        [done[t.key] for t in plan.of_kind("mergeability")],
        [done[t.key] for t in plan.of_kind("barrier")],
        built["results"],
        seed=plan.spec.seeds.test,
    )


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The mergeability section: coverage, diagnostics, barriers, the checkpoint arm."""
    from interlingua.mergeability.report import mergeability_section

    return mergeability_section(tables, fig_dir) if "mergeability" in tables else []


MERGEABILITY = Capability(
    "mergeability",
    section=MergeabilitySpec,
    description="weight coverage, diagnostics, barriers, checkpoint arm (off when absent)",
    kinds=(
        Kind(
            "mergeability",
            ("weights",),
            runner=run_weights,
            label=lambda t: f"mergeability {t.a} vs {t.b}",
            phase=CHECKS,
            cost=weights_cost,
            example=weights_example,
        ),
        Kind(
            "barrier",
            ("barriers",),
            runner=run_barrier,
            label=lambda t: f"barrier {t.a} vs {t.b}",
            phase=CHECKS,
            cost=barrier_cost,
            example=barrier_example,
        ),
    ),
    stage="before",
    check=check,
    plan=plan,
    tables=tables,
    report=report,
    columns={
        "coverage": COVERAGE_COLUMNS,
        "mergeability": MERGEABILITY_COLUMNS,
        "barriers": BARRIER_COLUMNS,
        "barrier_curves": BARRIER_CURVE_COLUMNS,
        "checkpoint_correlations": CHECKPOINT_CORRELATION_COLUMNS,
    },
)
