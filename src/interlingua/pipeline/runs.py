"""``run(spec)``: pre-flight -> plan -> execute -> assemble.

The same call backs ``interlingua run CONFIG.yaml`` and notebooks.

1. :func:`interlingua.pipeline.preflight.preflight` checks everything that needs no
   weights (output folder, cache, corpus, every model) before any work;
2. :func:`interlingua.pipeline.plan.build_plan` lists content-keyed tasks;
3. an executor (:class:`interlingua.pipeline.execute.LocalExecutor` by default) runs
   them, reading finished ones from the store, so a rerun or a resumed run
   recomputes nothing and a fully cached model is never loaded;
4. :func:`interlingua.pipeline.assemble.assemble` writes the tables and the report into
   a temporary folder and moves them into place, so a failed run changes
   nothing in the output folder.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import CoreSpec, RunSpec, load_spec, parse_spec

__all__ = ["RunResult", "run"]


@dataclass
class RunResult:
    """What a run computed (and wrote, unless it ran in memory), for notebooks.

    - ``output``: the output folder, or None for ``run(..., output=None)``;
    - ``table``: the results table (``results.csv``);
    - ``maps``: the held-out maps table (``maps.csv``); empty, with its
      columns, when the run has no ``maps:`` section;
    - ``tables``: every other table the run produced, by the stem of its file
      (``audit``, ``patching``, ``alignments``, ``transport``, ``quality``,
      ``predictors``, ``predictor_pairs``, ``typology``, ``sweeps``, ``trends``,
      ``contrasts``, the mergeability tables): only those its sections made;
    - ``info``: what ``run.json`` holds; ``controls``: each pair's shuffled
      permutation and its seed (``controls.json``).
    """

    output: Path | None
    table: pd.DataFrame
    info: dict[str, Any]
    cache_hits: int = 0
    cache_misses: int = 0
    models_loaded: list[str] = field(default_factory=list)
    #: wall seconds of each phase (preflight, plan, execute, assemble) and ``total`` (their sum and the gaps)
    phases: dict[str, float] = field(default_factory=dict)
    estimate: Any = None  # interlingua.pipeline.cost.CostEstimate made before the tasks ran
    maps: pd.DataFrame = field(default_factory=pd.DataFrame)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)


def coerce_spec(spec: RunSpec | Mapping[str, Any] | str | Path) -> RunSpec:
    """A :class:`RunSpec` from a spec, a mapping or a YAML path; anything else is a :class:`ConfigError`."""
    if isinstance(spec, CoreSpec):  # a RunSpec (of whichever registered capabilities)
        return spec
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    if isinstance(spec, Mapping):
        return parse_spec(dict(spec))
    raise ConfigError(
        f"run() takes a RunSpec, a mapping or the path of a YAML config, not {type(spec).__name__}; "
        "see configs/example.yaml"
    )


def _declared_output(spec: object) -> object:
    """The ``output`` a spec or mapping declares (None when it says None; a sentinel when it does not say)."""
    if isinstance(spec, Mapping):
        return spec.get("output", FROM_SPEC) if "output" in spec else FROM_SPEC
    if isinstance(spec, CoreSpec):
        return spec.output
    return FROM_SPEC


class _FromSpec:
    """The default of ``run(output=...)``: the spec's own ``output`` folder."""

    def __repr__(self) -> str:
        return "<the spec's output>"


FROM_SPEC: Any = _FromSpec()


def run(
    spec: RunSpec | Mapping[str, Any] | str | Path,
    *,
    output: str | Path | None = FROM_SPEC,
    progress: bool | None = None,
    executor: Any = None,
) -> RunResult:
    """Execute a run spec end to end; returns its tables and what was written.

    ``output``: by default the spec's ``output`` folder; a path writes there
    instead; ``None`` (or a spec whose ``output`` is None) runs in memory: no output folder is checked or written
    (no report, no figures; a mapping may then leave ``output`` out), while
    the cache (``cache_dir``) is read and filled as in any run. The tables are
    on the returned :class:`RunResult` either way.
    """
    from interlingua.pipeline.assemble import assemble
    from interlingua.pipeline.cost import announce
    from interlingua.pipeline.execute import LocalExecutor, Runtime
    from interlingua.pipeline.plan import build_plan
    from interlingua.pipeline.preflight import preflight

    if isinstance(output, _FromSpec) and _declared_output(spec) is None:
        output = None  # a spec whose output is None runs in memory, as run(spec, output=None) does
    in_memory = output is None
    given = not isinstance(output, _FromSpec)
    if given and not in_memory and not isinstance(output, (str, Path)):
        raise ConfigError(f"output must be a folder path or None (in memory), not {type(output).__name__}")
    if given and isinstance(spec, Mapping) and spec.get("output") is None:
        spec = {**spec, "output": ""}  # the argument decides; the key only completes the schema
    spec = coerce_spec(spec)
    if given:
        spec = spec.model_copy(update={"output": "" if in_memory else str(output)})
    t0 = time.perf_counter()
    checked = preflight(spec, output=not in_memory)
    t1 = time.perf_counter()
    spec = checked.spec  # zoo models resolved to their folders
    plan = build_plan(spec, checked.corpus, checked.fingerprints)
    runtime = Runtime(plan, checked.store, progress=spec.progress if progress is None else progress)
    estimate = announce(plan, checked)  # a run estimated over the threshold says so before starting
    t2 = time.perf_counter()
    done = (executor or LocalExecutor(estimate=estimate)).execute(plan, runtime)  # its memory bounds the workers
    t3 = time.perf_counter()
    tables = assemble(plan, runtime, done, checked.target, t0)
    t4 = time.perf_counter()
    info = tables.info
    phases = {"preflight": t1 - t0, "plan": t2 - t1, "execute": t3 - t2, "assemble": t4 - t3, "total": t4 - t0}
    phases.update({f"execute.{kind}": s for kind, s in runtime.seconds.items()})  # by task kind (local executor)
    if tables.maps is not None:
        maps = tables.maps
    else:
        from interlingua.core.schema import result_table
        from interlingua.pipeline import registry

        maps = result_table([], registry.capability("maps").columns["maps"])  # an empty table, every column
    return RunResult(
        output=checked.target.path if checked.target is not None else None,
        table=tables.results,
        info=info,
        cache_hits=info["cache"]["representations"]["hits"],
        cache_misses=info["cache"]["representations"]["misses"],
        models_loaded=list(runtime.loaded_models),
        phases=phases,
        estimate=estimate,
        maps=maps,
        tables=dict(tables.extra),
        controls=tables.controls,
    )
