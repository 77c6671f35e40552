"""Ray executor: a plan's content-keyed tasks as Ray tasks on nodes that share the store.

``interlingua run CONFIG --executor ray [--address ADDRESS]`` or
``interlingua.run(spec, executor=RayExecutor(address=...))``. The plan, its
keys and the runners are the local ones; only where a task runs changes, so a
Ray run writes the same store entries as a local run of the same config (byte
for byte on the same kind of device: a GPU and a CPU extraction differ in the
last float bits) and the same ``results.csv`` up to the last float64 bit (a
worker's numeric libraries may sum a large Gram in another order).

Design
------
Data flow. The store is the only channel for arrays: every node must see the
run's ``cache_dir`` at the same path (a shared filesystem; checked on every
node before anything is submitted). A task writes its output to the store
(atomically: temporary file + rename, so a worker killed mid-write leaves no
partial entry) and returns only small things through Ray's object store: rows
of a comparison, a map or an audit (JSON), and an extraction's truncation
report. A task that needs an extraction reads it back from the store, where
it is verified like any entry.

Dependencies. A task is submitted with the ObjectRefs of its dependencies'
Ray tasks as arguments, so Ray starts it once they have finished (and fails it
when one failed for good); a dependency already in the store is not a Ray task
and not an argument. ``audit_gate`` (``audit.strict``) runs in the driver
between two stages: nothing after it in the plan is submitted before it has
passed, as in a local run.

Grouping. Tasks that load a model are grouped so that each model is loaded
once: one Ray task per model for its extractions (every missing language of
it, in plan order), one per base model for audits and NLL (quality) tasks
(adapters go on and off one base, as locally). A model group runs on a worker
process that serves at most ``max_calls`` groups (default 1: the process exits
after its model and gives all of its memory, host and GPU, back), so a worker
never holds more than one model. Comparisons and maps are one Ray task each on
reused CPU workers, or, with ``side_block=B``, one Ray task per block pair of
sides (B x B extractions), which reads each of its sides once: the layout for
all-pairs sweeps, where per-comparison tasks would read every side once per
partner.

Resources. A model group asks for ``gpus_per_model`` GPUs (default 1; a
fraction packs several small models on one GPU) when its model's ``device`` is
``cuda`` or ``auto`` and the cluster has GPUs, else ``cpus_per_model`` CPUs;
every other task asks for ``cpus_per_task`` CPUs.

Skipping and resuming. Before submitting, the driver asks the store which
outputs exist (:func:`interlingua.pipeline.execute.is_done`; for extractions it also
reads each entry's header and checks its key); a finished task is not
submitted, and a model whose extractions are all stored is never loaded. A run
killed at any point therefore loses only the tasks that were running: the
rerun submits exactly what is missing.

Faults. A task whose worker process dies (killed, out of memory, a lost node)
is retried by Ray up to ``max_retries`` times; a task that raises an exception
of ``retry_exceptions`` (default: ``OSError`` and ``StoreError``, such as a
hiccup of a network filesystem) is retried too. Any other exception (a bad
input, non-finite activations) is not retried: the run stops and raises it, as
a local run would. Tasks already submitted are left to finish (their outputs go
to the store, so the rerun after the fix reuses them): ``ray.cancel`` races with
a task's completion inside Ray's core worker and can abort the driver process
with a failed check ("Tried to complete task that was not pending"; the same race as
ray-project/ray#54846), which once killed this project's test run. A retried extraction group finds
the languages its killed attempt finished in the store and computes only the
others.

Progress: one bar over every task of the plan, advanced as Ray tasks finish
(``ray.wait``); stored tasks count as done at once.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlingua.core.errors import InterlinguaError, StoreError
from interlingua.pipeline.registry import driver_kinds, kinds, model_kinds, namespace

if TYPE_CHECKING:  # the execution modules import torch: workers that only probe the store do without
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan, Task

__all__ = ["RayExecutor", "RayExecutorError", "TaskGroup", "group_tasks", "run_group", "stages"]

#: Kinds that load a model; their tasks are grouped by model (extraction, alignment) or base model (LM head
#: tasks). From the registry, as the local executor's release policy is.
MODEL_KINDS = model_kinds()
#: Kinds that run in the driver, between stages: every later task waits for them.
DRIVER_KINDS = driver_kinds()


class RayExecutorError(InterlinguaError):
    """A Ray task could not finish (retries used up, a node lost, the cluster unreachable)."""


@dataclass(frozen=True)
class TaskGroup:
    """Tasks that run as one Ray task, in plan order: one model's extractions, one base's LM tasks, or one task."""

    name: str
    keys: tuple[str, ...]
    kinds: tuple[str, ...]
    models: tuple[str, ...]
    depends: tuple[str, ...]  # keys of tasks outside the group

    @property
    def loads_model(self) -> bool:
        return bool(self.models)


def stages(plan: Plan) -> list[tuple[list[Task], Task | None]]:
    """The plan cut at driver tasks (``audit_gate``): ``[(tasks, driver task or None), ...]`` in plan order."""
    out: list[tuple[list[Task], Task | None]] = []
    current: list[Task] = []
    for task in plan.tasks:
        if task.kind in DRIVER_KINDS:
            out.append((current, task))
            current = []
        else:
            current.append(task)
    if current or not out:
        out.append((current, None))
    return out


def _base(plan: Plan, model: str) -> str:
    spec = plan.models[model]
    return str(spec.path or spec.package or model)


def group_tasks(plan: Plan, tasks: list[Task], side_block: int | None = None) -> list[TaskGroup]:
    """Group ``tasks`` (one stage) so that each model loads once; groups in order of their first task.

    ``side_block``: comparisons and maps whose sides fall in the same (block of ``side_block`` extractions) x
    (block) run as one Ray task, which reads each of its sides from the store once (for all-pairs sweeps:
    fewer, longer tasks and ~``side_block`` times less reading); None: one Ray task per comparison or map.
    """
    members: dict[str, list[Task]] = {}
    side_index = {t.key: i for i, t in enumerate(t for t in plan.tasks if t.kind == "extract")}
    for task in tasks:
        kind = kinds()[task.kind]
        model = _model_of(task)
        if model is not None and kind.group == "model":
            name = f"{task.kind}:{model}"
        elif model is not None and kind.group == "base":
            name = f"lm:{_base(plan, model)}"
        elif side_block and kind.pair and all(s in side_index for s in getattr(task, "sides", ())):
            a, b = sorted(side_index[s] // side_block for s in task.sides)  # type: ignore[attr-defined]  # a pair kind
            name = f"pairs:{a}x{b}"
        else:
            name = f"{task.kind}:{task.key[:12]}"
        members.setdefault(name, []).append(task)
    groups = []
    for name, group in members.items():
        keys = tuple(t.key for t in group)
        inside = set(keys)
        depends = tuple(dict.fromkeys(d for t in group for d in t.depends if d not in inside))
        models = tuple(dict.fromkeys(m for m in map(_model_of, group) if m is not None))
        groups.append(TaskGroup(name, keys, tuple(dict.fromkeys(t.kind for t in group)), models, depends))
    return groups


def _model_of(task: Task) -> str | None:
    """The model a model-holding task loads (None for other kinds, and for an alignment of a language with
    itself, which needs no encoder)."""
    return getattr(task, "model", None) if kinds()[task.kind].holds_model else None


def _device(plan: Plan, model: str) -> str:
    """The device a model group's model asks for: a run model's, or the word aligner's own encoder's."""
    spec: Any = plan.model_spec(model)
    return str(getattr(spec, "device", "cpu"))


# -- the worker side ---------------------------------------------------------------------------------------


@contextmanager
def _runner_overrides(runners: Mapping[str, Callable[..., Any]] | None) -> Iterator[None]:
    """Extra or replaced runners for the duration of one group (new kinds, or faults injected by tests)."""
    if not runners:
        yield
        return
    from interlingua.pipeline import execute

    saved = dict(execute.RUNNER_OVERRIDES)
    execute.RUNNER_OVERRIDES.update(runners)
    try:
        yield
    finally:
        execute.RUNNER_OVERRIDES.clear()
        execute.RUNNER_OVERRIDES.update(saved)


def _portable(output: Any) -> Any:
    """What travels back to the driver: an extraction's report (its arrays stay in the store), else the output."""
    from interlingua.pipeline.execute import ExtractOutput

    if isinstance(output, ExtractOutput):
        return {"truncated": list(output.truncated), "max_length": int(output.max_length)}
    return output


def run_group(
    plan: Plan,
    store_root: str | os.PathLike[str],
    keys: tuple[str, ...] | list[str],
    *,
    runners: Mapping[str, Callable[..., Any]] | None = None,
    index: Mapping[str, Task] | None = None,
) -> dict[str, Any]:
    """Run the tasks ``keys`` of ``plan`` against the store at ``store_root`` (in a worker, or anywhere).

    Dependencies are read back from the store (a missing or damaged one is recomputed, as locally). Returns
    ``{"outputs": {key: portable output}, "computed", "loaded", "counts", "host", "pid"}``; ``counts`` is the
    store traffic of the tasks themselves (dependency reads are not counted, as in a local run they are not).
    """
    from interlingua.core.store import Store
    from interlingua.pipeline.execute import Outputs, Runtime

    index = index if index is not None else {t.key: t for t in plan.tasks}
    rt = Runtime(plan, Store(store_root), progress=False)
    deps = Runtime(plan, Store(store_root), progress=False)  # reads of finished dependencies: not this task's
    held = Outputs([index[k] for k in keys], lambda key, out: None)  # an output goes after its group's last reader
    outputs: dict[str, Any] = {}
    with _runner_overrides(runners):
        try:
            for key in keys:
                task = index[key]
                for dep in task.depends:
                    if dep not in held.done:
                        held.done[dep] = deps.run(index[dep], held.inputs(index[dep]))
                        deps.release_except(None)
                if task.kind not in MODEL_KINDS:
                    rt.release_except(None)
                output = rt.run(task, held.inputs(task))
                outputs[key] = _portable(output)
                held.finish(task, output)
                del output
        finally:
            rt.release_except(None)
            deps.release_except(None)
    computed = dict(rt.computed)
    for kind, n in deps.computed.items():
        computed[kind] = computed.get(kind, 0) + n
    return {
        "outputs": outputs,
        "computed": computed,
        "loaded": list(dict.fromkeys([*rt.loaded_models, *deps.loaded_models])),
        "counts": rt.store.stats(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


#: ``(plan, {key: task}, runners)`` a worker process has deserialized, by the plan's object id (a reused
#: worker reads them once per run).
_PLANS: dict[str, tuple[Any, dict[str, Any], Any]] = {}


def _remote_entry(
    shared: list[Any], store_root: str, keys: tuple[str, ...], cwd: str | None, *dependencies: Any
) -> dict[str, Any]:
    """The body of every Ray task. ``shared``: ObjectRefs of the plan and of the runner overrides (in a list,
    so Ray does not resolve them for every call); ``dependencies`` are only there to make Ray wait for them."""
    import ray

    plan_ref, runners_ref = shared
    cached = _PLANS.get(plan_ref.hex())
    if cached is None:
        plan = ray.get(plan_ref)
        runners = ray.get(runners_ref) if runners_ref is not None else None
        cached = (plan, {t.key: t for t in plan.tasks}, runners)
        _PLANS.clear()  # one run's plan at a time
        _PLANS[plan_ref.hex()] = cached
    if cwd and os.path.isdir(cwd) and os.getcwd() != cwd:
        os.chdir(cwd)  # relative model folders in the config resolve as in the driver
    return run_group(cached[0], store_root, keys, runners=cached[2], index=cached[1])


def _probe_store(path: str, token: str) -> dict[str, Any]:
    """On one node: is the driver's probe file there, and can this node write next to it?"""
    p = Path(path)
    try:
        seen = p.read_text(encoding="utf-8") == token
    except OSError:
        seen = False
    writable = False
    if seen:
        tmp = p.with_name(f"{p.name}.{socket.gethostname()}.{os.getpid()}")
        try:
            tmp.write_text("ok", encoding="utf-8")
            tmp.unlink()
            writable = True
        except OSError:
            pass
    return {"host": socket.gethostname(), "seen": seen, "writable": writable}


# -- the driver side ---------------------------------------------------------------------------------------


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InterlinguaError(
            "the ray executor needs Ray: pip install 'interlingua[ray]' (or pip install 'ray>=2.9'), "
            "on the driver and on every node of the cluster"
        ) from None
    return ray


def _stored_meta(path: Path) -> dict[str, str] | None:
    """The header metadata of a stored arrays entry (not its tensors), or None when unreadable."""
    try:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as fh:
            return dict(fh.metadata() or {})
    except Exception:
        return None


def _add_counts(store: Any, counts: Mapping[str, Mapping[str, int]]) -> None:
    for ns, values in counts.items():
        bucket = store.counts.setdefault(ns, {"hits": 0, "misses": 0, "rebuilt": 0})
        for what, n in values.items():
            bucket[what] = bucket.get(what, 0) + int(n)


#: Seconds to wait for a Ray cluster's address to answer before the run fails (``connect_timeout``).
CONNECT_TIMEOUT = 30.0
CONNECT_TIMEOUT_ENV = "INTERLINGUA_RAY_CONNECT_TIMEOUT"


def connect_timeout(given: float | None = None) -> float:
    """``given``, else ``$INTERLINGUA_RAY_CONNECT_TIMEOUT``, else :data:`CONNECT_TIMEOUT` seconds."""
    if given is not None:
        value: float | str = given
    else:
        value = os.environ.get(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT)
    try:
        seconds = float(value)
    except ValueError:
        raise RayExecutorError(f"${CONNECT_TIMEOUT_ENV}={value!r} is not a number of seconds") from None
    if not seconds > 0 or seconds == float("inf"):
        raise RayExecutorError(f"the Ray connect timeout must be a positive number of seconds, not {value!r}")
    return seconds


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``HOST:PORT`` or ``ray://HOST:PORT`` (IPv6 in brackets); None for other forms."""
    rest = address.removeprefix("ray://").rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


def probe_address(address: str | None, timeout: float) -> None:
    """Fail within ``timeout`` seconds when nothing answers at the Ray cluster's address.

    ``ray.init`` waits for an unreachable GCS without bound (issue 40: still waiting after 300 s), so the
    address (``--address``, else ``$RAY_ADDRESS``; ``auto`` resolved as Ray resolves it) is checked first,
    all within ``timeout`` seconds: (1) a TCP connection; (2) the HTTP/2 preface, which every gRPC server
    answers with a SETTINGS frame; (3) for a GCS address (not ``ray://``), the call Ray's own GCS client
    makes first, ``GetClusterId``, through Ray's native client (:func:`_gcs_answers`): a gRPC server that
    is not a Ray GCS answers it with an error (UNIMPLEMENTED for an unknown service) or not at all. A
    ``ray://`` address is Ray Client's server, not the GCS, and gets steps 1 and 2 only. No address (a new
    local instance) or one Ray cannot resolve is left to ``ray.init``.
    """
    target = address if address is not None else os.environ.get("RAY_ADDRESS") or None
    if target is None or target == "local":
        return
    if target == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address

            resolved = canonicalize_bootstrap_address("auto")
        except Exception:  # no cluster recorded on this machine: ray.init says so at once
            return
        if not resolved:
            return
        target = str(resolved)
    where = _host_port(target)
    if where is None:
        return
    wait = (
        f"start it with `ray start --head` there, or check --address / $RAY_ADDRESS (the wait is set by "
        f"${CONNECT_TIMEOUT_ENV} or RayExecutor(connect_timeout=...))"
    )
    if not target.startswith("ray://"):
        _native_gcs_client()  # its import is not the cluster's time to answer
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection(where, timeout=timeout) as conn:
            reply = _http2_reply(conn, deadline)
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc) or type(exc).__name__)
        raise RayExecutorError(f"cannot reach a Ray cluster at {target} within {timeout:g} s ({why}); {wait}") from None
    if reply[3:4] != b"\x04" or reply[5:9] != b"\x00\x00\x00\x00":  # an HTTP/2 SETTINGS frame on stream 0
        got = (
            f"it replied {reply[:24]!r}" if reply else f"it closed the connection or said nothing within {timeout:g} s"
        )
        raise RayExecutorError(
            f"{target} answers but is not a Ray cluster: a Ray head (GCS, or the ray:// client server) speaks gRPC "
            f"and answers the HTTP/2 preface with a SETTINGS frame, and {got}; {wait}"
        )
    if target.startswith("ray://"):
        return
    why = _gcs_answers(f"{where[0]}:{where[1]}" if ":" not in where[0] else f"[{where[0]}]:{where[1]}", deadline)
    if why:
        raise RayExecutorError(
            f"{target} answers gRPC but is not a Ray cluster's GCS: Ray's GCS client asked it for the cluster id "
            f"(GetClusterId, the first call ray.init makes) and {why}; {wait}"
        )


def _gcs_answers(address: str, deadline: float) -> str:
    """Empty when a Ray GCS at ``address`` gives its cluster id by ``deadline``, else what happened instead.

    Uses Ray's native GCS client (``ray._raylet.InnerGcsClient.standalone``, as ``ray.init`` connects): a
    gRPC ``GetClusterId`` call with the time left. It runs in a daemon thread joined until ``deadline``,
    so the probe keeps its limit even if the native client waits longer (it retries the channel); the
    native client's own warnings, printed to the process's stderr, are discarded meanwhile. Without Ray's
    native module (another Ray build), it says nothing and the check is left to ``ray.init``.
    """
    client = _native_gcs_client()
    if client is None:  # pragma: no cover - a Ray without the native client
        return ""
    left = deadline - time.monotonic()
    if left <= 0:
        return "the time ran out before it could ask"
    outcome: list[str] = []

    def ask() -> None:
        try:  # 0.9 of the time left: the client gives up (and logs so) before the join does
            client.standalone(address, None, max(int(left * 900), 1))
            outcome.append("")
        except Exception as exc:  # the native client raises RpcError and its kin: what it says is the answer
            outcome.append(f"got {type(exc).__name__}: {str(exc).strip() or 'no message'}")

    asker = threading.Thread(target=ask, name="interlingua-ray-gcs-probe", daemon=True)
    with _stderr_discarded():
        asker.start()
        asker.join(max(deadline - time.monotonic(), 0.0))
    if not outcome:
        return f"no reply came within {left:.3g} s"
    return outcome[0]


def _native_gcs_client() -> Any:
    """Ray's native GCS client class, or None (imported before the probe's clock starts: it takes seconds)."""
    try:
        from ray._raylet import InnerGcsClient  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - a Ray without the native client
        return None
    return InnerGcsClient


@contextmanager
def _stderr_discarded() -> Iterator[None]:
    """Point file descriptor 2 at the null device for the block (native libraries write there, not to
    ``sys.stderr``); anything that fails to redirect is left as it was."""
    try:
        saved = os.dup(2)
    except OSError:
        saved = -1
    if saved >= 0:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
        except OSError:
            os.close(saved)
            saved = -1
    try:
        yield
    finally:
        if saved >= 0:
            os.dup2(saved, 2)
            os.close(saved)


#: An HTTP/2 client's connection preface and an empty SETTINGS frame (RFC 9113, section 3.4).
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _http2_reply(conn: socket.socket, deadline: float) -> bytes:
    """What the server sends after our HTTP/2 preface, at least the 9 bytes of a frame header unless it closes
    the connection or says nothing by ``deadline`` (a gRPC server, as Ray's are, answers with its SETTINGS)."""
    conn.sendall(_HTTP2_PREFACE)
    got = b""
    while len(got) < 9:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            chunk = conn.recv(64)
        except TimeoutError:
            break
        if not chunk:
            break
        got += chunk
    return got


@dataclass
class RayExecutor:
    """Runs a plan's tasks as Ray tasks (see the module docstring for the design).

    ``address``: a Ray cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``); None connects to the
    cluster ``$RAY_ADDRESS`` names or starts a local one. When Ray is already initialized in this process,
    that instance is used and left running; one this executor started is shut down after the run.
    ``max_calls``: model groups a worker process runs before it exits (1: one model per process, all of its
    memory given back; 0: reuse processes, saving the ~seconds of a fresh process and imports per model).
    ``gpus_per_model`` may be a fraction (four 125 M models share one GPU at 0.25). ``side_block``: see
    :func:`group_tasks`. ``runners``: extra or replacement runners by task kind, shipped to the workers.
    After a run, ``submitted`` lists the task keys it sent to Ray, ``groups`` the Ray tasks' names and
    ``timings`` the driver's seconds (probe: the store and what it holds; submit; wait; collect).
    ``connect_timeout``: seconds an unreachable cluster address may take to answer before the run fails
    (default ``$INTERLINGUA_RAY_CONNECT_TIMEOUT`` or 30).
    """

    address: str | None = None
    max_retries: int = 3
    retry_exceptions: tuple[type[BaseException], ...] = (OSError, StoreError)
    gpus_per_model: float = 1.0
    cpus_per_model: float = 1.0
    cpus_per_task: float = 1.0
    max_calls: int = 1
    side_block: int | None = None
    check_store: bool = True
    runners: Mapping[str, Callable[..., Any]] | None = None
    init_kwargs: dict[str, Any] = field(default_factory=dict)
    connect_timeout: float | None = None
    submitted: list[str] = field(default_factory=list, init=False)
    groups: list[str] = field(default_factory=list, init=False)
    timings: dict[str, float] = field(default_factory=dict, init=False)

    # -- entry point ---------------------------------------------------------------------------------------
    def execute(self, plan: Plan, runtime: Runtime) -> dict[str, Any]:
        ray = _import_ray()
        started = False
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "logging_level": logging.WARNING, **self.init_kwargs}
            probe_address(self.address, connect_timeout(self.connect_timeout))
            try:
                ray.init(address=self.address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RayExecutorError(
                    f"could not connect to the Ray cluster at {self.address or '$RAY_ADDRESS / a new local one'} "
                    f"({exc}); start it with `ray start --head` (see docs) or check --address"
                ) from None
            started = True
        try:
            return self._execute(ray, plan, runtime)
        finally:
            if started:
                ray.shutdown()

    def _execute(self, ray: Any, plan: Plan, runtime: Runtime) -> dict[str, Any]:
        from tqdm.auto import tqdm

        from interlingua.pipeline.execute import TaskInputs

        t0 = time.perf_counter()
        self.submitted, self.groups, self.timings = [], [], {"probe": 0.0, "submit": 0.0, "wait": 0.0, "collect": 0.0}
        root = str(Path(runtime.store.root).resolve())
        if self.check_store:
            self._check_shared_store(ray, Path(root))
        self.timings["probe"] += time.perf_counter() - t0
        shared = [ray.put(plan), ray.put(dict(self.runners)) if self.runners else None]
        gpus = float(ray.cluster_resources().get("GPU", 0) or 0)
        model_fn = ray.remote(max_calls=self.max_calls)(_remote_entry)
        task_fn = ray.remote(_remote_entry)
        done: dict[str, Any] = {}
        bar = tqdm(total=len(plan.tasks), desc="tasks (ray)", unit="task", disable=not runtime.progress)
        try:
            for tasks, barrier in stages(plan):
                t = time.perf_counter()
                stored, todo = self._split(runtime, tasks)
                bar.update(len(stored))
                groups = group_tasks(plan, todo, self.side_block)
                self.timings["probe"] += time.perf_counter() - t
                t = time.perf_counter()
                refs = self._submit(ray, plan, groups, shared, root, model_fn, task_fn, gpus)
                self.timings["submit"] += time.perf_counter() - t
                t = time.perf_counter()
                reports = self._wait(ray, refs, bar, root)
                self.timings["wait"] += time.perf_counter() - t
                t = time.perf_counter()
                self._collect(plan, runtime, tasks, stored, groups, reports, done)
                self.timings["collect"] += time.perf_counter() - t
                if barrier is not None:
                    done[barrier.key] = runtime.run(barrier, TaskInputs(barrier, done))
                    bar.update(1)
        finally:
            bar.close()
        return done

    # -- the store ------------------------------------------------------------------------------------------
    def _check_shared_store(self, ray: Any, root: Path) -> None:
        """Every live node must see the driver's store at the same path, and write to it."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        token = uuid.uuid4().hex
        probe = root / f".ray-probe-{token[:12]}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            probe.write_text(token, encoding="utf-8")
        except OSError as exc:
            raise StoreError(
                f"cannot write the store {root} ({exc.strerror or exc}); give a writable cache_dir"
            ) from None
        try:
            fn = ray.remote(num_cpus=0, max_retries=1)(_probe_store)
            nodes = [n for n in ray.nodes() if n.get("Alive")]
            refs = [
                fn.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
                    str(probe), token
                )
                for n in nodes
            ]
            results = ray.get(refs, timeout=300)
        except ray.exceptions.GetTimeoutError:
            raise RayExecutorError(
                "a Ray node did not run the store check within 300 s: are its workers able to start "
                "(interlingua installed on it, resources free)?"
            ) from None
        finally:
            probe.unlink(missing_ok=True)
        bad = [
            (n.get("NodeManagerAddress", "?"), r) for n, r in zip(nodes, results) if not (r["seen"] and r["writable"])
        ]
        if bad:
            lines = "; ".join(
                f"{ip} ({r['host']}): {'cannot write it' if r['seen'] else 'does not see it'}" for ip, r in bad
            )
            raise StoreError(
                f"the store {root} is not shared with every Ray node: {lines}. Put cache_dir on a filesystem "
                "every node mounts at the same path (NFS, Lustre, a mounted bucket), writable by the Ray workers"
            )

    def _split(self, runtime: Runtime, tasks: list[Task]) -> tuple[dict[str, Any], list[Task]]:
        """``({key: header metadata or None}, tasks to run)``: what the store holds, and the rest."""
        from interlingua.pipeline.execute import is_done, output_paths
        from interlingua.pipeline.plan import ExtractTask

        stored: dict[str, Any] = {}
        todo: list[Task] = []
        for task in tasks:
            if not is_done(runtime, task):
                todo.append(task)
                continue
            if isinstance(task, ExtractTask):  # headers only: a cheap check that the entries are whole and ours
                metas = [_stored_meta(p) for p in output_paths(runtime, task)]
                keys = [key for _, key in task.entries]
                if any(m is None or m.get("key") != k for m, k in zip(metas, keys)):
                    todo.append(task)
                    continue
                stored[task.key] = metas
            else:
                stored[task.key] = None
        return stored, todo

    # -- submission and waiting -------------------------------------------------------------------------------
    def _submit(
        self,
        ray: Any,
        plan: Plan,
        groups: list[TaskGroup],
        shared: list[Any],
        root: str,
        model_fn: Any,
        task_fn: Any,
        gpus: float,
    ) -> list[tuple[Any, TaskGroup]]:
        cwd = os.getcwd()
        by_key: dict[str, Any] = {}
        out = []
        retry: Any = list(self.retry_exceptions) if self.retry_exceptions else False
        shaped: dict[tuple[Any, ...], Any] = {}  # one options() per shape: building them costs ~1 ms each
        for group in groups:
            deps = list(dict.fromkeys(by_key[d] for d in group.depends if d in by_key))
            if group.loads_model:
                cuda = any(_device(plan, m).startswith(("cuda", "auto")) for m in group.models)
                resources = (
                    {"num_gpus": self.gpus_per_model, "num_cpus": self.cpus_per_model}
                    if cuda and gpus > 0
                    else {"num_cpus": self.cpus_per_model}
                )
                fn, name = model_fn, group.name[:100]  # named after its model in Ray's logs and dashboard
            else:
                resources, fn, name = {"num_cpus": self.cpus_per_task}, task_fn, group.kinds[0]
            shape = (name, *sorted(resources.items()))
            if shape not in shaped:
                shaped[shape] = fn.options(name=name, max_retries=self.max_retries, retry_exceptions=retry, **resources)
            ref = shaped[shape].remote(shared, root, group.keys, cwd, *deps)
            for key in group.keys:
                by_key[key] = ref
            out.append((ref, group))
            self.submitted.extend(group.keys)
            self.groups.append(group.name)
        return out

    def _wait(self, ray: Any, refs: list[tuple[Any, TaskGroup]], bar: Any, root: str) -> dict[str, dict[str, Any]]:
        """Reports by group name as the Ray tasks finish; the first failure is raised (the others are not
        cancelled: see the module docstring, "Faults")."""
        pending = {ref: group for ref, group in refs}
        reports: dict[str, dict[str, Any]] = {}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.2)
            for ref in ready:
                group = pending.pop(ref)
                reports[group.name] = self._get(ray, ref, group, root)
                bar.update(len(group.keys))
        return reports

    def _get(self, ray: Any, ref: Any, group: TaskGroup, root: str) -> dict[str, Any]:
        from ray.exceptions import RayError, RayTaskError

        try:
            return ray.get(ref)
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, InterlinguaError):
                raise cause from None  # a bad input or a failed check: the same message as a local run
            raise
        except RayError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise RayExecutorError(
                f"Ray task {group.name} failed after up to {self.max_retries} retries ({type(exc).__name__}: "
                f"{first}); every finished output is in the store {root}, and rerunning the same config "
                "computes only what is missing"
            ) from exc

    # -- collecting outputs -----------------------------------------------------------------------------------
    def _collect(
        self,
        plan: Plan,
        runtime: Runtime,
        tasks: list[Task],
        stored: dict[str, Any],
        groups: list[TaskGroup],
        reports: dict[str, dict[str, Any]],
        done: dict[str, Any],
    ) -> None:
        """Outputs in plan order: from the reports of Ray tasks, and from the store for tasks not submitted."""
        from interlingua.core.store import Store
        from interlingua.pipeline.execute import ExtractOutput, TaskInputs, stored_sides
        from interlingua.pipeline.execute import Runtime as _Runtime
        from interlingua.pipeline.plan import ExtractTask

        outputs: dict[str, Any] = {}
        for group in groups:  # group order: the order a local run would load models in
            report = reports[group.name]
            outputs.update(report["outputs"])
            _add_counts(runtime.store, report["counts"])
            for kind, n in report["computed"].items():
                runtime.computed[kind] = runtime.computed.get(kind, 0) + int(n)
            for name in report["loaded"]:
                if name not in runtime.loaded_models:
                    runtime.loaded_models.append(name)
        reader = _Runtime(plan, Store(runtime.store.root), progress=False)  # the driver never holds every side

        max_length = int(plan.spec.max_length)
        for task in tasks:
            if task.key in outputs:
                out = outputs[task.key]
                if isinstance(task, ExtractTask) and isinstance(out, dict) and "truncated" in out:
                    out = ExtractOutput(stored_sides(reader, task), list(out["truncated"]), int(out["max_length"]))
                done[task.key] = out
            elif isinstance(task, ExtractTask):
                metas = stored[task.key]
                truncated = list(json.loads(metas[-1].get("truncated", "[]")))
                length = int(metas[-1].get("effective_max_length", max_length))
                _add_counts(runtime.store, {namespace("extract"): {"hits": len(metas)}})
                if truncated:  # as a local run warns for a cached side
                    from interlingua.data.representations.extract import truncation_advice
                    from interlingua.pipeline.execute import stored_position_limit

                    advice = truncation_advice(length, stored_position_limit(metas[-1], max_length))
                    warnings.warn(
                        f"{task.model} on {task.language}: {len(truncated)} sentences were truncated to {length} "
                        f"tokens (first: {truncated[:5]}); {advice}",
                        UserWarning,
                        stacklevel=2,
                    )
                done[task.key] = ExtractOutput(stored_sides(reader, task), truncated, length)
            else:  # a stored JSON entry: read (and verified) here, exactly as a local run reads it
                done[task.key] = runtime.run(task, TaskInputs(task, done))
