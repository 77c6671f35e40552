"""Concurrent extraction for the local executor: the sides of different models extracted at once.

A forward pass runs at the run's fixed torch thread count (``threads``, 1 by default: docs/threads.md), so on a
machine with C cores a run that extracts one side after another leaves C - threads cores idle. Here the plan's
ready extraction tasks (no capability entries, dependencies done) are grouped by model into chains (a model's
sides in plan order, so each model loads once), and up to ``workers`` chains run at once on Python threads.

Why the tables stay the same bits: every chain's forward passes run at the same fixed thread count as a
sequential run (torch's thread count is per OS thread under OpenMP and is set to the run's count for the
process before the chains start and in each of them), numpy's BLAS stays at its one analysis thread (the chains
run inside the driver's :func:`~interlingua.core.numerics.pinned`), and each side is stored under its own key,
written atomically. torch releases the GIL inside its operators, so the chains' forward passes overlap.

``workers`` is not part of any key; its default (:func:`default_workers`) is the CPUs this process may use divided
by the thread count, at most one per chain, at most as many of the largest models as fit in the available memory
by the cost model's estimate of an extraction's working set.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlingua.pipeline.plan import ExtractTask, Plan, Task

__all__ = [
    "MEMORY_SHARE",
    "available_memory",
    "cpu_cores",
    "default_workers",
    "ready_chains",
    "run_chains",
    "schedule_seconds",
]

#: The share of the available memory concurrent extractions may plan to use (the rest: the interpreter, the
#: analysis' arrays, other processes' growth).
MEMORY_SHARE = 0.8


def cpu_cores() -> int:
    """The CPUs this process may run on (its affinity; every CPU where the system has no affinity)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # macOS, Windows
        return max(os.cpu_count() or 1, 1)


def available_memory() -> int | None:
    """Bytes of memory available to new work (Linux ``MemAvailable``); None where it is not known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_workers(
    threads: int | str,
    chains: int,
    peaks: list[float] | None = None,
    memory: int | None = None,
    cores: int | None = None,
) -> tuple[int, str]:
    """How many chains run at once when the config names no ``workers``, and why.

    ``threads``: the run's torch threads ("auto": 1 worker, its tuner measures the whole machine); ``chains``: the
    models with sides to extract; ``peaks``: the estimated working set of each chain's extraction (bytes; None: not
    estimated); ``memory``: the available bytes (None: not known). The count is the CPUs / threads, at most
    ``chains``, at most the number of the largest peaks that fit in :data:`MEMORY_SHARE` of the memory; at least 1.
    ``cores``: the CPUs to count (None: :func:`cpu_cores`, this process's).
    """
    if threads == "auto":
        return 1, "threads: auto measures the whole machine, so extractions run one after another"
    per = max(int(threads), 1)
    cores = cpu_cores() if cores is None else max(int(cores), 1)
    count, why = max(cores // per, 1), f"{cores} CPUs / {per} thread{'s' if per > 1 else ''}"
    if chains < count:
        count, why = max(chains, 1), f"{chains} model{'s' if chains != 1 else ''} to extract"
    if peaks and memory:
        budget, fit = MEMORY_SHARE * memory, 0
        for peak in sorted(peaks, reverse=True)[:count]:
            if budget < peak:
                break
            budget -= peak
            fit += 1
        if max(fit, 1) < count:
            count, why = max(fit, 1), f"the estimated memory of the largest models ({memory / 2**30:.1f} GiB available)"
    return count, why


def eligible(task: Task, done: set[str] | dict[str, Any]) -> bool:
    """A task a chain may run: an extraction with no capability entries (those read other tasks' outputs and
    hold resources across tasks) whose dependencies are done."""
    return isinstance(task, ExtractTask) and not task.extra and all(d in done for d in task.depends)


def ready_chains(plan: Plan, start: int, done: set[str] | dict[str, Any]) -> tuple[list[list[ExtractTask]], int]:
    """The eligible tasks from plan position ``start`` on (an unbroken run of them), grouped by model in plan order,
    and the position after them."""
    chains: dict[str, list[ExtractTask]] = {}
    end = start
    while end < len(plan.tasks) and eligible(plan.tasks[end], done):
        task = plan.tasks[end]
        assert isinstance(task, ExtractTask)
        chains.setdefault(task.model, []).append(task)
        end += 1
    return list(chains.values()), end


def schedule_seconds(chains: list[float], workers: int) -> float:
    """Wall seconds of chains of these durations on ``workers`` lanes, each chain to the lane free first, in order
    (what :func:`run_chains` does): the estimate of ``interlingua plan``."""
    lanes = [0.0] * max(min(workers, len(chains)), 1)
    for seconds in chains:
        i = lanes.index(min(lanes))
        lanes[i] += seconds
    return max(lanes)


@dataclass
class ChainHooks:
    """What :func:`run_chains` asks of its caller: load a chain's model when it has sides to compute (``load``), a
    task starts (``start``) and ends (``finish``), a chain's model is no longer needed (``release``). ``start``,
    ``finish`` and ``release`` are called under one lock, so they may touch shared state."""

    load: Callable[[list[ExtractTask]], None]
    start: Callable[[Task], None]
    finish: Callable[[Task], None]
    release: Callable[[str], None]


class _Gate:
    """Model loads exclusive of forward passes: loading sets process-wide torch state (transformers sets torch's
    default dtype while it builds a model), which a forward pass running beside it must not see."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._passes = 0
        self._loading = False

    @contextmanager
    def forward(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._loading)
            self._passes += 1
        try:
            yield
        finally:
            with self._cond:
                self._passes -= 1
                self._cond.notify_all()

    @contextmanager
    def load(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._loading and self._passes == 0)
            self._loading = True
        try:
            yield
        finally:
            with self._cond:
                self._loading = False
                self._cond.notify_all()


def run_chains(
    chains: list[list[ExtractTask]],
    workers: int,
    run: Callable[[Task], Any],
    hooks: ChainHooks,
    threads: int | str,
) -> dict[str, Any]:
    """Run each chain's tasks in order, up to ``workers`` chains at once; ``{task key: output}``.

    The first ``workers`` chains' models load here, one after another, before any chain starts; a later chain's
    model loads when no forward pass runs (:class:`_Gate`). Each chain runs on a daemon thread in a copy of the
    caller's context (so the caller's analysis BLAS limit holds there), with torch at ``threads`` threads. The
    first error stops the chains from starting another task; the running tasks finish (their outputs are stored)
    and the error is raised, the first in plan order. An interrupt of the caller is raised at once (a running
    extraction's writes are atomic; a rerun resumes from the store).
    """
    import torch

    count = max(min(workers, len(chains)), 1)
    for chain in chains[:count]:
        hooks.load(chain)
    lock = threading.Lock()
    gate = _Gate()
    pending = list(enumerate(chains))
    outputs: dict[str, Any] = {}
    errors: dict[int, BaseException] = {}  # plan position of the failed task -> its error
    order = {t.key: i for i, t in enumerate(t for c in chains for t in c)}
    stop = threading.Event()
    finished = threading.Semaphore(0)

    def lane() -> None:
        try:
            if isinstance(threads, int) and torch.get_num_threads() != threads:
                torch.set_num_threads(threads)  # per OS thread under OpenMP: this lane's forward passes
            while not stop.is_set():
                with lock:
                    if not pending:
                        break
                    position, chain = pending.pop(0)
                current = chain[0]  # the task an error is charged to
                try:
                    if position >= count:
                        with gate.load():
                            hooks.load(chain)
                    for task in chain:
                        if stop.is_set():
                            break
                        current = task
                        with lock:
                            hooks.start(task)
                        with gate.forward():
                            out = run(task)
                        with lock:
                            outputs[task.key] = out
                            hooks.finish(task)
                except BaseException as exc:  # noqa: BLE001  # handed to the caller's thread, raised there
                    with lock:
                        errors[order[current.key]] = exc
                    stop.set()
                finally:
                    with lock:
                        hooks.release(chain[0].model)
        finally:
            finished.release()

    lanes = [
        threading.Thread(
            target=contextvars.copy_context().run, args=(lane,), name=f"interlingua-extract-{i}", daemon=True
        )
        for i in range(count)
    ]
    try:
        for t in lanes:
            t.start()
        for _ in lanes:
            while not finished.acquire(timeout=0.5):  # a timeout keeps the wait interruptible (Ctrl-C)
                pass
    except BaseException:
        stop.set()
        raise
    if errors:
        raise errors[min(errors)]
    return outputs
