"""What ``--json`` prints: the results of ``plan``, ``validate``, ``run`` and ``cache list`` as one JSON object.

Each is the same information as the command's text, with numbers as numbers, for scripts and notebooks; the
text stays the default for people. ``--quiet`` (``run``, ``demo``, ``plan``) prints nothing but errors.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

__all__ = ["dumps", "estimate_dict", "plan_dict", "run_dict", "validate_dict"]


def dumps(payload: dict[str, Any]) -> str:
    """The object as indented JSON (paths as text, NaN as null)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and v != v:
            return None
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(payload), indent=2, default=str, allow_nan=False)


def estimate_dict(est: Any) -> dict[str, Any]:
    """A :class:`~interlingua.pipeline.cost.CostEstimate` as ``seconds``, ``phases`` and ``tasks`` by kind."""
    return {
        "seconds": float(est.seconds),
        "phases": [dataclasses.asdict(p) for p in est.phases],
        "tasks": {kind: {"total": total, "stored": stored} for kind, (total, stored) in est.kinds.items()},
        "stored_known": bool(est.stored_known),
    }


def _checked_dict(source: str, spec: Any, checked: Any) -> dict[str, Any]:
    return {
        "config": source,
        "models": len(spec.models),
        "languages": list(checked.corpus.languages),
        "sentences": len(checked.corpus),
        "output": str(checked.target.path) if checked.target is not None else None,
        "cache": str(checked.store.root),
    }


def plan_dict(spec: Any, source: str) -> dict[str, Any]:
    """``plan --json``: pre-flight (weights hashed, nothing run) and the estimate, as ``plan`` prints them."""
    from interlingua.pipeline.cost import estimate_checked
    from interlingua.pipeline.preflight import preflight

    checked = preflight(spec)
    _, est = estimate_checked(checked)
    return {**_checked_dict(source, spec, checked), "estimate": estimate_dict(est)}


def validate_dict(spec: Any, source: str) -> dict[str, Any]:
    """``validate --json``: what ``validate`` prints, changing nothing (no build, no store write): the checks
    passed, the plan's tasks by kind and what a run would build first; the time and what is stored: ``plan``."""
    from interlingua.core.hashing import use_hash_cache
    from interlingua.core.store import Store
    from interlingua.pipeline.cost import unhashed_fingerprints
    from interlingua.pipeline.plan import build_plan
    from interlingua.pipeline.preflight import pending_builds, preflight

    try:
        checked = preflight(spec, fingerprints=False, read_only=True)
        builds = pending_builds(checked.spec, checked.store)
    finally:
        use_hash_cache(Store(spec.cache_dir).folder("hashes"))  # later hashing in this process keeps hashes again
    plan = build_plan(checked.spec, checked.corpus, unhashed_fingerprints(checked.spec))
    return {
        "valid": True,
        **_checked_dict(source, spec, checked),
        "tasks": dict(plan.summary()),
        "not_built": list(builds),
    }


def run_dict(result: Any, wall: float | None = None) -> dict[str, Any]:
    """``run --json``: what the closing summary line says (files, wall time by phase, cache hits)."""
    from interlingua.pipeline.summary import written_files

    phases = dict(getattr(result, "phases", {}) or {})
    out = Path(result.output)
    cache = result.info.get("cache", {})
    return {
        "output": str(out),
        "files": written_files(out),
        "wall_seconds": wall if wall is not None else phases.get("total"),
        "phases": {k: float(v) for k, v in phases.items()},
        "cache": {"root": cache.get("root"), **{k: v for k, v in cache.items() if isinstance(v, dict)}},
        "warnings": len(result.info.get("warnings", []) or []),
    }
