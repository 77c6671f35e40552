"""``run(spec)``: pre-flight -> plan -> execute -> assemble.

The same call backs ``interlingua run CONFIG.yaml`` and notebooks.

1. :func:`interlingua.preflight.preflight` checks everything that needs no
   weights (output folder, cache, corpus, every model) before any work;
2. :func:`interlingua.plan.build_plan` lists content-keyed tasks;
3. an executor (:class:`interlingua.execute.LocalExecutor` by default) runs
   them, reading finished ones from the store, so a rerun or a resumed run
   recomputes nothing and a fully cached model is never loaded;
4. :func:`interlingua.assemble.assemble` writes the tables and the report into
   a temporary folder and moves them into place, so a failed run changes
   nothing in the output folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from interlingua.config import RunSpec, load_spec, parse_spec
from interlingua.errors import ConfigError

__all__ = ["RunResult", "run"]


@dataclass
class RunResult:
    """What a run wrote, and the table itself for notebooks."""

    output: Path
    table: pd.DataFrame
    info: dict[str, Any]
    cache_hits: int = 0
    cache_misses: int = 0
    models_loaded: list[str] = field(default_factory=list)
    #: wall seconds of each phase (preflight, plan, execute, assemble) and ``total`` (their sum and the gaps)
    phases: dict[str, float] = field(default_factory=dict)
    estimate: Any = None  # interlingua.cost.CostEstimate made before the tasks ran


def coerce_spec(spec: RunSpec | Mapping[str, Any] | str | Path) -> RunSpec:
    """A :class:`RunSpec` from a spec, a mapping or a YAML path; anything else is a :class:`ConfigError`."""
    if isinstance(spec, RunSpec):
        return spec
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec))
    raise ConfigError(
        f"run() takes a RunSpec, a mapping or the path of a YAML config, not {type(spec).__name__}; "
        "see configs/example.yaml"
    )


def run(
    spec: RunSpec | Mapping[str, Any] | str | Path,
    *,
    progress: bool | None = None,
    executor: Any = None,
) -> RunResult:
    """Execute a run spec end to end; returns the table and what was written."""
    from interlingua.assemble import assemble
    from interlingua.execute import LocalExecutor, Runtime
    from interlingua.plan import build_plan
    from interlingua.preflight import preflight

    from interlingua.cost import announce

    spec = coerce_spec(spec)
    t0 = time.perf_counter()
    checked = preflight(spec)
    t1 = time.perf_counter()
    spec = checked.spec  # zoo models resolved to their folders
    plan = build_plan(spec, checked.corpus, checked.fingerprints)
    runtime = Runtime(plan, checked.store, progress=spec.progress if progress is None else progress)
    estimate = announce(plan, checked)  # a run estimated over the threshold says so before starting
    t2 = time.perf_counter()
    done = (executor or LocalExecutor()).execute(plan, runtime)
    t3 = time.perf_counter()
    table, info = assemble(plan, runtime, done, checked.target, t0)
    t4 = time.perf_counter()
    phases = {"preflight": t1 - t0, "plan": t2 - t1, "execute": t3 - t2, "assemble": t4 - t3, "total": t4 - t0}
    phases.update({f"execute.{kind}": s for kind, s in runtime.seconds.items()})  # by task kind (local executor)
    return RunResult(
        output=checked.target.path,
        table=table,
        info=info,
        cache_hits=info["cache"]["representations"]["hits"],
        cache_misses=info["cache"]["representations"]["misses"],
        models_loaded=list(runtime.loaded_models),
        phases=phases,
        estimate=estimate,
    )
