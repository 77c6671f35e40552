"""The ``audit`` capability: is each checkpoint what it claims to be?

Section :class:`~interlingua.audit.config.AuditSpec`: one task per model (adapter, tokenizer against
embeddings, NLL against chance, identity keys), then under ``audit.strict`` a gate that stops the run
before any extraction when a verdict is bad. Audits run on one causal-LM cache (:func:`lm_cache`) that
holds one base model across adapters; the ``quality`` capability scores its NLL on the same cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from interlingua.audit.columns import AUDIT_COLUMNS
from interlingua.audit.config import AuditSpec
from interlingua.audit.cost import audit_cost, gate_cost
from interlingua.contract.capability import CHECKS, Capability, Kind, section_options
from interlingua.core.store import content_key, json_safe

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["AUDIT", "AUDIT_FORMAT_VERSION", "AuditGateTask", "AuditTask", "audit_options", "lm_cache"]

#: Bumped whenever a stored audit row would change for the same inputs.
AUDIT_FORMAT_VERSION = 2


def audit_example() -> tuple[Any, Any]:
    """A sample audit and what a finished one holds."""

    return AuditTask("k-audit", "m", "eng_Latn"), {"row": {}}


def gate_example() -> tuple[Any, Any]:
    """A sample gate (it stores nothing)."""

    return AuditGateTask("k-gate"), None


@dataclass(frozen=True)
class AuditTask:
    """One model's audit row: adapter, tokenizer provenance, NLL on one corpus side, identity keys."""

    kind: ClassVar[str] = "audit"
    key: str
    model: str
    language: str
    depends: tuple[str, ...] = ()
    options: AuditSpec | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class AuditGateTask:
    """``audit.strict``: stop before any extraction when an audited model's verdict is bad."""

    kind: ClassVar[str] = "audit_gate"
    key: str
    depends: tuple[str, ...] = ()


audit_options = section_options("audit", AuditSpec)


def check_audit(spec: RunSpec) -> None:
    """The scored side is a corpus language."""
    opts = audit_options(spec)
    if opts is not None:
        spec.check_languages("audit.language", opts.language)


def plan_audit(ctx: PlanContext) -> None:
    """One audit task per model (keyed by its files, the options and the scored text), then the strict gate."""
    from interlingua.contract.keys import threads_key
    from interlingua.data.corpora import normalize_language

    spec, corpus, names, models, fingerprints = ctx.spec, ctx.corpus, ctx.names, ctx.models, ctx.fingerprints
    opts = audit_options(spec)
    if opts is None:
        return
    language = normalize_language(opts.language or spec.corpus.languages[0])
    options = ctx.versioned(
        {
            "format": AUDIT_FORMAT_VERSION,
            "audit": opts.model_dump(mode="json", exclude={"strict", "language"}),
            "language": language,
            "corpus_fingerprint": corpus.fingerprint(language) if opts.quality else "",
            "ids_sha256": (ctx.ids_sha256() if opts.quality else ""),
            "special_tokens": spec.special_tokens,
            "max_length": spec.max_length,
            "threads": threads_key(spec),
        }
    )
    keys = []
    # models over one base next to each other: the audit loads each base once (adapters go on and off it)
    for name in sorted(names, key=lambda n: (str(models[n].path or models[n].package), names.index(n))):
        m = models[name]
        key = content_key(
            {
                **options,
                "model": name,
                "fingerprint": fingerprints[name],
                "spec": m.model_dump(mode="json", include={"path", "adapter", "tokenizer", "dtype"}),
            }
        )
        ctx.add(AuditTask(key, name, language, options=opts))
        keys.append(key)
    if opts.strict:
        ctx.add(AuditGateTask(content_key({"audit_gate": keys}), depends=tuple(keys)))


def run_audit(rt: Runtime, task: AuditTask, done: dict[str, Any]) -> dict[str, Any]:
    """One model's audit row and identity keys, from the store or computed (loads the model with its LM head)."""
    return rt.stored(task, lambda: _audit(rt, task), valid=lambda v: isinstance(v, dict) and "row" in v)


def _audit(rt: Runtime, task: AuditTask) -> dict[str, Any]:
    from dataclasses import asdict

    from interlingua.audit import audit_one
    from interlingua.data.models.loading import hf_progress

    opts = task.options
    assert opts is not None
    lm_cache(rt)
    settings = rt.plan.run_settings()
    sentences = rt.plan.corpus.sentences(task.language) if opts.quality else None
    with hf_progress():
        row, identity = audit_one(
            rt.plan.models[task.model],
            corpus_sentences=sentences,
            cache_dir=rt.store.folder("models"),
            tiny_threshold=opts.tiny_threshold,
            min_agreement=opts.min_agreement,
            margin=opts.margin,
            special_tokens=settings.special_tokens,
            max_length=settings.max_length,
            batch_size=settings.batch_size,
            lm_cache=lm_cache(rt),
        )
    row["model"] = task.model
    if opts.quality:
        row["quality_language"] = task.language
    out = {"row": json_safe(row, infinite=True), "identity": asdict(identity)}
    return out


def lm_cache(rt: Runtime) -> Any:
    """The causal-LM cache audits and quality tasks share (one base held); extraction models released first."""
    from interlingua.audit import CausalLMCache

    if "audit" not in rt.held:
        rt.release_except(None)
        rt.held["audit"] = CausalLMCache(rt.store.folder("models"))
    return rt.held["audit"]


def run_audit_gate(rt: Runtime, task: AuditGateTask, done: dict[str, Any]) -> None:
    """``audit.strict``: raise :class:`AuditError` naming every model whose audit found something bad."""
    from interlingua.core.errors import AuditError

    bad = [(done[k]["row"]["model"], done[k]["row"]["_bad"]) for k in task.depends if done[k]["row"].get("_bad")]
    if bad:
        lines = "\n".join(f"  {model}: {'; '.join(findings)}" for model, findings in bad)
        raise AuditError(
            f"audit.strict: {len(bad)} model(s) are not what they claim to be:\n{lines}\n"
            "fix or drop them, or set audit.strict: false to compare them anyway (audit.csv keeps the verdicts)"
        )


def audit_tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``audit``: the audit rows of the run's models, in config order, with identity groups across them."""
    from interlingua.audit import SpecIdentity, finish_rows

    tasks = plan.of_kind("audit")
    if not tasks:
        return {}
    order = list(plan.models)
    tasks = sorted(tasks, key=lambda t: order.index(t.model))  # config order (the plan groups them by base)
    rows = [dict(done[t.key]["row"]) for t in tasks]
    identities = [SpecIdentity(**done[t.key]["identity"]) for t in tasks]
    return {"audit": finish_rows(rows, identities)}


def audit_report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The audit section (before the results: a bad verdict changes how they read)."""
    from interlingua.audit.report import audit_section

    return audit_section(tables["audit"]) if "audit" in tables else []


def audit_info(tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """``run.json``'s ``audit``: the models with a bad verdict, of how many (the headline reads it)."""
    audit = tables.get("audit")
    if audit is None:
        return {}
    return {"audit": {"bad": audit.loc[audit["bad"], "model"].tolist(), "models": len(audit)}}


def audit_headline(tables: dict[str, pd.DataFrame], info: dict[str, Any]) -> list[str]:
    """A headline line when the audit found a model at fault (after the results' lines: it qualifies them)."""
    from interlingua.audit.report import audit_headline as line

    return line(info)


AUDIT = Capability(
    "audit",
    section=AuditSpec,
    description="audit every model first (off when absent)",
    kinds=(
        Kind(
            "audit",
            ("audit",),
            runner=run_audit,
            holds_model=True,
            group="base",
            label=lambda t: f"audit {t.model} on {t.language}",
            phase=CHECKS,
            cost=audit_cost,
            example=audit_example,
        ),
        Kind("audit_gate", runner=run_audit_gate, driver=True, phase=CHECKS, cost=gate_cost, example=gate_example),
    ),
    stage="before",
    check=check_audit,
    plan=plan_audit,
    tables=audit_tables,
    report=audit_report,
    report_first=True,
    headline=audit_headline,
    run_info=audit_info,
    columns={"audit": AUDIT_COLUMNS},
)
