"""What a capability declares: its config section, cross-checks, task kinds, planner and runners.

A capability (maps, patching, transport, ...) lives in its own package and
describes itself with one :class:`Capability`; :mod:`interlingua.pipeline.registry`
lists them once. The pipeline reads everything per capability from there:
``RunSpec``'s sections (:mod:`interlingua.pipeline.config`), the tasks a run plans
(:mod:`interlingua.pipeline.plan` calls each planner with a :class:`PlanContext`), how a
task runs (:mod:`interlingua.pipeline.execute` calls its kind's runner), the store's
namespaces, how executors group tasks, and the order of tables.

This module imports nothing of the package at run time, so a capability's
declaration can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd
    from pydantic import BaseModel

    from interlingua.contract.pairs import Pair
    from interlingua.core.schema import Column
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.data.models.spec import ModelSpec
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.cost import CostContext
    from interlingua.pipeline.plan import Plan

__all__ = [
    "CHECKS",
    "EXTRACTION",
    "Capability",
    "CostPhase",
    "ExtraModel",
    "Kind",
    "PlanContext",
    "SideEntry",
    "TaskCost",
    "section_options",
]

S = TypeVar("S", bound="BaseModel")


def section_options(name: str, cls: type[S]) -> Callable[[RunSpec], S | None]:
    """A capability's options accessor: ``options(spec)`` is its section ``name`` of the run spec, typed as ``cls``
    (None when the config leaves it out: the capability is off)."""

    def options(spec: RunSpec) -> S | None:
        return spec.section(name, cls)

    options.__doc__ = f"The run's ``{name}:`` section (None: off)."
    return options


@dataclass(frozen=True)
class CostPhase:
    """A line of ``interlingua plan``'s estimate that task kinds are priced into (several kinds may share one).

    ``rank``: phases print in rank order (the pipeline's own: startup 0, model loading 10, extraction 20,
    outputs 100). ``rough``: the estimate counts forward passes and fits only. ``advice``: what cuts the
    phase, most effective first (option names of the config reference), offered when it dominates a long
    run. ``parts``: what the phase's named shares are (e.g. ``"measure"``: the detail reads "by measure: ...",
    and the advice "fewer measures (most costly: ...)" then ``parts_advice``).
    """

    name: str
    rank: int
    rough: bool = False
    advice: tuple[str, ...] = ()
    parts: str = ""
    parts_advice: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskCost:
    """What one task still to run costs: seconds, its working set, the models it loads.

    ``seconds``: the task's seconds as terms its phase adds one after another (their order is kept, so the
    estimate is the same to the float whoever sums it); ``parts``: when given, the name of each term (the
    phase's shares, e.g. seconds per measure). ``peak_bytes``: its largest working set beyond the interpreter
    (0: not estimated). ``loads``: the models it loads (each priced once in the loading phase). ``tokens``:
    tokens it runs through a model (said in its phase's detail).
    """

    seconds: tuple[float, ...] = ()
    parts: tuple[str, ...] = ()
    peak_bytes: float = 0.0
    loads: tuple[str, ...] = ()
    tokens: float = 0.0

    def __post_init__(self) -> None:
        if self.parts and len(self.parts) != len(self.seconds):
            raise ValueError(f"TaskCost: {len(self.parts)} part names for {len(self.seconds)} terms")

    @property
    def total(self) -> float:
        """The task's seconds (summed in order)."""
        out = 0.0
        for s in self.seconds:
            out += s
        return out


#: The phase of the model checks several capabilities run (audits, quality, weights, barriers): one line.
CHECKS = CostPhase(
    "audits, quality, weights, barriers",
    70,
    rough=True,
    advice=(
        "a coarser mergeability.barriers.grid or a smaller barriers.n (each grid point is a forward pass per language)",
        "fewer checkpoint pairs (each pair gets its barriers)",
        "device: cuda for the models (forward passes)",
    ),
)


#: The pipeline's extraction phase: its own ``extract`` kind and any kind that runs an encoder over the corpus.
EXTRACTION = CostPhase(
    "extraction",
    20,
    advice=(
        "fewer sentences (corpus.n) or a smaller max_length",
        "device: cuda for the models (forward passes)",
        "fewer models or languages",
    ),
)


@dataclass(frozen=True)
class Kind:
    """One task kind.

    ``namespaces``: the store folders its runner writes entries into (the first holds the task's own
    output; empty: it stores nothing and always runs). ``runner(runtime, task, done)``: computes the
    task's output (or reads it from the store) and returns it; ``done`` holds the outputs of the task's
    ``depends`` only (reading another raises). ``holds_model``: its runner loads a model
    that the next task of a model-holding kind may reuse (the local executor keeps it; Ray groups these
    tasks by ``group`` so each model loads once on one worker); every other kind releases all models
    before it runs (it loads its own, or none). ``group``: how Ray groups a model-holding kind's tasks,
    ``"model"`` (one group per model and kind) or ``"base"`` (one per base model: audits and NLL over
    adapters). ``driver``: it runs in the driver between stages, everything after it waits. ``pair``: it
    reads two extracted sides (``sides``), so Ray's ``side_block`` may batch it. ``progress``: counted by
    the local progress bar, which names it by this verb (``"comparing"``; empty: not counted).
    ``label(task)``: what the task does, for a progress bar (default: the kind's name).
    ``phase`` and ``cost(task, ctx)``: the line of ``interlingua plan``'s estimate its tasks count in, and what
    one task still to run costs (a :class:`TaskCost`; ``ctx``: the plan, the models' shapes, the calibrated
    rates, see :class:`~interlingua.pipeline.cost.CostContext`). Every kind has both: the registry refuses a
    kind without them, so no task is priced at 0 s unseen. ``example()``: a sample task of the kind and what
    a finished one holds in the store (None: it stores nothing as JSON), for the kind checks
    (``tests/test_kinds.py``).
    """

    name: str
    namespaces: tuple[str, ...] = ()
    runner: Callable[..., Any] | None = None
    holds_model: bool = False
    group: str = ""
    driver: bool = False
    pair: bool = False
    progress: str = ""
    label: Callable[[Any], str] | None = None
    phase: CostPhase | None = None
    cost: Callable[[Any, CostContext], TaskCost] | None = None
    example: Callable[[], tuple[Any, Any]] | None = None

    @property
    def namespace(self) -> str | None:
        """The namespace of the task's own output (None: the kind stores nothing)."""
        return self.namespaces[0] if self.namespaces else None


@dataclass(frozen=True)
class Capability:
    """One capability, declared in its own package.

    ``name``: its config key (``RunSpec.<name>``, absent: off). ``section``: the pydantic model of that
    key (None: it has no section of its own and reads top-level keys; a pydantic model, or a type such as
    ``list[Model]`` with a ``default_factory``). ``description``: the key's one-line help; ``default_factory``:
    the section's value when the config leaves it out (default: None, the capability is off). ``kinds``:
    its task kinds, in the order it emits them. ``stage``: whether it plans before the
    sides are extracted (``"before"``: audits, weights, alignments that extraction reads) or after
    (``"after"``: tasks that read extracted sides). ``check(spec)``: cross-checks of its section against
    the rest of the spec (raise ``ValueError`` with what is wrong and what to do; run by ``RunSpec``'s
    validation). ``request(ctx)``: tell the plan which sides (``ctx.need``) or word-aligned side pairs
    (``ctx.request_words``) it reads, before any task is planned. ``plan(ctx)``: add its tasks
    (``ctx.add``). ``read_entries(runtime, task, entries, done)``: compute or read the extra entries of a
    side that it added (``ctx.add_entries``) when the side's extraction runs. ``wants_words(spec)``: whether
    the spec asks it for word-aligned rows (so an ``alignment:`` section is not set for nothing).
    ``extra_models(spec)``: the models it loads beside the run's own (:class:`ExtraModel`: pre-flight checks,
    resolves and fingerprints each like a run model). ``preflight(spec, corpus, placeholder=False)``: what it
    needs of the sampled corpus and the machine,
    checked before any model runs (raise :class:`~interlingua.core.errors.ConfigError`; ``validate`` runs it too;
    ``placeholder``: the corpus is the offline check's stand-in, whose text says nothing). ``tables(plan,
    done, built)``: its output tables by file stem (``<stem>.csv``; none when it ran none), from its tasks'
    outputs and the tables built before it (``built``: every earlier capability's, in registry order, so
    ``results``, compare's, for every capability after compare).
    ``report(tables, info, fig_dir)``: its section of ``report.md`` (Markdown lines; none when its
    tables are absent) from every table of the run and ``run.json``'s content, figures written into
    ``fig_dir``; sections follow registry order after the results, or before them (``report_first``).
    ``write_files(plan, done, tables, folder)``: the files it writes into the run folder besides its tables
    (e.g. ``folds.json``), from every table of the run; returns entries for ``run.json``. ``run_info(tables)``:
    its entries of ``run.json`` read from the run's tables (in memory too; e.g. the audit's bad models).
    ``headline(tables, info)``: its lines under the report's headline (a ``report_first`` capability's after the
    others': they qualify the results); ``appendix(tables, info)``: its section
    after every capability's section (before the warnings). ``columns``: every table it writes, by file stem,
    with its columns in order, each with its glossary text (the one home of a column: ``<package>/columns.py``);
    ``report_columns``: the columns its report section derives that are no file's column (e.g. ``peak layer``).
    The report's glossary is read from these declarations only (:mod:`interlingua.pipeline.report`), and a
    table it writes with a column it does not declare is an error (``tests/test_capability_columns.py``).
    ``glossary_extra(info)``: descriptions of column names its section takes from the run (e.g. the quality
    table's language columns), used when its tables are present.
    ``figure_count(plan)``: about how many figures its report draws (priced in the estimate's outputs phase).
    """

    name: str
    section: Any = None
    description: str = ""
    default_factory: Callable[[], Any] | None = None
    kinds: tuple[Kind, ...] = ()
    stage: Literal["before", "after"] = "after"
    check: Callable[[RunSpec], None] | None = None
    request: Callable[[PlanContext], None] | None = None
    plan: Callable[[PlanContext], None] | None = None
    read_entries: Callable[..., dict[str, Any]] | None = None
    extra_models: Callable[[RunSpec], list[ExtraModel]] | None = None
    wants_words: Callable[[RunSpec], bool] | None = None
    preflight: Callable[..., None] | None = None
    tables: Callable[[Plan, dict[str, Any], dict[str, pd.DataFrame]], dict[str, pd.DataFrame]] | None = None
    write_files: Callable[[Plan, dict[str, Any], dict[str, pd.DataFrame], Path], dict[str, Any]] | None = None
    run_info: Callable[[dict[str, pd.DataFrame]], dict[str, Any]] | None = None
    report: Callable[[dict[str, pd.DataFrame], dict[str, Any], Path], list[str]] | None = None
    report_first: bool = False
    headline: Callable[[dict[str, pd.DataFrame], dict[str, Any]], list[str]] | None = None
    appendix: Callable[[dict[str, pd.DataFrame], dict[str, Any]], list[str]] | None = None
    columns: Mapping[str, tuple[Column, ...]] = field(default_factory=dict)
    report_columns: tuple[Column, ...] = ()
    glossary_extra: Callable[[dict[str, Any]], dict[str, str]] | None = None
    figure_count: Callable[[Plan], int] | None = None


@dataclass(frozen=True)
class ExtraModel:
    """A model a capability loads beside the run's own (the word aligner's encoder given as a model spec).

    ``name``: the name its fingerprint is recorded under (``plan.fingerprints``, the runtime's handles);
    ``section`` / ``field``: where the config gives it (``spec.<section>.<field>``: error messages name it,
    and pre-flight writes the resolved spec back there); ``spec``: the model.
    """

    name: str
    section: str
    field: str
    spec: ModelSpec


@dataclass(frozen=True)
class SideEntry:
    """An extra stored entry of one extracted side, added by a capability (e.g. word-aligned rows).

    ``name``: the entry's name in the extract task; ``inputs``: what it depends on beyond the side's own
    inputs (part of its content key); ``stem``: its file name in the side's folder, after the
    language; ``depends``: task keys it needs first; ``owner``: the capability
    whose ``read_entries`` computes it.
    """

    name: str
    inputs: dict[str, str]
    owner: str
    stem: str
    depends: tuple[str, ...] = ()


@dataclass
class PlanContext:
    """What a capability's planner reads and where it writes: the plan so far and the run's sides.

    ``needed``: per model, the corpus languages it is extracted on (in request order). ``word_pairs``:
    side pairs that asked for word-aligned rows (``request_words``). ``extract_keys``: (model, language)
    -> the extract task's key; ``entry_keys``: (extract key, entry name) -> the stored entry's key (both
    filled when extraction is planned, so ``"after"`` planners can key their tasks by what they read).
    ``shared``: values one capability's planner leaves for another's (e.g. the alignment tasks by
    language pair), keyed by the producing capability's name.
    """

    plan: Plan
    spec: RunSpec
    corpus: ParallelCorpus
    fingerprints: dict[str, str]
    names: list[str]
    models: dict[str, ModelSpec]
    pairs: list[Pair]
    needed: dict[str, list[str]] = field(default_factory=dict)
    word_pairs: list[Pair] = field(default_factory=list)
    entries: dict[tuple[str, str], list[SideEntry]] = field(default_factory=dict)
    extract_keys: dict[tuple[str, str], str] = field(default_factory=dict)
    entry_keys: dict[tuple[str, str], str] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)

    def need(self, model: str, language: str) -> None:
        """Extract ``model`` on ``language`` (once, whoever asks)."""
        langs = self.needed.setdefault(model, [])
        if language not in langs:
            langs.append(language)

    def request_words(self, pair: Pair) -> None:
        """The two sides of ``pair`` get word-aligned rows (planned by the capability that aligns words)."""
        self.need(pair.a.model, pair.a.language)
        self.need(pair.b.model, pair.b.language)
        if pair not in self.word_pairs:
            self.word_pairs.append(pair)

    def add_entries(self, model: str, language: str, entry: SideEntry) -> None:
        """One extra entry on a side's extraction (once per name)."""
        listed = self.entries.setdefault((model, language), [])
        if all(e.name != entry.name for e in listed):
            listed.append(entry)

    def add(self, task: Any) -> None:
        """Append one task to the plan (dependencies must already be in it)."""
        self.plan.tasks.append(task)

    def ids_sha256(self, n: int | None = None) -> str:
        """sha256 of the corpus's sentence ids (the first ``n``), for the key of a task that reads its sentences."""
        from interlingua.contract.keys import ids_sha256

        return ids_sha256(self.corpus, n)

    def versioned(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A task key's inputs with the package's version: an upgrade recomputes the task."""
        from interlingua.contract.keys import versioned

        return versioned(payload)

    def side_key(self, model: str, language: str) -> str:
        """The extract task key of a side (after extraction is planned)."""
        return self.extract_keys[(model, language)]

    def entry_key(self, model: str, language: str, entry: str) -> str:
        """The stored entry key of one pooling (or extra entry) of a side."""
        return self.entry_keys[(self.extract_keys[(model, language)], entry)]
