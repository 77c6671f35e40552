"""Execute: run a plan's tasks, reading finished ones from the store, computing the rest.

An :class:`Executor` runs tasks; the :class:`Runtime` runs one task of any
kind (its registered runner, :mod:`interlingua.pipeline.registry`) against the
:class:`~interlingua.core.store.Store`. :class:`LocalExecutor` runs them in plan
order in this process; a cluster executor plugs in with the same interface and
the same content keys, so a task whose output is already stored is never
recomputed, wherever it ran. The pipeline's own kind, ``extract``, runs here;
every other kind's runner lives in its capability's package.
"""

from __future__ import annotations

import gc
import json
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from tqdm.auto import tqdm

from interlingua.contract.pairs import SideData
from interlingua.core.errors import InterlinguaError
from interlingua.core.store import DiskFullError, Store, human_bytes
from interlingua.data.models.spec import ModelSpec
from interlingua.pipeline import registry
from interlingua.pipeline.plan import ExtractTask, Plan, Task

__all__ = [
    "ExtractOutput",
    "Executor",
    "LocalExecutor",
    "ModelHandle",
    "Outputs",
    "Runtime",
    "StoredSides",
    "TaskInputs",
    "UndeclaredInputError",
    "is_done",
    "output_paths",
]


#: Held while a model loads (concurrent extractions: :mod:`interlingua.pipeline.workers`).
_LOAD_LOCK = threading.RLock()


class ModelHandle:
    """A model that loads on first use; facts are kept in the store so cached runs never load it."""

    def __init__(
        self,
        spec: ModelSpec,
        fingerprint: str,
        store: Store,
        on_load: Callable[[], None] | None = None,
        progress: bool = True,
        status: Callable[[str], None] | None = None,
    ) -> None:
        self.spec = spec
        self.fingerprint = fingerprint
        self.store = store
        self.on_load = on_load  # told of every load, whatever needed the model (extraction or facts)
        self.progress = progress
        self.status = status  # our bar's postfix: says what loads, as transformers' own bars are off
        self._loaded: Any = None

    @property
    def loaded(self) -> Any:
        if self._loaded is None:
            from interlingua.data.models import load_model
            from interlingua.data.models.loading import hf_progress

            with _LOAD_LOCK:  # one load at a time: loading sets process-wide state (torch's default dtype)
                if self.status is not None:
                    self.status(f"loading {self.spec.label}")
                with hf_progress():
                    loaded = load_model(self.spec, cache_dir=self.store.folder("models"))
            self._loaded = loaded
            self.store.put_json("facts", self.fingerprint, loaded.facts.to_dict())
            if self.on_load is not None:
                self.on_load()
        return self._loaded

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    def facts(self) -> dict[str, Any]:
        if self._loaded is not None:
            return self._loaded.facts.to_dict()
        cached = self.store.get_json("facts", self.fingerprint)
        if isinstance(cached, dict) and isinstance(cached.get("num_layers"), int):
            return cached
        facts = self.loaded.facts.to_dict()  # absent or damaged: load once to record them again
        self.release()  # loaded only for its facts: never hold two models at once
        return facts

    def release(self) -> None:
        self._loaded = None
        gc.collect()


@dataclass
class ExtractOutput:
    """One side's stored arrays per pooling, and what extraction reported."""

    data: Mapping[str, Any]  # pooling -> SideData; a capability's extra entry -> what its read_entries returns
    truncated: list[str]
    max_length: int


@dataclass
class Runtime:
    """Runs one task of each kind against the store; holds the models of a local run."""

    plan: Plan
    store: Store
    progress: bool = True
    handles: dict[str, ModelHandle] = field(default_factory=dict)
    loaded_models: list[str] = field(default_factory=list)
    computed: dict[str, int] = field(default_factory=dict)
    held: dict[str, Any] = field(default_factory=dict)  # what a capability keeps across its tasks (a .release())
    status: Callable[[str], None] | None = None  # told what the current task is doing (a progress bar's postfix)
    seconds: dict[str, float] = field(default_factory=dict)  # wall seconds per task kind (LocalExecutor; with loads)
    cached_keys: set[str] = field(default_factory=set)  # tasks whose output :meth:`stored` read from the store
    busy: set[str] = field(default_factory=set)  # models concurrent extractions hold: release_except keeps them

    def handle(self, name: str) -> ModelHandle:
        if name not in self.handles:
            self.handles[name] = ModelHandle(
                self.plan.model_spec(name),
                self.plan.fingerprints[name],
                self.store,
                lambda: self._loaded(name),
                progress=self.progress,
                status=self._status,
            )
        return self.handles[name]

    def _status(self, text: str) -> None:
        if self.status is not None:
            self.status(text)

    def _loaded(self, name: str) -> None:
        if name not in self.loaded_models:
            self.loaded_models.append(name)

    def release_except(self, name: str | None) -> None:
        """Keep at most one model in memory (extraction tasks are grouped by model), besides the models concurrent
        extractions hold (``busy``: :mod:`interlingua.pipeline.workers`)."""
        for other, h in list(self.handles.items()):
            if other != name and other not in self.busy and h.is_loaded:
                h.release()
        for resource in self.held.values():
            resource.release()

    def run(self, task: Task, done: dict[str, Any]) -> Any:
        """Run one task at the run's numeric settings (numerics.pinned), in any process.

        ``done``: the outputs of the task's ``depends`` (an executor hands :meth:`Outputs.inputs`)."""
        from interlingua.core.numerics import pinned

        runner = _runner(task.kind)
        with pinned(self.plan.threads):
            return runner(self, task, done)

    def stored(self, task: Task, compute: Callable[[], Any], *, valid: Callable[[Any], bool]) -> Any:
        """A task's JSON output: from the store when it holds a ``valid`` one, else computed, stored and counted.

        The run-a-task skeleton every runner that stores one JSON entry under its key uses.
        """
        ns = registry.namespace(task.kind)
        cached = self.store.get_json(ns, task.key)
        if cached is not None and valid(cached):
            self.cached_keys.add(task.key)
            return cached
        out = compute()
        self.store.put_json(ns, task.key, out)
        self._count(task.kind)
        return out

    def namespace(self, kind: str) -> str:
        """The store namespace of kind ``kind``'s output (:func:`interlingua.pipeline.registry.namespace`): a
        runner asks its runtime, so a capability never imports the pipeline's frame."""
        return registry.namespace(kind)

    def entry_path(self, task: ExtractTask, name: str) -> Any:
        """Where one entry of an extracted side lives in the store (:func:`entry_path`)."""
        return entry_path(self, task, name)

    def was_cached(self, task: Task) -> bool:
        """Whether :meth:`stored` read ``task``'s output from the store in this process."""
        return task.key in self.cached_keys

    def _count(self, kind: str) -> None:
        with _COUNT_LOCK:  # concurrent extractions count too
            self.computed[kind] = self.computed.get(kind, 0) + 1


_COUNT_LOCK = threading.Lock()


#: Runners that replace a kind's registered one (faults injected by tests, a worker's extra kinds); empty
#: in a normal run.
RUNNER_OVERRIDES: dict[str, Callable[..., Any]] = {}


def _runner(kind: str) -> Callable[..., Any]:
    """An override, else the kind's registered runner (the pipeline's own ``extract``: :func:`run_extract`)."""
    runner = RUNNER_OVERRIDES.get(kind)
    if runner is None and kind == registry.EXTRACT.name:
        runner = run_extract
    if runner is None:
        try:
            runner = registry.kind(kind).runner
        except KeyError:
            runner = None
    if runner is None:
        raise InterlinguaError(f"no runner for task kind {kind!r}")
    return runner


def entry_path(rt: Runtime, task: ExtractTask, name: str) -> Any:
    """Where one entry (a pooling or a capability's extra entry) of an extracted side lives in the store."""
    return rt.store.arrays_path(
        registry.namespace("extract"),
        task.entry_key(name),
        folder=rt.plan.fingerprints[task.model][:16],
        stem=task.stem(name),
    )


def _side_data(arrays: dict[str, np.ndarray], n_chars: np.ndarray) -> SideData:
    lengths = np.stack([arrays["n_tokens"].astype(np.float64), n_chars], axis=1)
    return SideData(arrays["representations"], lengths, arrays["special_share"])


def stored_position_limit(meta: dict[str, Any], asked: int) -> int | None:
    """The model's position limit recorded with a stored side (None: it declares none).

    Entries stored before the limit was recorded: the limit is known only when it cut ``max_length``
    (the effective length is then the limit).
    """
    if "position_limit" in meta:
        raw = str(meta["position_limit"])
        return int(raw) if raw else None
    effective = int(meta.get("effective_max_length", asked))
    return effective if effective < asked else None


def run_extract(rt: Runtime, task: ExtractTask, done: dict[str, Any]) -> ExtractOutput:
    """Read every pooling of this side from the store, or extract the missing ones in one pass."""
    corpus = rt.plan.corpus
    sentences = corpus.sentences(task.language)
    n_chars = np.array([len(s) for s in sentences], dtype=np.float64)
    inputs = dict(task.entry_inputs)
    data: dict[str, Any] = {}  # pooling -> SideData; a capability's extra entry -> what it reads (a WordSide)
    missing: list[str] = []
    truncated: list[str] = []
    settings = rt.plan.run_settings()
    max_length = settings.max_length
    limit: int | None = None  # the model's position limit, for advice about truncated sentences
    extra = [(p, k) for p, k in task.entries if task.owner(p) is not None]
    for pooling, key in task.entries:
        if task.owner(pooling) is not None:
            continue
        expected = {**inputs, "pooling": pooling}
        got = rt.store.get_arrays(registry.namespace("extract"), entry_path(rt, task, pooling), key, expected)
        if got is None:
            missing.append(pooling)
            continue
        arrays, meta = got
        truncated = list(json.loads(meta.get("truncated", "[]")))
        max_length = int(meta.get("effective_max_length", max_length))
        limit = stored_position_limit(meta, settings.max_length)
        data[pooling] = _side_data(arrays, n_chars)
    if missing:
        from interlingua.data.representations.extract import extract

        rt.release_except(task.model)
        handle = rt.handle(task.model)
        result = extract(
            handle.loaded,
            sentences,
            missing,
            special_tokens=settings.special_tokens,
            max_length=settings.max_length,
            batch_size=settings.batch_size,
            progress=rt.progress,
            context=f"model {task.model!r} ({handle.spec.dtype}) on {task.language}",
            sentence_ids=list(corpus.ids),
            threads="auto" if rt.plan.threads == "auto" else int(rt.plan.threads),
        )
        truncated = [corpus.ids[i] for i in result.truncated]
        max_length = int(result.max_length)
        limit = result.position_limit
        for pooling in missing:
            arrays = {
                "representations": result.pooled[pooling],
                "n_tokens": np.asarray(result.n_tokens, dtype=np.int64),
                "special_share": np.asarray(result.special_share[pooling], dtype=np.float64),
            }
            meta = {
                **inputs,
                "pooling": pooling,
                "truncated": json.dumps(truncated),
                "effective_max_length": str(max_length),
                "position_limit": str(limit or ""),
            }
            rt.store.put_arrays(entry_path(rt, task, pooling), task.entry_key(pooling), arrays, meta)
            data[pooling] = _side_data(arrays, n_chars)
        rt._count("extract")
    elif truncated:  # a cached side repeats what extraction warned about
        from interlingua.data.representations.extract import truncation_advice

        warnings.warn(
            f"{task.model} on {task.language}: {len(truncated)} sentences were truncated to {max_length} tokens "
            f"(first: {truncated[:5]}); {truncation_advice(max_length, limit)}",
            UserWarning,
            stacklevel=2,
        )
    for owner in dict.fromkeys(o for _, o, _ in task.extra):  # each capability computes the entries it added
        read = registry.capability(owner).read_entries
        assert read is not None, f"capability {owner!r} adds side entries but cannot compute them"
        data.update(read(rt, task, [(p, k) for p, k in extra if task.owner(p) == owner], done))
    return ExtractOutput({p: data[p] for p, _ in task.entries}, truncated, max_length)


class UndeclaredInputError(InterlinguaError):
    """A runner read the output of a task its own task does not declare in ``depends`` (a capability's bug:
    an executor may run that task elsewhere, later, or not hold its output any more)."""


class TaskInputs(dict[str, Any]):
    """What a runner is handed as ``done``: the outputs of its task's ``depends``, and nothing else.

    Reading any other key (``inputs[key]``, ``key in inputs``, ``inputs.get(key)``) raises
    :class:`UndeclaredInputError`, so a runner that reads an undeclared output fails at once in any executor
    instead of depending on what happened to run before it. A declared key that is absent (a dependency an
    executor left in the store: a Ray worker's, or one read back from the store) reads as absent.
    """

    def __init__(self, task: Task, outputs: Mapping[str, Any]) -> None:
        super().__init__((k, outputs[k]) for k in task.depends if k in outputs)
        self.declared = frozenset(task.depends)
        self.reader = f"{task.kind} task {task.key[:12]}"

    def _check(self, key: object) -> None:
        if key not in self.declared:
            shown = key[:12] if isinstance(key, str) else repr(key)
            raise UndeclaredInputError(
                f"the {self.reader} read the output of task {shown}, which it does not declare: a runner is "
                "handed the outputs of its task's depends only; add that task's key to depends when planning it"
            )

    def __missing__(self, key: str) -> Any:
        self._check(key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        self._check(key)
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)


class StoredSides(Mapping[str, Any]):
    """An extraction's ``{entry: SideData or a capability's entry}`` read back from the store on first use:
    what an executor keeps of a side once no task reads it, so a run never holds every representation, only
    those assembly asks for (the map figure's pair)."""

    def __init__(self, load: Callable[[], dict[str, Any]], names: list[str]) -> None:
        self._load = load
        self._names = names
        self._data: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        if self._data is None:
            self._data = self._load()
        return self._data

    def __getitem__(self, name: str) -> Any:
        return self._get()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def stored_sides(reader: Runtime, task: ExtractTask) -> StoredSides:
    """``task``'s entries, read from the store by ``reader`` when first asked for (a runtime of its own, so
    these reads count in no run's store traffic; a truncation was reported when the side was extracted)."""

    def load() -> dict[str, Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                return dict(run_extract(reader, task, {}).data)
            finally:
                reader.release_except(None)

    return StoredSides(load, [name for name, _ in task.entries])


def without_arrays(reader: Runtime, task: Task, output: Any) -> Any:
    """What a local run keeps of an output no task reads any more: an extracted side's report with its arrays
    left in the store (:func:`stored_sides`); any other output whole (the rows its capability's tables are
    built from)."""
    if isinstance(task, ExtractTask) and isinstance(output, ExtractOutput) and not isinstance(output.data, StoredSides):
        return ExtractOutput(stored_sides(reader, task), output.truncated, output.max_length)
    return output


class Outputs:
    """The outputs an executor has collected, by task key (``done``): what it hands each runner, what it keeps.

    :meth:`inputs` is a task's declared inputs only (:class:`TaskInputs`). :meth:`finish` records a task's
    output and, once every task of ``tasks`` that reads an output (by ``depends``) has finished, releases it:
    ``release(key, output)`` says what is kept (None: nothing). Readers are counted, not positions, so tasks
    may finish in any order. ``released``: the keys whose output was released, in order.
    """

    def __init__(self, tasks: Iterable[Task], release: Callable[[str, Any], Any]) -> None:
        self.done: dict[str, Any] = {}
        self.released: list[str] = []
        self._release = release
        self._readers: dict[str, int] = {}
        for task in tasks:
            for dep in dict.fromkeys(task.depends):
                self._readers[dep] = self._readers.get(dep, 0) + 1

    def inputs(self, task: Task) -> TaskInputs:
        """The outputs of ``task``'s ``depends`` that are here: what its runner is handed."""
        return TaskInputs(task, self.done)

    def finish(self, task: Task, output: Any) -> None:
        """Record ``task``'s output; release every output whose last reader this was (``task``'s own too, when
        nothing reads it)."""
        self.done[task.key] = output
        for dep in dict.fromkeys(task.depends):
            if dep in self._readers:
                self._readers[dep] -= 1
                if self._readers[dep] == 0:
                    self._drop(dep)
        if self._readers.get(task.key, 0) == 0:
            self._drop(task.key)

    def _drop(self, key: str) -> None:
        if key not in self.done:
            return
        output = self.done[key]
        kept = self._release(key, output)
        if kept is output:
            return
        if kept is None:
            del self.done[key]
        else:
            self.done[key] = kept
        self.released.append(key)


def output_paths(rt: Runtime, task: Task) -> list[Any]:
    """The store paths holding ``task``'s output (empty for a kind that stores nothing)."""
    if isinstance(task, ExtractTask):
        return [entry_path(rt, task, pooling) for pooling, _ in task.entries]
    ns = registry.kind(task.kind).namespace
    return [rt.store.json_path(ns, task.key)] if ns else []


def is_done(rt: Runtime, task: Task) -> bool:
    """Whether ``task``'s output is in the store: existence only, so a driver can ask it of every task
    before submitting any (an entry is still verified when read, and a damaged one recomputed then)."""
    paths = output_paths(rt, task)
    return bool(paths) and all(p.exists() for p in paths)


def still_needed(rt: Runtime, tasks: list[Task], exc: DiskFullError) -> str:
    """How much the run still has to write into the store, for a full disk's error: each entry not stored
    yet judged by the stored entries of its kind (this run's or earlier ones'), or, for the kind that failed,
    by the size it was writing; at least that size."""
    sizes: dict[str, list[int]] = {}
    for t in rt.plan.tasks:
        for p in output_paths(rt, t):
            try:
                size = p.stat().st_size
            except OSError:
                continue
            sizes.setdefault(t.kind, []).append(size)
    guess = {kind: sum(v) / len(v) for kind, v in sizes.items()}
    if exc.writing and tasks:
        guess.setdefault(tasks[0].kind, float(exc.writing))
    total, known, unknown = 0.0, 0, 0
    for t in tasks:
        missing = sum(1 for p in output_paths(rt, t) if not p.exists())
        if t.kind in guess:
            total += missing * guess[t.kind]
            known += missing
        else:
            unknown += missing
    total = max(total, float(exc.writing or 0))
    text = f"about {human_bytes(total)} for {known} more entr{'y' if known == 1 else 'ies'}"
    if unknown:
        text += f" and {unknown} more of a kind whose size is not known yet"
    return text


def task_label(task: Task) -> str:
    """What a task does, for a progress bar: its kind and what it reads (model, language, pair, pooling)."""
    if isinstance(task, ExtractTask):
        return f"extract {task.model} on {task.language}"
    label = registry.kind(task.kind).label
    return task.kind if label is None else label(task)


class Executor(Protocol):
    """Runs every task of a plan and returns ``{task key: output}``."""

    def execute(self, plan: Plan, runtime: Runtime) -> dict[str, Any]: ...


def task_phase(task: Task, kinds: dict[str, Any]) -> str:
    """The phase a task belongs to, for its progress bar: extraction, or its kind's verb (``comparing pairs``)."""
    if isinstance(task, ExtractTask):
        return "extracting"
    verb = kinds[task.kind].progress
    return f"{verb} pairs" if verb else task.kind.replace("_", " ")


class PhaseBars:
    """One progress bar per phase (extracting, comparing pairs, ...), each with its own count and ETA.

    A phase's bar opens when its first task starts and closes when its last one ends, so its rate (and the
    ETA drawn from it) counts only that phase's tasks, never the minutes another phase took before it.
    """

    def __init__(self, tasks: list[Task], kinds: dict[str, Any], enabled: bool) -> None:
        self.kinds = kinds
        self.enabled = enabled
        self.totals: dict[str, int] = {}
        for task in tasks:
            phase = task_phase(task, kinds)
            self.totals[phase] = self.totals.get(phase, 0) + 1
        self.done: dict[str, int] = dict.fromkeys(self.totals, 0)
        self.bars: dict[str, Any] = {}

    def start(self, task: Task) -> Any:
        """The bar of ``task``'s phase (opened if needed), showing what the task does."""
        phase = task_phase(task, self.kinds)
        bar = self.bars.get(phase)
        if bar is None:
            unit = "model-language" if phase == "extracting" else "task"
            bar = tqdm(total=self.totals[phase], desc=phase, unit=unit, disable=not self.enabled)
            self.bars[phase] = bar
        if self.enabled:
            bar.set_postfix_str(task_label(task))
        return bar

    def finish(self, task: Task) -> None:
        phase = task_phase(task, self.kinds)
        self.bars[phase].update(1)
        self.done[phase] += 1
        if self.done[phase] == self.totals[phase]:
            self.bars.pop(phase).close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


class LocalExecutor:
    """Tasks in plan order, in this process; at most one model in memory at a time, except that ready extractions
    of different models run at once, up to ``workers`` (:mod:`interlingua.pipeline.workers`; None: the config's
    ``workers``, else :func:`~interlingua.pipeline.workers.default_workers`, bounded by ``estimate``'s memory).
    Each runner is handed its task's declared inputs only, and an extracted side's arrays are let go once the
    last task reading it has run (:class:`Outputs`).
    """

    #: the :class:`Outputs` of the last :meth:`execute` (which outputs were released, and when)
    outputs: Outputs | None = None

    def __init__(self, workers: int | None = None, estimate: Any = None) -> None:
        self.workers = workers
        self.estimate = estimate  # the run's CostEstimate (None: not priced; no memory bound on the default)
        self.chosen: tuple[int, str] | None = None  # the workers count of the last execute, and why

    def execute(self, plan: Plan, runtime: Runtime) -> dict[str, Any]:
        reader = Runtime(plan, Store(runtime.store.root), progress=False)  # assembly's reads of released sides
        outputs = self.outputs = Outputs(plan.tasks, lambda key, out: without_arrays(reader, plan.task(key), out))
        kinds = registry.kinds()
        bars = PhaseBars(list(plan.tasks), kinds, runtime.progress)
        own_status = runtime.progress and runtime.status is None
        self.chosen = workers = resolve_workers(plan, self.workers, getattr(self.estimate, "models", None))
        try:
            i = 0
            while i < len(plan.tasks):  # the plan orders dependencies first, extraction grouped by model
                if workers[0] > 1 and (
                    after := extract_concurrently(plan, runtime, i, outputs, bars, workers[0], own_status=own_status)
                ):
                    i = after
                    continue
                task = plan.tasks[i]
                if not kinds[task.kind].holds_model:  # the model-holding kinds keep one model across tasks
                    runtime.release_except(None)
                bar = bars.start(task)
                if own_status:
                    runtime.status = bar.set_postfix_str
                started = time.perf_counter()
                try:
                    outputs.finish(task, runtime.run(task, outputs.inputs(task)))
                except DiskFullError as exc:
                    raise exc.with_need(still_needed(runtime, plan.tasks[i:], exc)) from None
                runtime.seconds[task.kind] = runtime.seconds.get(task.kind, 0.0) + time.perf_counter() - started
                bars.finish(task)
                i += 1
        finally:
            bars.close()
            if own_status:
                runtime.status = None
        return outputs.done


def resolve_workers(plan: Plan, setting: int | None, shapes: dict[str, Any] | None = None) -> tuple[int, str]:
    """How many extractions run at once, and why: ``setting``, else the config's ``workers``, else
    :func:`~interlingua.pipeline.workers.default_workers`, bounded by the memory of the models' extractions when
    their shapes are known (``shapes``: the cost estimate's :class:`~interlingua.pipeline.cost.ModelShape` by model)."""
    from interlingua.pipeline import workers

    if setting is None:
        setting = getattr(plan.spec, "workers", None)
    if setting is not None:
        return max(int(setting), 1), "the config's workers"
    models = list(dict.fromkeys(t.model for t in plan.tasks if isinstance(t, ExtractTask)))
    peaks = None
    shapes = shapes or {}
    if all(m in shapes for m in models) and models:
        from interlingua.pipeline.extract_kind import extract_peak_bytes

        peaks = [
            max(
                extract_peak_bytes(t, plan.spec, len(plan.corpus), shapes[m])
                for t in plan.tasks
                if isinstance(t, ExtractTask) and t.model == m
            )
            for m in models
        ]
    return workers.default_workers(plan.threads, len(models), peaks, workers.available_memory())


def extract_concurrently(
    plan: Plan,
    runtime: Runtime,
    start: int,
    outputs: Outputs,
    bars: PhaseBars,
    count: int,
    *,
    own_status: bool = False,
) -> int | None:
    """Run the ready extractions from plan position ``start`` on, by model, up to ``count`` models at once
    (:func:`interlingua.pipeline.workers.run_chains`); the position after them, or None (fewer than two models
    with sides to compute: the caller runs the task itself). ``own_status``: the executor shows the runtime's
    status (model loads) on its bars."""
    from interlingua.core.numerics import pinned
    from interlingua.pipeline import workers

    chains, end = workers.ready_chains(plan, start, outputs.done)
    if sum(1 for c in chains if any(not is_done(runtime, t) for t in c)) < 2:
        return None  # fewer than two models to run: stored sides are read in a moment, one after another
    nxt = plan.tasks[end] if end < len(plan.tasks) else None
    keep = getattr(nxt, "model", None) if nxt is not None and registry.kinds()[nxt.kind].holds_model else None
    running: list[str] = []

    def begin(task: Task) -> None:
        bar = bars.start(task)
        running.append(task_label(task))
        if runtime.progress:
            bar.set_postfix_str(" | ".join(running))

    def finish(task: Task) -> None:
        running.remove(task_label(task))
        bars.finish(task)

    def load(chain: list[ExtractTask]) -> None:  # a model with a side to compute loads before its chain starts
        if any(not is_done(runtime, t) for t in chain):
            _ = runtime.handle(chain[0].model).loaded

    def release(model: str) -> None:  # the chain's sides are done: its model leaves memory (unless needed next)
        runtime.busy.discard(model)
        if model != keep and model in runtime.handles:
            runtime.handles[model].release()

    bar = bars.start(chains[0][0])  # the phase's bar, open before the first load
    if own_status:
        runtime.status = bar.set_postfix_str  # what loads, from any lane
    runtime.release_except(None)
    for chain in chains:
        runtime.handle(chain[0].model)  # created here, not raced for in the lanes
        runtime.busy.add(chain[0].model)
    loaded_before = len(runtime.loaded_models)
    started = time.perf_counter()
    from interlingua.data.models.loading import hf_progress

    try:
        # torch's threads for the process, numpy's one BLAS thread in every lane; the libraries' bars off throughout
        with pinned(plan.threads), hf_progress():
            results = workers.run_chains(
                chains,
                count,
                lambda task: runtime.run(task, outputs.inputs(task)),
                workers.ChainHooks(load, begin, finish, release),
                plan.threads,
            )
    except DiskFullError as exc:
        left = [t for t in plan.tasks[start:] if t.key not in outputs.done]
        raise exc.with_need(still_needed(runtime, left, exc)) from None
    finally:
        runtime.busy.difference_update(c[0].model for c in chains)
        first = {c[0].model: n for n, c in enumerate(chains)}  # loads in plan order, whichever lane was first
        runtime.loaded_models[loaded_before:] = sorted(
            runtime.loaded_models[loaded_before:], key=lambda m: first.get(m, len(first))
        )
    runtime.seconds["extract"] = runtime.seconds.get("extract", 0.0) + time.perf_counter() - started
    for task in plan.tasks[start:end]:  # here, not in the lanes: Outputs is not thread-safe
        outputs.finish(task, results[task.key])
    return end
