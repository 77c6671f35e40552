"""Assemble: task outputs -> the results table, ``run.json``, ``controls.json`` and the report."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from interlingua import __version__
from interlingua.compare import pair_permutation
from interlingua.execute import ExtractOutput, Runtime
from interlingua.measures import get_measure
from interlingua.outputs import OutputTarget, write_outputs
from interlingua.plan import ExtractTask, Plan
from interlingua.schema import result_table

__all__ = ["OUTPUT_FILES", "assemble", "run_info"]

OUTPUT_FILES = ("results.csv", "results.parquet", "run.json", "controls.json", "report.md", "manifest.json")


def _versions() -> dict[str, str]:
    out = {"interlingua": __version__, "python": platform.python_version()}
    for pkg in ("torch", "transformers", "tokenizers", "numpy", "scipy", "pandas", "datasets", "safetensors", "peft", "gguf"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def results_table(plan: Plan, done: dict[str, Any]) -> pd.DataFrame:
    """Every comparison row, in plan order, with the declared columns."""
    rows: list[dict[str, Any]] = []
    for task in plan.of_kind("compare"):
        rows += done[task.key]
    return result_table(rows)


def controls(plan: Plan) -> dict[str, dict[str, Any]]:
    """Each pair's one shuffled permutation (the control) and the seed that drew it."""
    out: dict[str, dict[str, Any]] = {}
    for pair in plan.pairs:
        perm, seed = pair_permutation(pair, len(plan.corpus), plan.spec.seeds.control)
        out[pair.label] = {"seed": seed, "permutation": perm.tolist()}
    return out


def run_info(plan: Plan, runtime: Runtime, done: dict[str, Any], seconds: float) -> dict[str, Any]:
    spec = plan.spec
    corpus = plan.corpus
    skipped = [
        f"`{mid}` on cross-model pairs: it needs a shared neuron basis (same model)."
        for mid in spec.measures
        if get_measure(mid).metadata.requires_same_model and any(p.kind == "cross_model" for p in plan.pairs)
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
        "command": sys.argv,
        "versions": _versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "corpus": {
            "name": corpus.name,
            "n": len(corpus),
            "languages": list(corpus.languages),
            "ids": list(corpus.ids),
            "fingerprints": {lang: corpus.fingerprint(lang) for lang in corpus.languages},
        },
        "models": {name: runtime.handle(name).facts() for name in plan.models},
        "pairs": [
            {"pair": p.label, "kind": p.kind, "control_seed": pair_permutation(p, len(corpus), spec.seeds.control)[1]}
            for p in plan.pairs
        ],
        "plan": plan.summary(),
        "computed": dict(runtime.computed),
        "cache": {"root": str(runtime.store.root), "representations": {"hits": 0, "misses": 0, "rebuilt": 0},
                  **runtime.store.stats()},
        "models_loaded": list(runtime.loaded_models),
        "truncated": truncated,
        "skipped": skipped,
        "seconds": round(seconds, 2),
    }


def assemble(plan: Plan, runtime: Runtime, done: dict[str, Any], target: OutputTarget, t0: float) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Write every output into ``target`` (atomically, with a manifest); return the table and run info."""
    from interlingua.report.markdown import write_report

    table = results_table(plan, done)
    info = run_info(plan, runtime, done, time.perf_counter() - t0)

    def build(tmp: Path) -> None:
        table.to_csv(tmp / "results.csv", index=False)
        table.to_parquet(tmp / "results.parquet", index=False)
        (tmp / "controls.json").write_text(json.dumps(controls(plan)), encoding="utf-8")
        (tmp / "run.json").write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
        write_report(tmp, table, info)

    write_outputs(target, build)
    return table, info
