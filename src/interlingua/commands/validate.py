"""``interlingua validate CONFIG``: every pre-flight check, changing nothing, and the plan's tasks by kind."""

from __future__ import annotations

from typing import Any

from interlingua.core.store import Store
from interlingua.pipeline.config import RunSpec
from interlingua.pipeline.preflight import pending_builds, preflight

__all__ = ["validate_command"]


def validate_command(spec: RunSpec, source: str, *, show: Any = print) -> int:
    """``interlingua validate CONFIG``: every pre-flight check, changing nothing (no merge built, no model trained
    or loaded, nothing written to the store or the output); the plan's tasks by kind; what a run would build first.

    What is stored and the time estimate come from ``interlingua plan CONFIG`` only (they need the weights'
    hashes and built merges): one code path, so the two commands never disagree about the store."""
    from interlingua.core.hashing import use_hash_cache
    from interlingua.pipeline.cost import unhashed_fingerprints
    from interlingua.pipeline.plan import build_plan

    try:
        checked = preflight(spec, fingerprints=False, read_only=True)
        builds = pending_builds(checked.spec, checked.store)
    finally:
        use_hash_cache(Store(spec.cache_dir).folder("hashes"))  # later hashing in this process keeps hashes again
    assert checked.target is not None  # preflight with an output (the default) prepares the target
    show(
        f"{source}: valid ({len(spec.models)} models, {len(checked.corpus.languages)} languages, "
        f"{len(checked.corpus)} sentences; output {checked.target.path}; cache {checked.store.root})"
    )
    plan = build_plan(checked.spec, checked.corpus, unhashed_fingerprints(checked.spec))
    show("plan: " + ", ".join(f"{total} {kind}" for kind, total in plan.summary().items()) + " task(s)")
    if builds:
        show(f"not built yet ({len(builds)}; `interlingua plan` or `run` builds them first): " + "; ".join(builds))
    show(
        f"validate built, loaded and wrote nothing; what is stored and the time: `interlingua plan {source}` "
        "(hashes the weights" + (", builds the merges above)" if builds else ")")
    )
    return 0
