"""The capability battery: a :class:`~interlingua.contract.capability.Capability` against the pipeline's contract.

What the pipeline relies on when it reads a capability's declaration (:mod:`interlingua.contract.capability`):

- ``declaration``: a :class:`Capability` whose name is a lower-case identifier, ``stage`` ``"before"`` or
  ``"after"``, ``kinds`` a tuple of :class:`Kind`, and every hook None or callable;
- ``section``: None, or a strict pydantic model (unknown keys are errors), or (with a ``default_factory``)
  a type such as ``list[Model]`` of strict models whose default validates; never a key of the core spec;
- ``unique_name``: no other registered capability has its name;
- ``kinds``: each kind's name a lower-case identifier, unique in the capability and among every registered
  kind (and the pipeline's ``extract``); its namespaces folder names that no other capability's kind writes;
- ``runners``: every kind has a callable runner; ``kind_flags``: a model-holding kind groups by ``"model"``
  or ``"base"`` and only such a kind has a group; a driver kind reads no pair of sides;
- ``spec``: the run spec rebuilt with its section parses a minimal config, and ``check`` accepts it;
- ``plan_when_off``: on a minimal context with its section absent (and no pairs) ``request`` and ``plan``
  add no task and need no side, ``wants_words`` is False; planning is repeatable;
- ``tables_on_empty_run``: ``tables`` on an empty run returns a dict of DataFrames by stem, with no row;
- ``report_on_empty_run``: ``report`` on no tables returns a list of Markdown lines (empty) and writes no figure.

- ``kind_example[<kind>]``: ``Kind.example()`` gives a keyed sample task of the kind and its stored payload;
- ``kind_cost[<kind>]``: the kind names its ``phase`` and ``Kind.cost(task, ctx)`` takes a task and a context
  (given the cost model's context, it prices the example task at finite seconds >= 0);
- ``columns``: every declared column (its tables' and its report's) has a name and glossary text, once per table.
"""

from __future__ import annotations

import inspect
import math
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlingua.contract.capability import Capability, Kind, PlanContext
from interlingua.testing._core import Check, checks_of, expect, run_checks

if TYPE_CHECKING:
    from interlingua.pipeline.config import CoreSpec

__all__ = ["capability_checks", "check_capability", "minimal_context"]

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_HOOKS = ("check", "request", "plan", "read_entries", "wants_words", "preflight", "tables", "report")
_LANGUAGES = ("eng_Latn", "deu_Latn")


def _others(cap: Capability, registered: Sequence[Capability]) -> list[Capability]:
    """The registered capabilities other than ``cap`` itself (by identity: a plugin may reuse a name, wrongly)."""
    return [c for c in registered if c is not cap]


def _declaration(cap: Capability) -> None:
    expect(isinstance(cap, Capability), f"the declaration is a {type(cap).__name__}, not a Capability")
    expect(bool(_NAME.match(cap.name)), f"name {cap.name!r} must be a lower-case identifier (it is a config key)")
    expect(cap.stage in ("before", "after"), f"stage is {cap.stage!r}, not 'before' or 'after'")
    expect(isinstance(cap.kinds, tuple), f"kinds is a {type(cap.kinds).__name__}, not a tuple")
    expect(all(isinstance(k, Kind) for k in cap.kinds), "every entry of kinds must be a Kind")
    for hook in _HOOKS:
        fn = getattr(cap, hook)
        expect(fn is None or callable(fn), f"hook {hook!r} is a {type(fn).__name__}, neither None nor callable")
    expect(cap.default_factory is None or callable(cap.default_factory), "default_factory must be None or callable")


def _strict(model: type, where: str) -> None:
    from pydantic import BaseModel

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise AssertionError(f"{where} is {model!r}, not a pydantic model")
    extra = model.model_config.get("extra")
    expect(
        extra == "forbid",
        f"{where} {model.__name__} allows unknown keys (extra={extra!r}); subclass "
        "interlingua.core.spec_base.Strict so a typo is an error",
    )


def _section(cap: Capability) -> None:
    from pydantic import BaseModel, TypeAdapter

    from interlingua.pipeline.config import CoreSpec

    if cap.section is None:
        expect(cap.default_factory is None, "a default_factory without a section has nothing to fill")
        return
    expect(cap.name not in CoreSpec.model_fields, f"the section name {cap.name!r} is already a key of the core spec")
    if isinstance(cap.section, type) and issubclass(cap.section, BaseModel):
        _strict(cap.section, "the section")
    else:
        expect(
            cap.default_factory is not None,
            f"the section {cap.section!r} is not a pydantic model; a collection type needs a default_factory",
        )
        args = [a for a in getattr(cap.section, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        expect(bool(args), f"the section {cap.section!r} holds no pydantic model")
        for a in args:
            _strict(a, "the section's item")
    if cap.default_factory is not None:
        TypeAdapter(cap.section).validate_python(cap.default_factory())


def _unique_name(cap: Capability, registered: Sequence[Capability]) -> None:
    clash = [c for c in _others(cap, registered) if c.name == cap.name]
    expect(not clash, f"another registered capability is named {cap.name!r}")


def _kinds(cap: Capability, registered: Sequence[Capability]) -> None:
    from interlingua.pipeline.registry import _OTHER_ENTRY_NAMESPACES, EXTRACT

    names = [k.name for k in cap.kinds]
    for n in names:
        expect(bool(_NAME.match(n)), f"kind name {n!r} must be a lower-case identifier")
    dup = sorted({n for n in names if names.count(n) > 1})
    expect(not dup, f"kind name(s) {dup} declared twice in this capability")
    taken = {EXTRACT.name: "the pipeline"} | {k.name: c.name for c in _others(cap, registered) for k in c.kinds}
    clash = {n: taken[n] for n in names if n in taken}
    expect(not clash, f"kind name(s) already registered: {', '.join(f'{n!r} (by {o})' for n, o in clash.items())}")
    written = {ns: "the pipeline" for ns in (*EXTRACT.namespaces, *_OTHER_ENTRY_NAMESPACES)}
    written |= {ns: c.name for c in _others(cap, registered) for k in c.kinds for ns in k.namespaces}
    for k in cap.kinds:
        expect(
            isinstance(k.namespaces, tuple) and all(isinstance(ns, str) for ns in k.namespaces),
            f"kind {k.name!r}: namespaces must be a tuple of folder names",
        )
        for ns in k.namespaces:
            expect(bool(_NAME.match(ns)), f"kind {k.name!r}: namespace {ns!r} must be a lower-case folder name")
            expect(ns not in written, f"kind {k.name!r}: namespace {ns!r} is written by {written.get(ns)}")


def _runners(cap: Capability) -> None:
    missing = [k.name for k in cap.kinds if not callable(k.runner)]
    expect(not missing, f"kind(s) {missing} have no runner: the executor could not run their tasks")
    for k in cap.kinds:
        expect(k.label is None or callable(k.label), f"kind {k.name!r}: label must be None or callable")


def _kind_flags(cap: Capability) -> None:
    for k in cap.kinds:
        if k.holds_model:
            expect(
                k.group in ("model", "base"),
                f"kind {k.name!r} holds a model: group must be 'model' or 'base', not {k.group!r}",
            )
        else:
            expect(not k.group, f"kind {k.name!r} holds no model but declares group {k.group!r}")
        expect(not (k.driver and k.pair), f"kind {k.name!r}: a driver kind runs between stages, not on two sides")
        expect(not (k.driver and k.holds_model), f"kind {k.name!r}: a driver kind cannot hold a model")


def _spec_class(cap: Capability, registered: Sequence[Capability]) -> type[CoreSpec]:
    from interlingua.pipeline.config import spec_class

    caps = [c for c in registered if c.name != cap.name]
    return spec_class((*caps, cap))


def minimal_spec(cap: Capability, registered: Sequence[Capability], root: Path) -> CoreSpec:
    """A run spec with ``cap``'s section (absent): one model, two languages, one pooling, nothing else."""
    data = {
        "output": str(root / "out"),
        "cache_dir": str(root / "cache"),
        "corpus": {"source": "local", "path": str(root / "corpus.tsv"), "languages": list(_LANGUAGES)},
        "models": [{"name": "m", "path": str(root / "m")}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
    }
    return _spec_class(cap, registered).model_validate(data)


def minimal_context(spec: CoreSpec) -> PlanContext:
    """An empty plan and its :class:`PlanContext`: the spec's models, a four-sentence corpus, no pairs."""
    from interlingua.data.corpora.corpus import ParallelCorpus
    from interlingua.pipeline.plan import Plan

    corpus = ParallelCorpus("battery", tuple("0123"), {lang: ("a", "b", "c", "d") for lang in _LANGUAGES})
    models = {str(m.name): m for m in spec.models}
    fingerprints = {name: "0" * 64 for name in models}
    plan = Plan(spec=spec, corpus=corpus, models=models, fingerprints=fingerprints, pairs=[])
    names = list(models)
    return PlanContext(plan, spec, corpus, dict(fingerprints), names, models, [], needed={m: [] for m in names})


def _spec(cap: Capability, registered: Sequence[Capability]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = minimal_spec(cap, registered, Path(tmp))
        if cap.section is not None and cap.default_factory is None:
            expect(getattr(spec, cap.name) is None, f"the section {cap.name!r} is not None when the config omits it")
        if cap.check is not None:
            cap.check(spec)


def _plan_when_off(cap: Capability, registered: Sequence[Capability]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = minimal_spec(cap, registered, Path(tmp))
        keys = []
        for _ in range(2):
            ctx = minimal_context(spec)
            if cap.request is not None:
                cap.request(ctx)
            if cap.plan is not None:
                cap.plan(ctx)
            keys.append([t.key for t in ctx.plan.tasks])
            if cap.section is not None and cap.default_factory is None:
                expect(not ctx.plan.tasks, f"planned {len(ctx.plan.tasks)} task(s) with its section absent (off)")
            expect(
                not any(ctx.needed.values()) and not ctx.word_pairs,
                f"asked for sides {ctx.needed} with no pairs and its section absent",
            )
            for t in ctx.plan.tasks:
                expect(t.kind in {k.name for k in cap.kinds}, f"planned a task of kind {t.kind!r}, not one of its own")
        expect(keys[0] == keys[1], "planning the same context twice gave other task keys")
        if cap.wants_words is not None:
            expect(cap.wants_words(spec) is False, "wants_words is not False with its section absent")


def _empty_built() -> dict[str, Any]:
    from interlingua.core.schema import result_table

    return {"results": result_table([])}


def _tables_on_empty_run(cap: Capability, registered: Sequence[Capability]) -> None:
    if cap.tables is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        ctx = minimal_context(minimal_spec(cap, registered, Path(tmp)))
        out = cap.tables(ctx.plan, {}, _empty_built())
    import pandas as pd

    expect(isinstance(out, dict), f"tables returned a {type(out).__name__}, not a dict of tables by stem")
    for stem, table in out.items():
        expect(isinstance(stem, str) and bool(_NAME.match(stem)), f"table stem {stem!r} is not a file stem")
        expect(isinstance(table, pd.DataFrame), f"table {stem!r} is a {type(table).__name__}, not a DataFrame")
    rows = sorted(stem for stem, table in out.items() if len(table))
    expect(not rows, f"an empty run gave rows in {rows}: a capability that ran nothing writes no row")


def _report_on_empty_run(cap: Capability) -> None:
    if cap.report is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        fig_dir = Path(tmp)
        lines = cap.report({}, {}, fig_dir)
        written = list(fig_dir.iterdir())
    expect(isinstance(lines, list) and all(isinstance(x, str) for x in lines), "report must return a list of str")
    expect(not lines, f"report on no tables gave {len(lines)} line(s): its section must be absent")
    expect(not written, f"report on no tables wrote {[p.name for p in written]}")


# -- each kind prices its own task and gives a sample; each capability declares its columns ---------------------


def _kind_example(kind: Kind) -> None:
    """``Kind.example()`` gives a sample task of this kind, keyed, with its dependencies, and its stored payload."""
    expect(kind.example is not None, f"kind {kind.name!r} has no example(): its sample task and stored payload")
    assert kind.example is not None
    task, _stored = kind.example()
    expect(getattr(task, "kind", None) == kind.name, f"example() gave a task of kind {getattr(task, 'kind', None)!r}")
    expect(isinstance(getattr(task, "key", None), str), "example()'s task has no string key")
    expect(isinstance(getattr(task, "depends", ()), tuple), "example()'s task depends must be a tuple of keys")


def _kind_cost(kind: Kind, cost_context: Any = None) -> None:
    """``Kind.cost(task, ctx)`` takes a task and a context and the kind names its ``phase``; given a cost context,
    it prices the example task at finite seconds >= 0 (an unpriced kind is an error, not 0 s)."""
    from interlingua.contract.capability import CostPhase, TaskCost

    expect(isinstance(kind.phase, CostPhase), f"kind {kind.name!r}: phase is {kind.phase!r}, not a CostPhase")
    cost = kind.cost
    expect(callable(cost), f"kind {kind.name!r}: cost is not callable")
    assert cost is not None
    try:
        inspect.signature(cost).bind(object(), object())
    except TypeError as err:
        raise AssertionError(f"kind {kind.name!r}: cost must accept (task, ctx): {err}") from err
    if cost_context is None or kind.example is None:
        return
    priced = cost(kind.example()[0], cost_context)
    expect(isinstance(priced, TaskCost), f"kind {kind.name!r}: cost returned {type(priced).__name__}, not a TaskCost")
    seconds = priced.total
    expect(
        math.isfinite(seconds) and seconds >= 0 and all(math.isfinite(s) and s >= 0 for s in priced.seconds),
        f"kind {kind.name!r}: cost of its example task is {seconds!r}, not a finite number of seconds >= 0",
    )


def _columns(cap: Capability) -> None:
    """Every declared column has a name, a dtype and its glossary text (no "(not described)" in a report)."""
    from interlingua.core.schema import Column

    for stem, columns in [*cap.columns.items(), ("(report)", cap.report_columns)]:
        names = [c.name for c in columns]
        expect(len(set(names)) == len(names), f"table {stem!r} declares a column twice")
        for c in columns:
            expect(isinstance(c, Column), f"table {stem!r}: {c!r} is not a Column")
            expect(bool(c.name) and bool(c.doc.strip()), f"table {stem!r}: column {c.name!r} has no glossary text")


def _hook_checks(cap: Capability, cost_context: Any = None) -> list[tuple[str, Callable[[], None]]]:
    """Each kind's ``example`` and ``cost`` (with its ``phase``), and the capability's declared ``columns``."""
    out: list[tuple[str, Callable[[], None]]] = []
    for k in cap.kinds:
        out.append((f"kind_example[{k.name}]", lambda k=k: _kind_example(k)))  # type: ignore[misc]
        out.append((f"kind_cost[{k.name}]", lambda k=k: _kind_cost(k, cost_context)))  # type: ignore[misc]
    out.append(("columns", lambda: _columns(cap)))
    return out


def capability_checks(
    capability: Capability, registered: Sequence[Capability] | None = None, *, cost_context: Any = None
) -> Iterator[Check]:
    """The battery's checks for ``capability``, judged against ``registered`` (default: the registry's
    capabilities; a plugin's own declaration need not be among them), one named :class:`Check` each.
    ``cost_context``: the cost model's context, to price each kind's example task (``kind_cost``)."""
    if not isinstance(capability, Capability):
        raise TypeError(f"check_capability needs a Capability declaration, not a {type(capability).__name__}")
    if registered is None:
        from interlingua.pipeline.registry import capabilities

        registered = capabilities()
    cap, reg = capability, tuple(registered)
    pairs: list[tuple[str, Callable[[], None]]] = [
        ("declaration", lambda: _declaration(cap)),
        ("section", lambda: _section(cap)),
        ("unique_name", lambda: _unique_name(cap, reg)),
        ("kinds", lambda: _kinds(cap, reg)),
        ("runners", lambda: _runners(cap)),
        ("kind_flags", lambda: _kind_flags(cap)),
        ("spec", lambda: _spec(cap, reg)),
        ("plan_when_off", lambda: _plan_when_off(cap, reg)),
        ("tables_on_empty_run", lambda: _tables_on_empty_run(cap, reg)),
        ("report_on_empty_run", lambda: _report_on_empty_run(cap)),
        *_hook_checks(cap, cost_context),
    ]
    yield from checks_of(pairs, cap.name if isinstance(cap.name, str) else repr(cap.name))


def check_capability(
    capability: Capability, registered: Sequence[Capability] | None = None, *, cost_context: Any = None
) -> list[str]:
    """Run the whole capability battery; raises :class:`~interlingua.testing.CheckFailed` naming the first
    failed check, else returns the names of the checks that passed."""
    return run_checks(capability_checks(capability, registered, cost_context=cost_context))
