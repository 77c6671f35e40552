"""Concurrent extraction (``workers``): two models' sides extracted at once give the same bytes as one after another.

The overlap is shown by a hook on the extract runner, not by timing: each extraction waits at a two-party barrier
before it runs, so a run that did not run them at once fails with a broken barrier; and the recorded events put
both starts before either end.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pytest

from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import InterlinguaError
from interlingua.pipeline import execute, workers
from interlingua.pipeline.runs import run

CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    sents = parallel_sentences(24, seed=5)
    tsv = tmp_path_factory.mktemp("concurrent") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(24)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        tsv, sep="\t", index=False
    )
    return tsv


def _spec(folder: Path, corpus: Path, gpt2: Path, llama: Path, n_workers: int) -> dict:
    return {
        "output": str(folder / "out"),
        "cache_dir": str(folder / "cache"),  # each run its own cache: every side is computed
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"], "n": 24},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pooling": ["mean", "last"],
        "measures": ["cka_linear_biased", "cka_linear_debiased"],
        "inference": {"permutations": 19},
        "threads": 1,
        "workers": n_workers,
    }


@pytest.mark.pipeline
def test_two_workers_overlap_and_give_the_same_bytes(tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, monkeypatch):
    one = run(_spec(tmp_path / "one", corpus, tiny_gpt2_path, tiny_llama_path, 1))

    barrier = threading.Barrier(2, timeout=120)  # both models' first sides must be running at once to pass
    events: list[tuple[str, str, str]] = []
    first: set[str] = set()

    def recording(rt, task, done):
        if task.model not in first:
            first.add(task.model)
            events.append(("start", task.model, threading.current_thread().name))
            barrier.wait()
            out = execute.run_extract(rt, task, done)
            events.append(("end", task.model, threading.current_thread().name))
            return out
        return execute.run_extract(rt, task, done)

    monkeypatch.setitem(execute.RUNNER_OVERRIDES, "extract", recording)
    two = run(_spec(tmp_path / "two", corpus, tiny_gpt2_path, tiny_llama_path, 2))

    kinds = [e[0] for e in events]
    assert kinds == ["start", "start", "end", "end"], events
    assert {e[1] for e in events} == {"gpt2", "llama"}
    assert len({e[2] for e in events}) == 2  # two threads
    assert two.models_loaded == one.models_loaded == ["gpt2", "llama"]  # plan order, whichever loaded first
    for name in ("results.csv", "results.parquet"):
        a, b = one.output / name, two.output / name
        if a.exists() or b.exists():
            assert a.read_bytes() == b.read_bytes(), name
    pd.testing.assert_frame_equal(one.table, two.table)
    assert (one.output / "results.csv").exists()


@pytest.mark.pipeline
def test_a_failing_extraction_is_raised_and_the_other_model_is_stored(
    tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, monkeypatch
):
    def failing(rt, task, done):
        if task.model == "llama":
            raise InterlinguaError("llama failed on purpose")
        return execute.run_extract(rt, task, done)

    monkeypatch.setitem(execute.RUNNER_OVERRIDES, "extract", failing)
    spec = _spec(tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, 2)
    with pytest.raises(InterlinguaError, match="llama failed on purpose"):
        run(spec)
    monkeypatch.delitem(execute.RUNNER_OVERRIDES, "extract")
    again = run(spec)  # gpt2's first side ran beside the failure and was stored, or was never started
    assert again.table is not None and len(again.table) > 0


def test_default_workers_is_cores_over_threads(monkeypatch):
    monkeypatch.setattr(workers, "cpu_cores", lambda: 8)
    assert workers.default_workers(1, 5)[0] == 5  # one per model with sides to extract
    assert workers.default_workers(1, 20)[0] == 8
    assert workers.default_workers(2, 20)[0] == 4
    assert workers.default_workers(3, 20)[0] == 2
    assert workers.default_workers(16, 20)[0] == 1
    assert workers.default_workers("auto", 20)[0] == 1
    assert workers.default_workers(1, 0)[0] == 1


def test_default_workers_fit_the_largest_models_in_memory(monkeypatch):
    monkeypatch.setattr(workers, "cpu_cores", lambda: 8)
    gib = 2**30
    peaks = [1.0 * gib, 3.0 * gib, 2.0 * gib, 0.5 * gib]
    # 80% of 5 GiB = 4 GiB: the largest (3) fits, the next largest (2) does not
    count, why = workers.default_workers(1, 4, peaks, 5 * gib)
    assert count == 1 and "memory" in why
    assert workers.default_workers(1, 4, peaks, 7 * gib)[0] == 2  # 5.6 GiB: 3 + 2, not + 1 more
    assert workers.default_workers(1, 4, peaks, 100 * gib)[0] == 4
    assert workers.default_workers(1, 4, peaks, None)[0] == 4  # memory unknown: no bound
    assert workers.default_workers(1, 4, peaks, 1 * gib)[0] == 1  # never below one


def test_schedule_seconds_is_the_busiest_lane():
    assert workers.schedule_seconds([4.0, 3.0, 2.0], 1) == 9.0
    assert workers.schedule_seconds([4.0, 3.0, 2.0], 2) == 5.0  # 4 | 3 + 2
    assert workers.schedule_seconds([4.0, 3.0, 2.0], 3) == 4.0
    assert workers.schedule_seconds([4.0, 3.0, 2.0], 10) == 4.0
    assert workers.schedule_seconds([], 2) == 0.0


def test_workers_must_be_positive():
    from interlingua.pipeline.config import parse_spec

    base = {
        "output": "out",
        "corpus": {"source": "local", "path": "x.tsv", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "m", "path": "m"}],
    }
    assert parse_spec({**base, "workers": 3}).workers == 3
    assert parse_spec(base).workers is None
    with pytest.raises(InterlinguaError, match="workers"):
        parse_spec({**base, "workers": 0})


@pytest.mark.pipeline
def test_the_plan_prices_the_busiest_lane_and_the_models_together(
    tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, monkeypatch
):
    from interlingua.pipeline import cost
    from interlingua.pipeline.config import parse_spec
    from interlingua.pipeline.extract_kind import extract_cost
    from interlingua.pipeline.preflight import preflight

    monkeypatch.setattr(cost, "matmul_rate", lambda dtype="float64": 1e9)  # the estimate a function of the plan
    monkeypatch.setattr(cost, "measure_overheads", lambda mid: (1e-3, 1e-3, 1e-4))
    monkeypatch.setattr(cost, "mean_tokens", lambda sentences, folder, max_length: (12.0, "fixed"))

    def extraction(n_workers: int) -> tuple[cost.Phase, cost.CostEstimate, list]:
        spec = parse_spec(_spec(tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, n_workers))
        plan, est = cost.estimate_checked(preflight(spec))
        return est.phase("extraction"), est, plan

    one, est, plan = extraction(1)
    two, _, _ = extraction(2)
    ctx = cost.CostContext(plan, {}, None, est.models, 1e9, 1e9, cost.forward_rate(1e9, plan.threads))
    lanes: dict[str, float] = {}
    peaks: dict[str, float] = {}
    for t in plan.of_kind("extract"):
        c = extract_cost(t, ctx)
        lanes[t.model] = lanes.get(t.model, 0.0) + sum(c.seconds)
        peaks[t.model] = max(peaks.get(t.model, 0.0), c.peak_bytes)
    assert one.seconds == pytest.approx(sum(lanes.values()), rel=1e-12)
    assert two.seconds == pytest.approx(max(lanes.values()), rel=1e-12)  # one model per lane
    assert one.peak_bytes == pytest.approx(max(peaks.values()), rel=1e-12)
    assert two.peak_bytes == pytest.approx(sum(peaks.values()), rel=1e-12)  # both models in memory at once
    assert "2 models at once" in two.detail and "at once" not in one.detail


def test_the_default_is_bounded_by_the_plans_own_extraction_peaks(
    tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, monkeypatch
):
    """The executor's default reads each model's extraction peak from the run's cost estimate (the path a run
    without ``workers:`` takes): two models on 8 cores with memory unknown; one when memory holds neither."""
    from interlingua.pipeline.config import parse_spec
    from interlingua.pipeline.cost import estimate
    from interlingua.pipeline.plan import build_plan
    from interlingua.pipeline.preflight import preflight

    spec = _spec(tmp_path, corpus, tiny_gpt2_path, tiny_llama_path, 1)
    del spec["workers"]
    checked = preflight(parse_spec(spec))
    plan = build_plan(checked.spec, checked.corpus, checked.fingerprints)
    est = estimate(plan, {k: r for k, r in checked.models.items() if isinstance(r, dict)}, checked.store)
    assert set(est.models) == {"gpt2", "llama"}
    monkeypatch.setattr(workers, "cpu_cores", lambda: 8)
    monkeypatch.setattr(workers, "available_memory", lambda: None)
    assert execute.resolve_workers(plan, None, est.models)[0] == 2
    monkeypatch.setattr(workers, "available_memory", lambda: 1)
    count, why = execute.resolve_workers(plan, None, est.models)
    assert count == 1 and "memory" in why
