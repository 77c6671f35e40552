"""What an executor hands a runner and what it keeps: a task's declared inputs only, and an extracted side's
arrays let go once the last task that reads it has run.

The unit tests run the local executor and Ray's worker body (``run_group``, no Ray started) on a hand-built
plan of extractions and comparisons whose runners are replaced by recorders; the run test instruments every
runner of a real run (tiny GPT-2 and Llama, maps between them) and checks its tables and map figure against
the same run with nothing released.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fixtures.plugins import parallel_tsv
from interlingua.contract.pairs import SideData
from interlingua.core.store import Store
from interlingua.pipeline import execute, plan, registry
from interlingua.pipeline.executors.ray import run_group

# runs the CLI / the executors: in the full suite, not make test-fast (its 2-minute promise)
pytestmark = pytest.mark.pipeline

COMPARE, _ = registry.kind("compare").example()  # type: ignore[misc]


def _side(key: str, language: str) -> plan.ExtractTask:
    return plan.ExtractTask(key, "m", language, (("mean", f"{key}-mean"),), ())


def _compare(key: str, a: str, b: str) -> Any:
    return dataclasses.replace(COMPARE, key=key, sides=(a, b), depends=(a, b))


#: three sides and two comparisons: e1 is read by c12 only, e2 by c12 and c23, e3 by c23 only
TASKS = [_side("e1", "eng_Latn"), _side("e2", "deu_Latn"), _compare("c12", "e1", "e2"), _side("e3", "fra_Latn")]
TASKS.append(_compare("c23", "e2", "e3"))


def _plan(tasks: list[Any]) -> plan.Plan:
    return plan.Plan(
        spec=None,  # type: ignore[arg-type]
        corpus=None,  # type: ignore[arg-type]
        models={"m": SimpleNamespace(path="/models/m", package=None, device="cpu")},  # type: ignore[dict-item]
        fingerprints={"m": "1" * 64},
        pairs=[],
        tasks=tasks,
    )


class Recorder:
    """Replacement runners: an extraction makes fresh arrays (watched by weak references), a comparison records
    what it was handed and which sides' arrays were still alive when it ran."""

    def __init__(self) -> None:
        self.arrays: dict[str, weakref.ref[np.ndarray]] = {}
        self.handed: dict[str, set[str]] = {}
        self.alive: dict[str, set[str]] = {}

    def extract(self, rt: Any, task: Any, done: Any) -> execute.ExtractOutput:
        reps = np.full((2, 4, 3), float(len(self.arrays)))
        self.arrays[task.key] = weakref.ref(reps)
        return execute.ExtractOutput({"mean": SideData(reps, np.ones((4, 2)), np.zeros(2))}, [], 8)

    def compare(self, rt: Any, task: Any, done: Any) -> list[dict[str, Any]]:
        self.handed[task.key] = set(done)
        gc.collect()
        self.alive[task.key] = {k for k, ref in self.arrays.items() if ref() is not None}
        assert all(done[s].data["mean"].reps.shape == (2, 4, 3) for s in task.sides)
        return [{"pair": task.key}]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    rec = Recorder()
    monkeypatch.setitem(execute.RUNNER_OVERRIDES, "extract", rec.extract)
    monkeypatch.setitem(execute.RUNNER_OVERRIDES, "compare", rec.compare)
    return rec


def test_the_local_executor_hands_each_runner_its_declared_inputs_only(recorder: Recorder, tmp_path: Path) -> None:
    p = _plan(TASKS)
    done = execute.LocalExecutor().execute(p, execute.Runtime(p, Store(tmp_path), progress=False))
    assert recorder.handed == {"c12": {"e1", "e2"}, "c23": {"e2", "e3"}}  # not e1 for c23, nor c12's rows
    assert list(done) == [t.key for t in TASKS]  # every output is returned, in plan order
    assert done["c12"] == [{"pair": "c12"}] and done["c23"] == [{"pair": "c23"}]


def test_ray_workers_hand_each_runner_the_same_inputs(tmp_path: Path) -> None:
    rec = Recorder()
    report = run_group(
        _plan(TASKS), tmp_path, [t.key for t in TASKS], runners={"extract": rec.extract, "compare": rec.compare}
    )
    assert rec.handed == {"c12": {"e1", "e2"}, "c23": {"e2", "e3"}}
    assert report["outputs"]["e1"] == {"truncated": [], "max_length": 8}  # a side travels as its report only
    # a worker holds a side until its group's last reader: e1 is gone before c23 runs
    assert rec.alive == {"c12": {"e1", "e2"}, "c23": {"e2", "e3"}}


def test_a_side_s_arrays_are_released_after_its_last_reader(recorder: Recorder, tmp_path: Path) -> None:
    p = _plan(TASKS)
    executor = execute.LocalExecutor()
    done = executor.execute(p, execute.Runtime(p, Store(tmp_path), progress=False))
    # when c23 runs, e1's last reader (c12) has finished: its arrays are freed, while c23's own sides live
    assert recorder.alive == {"c12": {"e1", "e2"}, "c23": {"e2", "e3"}}
    assert executor.outputs is not None and executor.outputs.released == ["e1", "e2", "e3"]
    gc.collect()
    assert all(ref() is None for ref in recorder.arrays.values())  # the run holds no side's arrays at the end
    for side in ("e1", "e2", "e3"):  # what is kept: the side's report, its arrays readable from the store
        out = done[side]
        assert isinstance(out.data, execute.StoredSides) and list(out.data) == ["mean"]
        assert out.truncated == [] and out.max_length == 8


def test_a_side_no_task_reads_is_released_when_extracted(recorder: Recorder, tmp_path: Path) -> None:
    tasks = [*TASKS, _side("e4", "rus_Cyrl")]
    p = _plan(tasks)
    executor = execute.LocalExecutor()
    executor.execute(p, execute.Runtime(p, Store(tmp_path), progress=False))
    assert executor.outputs is not None and executor.outputs.released == ["e1", "e2", "e3", "e4"]


def test_a_runner_reading_an_undeclared_output_fails(recorder: Recorder, tmp_path: Path) -> None:
    def sneaky(rt: Any, task: Any, done: Any) -> Any:
        if task.key == "c23":
            return done["e1"]  # finished earlier in this process, but not one of c23's sides
        return []

    execute.RUNNER_OVERRIDES["compare"] = sneaky  # restored by the recorder fixture's monkeypatch
    p = _plan(TASKS)
    with pytest.raises(execute.UndeclaredInputError, match=r"compare task c23 read the output of task e1"):
        execute.LocalExecutor().execute(p, execute.Runtime(p, Store(tmp_path), progress=False))


def test_task_inputs_refuse_every_way_of_reading_an_undeclared_key() -> None:
    task = _compare("c", "a", "b")
    inputs = execute.TaskInputs(task, {"a": 1, "z": 26})  # b declared but not here (left in the store)
    assert dict(inputs) == {"a": 1} and inputs["a"] == 1
    assert "b" not in inputs and inputs.get("b") is None
    with pytest.raises(KeyError):
        inputs["b"]
    for read in (lambda: inputs["z"], lambda: "z" in inputs, lambda: inputs.get("z")):
        with pytest.raises(execute.UndeclaredInputError):
            read()


# -- a real run ---------------------------------------------------------------------------------------------


def _instrumented(seen: dict[str, bool]) -> dict[str, Any]:
    """Every registered kind's runner (and extract's), recording whether it was handed exactly its depends."""

    def wrap(runner: Any) -> Any:
        def run(rt: Any, task: Any, done: Any) -> Any:
            seen[task.key] = set(done) == set(task.depends) and isinstance(done, execute.TaskInputs)
            return runner(rt, task, done)

        return run

    runners = {name: k.runner for name, k in registry.kinds().items() if k.runner is not None}
    runners["extract"] = execute.run_extract
    return {name: wrap(r) for name, r in runners.items()}


@pytest.mark.pipeline
def test_a_run_releasing_its_sides_writes_the_tables_of_one_that_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_gpt2_path: Path, tiny_llama_path: Path
) -> None:
    from interlingua.pipeline.runs import run

    corpus = parallel_tsv(tmp_path, seed=5, n=24)

    def spec(name: str) -> dict[str, Any]:
        return {
            "output": str(tmp_path / name / "out"),
            "cache_dir": str(tmp_path / name / "cache"),
            "progress": False,
            "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"]},
            "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}, {"name": "llama", "path": str(tiny_llama_path)}],
            "pairs": {"within_model": True, "cross_model": "same_language"},
            "pooling": ["mean"],
            "measures": ["cka_linear_biased"],
            "inference": {"permutations": 0},
            "maps": {"estimators": ["procrustes"], "folds": 3, "bootstrap": 0},
        }

    seen: dict[str, bool] = {}
    executor = execute.LocalExecutor()
    with monkeypatch.context() as patch:
        for name, runner in _instrumented(seen).items():
            patch.setitem(execute.RUNNER_OVERRIDES, name, runner)
        released = run(spec("released"), executor=executor)
    assert executor.outputs is not None
    assert seen and all(seen.values())  # every runner was handed its depends, nothing else
    sides = [k for k in executor.outputs.done if isinstance(executor.outputs.done[k], execute.ExtractOutput)]
    assert len(sides) == 4 and set(executor.outputs.released) == set(sides)  # 2 models x 2 languages, all let go

    with monkeypatch.context() as patch:  # the same run keeping every side in memory until assembly
        patch.setattr(execute, "without_arrays", lambda reader, task, output: output)
        kept = run(spec("kept"))
    pd.testing.assert_frame_equal(released.table, kept.table)
    pd.testing.assert_frame_equal(released.maps, kept.maps)
    figure = Path("figures") / "map_clouds.png"  # drawn at assembly from a pair's sides, read back from the store
    assert (tmp_path / "released" / "out" / figure).read_bytes() == (tmp_path / "kept" / "out" / figure).read_bytes()
