"""The ``quality`` capability: how well each model reads each language side (its NLL against chance).

Section :class:`~interlingua.quality.config.QualitySpec`: one task per model x corpus side it reads (kind
``quality``), teacher-forced mean NLL in nats per scored token against chance ln V, before extraction, on
the audit's causal-LM cache (one base model held across adapters); ``quality.csv`` and a report section.
The values also serve as predictors (``predictors:``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.audit.capability import AUDIT_FORMAT_VERSION, lm_cache
from interlingua.contract.capability import CHECKS, Capability, Kind, section_options
from interlingua.core.store import content_key, json_safe
from interlingua.quality.columns import QUALITY_COLUMNS, REPORT_COLUMNS
from interlingua.quality.config import QualitySpec
from interlingua.quality.cost import quality_cost

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["QUALITY", "QualityTask", "options"]


def quality_example() -> tuple[Any, Any]:
    """A sample quality task and what a finished one holds."""

    return QualityTask("k-quality", "m", "eng_Latn"), {"nll": 1.0}


@dataclass(frozen=True)
class QualityTask:
    """One model's mean NLL on one language side (teacher-forced, against chance ln V)."""

    kind: ClassVar[str] = "quality"
    key: str
    model: str
    language: str
    depends: tuple[str, ...] = ()
    n: int | None = field(default=None, compare=False)  # score the first n sentences (None: all)


options = section_options("quality", QualitySpec)


def check_quality(spec: RunSpec) -> None:
    """The listed sides are corpus languages."""
    opts = options(spec)
    if opts is not None:
        spec.check_languages("quality.languages", opts.languages)


def plan_quality(ctx: PlanContext) -> None:
    """One NLL task per model x language side it reads (or the listed sides), grouped by base model."""
    from interlingua.contract.keys import threads_key
    from interlingua.data.corpora import normalize_language

    spec, corpus, names, models, fingerprints = ctx.spec, ctx.corpus, ctx.names, ctx.models, ctx.fingerprints
    needed = ctx.needed
    opts = options(spec)
    if opts is None:
        return
    listed = None if opts.languages == "all" else {normalize_language(c) for c in opts.languages}
    for name in sorted(names, key=lambda n: (str(models[n].path or models[n].package), names.index(n))):
        for lang in needed[name]:
            if listed is not None and lang not in listed:
                continue
            key = content_key(
                ctx.versioned(
                    {
                        "format": AUDIT_FORMAT_VERSION,
                        "quality": name,
                        "fingerprint": fingerprints[name],
                        "corpus_fingerprint": corpus.fingerprint(lang),
                        "ids_sha256": ctx.ids_sha256(),
                        "special_tokens": spec.special_tokens,
                        "max_length": spec.max_length,
                        "lang": lang,
                        "n": opts.n,
                        "threads": threads_key(spec),
                    }
                )
            )
            ctx.add(QualityTask(key, name, lang, n=opts.n))


def run_quality(rt: Runtime, task: QualityTask, done: dict[str, Any]) -> dict[str, Any]:
    """One model's NLL on one side, from the store or computed on the shared causal-LM cache."""
    return rt.stored(task, lambda: _quality(rt, task), valid=lambda v: isinstance(v, dict) and "nll" in v)


def _quality(rt: Runtime, task: QualityTask) -> dict[str, Any]:
    from interlingua.data.models.loading import hf_progress

    settings = rt.plan.run_settings()
    with hf_progress():
        sentences = rt.plan.corpus.sentences(task.language)[: task.n or None]
        q = lm_cache(rt).quality(
            rt.plan.models[task.model],
            sentences,
            special_tokens=settings.special_tokens,
            max_length=settings.max_length,
            batch_size=settings.batch_size,
        )
    out = json_safe(
        {
            "model": task.model,
            "language": task.language,
            "nll": q.nll,
            "chance_nll": q.chance,
            "vocab": q.vocab,
            "n_tokens": q.n_tokens,
            "n_sentences": q.n_sentences,
            "truncated": q.truncated,
            "verdict": q.verdict,
        },
        infinite=True,
    )
    return out


def quality_tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``quality``: each model's NLL per language side (``quality.columns.QUALITY_COLUMNS``)."""
    from interlingua.core.schema import result_table
    from interlingua.quality.columns import QUALITY_COLUMNS

    tasks = plan.of_kind("quality")
    if not tasks:
        return {}
    order = list(plan.models)
    tasks = sorted(tasks, key=lambda t: (order.index(t.model), t.language))
    return {"quality": result_table([done[t.key] for t in tasks], QUALITY_COLUMNS)}


def quality_report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The NLL-per-side section."""
    from interlingua.quality.report import quality_section

    return quality_section(tables["quality"]) if "quality" in tables else []


QUALITY = Capability(
    "quality",
    section=QualitySpec,
    description="each model's NLL per language side (off when absent)",
    kinds=(
        Kind(
            "quality",
            ("quality",),
            runner=run_quality,
            holds_model=True,
            group="base",
            label=lambda t: f"quality {t.model} on {t.language}",
            phase=CHECKS,
            cost=quality_cost,
            example=quality_example,
        ),
    ),
    stage="before",
    check=check_quality,
    plan=plan_quality,
    tables=quality_tables,
    report=quality_report,
    columns={"quality": QUALITY_COLUMNS},
    report_columns=REPORT_COLUMNS,
    glossary_extra=lambda info: {
        str(lang): f"mean NLL on {lang}, nats per scored token (quality.csv's nll)"
        for lang in info["corpus"]["languages"]
    },
)
