"""Properties of every registered task kind, derived from its capability's line in ``interlingua.pipeline.registry``.

For every kind the registry lists (each with its runner, and a sample task of its capability's task class):
- a finished task's output is found where the store keeps it, in a namespace the store knows (its runner
  reads back the entry ``is_done`` looks for, without computing anything);
- the temporary files of a writer killed mid-write in that namespace are tidied by the store's sweep;
- the local executor and the Ray executor treat it alike: both keep the loaded model before it, or both
  release every model; Ray groups two tasks of a model-holding kind on one model into one task (the model
  loads once) and gives that group a model; driver kinds cut the plan into stages.

No models are loaded and Ray is not started: runners are replaced by recorders where a task would compute.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from interlingua.contract.pairs import Pair, Side
from interlingua.core.store import Store, atomic_write, host_tag
from interlingua.pipeline import execute, plan, registry
from interlingua.pipeline.executors.ray import group_tasks, run_group, stages

KINDS = registry.kinds()

PAIR = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
#: Each kind's sample task and what a finished one holds in the store, from its declaration (``Kind.example``).
EXAMPLES: dict[str, tuple[Any, Any]] = {name: k.example() for name, k in KINDS.items() if k.example is not None}
SAMPLES: dict[str, Any] = {name: task for name, (task, _) in EXAMPLES.items()}
STORED: dict[str, Any] = {name: payload for name, (_, payload) in EXAMPLES.items() if payload is not None}
STORING = [k for k in KINDS if KINDS[k].namespaces]


def _plan(tasks: list[Any]) -> plan.Plan:
    models = {name: SimpleNamespace(path=f"/models/{name}", package=None, device="cpu") for name in "mn"}
    return plan.Plan(
        spec=None,
        corpus=None,
        models=models,
        fingerprints={"m": "1" * 64, "n": "2" * 64},  # type: ignore[arg-type]
        pairs=[PAIR],
        tasks=tasks,
    )


def _runtime(tasks: list[Any], root: Path) -> execute.Runtime:
    return execute.Runtime(_plan(tasks), Store(root), progress=False)


def test_every_registered_kind_has_a_runner_a_task_class_a_sample_and_a_cost() -> None:
    assert set(KINDS) == set(SAMPLES)
    for name, k in KINDS.items():
        assert k.phase is not None and callable(k.cost), name  # priced by its own hook, never 0 s unseen
        # a kind storing no entry of its own has nothing to read back; one storing JSON says what it holds
        assert (name in STORED) == (k.namespace is not None and name != "extract"), name
    for cap in registry.capabilities():
        for k in cap.kinds:
            assert k.runner is not None, k.name  # the pipeline's own extract is the one kind run by execute
    assert KINDS["extract"] is registry.EXTRACT and registry.EXTRACT.runner is None
    names = [c.name for c in registry.capabilities()]
    assert len(names) == len(set(names))
    for name, task in SAMPLES.items():
        assert task.kind == name
        if KINDS[name].holds_model:
            assert isinstance(task.model, str), name  # what the executors group it by
        if KINDS[name].pair:
            assert len(task.sides) == 2, name


@pytest.mark.parametrize("name", STORING)
def test_a_finished_task_is_read_from_a_namespace_the_store_sweeps(name: str, tmp_path: Path) -> None:
    task = SAMPLES[name]
    rt = _runtime([task], tmp_path)
    paths = execute.output_paths(rt, task)
    assert paths, name
    for path in paths:
        ns = path.relative_to(tmp_path).parts[0]
        assert ns in KINDS[name].namespaces and ns in _entry_namespaces(), (name, path)
    assert not execute.is_done(rt, task)
    if name == "extract":
        return  # its entries are arrays read with their inputs (tests/test_store_verification.py, test_run_cache.py)
    rt.store.put_json(registry.namespace(name), task.key, STORED[name])
    assert execute.is_done(rt, task)
    got = rt.run(task, {})
    if name == "patching":  # a patching row is returned with its controls' verdicts (identity, twin) beside it
        assert [row.pop("identity_control") for row in got] == ["not run"]
        assert [row.pop("twin_control") for row in got] == ["not run"]
        assert [row.pop("chain") for row in got] == [""]
        assert [row.pop("fit") for row in got] == ["sentences"]  # the fit is named on every row, not stored
    assert got == STORED[name]  # the runner reads the entry is_done found, and computes nothing
    assert rt.computed == {} and rt.store.stats()[registry.namespace(name)]["hits"] == 1


def _entry_namespaces() -> tuple[str, ...]:
    return registry.entry_namespaces()


def _killed_writer(path: Path) -> None:
    """A child process that starts ``atomic_write(path)`` and dies inside the write, as a killed run does."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            atomic_write(path, lambda tmp: os._exit(0))
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # it died inside the write


@pytest.mark.parametrize("name", STORING)
def test_what_a_killed_writer_leaves_in_a_kind_s_namespace_is_swept(name: str, tmp_path: Path) -> None:
    task = SAMPLES[name]
    rt = _runtime([task], tmp_path)
    paths = execute.output_paths(rt, task)
    # and the kind's other folders: each namespace it writes, one folder down (transport/plans, maps/fitted)
    paths += [tmp_path / ns / "sub" / f"{name}.json" for ns in KINDS[name].namespaces]
    for path in paths:
        _killed_writer(path)
    left = sorted(p for p in tmp_path.rglob(".tmp-*") if p.is_file())
    assert len(left) == len(paths) and all(p.name.startswith(f".tmp-{host_tag()}-") for p in left)
    live = paths[0].parent / f".tmp-{host_tag()}-{os.getpid()}-live.part"  # a writer still running: kept
    live.write_bytes(b"")
    assert sorted(rt.store.sweep(registry.entry_namespaces())) == left
    assert sorted(p for p in tmp_path.rglob(".tmp-*")) == [live]
    assert not any(p.exists() for p in paths)


def _local_releases(tasks: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, bool]:
    """Per task key: did the local executor release every model just before running it?"""
    events: list[tuple[str, Any]] = []
    with monkeypatch.context() as patch:
        patch.setattr(execute.Runtime, "release_except", lambda self, name: events.append(("release", name)))
        patch.setattr(execute.Runtime, "run", lambda self, task, done: events.append(("run", task.key)))
        execute.LocalExecutor().execute(_plan(tasks), _runtime(tasks, tmp_path))
    return _released_before(events)


def _released_before(events: list[tuple[str, Any]]) -> dict[str, bool]:
    out: dict[str, bool] = {}
    previous: tuple[str, Any] | None = None
    for event in events:
        if event[0] == "run":
            out[event[1]] = previous == ("release", None)
        previous = event
    return out


def _ray_releases(tasks: list[Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, bool]:
    """Per task key: did a Ray worker (``run_group``, the body of every Ray task) release every model first?"""
    events: list[tuple[str, Any]] = []
    runners = {k: (lambda rt, task, done: events.append(("run", task.key))) for k in KINDS}
    p = _plan(tasks)
    with monkeypatch.context() as patch:
        patch.setattr(execute.Runtime, "release_except", lambda self, name: events.append(("release", name)))
        for task in tasks:  # one group per task: what a worker does before each task does not depend on grouping
            events.append(("group", task.key))
            run_group(p, tmp_path, [task.key], runners=runners)
    return _released_before(events)


def test_both_executors_keep_or_release_the_model_alike_for_every_kind(monkeypatch, tmp_path: Path) -> None:
    # each kind after a model-holding task (an extraction), so keeping and releasing differ
    tasks = []
    for name, task in SAMPLES.items():
        if KINDS[name].driver:
            continue
        tasks += [plan.ExtractTask(f"before-{name}", "m", "eng_Latn", (), ()), task]
    local = _local_releases(tasks, monkeypatch, tmp_path)
    ray = _ray_releases(tasks, monkeypatch, tmp_path)
    assert local == ray
    for task in tasks:
        assert local[task.key] == (not KINDS[task.kind].holds_model), task.kind


@pytest.mark.parametrize("name", [k for k in KINDS if not KINDS[k].driver])
def test_ray_groups_a_model_holding_kind_by_its_model(name: str) -> None:
    task = SAMPLES[name]
    twin = dataclasses.replace(task, key=f"{task.key}-twin")
    groups = group_tasks(_plan([task, twin]), [task, twin])
    if KINDS[name].holds_model:  # the model loads once, on a worker that gives its memory back afterwards
        assert len(groups) == 1 and groups[0].loads_model and groups[0].models == ("m",)
    else:
        assert len(groups) == 2 and not any(g.loads_model for g in groups)


@pytest.mark.parametrize("name", registry.driver_kinds())
def test_a_driver_kind_cuts_the_plan_into_stages(name: str) -> None:
    before, after = SAMPLES["audit"], SAMPLES["compare"]
    cut = stages(_plan([before, SAMPLES[name], after]))
    assert [([t.key for t in tasks], b.key if b else None) for tasks, b in cut] == [
        ([before.key], SAMPLES[name].key),
        ([after.key], None),
    ]
