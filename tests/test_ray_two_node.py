"""The Ray executor on a two-node cluster on this machine, one worker node killed mid-run: the run finishes
(Ray retries the tasks the dead node was running) and its tables equal a local run's, byte for byte."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

from fixtures.tables import assert_same_table  # noqa: E402
from fixtures.tiny_models import parallel_sentences  # noqa: E402
from interlingua.comparison.capability import run as run_compare  # noqa: E402
from interlingua.pipeline.executors import RayExecutor  # noqa: E402
from interlingua.pipeline.runs import run  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.pipeline]

CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}
TABLES = ("results.csv", "maps.csv")
#: How long each comparison sleeps before it computes, so the worker node is surely busy when it is killed.
COMPARE_DELAY_S = 1.0
#: How long an attempt on the node to be killed sleeps: longer than its worker process outlives the killed
#: raylet, so it cannot finish and hand its result to the driver directly (which would leave nothing to retry).
DOOMED_DELAY_S = 20.0


def _spec(folder: Path, corpus: Path, gpt2: Path, llama: Path) -> dict:
    return {
        "output": str(folder / "out"),
        "cache_dir": str(folder / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"], "n": 32},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pooling": ["mean", "last"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 19, "jackknife_groups": 4},
        "layer_grid": True,
        "special_tokens": "include",
        "maps": {"estimators": ["procrustes"], "folds": 2, "bootstrap": 0},
    }


def _journal(folder: Path, doomed: str = ""):
    """A compare runner that records on which node each attempt starts and ends (one file per event).

    ``doomed``: the node id the test kills; an attempt there waits ``DOOMED_DELAY_S`` before computing."""

    def compare(rt, task, done):
        node = ray.get_runtime_context().get_node_id()
        stamp = f"{task.key[:16]}.{time.monotonic_ns()}"
        (folder / f"start.{stamp}").write_text(node)
        time.sleep(DOOMED_DELAY_S if node == doomed else COMPARE_DELAY_S)
        out = run_compare(rt, task, done)
        (folder / f"end.{stamp}").write_text(node)
        return out

    return compare


def _events(folder: Path, kind: str) -> list[tuple[str, str]]:
    """``[(attempt, node id)]``: attempts are ``KEY.NS`` (a task's key prefix and the start's monotonic ns)."""
    return [(p.name.split(".", 1)[1], p.read_text()) for p in folder.glob(f"{kind}.*")]


def test_a_run_survives_a_killed_worker_node_and_equals_a_local_run(tmp_path, tiny_gpt2_path, tiny_llama_path):
    sents = parallel_sentences(40, seed=3)
    corpus = tmp_path / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(40)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        corpus, sep="\t", index=False
    )
    local = run(_spec(tmp_path / "local", corpus, tiny_gpt2_path, tiny_llama_path))

    journal = tmp_path / "journal"
    journal.mkdir()
    # a node is declared dead after 5 missed health checks 0.2 s apart (the default waits ~30 s)
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "_system_config": {"health_check_period_ms": 200, "health_check_failure_threshold": 5},
        },
    )
    try:
        worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.WARNING)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        dead = worker.node_id
        killed = threading.Event()

        def kill_when_busy() -> None:
            """Once a comparison has finished (its rows stored) and one is running on the worker node: kill it."""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                ended = {stamp for stamp, _ in _events(journal, "end")}
                running_there = {stamp for stamp, node in _events(journal, "start") if node == dead} - ended
                if running_there and ended:
                    cluster.remove_node(worker, allow_graceful=False)
                    killed.set()
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=kill_when_busy, daemon=True)
        killer.start()
        ex = RayExecutor(runners={"compare": _journal(journal, doomed=dead)}, max_retries=3)
        remote = run(_spec(tmp_path / "ray", corpus, tiny_gpt2_path, tiny_llama_path), executor=ex)
        killer.join(timeout=5)
        assert killed.is_set(), "the worker node was never killed: the run finished before it was busy"
        assert not any(n["NodeID"] == dead and n["Alive"] for n in ray.nodes())
    finally:
        ray.shutdown()
        cluster.shutdown()

    # a comparison running on the killed node was started again on the head node by Ray (its worker
    # process may outlive its raylet for a moment, so whether the dead attempt ended is not asserted)
    starts = sorted(_events(journal, "start"), key=lambda e: int(e[0].split(".")[1]))
    on_dead = {a.split(".")[0] for a, node in starts if node == dead}
    retried = {a.split(".")[0] for a, node in starts if node != dead} & on_dead
    assert retried, "no comparison that ran on the killed node was run again"
    keys = json.loads((remote.output / "run.json").read_text())["plan"]
    assert keys["compare"] == json.loads((local.output / "run.json").read_text())["plan"]["compare"]
    # each Ray worker process runs with the plan's BLAS thread count, as the local run does: the same bytes
    for name in TABLES:
        assert_same_table(remote.output / name, (local.output / name).read_bytes())
