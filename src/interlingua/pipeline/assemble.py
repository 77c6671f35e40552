"""Assemble: task outputs -> the results table, ``run.json``, ``controls.json`` and the report."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from interlingua import __version__
from interlingua.analysis.measures import get_measure
from interlingua.contract.pairs import pair_permutation
from interlingua.core.numerics import numeric_settings
from interlingua.core.outputs import OutputTarget, write_outputs
from interlingua.core.schema import RESULT_COLUMNS, result_table
from interlingua.pipeline import registry
from interlingua.pipeline.execute import ExtractOutput, Runtime
from interlingua.pipeline.plan import ExtractTask, Plan
from interlingua.report.notes import note_warnings

__all__ = ["OUTPUT_FILES", "Tables", "assemble", "build_tables", "calibration_info", "run_info"]

OUTPUT_FILES = (
    "results.csv",
    "results.parquet",
    "run.json",
    "controls.json",
    "report.md",
    "report.html",
    "manifest.json",
)
MAP_FILES = ("maps.csv", "maps.parquet", "folds.json")


def _versions() -> dict[str, str]:
    out = {"interlingua": __version__, "python": platform.python_version()}
    for pkg in (
        "torch",
        "transformers",
        "tokenizers",
        "numpy",
        "scipy",
        "pandas",
        "datasets",
        "safetensors",
        "peft",
        "gguf",
    ):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def controls(plan: Plan) -> dict[str, dict[str, Any]]:
    """Each pair's one shuffled permutation (the control) and the seed that drew it."""
    out: dict[str, dict[str, Any]] = {}
    for pair in plan.pairs:
        perm, seed = pair_permutation(pair, len(plan.corpus), plan.spec.seeds.control)
        out[pair.label] = {"seed": seed, "permutation": perm.tolist()}
    return out


def calibration_info(alpha: float, null_method: str) -> dict[str, Any]:
    """What the ``tau`` / ``calibrated`` columns mean in this run (``run.json["calibration"]``)."""
    return {
        "alpha": alpha,
        "tau": "the (1 - alpha) order statistic of the permutation null with the observed value included: "
        "position ceil((1 - alpha)(K + 1)) of the K + 1 sorted values",
        "calibrated": "(s - tau) / (s_max - tau) clipped to [0, 1] for measures bounded above by s_max, "
        "max(s - tau, 0) for unbounded ones",
        "grid": "tau_grid_max / _grid_mean / _best_a / _best_b: the same aggregate over grids permuted by one "
        "permutation of side B's rows at every layer",
        "moments": "Pearson type III (1 - alpha) quantile for cka_linear_biased"
        if null_method == "moments"
        else "not used",
    }


def run_info(
    plan: Plan, runtime: Runtime, done: dict[str, Any], seconds: float, pair_controls: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    spec = plan.spec
    corpus = plan.corpus
    skipped = [
        f"`{mid}` on cross-model pairs: it needs a shared neuron basis (same model)."
        for mid in spec.measures
        if get_measure(mid).metadata.requires_same_model and any(p.relation == "cross_model" for p in plan.pairs)
    ]
    truncated: dict[str, Any] = {}
    for task in plan.of_kind("extract"):
        assert isinstance(task, ExtractTask)
        out: ExtractOutput = done[task.key]
        if out.truncated:
            truncated[f"{task.model}:{task.language}"] = {"max_length": out.max_length, "ids": out.truncated}
    return {
        "interlingua_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "spec": spec.model_dump(mode="json"),
        "special_tokens": spec.special_tokens,
        "standardize": spec.standardize,
        "seeds": spec.seeds.model_dump(),
        "calibration": calibration_info(spec.inference.alpha, spec.inference.null_method),
        "command": sys.argv,
        "versions": _versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "numerics": numeric_settings(plan.threads),
        "corpus": {
            "name": corpus.name,
            "n": len(corpus),
            "languages": list(corpus.languages),
            "ids": list(corpus.ids),
            "fingerprints": {lang: corpus.fingerprint(lang) for lang in corpus.languages},
            "selection": spec.corpus.selection(),  # what the config selected (bible books, versions, n, ...)
        },
        "models": {name: runtime.handle(name).facts() for name in plan.models},
        "pairs": [
            {"pair": p.label, "kind": p.relation, "control_seed": pair_controls[p.label]["seed"]} for p in plan.pairs
        ],
        "plan": plan.summary(),
        "computed": dict(runtime.computed),
        "cache": {
            "root": str(runtime.store.root),
            "representations": {"hits": 0, "misses": 0, "rebuilt": 0},
            **runtime.store.stats(),
        },
        "models_loaded": list(runtime.loaded_models),
        "truncated": truncated,
        "skipped": skipped,
        "seconds": round(seconds, 2),
    }


@dataclass
class Tables:
    """Everything a run's outputs are made of, in memory.

    ``results`` (``results.csv``), ``maps`` (``maps.csv``; None when the run
    fits no maps), ``extra``: every other table by its file stem (``audit``,
    ``patching``, ``alignments``, ``transport``, ``quality``, ``predictors``,
    ``predictor_pairs``, ``typology``, ``sweeps``, ``trends``, ``contrasts`` and
    the mergeability tables: those the run's sections produce), ``info``
    (``run.json``) and ``controls`` (``controls.json``: each pair's permutation).
    """

    results: pd.DataFrame
    maps: pd.DataFrame | None
    extra: dict[str, pd.DataFrame]
    info: dict[str, Any]
    controls: dict[str, dict[str, Any]]


def build_tables(plan: Plan, runtime: Runtime, done: dict[str, Any], t0: float) -> Tables:
    """Every table and the run info from the task outputs (nothing is written).

    Each capability builds its own tables (``Capability.tables``), in registry order, each reading the tables
    built before it; a table it writes must be one it declares (``Capability.columns``) with exactly the
    declared columns, in order.
    """
    built: dict[str, pd.DataFrame] = {}  # what later capabilities' tables may read
    for cap in registry.capabilities():  # the tables each capability declares, in registry order
        if cap.tables is not None:
            made = cap.tables(plan, done, built)
            _check_declared(cap, made)
            built.update(made)
    table = built.pop("results", None)
    if table is None:  # no capability wrote the results (none is registered that does)
        table = result_table([], RESULT_COLUMNS)
    maps = built.pop("maps", None)
    extra = built
    pair_controls = controls(plan)
    info = run_info(plan, runtime, done, time.perf_counter() - t0, pair_controls)
    everything = {"results": table, **({"maps": maps} if maps is not None else {}), **extra}
    for cap in registry.capabilities():  # each capability's entries of run.json (the audit's verdicts, ...)
        if cap.run_info is not None:
            info.update(cap.run_info(everything))
    # each kind of note once per table, with the rows it applies to (read from the rows: cached runs say the same)
    info["warnings"] = note_warnings(everything)
    return Tables(table, maps, extra, info, pair_controls)


def _check_declared(cap: Any, made: dict[str, pd.DataFrame]) -> None:
    """A table the capability did not declare, or with columns it did not declare, is a programming error."""
    for stem, frame in made.items():
        declared = cap.columns.get(stem)
        if declared is None:
            raise ValueError(
                f"capability {cap.name!r} writes {stem}.csv but declares no columns for it (Capability.columns)"
            )
        names = [c.name for c in declared]
        extra = [c for c in frame.columns if c not in names]
        if extra:
            raise ValueError(f"capability {cap.name!r} writes {stem}.csv with undeclared columns {extra}")


def assemble(plan: Plan, runtime: Runtime, done: dict[str, Any], target: OutputTarget | None, t0: float) -> Tables:
    """Every table and the run info; written into ``target`` (atomically, with a manifest) unless it is None."""
    from interlingua.pipeline.report import write_report

    tables = build_tables(plan, runtime, done, t0)
    if target is None:  # in memory (run(..., output=None))
        return tables
    table, maps, extra, info, pair_controls = (tables.results, tables.maps, tables.extra, tables.info, tables.controls)

    def build(tmp: Path) -> None:
        table.to_csv(tmp / "results.csv", index=False)
        table.to_parquet(tmp / "results.parquet", index=False)
        everything = {"results": table, **({"maps": maps} if maps is not None else {}), **extra}
        for name, frame in everything.items():
            if name != "results":
                frame.to_csv(tmp / f"{name}.csv", index=False)
                frame.to_parquet(tmp / f"{name}.parquet", index=False)
        for cap in registry.capabilities():  # files besides the tables (folds.json, ...); entries for run.json
            if cap.write_files is not None:
                info.update(cap.write_files(plan, done, everything, tmp))
        (tmp / "controls.json").write_text(json.dumps(pair_controls), encoding="utf-8")
        (tmp / "run.json").write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
        # figures of the report being replaced: one drawn from the same inputs is copied, not drawn again
        previous = target.path / "figures" if any(n.startswith("figures/") for n in target.owned) else None
        write_report(tmp, table, info, maps=maps, sections=extra, previous=previous)

    write_outputs(target, build)
    return tables
