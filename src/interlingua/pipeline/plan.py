"""Plan: a run spec -> a list of content-keyed tasks with their dependencies.

Nothing is computed here. Every task's key is a hash of everything its output
depends on (model files, corpus text and ids, options, package version), so
the same task in two runs, or on two machines, has the same key and is
computed once. An executor (:mod:`interlingua.pipeline.execute`) runs the tasks in
order; assembly (:mod:`interlingua.pipeline.assemble`) turns their outputs into tables
and a report.

The pipeline plans one kind itself, ``extract`` (one model reading one
language, every pooling in one forward pass); every other kind belongs to a
capability (:mod:`interlingua.pipeline.registry`). Planning has three steps: each
capability says which sides it reads (``request``), the capabilities of stage
``"before"`` plan their tasks (those that read no extracted side, or add
entries to a side's extraction), extraction is planned for every requested
side, and the capabilities of stage ``"after"`` plan the tasks that read those
sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from interlingua.contract.capability import PlanContext
from interlingua.contract.keys import ids_sha256, threads_key
from interlingua.contract.pairs import Pair, Side, enumerate_pairs
from interlingua.core.errors import ConfigError
from interlingua.core.numerics import resolve_threads
from interlingua.core.store import content_key
from interlingua.data.corpora import ParallelCorpus, normalize_language
from interlingua.data.models.spec import ModelSpec
from interlingua.pipeline import registry
from interlingua.pipeline.config import RunSpec
from interlingua.pipeline.extract_kind import ExtractTask  # the pipeline's own kind's task (an API name of plan)

__all__ = [
    "EXTRACT_FORMAT_VERSION",
    "ExtractTask",
    "Plan",
    "RunSettings",
    "Task",
    "build_plan",
    "entry_inputs",
]

#: Bumped whenever stored representations would change for the same inputs.
EXTRACT_FORMAT_VERSION = 2


class Task(Protocol):
    """What every task is: a frozen dataclass with its kind, its content key and the keys it needs first."""

    kind: ClassVar[str]

    @property
    def key(self) -> str: ...

    @property
    def depends(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class RunSettings:
    """The run-wide settings every forward pass uses, resolved from the spec once: what a runner reads
    instead of the spec (its own options travel on its task)."""

    max_length: int
    batch_size: int
    special_tokens: str

    @classmethod
    def of(cls, spec: RunSpec) -> RunSettings:
        return cls(int(spec.max_length), int(spec.batch_size), str(spec.special_tokens))


@dataclass
class Plan:
    """The tasks of a run, in an order that respects dependencies.

    ``extra_models``: models a capability loads that are not run models (given as model specs in its
    section), by the name its tasks use.
    """

    spec: RunSpec
    corpus: ParallelCorpus
    models: dict[str, ModelSpec]
    fingerprints: dict[str, str]
    pairs: list[Pair]
    tasks: list[Any] = field(default_factory=list)
    #: torch CPU threads of every forward pass, resolved once in the driver (numerics.resolve_threads)
    threads: int | str = 1
    extra_models: dict[str, ModelSpec] = field(default_factory=dict)
    #: max_length, batch_size, special_tokens (None only in plans built by hand in tests)
    settings: RunSettings | None = None
    _by_key: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def run_settings(self) -> RunSettings:
        """The plan's :class:`RunSettings` (a plan from :func:`build_plan` always has them)."""
        if self.settings is None:
            raise ValueError("this plan was built without run settings; build it with build_plan")
        return self.settings

    def of_kind(self, kind: str) -> list[Any]:
        """The plan's tasks of one kind, in plan order."""
        return [t for t in self.tasks if t.kind == kind]

    def task(self, key: str) -> Any:
        """The task with ``key``; KeyError when the plan has none (an index, rebuilt when tasks were added)."""
        if len(self._by_key) != len(self.tasks):
            self._by_key = {t.key: t for t in self.tasks}
        return self._by_key[key]

    def model_spec(self, name: str) -> ModelSpec:
        """A run model's spec, or a capability's extra model's."""
        found = self.models.get(name) or self.extra_models.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def extract_task(self, model: str, language: str) -> ExtractTask:
        for t in self.of_kind("extract"):
            assert isinstance(t, ExtractTask)
            if t.model == model and t.language == language:
                return t
        raise KeyError((model, language))

    def summary(self) -> dict[str, int]:
        kinds: dict[str, int] = {}
        for t in self.tasks:
            kinds[t.kind] = kinds.get(t.kind, 0) + 1
        return kinds


def build_plan(spec: RunSpec, corpus: ParallelCorpus, fingerprints: dict[str, str]) -> Plan:
    """The run's pairs, each capability's tasks and the extraction of every side they read."""
    languages = [normalize_language(code) for code in spec.corpus.languages]
    explicit = [
        (Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language)))
        for p in spec.pairs.explicit
    ]
    names = [m.name or m.label for m in spec.models]
    pairs = enumerate_pairs(
        names, languages, within_model=spec.pairs.within_model, cross_model=spec.pairs.cross_model, explicit=explicit
    )
    if not pairs:
        raise ConfigError(
            "the config selects no pairs: enable pairs.within_model or pairs.cross_model, or list pairs.explicit"
        )
    models = {name: m for name, m in zip(names, spec.models)}
    plan = Plan(
        spec=spec,
        corpus=corpus,
        models=models,
        fingerprints=dict(fingerprints),
        pairs=pairs,
        threads=resolve_threads(spec.threads),
        settings=RunSettings.of(spec),
    )
    ctx = PlanContext(plan, spec, corpus, dict(fingerprints), names, models, pairs, needed={m: [] for m in names})
    caps = registry.capabilities()
    for cap in caps:
        if cap.request is not None:
            cap.request(ctx)
    for cap in caps:
        if cap.stage == "before" and cap.plan is not None:
            cap.plan(ctx)
    _extract_tasks(ctx)
    for cap in caps:
        if cap.stage == "after" and cap.plan is not None:
            cap.plan(ctx)
    return plan


def _extract_tasks(ctx: PlanContext) -> None:
    """One extract task per requested side (grouped by model, so each model loads once): every sentence
    pooling of the run, then the extra entries capabilities added to that side."""
    spec, corpus = ctx.spec, ctx.corpus
    sentence_poolings = spec.sentence_poolings()
    for name in ctx.names:
        for lang in ctx.needed[name]:
            entries: list[tuple[str, str]] = []  # (entry name: a pooling or an extra entry, its content key)
            inputs = None
            for pooling in sentence_poolings:
                inputs = entry_inputs(spec, ctx.models[name], ctx.fingerprints[name], corpus, lang, pooling)
                entries.append((pooling, content_key(inputs)))
            extra = ctx.entries.get((name, lang), [])
            for e in extra:
                own = {**entry_inputs(spec, ctx.models[name], ctx.fingerprints[name], corpus, lang, e.name), **e.inputs}
                entries.append((e.name, content_key(own)))
            key = content_key({"extract": dict(entries)})
            ctx.extract_keys[(name, lang)] = key
            assert inputs is not None
            common = tuple(sorted((k, v) for k, v in inputs.items() if k != "pooling"))
            depends = tuple(dict.fromkeys(d for e in extra for d in e.depends))
            ctx.add(
                ExtractTask(
                    key,
                    name,
                    lang,
                    tuple(entries),
                    common,
                    depends=depends,
                    extra=tuple((e.name, e.owner, e.stem) for e in extra),
                )
            )
            ctx.entry_keys.update({(key, entry): entry_key for entry, entry_key in entries})


def entry_inputs(
    spec: RunSpec, mspec: ModelSpec, fingerprint: str, corpus: ParallelCorpus, language: str, pooling: str
) -> dict[str, str]:
    """Everything one stored representation depends on, as strings (also written into the entry)."""
    return {
        "format_version": str(EXTRACT_FORMAT_VERSION),
        "model_fingerprint": fingerprint,
        "corpus_fingerprint": corpus.fingerprint(language),
        "ids_sha256": ids_sha256(corpus),
        "n": str(len(corpus)),
        "lang": language,
        "pooling": pooling,
        "special_tokens": spec.special_tokens,
        "max_length": str(spec.max_length),
        "batch_size": str(spec.batch_size),
        "dtype": mspec.dtype,
        "threads": threads_key(spec),  # a forward pass's last bits depend on it (numerics.py)
    }
