"""The ``transport`` capability: one task per directed model pair, fused by optimal transport.

Its section is :class:`~interlingua.transport.config.TransportSpec`; each task (kind ``transport``)
reads both models' files and the corpus text itself (no extracted side), and stores the fusion's rows
(NLL deltas at every alpha, the shuffled-plan control, the correspondence controls) under its key.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.contract.capability import Capability, Kind, section_options
from interlingua.core.store import content_key, json_safe
from interlingua.transport.columns import FUSION_COLUMNS
from interlingua.transport.config import TransportSpec
from interlingua.transport.cost import FUSION, transport_cost

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["TRANSPORT", "TransportTask", "options"]


def transport_example() -> tuple[Any, Any]:
    """A sample fusion task and what a finished one holds."""

    return TransportTask("k-transport", "m", "n", "eng_Latn", "eng_Latn"), [{"row": 1}]


@dataclass(frozen=True)
class TransportTask:
    """One directed OT fusion (target <- donor): plans, fused targets at every alpha, the shuffled control, NLL."""

    kind: ClassVar[str] = "transport"
    key: str
    target: str
    donor: str
    target_language: str
    donor_language: str
    depends: tuple[str, ...] = ()
    options: TransportSpec | None = field(default=None, compare=False, repr=False)
    max_length: int = field(default=256, compare=False)


options = section_options("transport", TransportSpec)


def check(spec: RunSpec) -> None:
    """Both models of every pair are run models, its languages corpus languages, and the corpus big enough."""
    opts = options(spec)
    if opts is None:
        return
    for tp in opts.pairs:
        for role in ("target", "donor"):
            spec.check_models(f"transport pair {role}", [getattr(tp, role)])
        for role in ("target_language", "donor_language"):
            spec.check_languages(f"transport {role}", getattr(tp, role))
    if spec.corpus.n is not None and spec.corpus.n < opts.probe_n + opts.eval_n:
        raise ValueError(
            f"transport needs probe_n + eval_n = {opts.probe_n + opts.eval_n} disjoint "
            f"sentences but corpus.n is {spec.corpus.n}; raise corpus.n or lower them"
        )


def plan(ctx: PlanContext) -> None:
    """One task per directed pair, keyed by both models' files, the probe and evaluation text and the options."""
    from interlingua.core.errors import ConfigError
    from interlingua.core.numerics import resolve_threads
    from interlingua.data.corpora import normalize_language

    spec, corpus = ctx.spec, ctx.corpus
    opts = options(spec)
    if opts is None:
        return
    if importlib.util.find_spec("ot") is None:  # before any model runs, not when the first plan is solved
        from interlingua.transport.errors import TransportError

        raise TransportError(
            "the run's transport: section needs POT (Python Optimal Transport), which is not installed: "
            "pip install 'interlingua[transport]' (or pip install 'pot>=0.9')"
        )
    if len(corpus) < opts.probe_n + opts.eval_n:
        raise ConfigError(
            f"transport needs probe_n + eval_n = {opts.probe_n + opts.eval_n} disjoint sentences; the corpus has "
            f"{len(corpus)}: lower transport.probe_n / eval_n or raise corpus.n"
        )
    stored = opts.model_dump(mode="json", exclude={"pairs"})
    for tp in opts.pairs:
        tl = normalize_language(tp.target_language or spec.corpus.languages[0])
        dl = normalize_language(tp.donor_language) if tp.donor_language else tl
        key = content_key(
            ctx.versioned(
                {
                    "transport": stored,
                    "target": ctx.fingerprints[tp.target],
                    "donor": ctx.fingerprints[tp.donor],
                    "sides": [corpus.fingerprint(tl), corpus.fingerprint(dl)],
                    "ids_sha256": ctx.ids_sha256(),
                    "max_length": spec.max_length,
                    "threads": str(resolve_threads(spec.threads)),
                }
            )
        )
        ctx.add(TransportTask(key, tp.target, tp.donor, tl, dl, options=opts, max_length=spec.max_length))


def run(rt: Runtime, task: TransportTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Fusion rows of one directed pair from the store, or computed (probe, plans, fused targets, NLL)."""
    rows = rt.stored(task, lambda: _fuse(rt, task), valid=lambda v: isinstance(v, list))
    if rt.was_cached(task) and rows and rows[0].get("self_control") == "failed":  # fuse_pair warned when computing
        from interlingua.transport.errors import TransportWarning

        warnings.warn(
            f"transport {task.target} <- {task.donor} (stored rows): {rows[0].get('note', '')}",
            TransportWarning,
            stacklevel=2,
        )
    return rows


def _fuse(rt: Runtime, task: TransportTask) -> list[dict[str, Any]]:
    from interlingua.transport import ParallelProbe, SweepOptions, fuse_pair

    opts = task.options
    assert opts is not None
    rt.release_except(None)  # fuse_pair loads both models itself
    corpus = rt.plan.corpus
    probe = slice(0, opts.probe_n)
    held = slice(len(corpus) - opts.eval_n, len(corpus))
    evaluation = {
        lang: corpus.sentences(lang)[held] for lang in dict.fromkeys((task.target_language, task.donor_language))
    }
    table = fuse_pair(
        rt.plan.models[task.target],
        rt.plan.models[task.donor],
        ParallelProbe(
            corpus.sentences(task.target_language)[probe],
            corpus.sentences(task.donor_language)[probe],
            task.target_language,
            task.donor_language,
        ),
        evaluation,
        SweepOptions.from_spec(opts, max_length=task.max_length),
        cache_dir=rt.store.folder("models"),
        plans_cache=rt.store,  # plans keyed by their inputs: another alpha grid or eval set reuses them
    )
    return [
        json_safe({**row, "target": task.target, "donor": task.donor}, infinite=True)
        for row in table.to_dict("records")
    ]


def tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``transport``: every directed fusion's rows (``transport.FUSION_COLUMNS``)."""
    tasks = plan.of_kind("transport")
    if not tasks:
        return {}
    from interlingua.core.schema import result_table

    return {"transport": result_table([row for t in tasks for row in done[t.key]], FUSION_COLUMNS)}


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The fusion section: the correspondence controls, then the NLL deltas against the shuffled plan."""
    from interlingua.transport.report import transport_section

    return transport_section(tables["transport"], fig_dir) if "transport" in tables else []


TRANSPORT = Capability(
    "transport",
    section=TransportSpec,
    description="OT fusion of model pairs (off when absent)",
    kinds=(
        # also transport/plans/: the OT plans by their inputs
        Kind(
            "transport",
            ("transport",),
            runner=run,
            label=lambda t: f"transport {t.donor} -> {t.target}",
            phase=FUSION,
            cost=transport_cost,
            example=transport_example,
        ),
    ),
    check=check,
    plan=plan,
    tables=tables,
    report=report,
    columns={"transport": FUSION_COLUMNS},
)
