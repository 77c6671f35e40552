"""The registry: every capability of a run, listed once, and everything derived from the list.

A capability lives in its own package and declares itself there with one
:class:`~interlingua.contract.capability.Capability`; :data:`CAPABILITIES` names them
in the order they plan, run, table and report. From this one list come
``RunSpec``'s sections (:mod:`interlingua.pipeline.config`), the plan's tasks
(:mod:`interlingua.pipeline.plan`), each task's runner (:mod:`interlingua.pipeline.execute`),
the store's entry namespaces (given to :meth:`interlingua.core.store.Store.sweep`, so it
tidies every namespace a task writes; the store itself knows no task kind), where a finished
task's output is looked for, which kinds keep a model loaded (the local and the Ray executor group
alike), which run in the driver between stages, and which read two extracted sides.

The same registry style as the measures, the map estimators and the merge methods
(:class:`interlingua.core.named.Registry`): one declaration per item, listed once, looked
up by name (:func:`capability`, :func:`kind`). It stays an explicit list of
``module:attribute`` paths rather than a ``Registry`` filled at import so that reading it
imports no capability (``validate`` stays torch-free) and its order is the run's order.

Adding a capability: its package (section, planner, runners; see
``docs/ARCHITECTURE.md``) and one line in :data:`CAPABILITIES`.
``tests/test_kinds.py`` checks every registered kind against both executors
and the store.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING

from interlingua.contract.capability import EXTRACTION, Capability, CostPhase, Kind
from interlingua.pipeline.extract_kind import extract_cost, extract_example

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CAPABILITIES",
    "EXTRACT",
    "capabilities",
    "capability",
    "cost_phases",
    "driver_kinds",
    "entry_namespaces",
    "kind",
    "kinds",
    "model_kinds",
    "namespace",
    "pair_kinds",
    "store_namespaces",
]

#: The capabilities, ``module:attribute`` of each declaration, in the order they plan (those of stage
#: ``"before"`` first), run, table and report. Imported on first use, so the list costs nothing to read.
CAPABILITIES: list[str] = [
    "interlingua.audit.capability:AUDIT",
    "interlingua.comparison.capability:COMPARE",
    "interlingua.alignment.capability:ALIGNMENT",
    "interlingua.quality.capability:QUALITY",
    "interlingua.predictors.capability:PREDICTORS",
    "interlingua.mergeability.capability:MERGEABILITY",
    "interlingua.predictors.capability:CONTRASTS",
    "interlingua.maps.capability:MAPS",
    "interlingua.patching.capability:PATCHING",
    "interlingua.transport.capability:TRANSPORT",
]

#: The pipeline's own kind: one model reading one language, every pooling (and every capability's extra
#: entries of that side) in one forward pass. Planned between the two stages of capabilities.
EXTRACT = Kind(
    "extract",
    ("representations",),
    holds_model=True,
    group="model",
    phase=EXTRACTION,
    cost=extract_cost,
    example=extract_example,
)

#: Store namespaces written by something other than a task's runner (a model's facts at its first load).
_OTHER_ENTRY_NAMESPACES = ("facts",)


@cache
def _load(path: str) -> Capability:
    module, _, attribute = path.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if not isinstance(found, Capability):
        raise TypeError(f"{path} is a {type(found).__name__}, not a Capability")
    return found


def capabilities(paths: Iterable[str] | None = None) -> tuple[Capability, ...]:
    """The registered capabilities (or those at ``paths``), in registry order."""
    return tuple(_load(p) for p in (CAPABILITIES if paths is None else paths))


def capability(name: str) -> Capability:
    """The registered capability ``name``; KeyError for an unknown one."""
    for c in capabilities():
        if c.name == name:
            return c
    raise KeyError(name)


def kinds() -> dict[str, Kind]:
    """Every task kind, in the order a plan emits them: the capabilities planned before extraction,
    extraction, then the others (built once per registry list; runtimes ask it for every task)."""
    return _kinds(tuple(CAPABILITIES))


@cache
def _kinds(paths: tuple[str, ...]) -> dict[str, Kind]:
    caps = capabilities(paths)
    ordered = [
        *(k for c in caps if c.stage == "before" for k in c.kinds),
        EXTRACT,
        *(k for c in caps if c.stage == "after" for k in c.kinds),
    ]
    out: dict[str, Kind] = {}
    for k in ordered:
        if k.name in out:
            raise ValueError(f"task kind {k.name!r} is registered twice")
        if k.phase is None or k.cost is None:
            raise ValueError(
                f"task kind {k.name!r} has no cost: declare Kind(..., phase=<its CostPhase>, cost=<its cost hook>) "
                "so that `interlingua plan` prices its tasks (see docs/ARCHITECTURE.md, adding a capability)"
            )
        if k.example is None:
            raise ValueError(f"task kind {k.name!r} has no example: declare Kind(..., example=<a sample task>)")
        out[k.name] = k
    _phases(tuple(out.values()))  # one declaration per phase name
    return out


def _phases(found: tuple[Kind, ...]) -> tuple[CostPhase, ...]:
    by_name: dict[str, CostPhase] = {}
    for k in found:
        assert k.phase is not None
        seen = by_name.setdefault(k.phase.name, k.phase)
        if seen != k.phase:
            raise ValueError(
                f"cost phase {k.phase.name!r} is declared twice, differently (kind {k.name!r}); share one CostPhase"
            )
    return tuple(by_name.values())


def cost_phases() -> tuple[CostPhase, ...]:
    """The cost phases the registered kinds are priced into (one per name, in kind order)."""
    return _phases(tuple(kinds().values()))


def kind(name: str) -> Kind:
    """The registered kind ``name``; KeyError for an unknown one."""
    return kinds()[name]


def namespace(name: str) -> str:
    """The store namespace of kind ``name``'s output (the runners write there, ``output_paths`` looks there)."""
    ns = kinds()[name].namespace
    if ns is None:
        raise KeyError(f"task kind {name!r} stores nothing")
    return ns


def entry_namespaces() -> tuple[str, ...]:
    """Every namespace whose entries the store's atomic writer writes: each kind's, then the others'."""
    out: list[str] = []
    for k in kinds().values():
        out += [ns for ns in k.namespaces if ns not in out]
    return (*out, *(ns for ns in _OTHER_ENTRY_NAMESPACES if ns not in out))


def store_namespaces() -> tuple[str, ...]:
    """Every top-level folder the store owns under its root: the entry namespaces, then the store's own
    (``interlingua cache`` lists and clears only these)."""
    from interlingua.core.store import OWN_NAMESPACES

    entry = entry_namespaces()
    return (*entry, *(ns for ns in OWN_NAMESPACES if ns not in entry))


def model_kinds() -> tuple[str, ...]:
    """Kinds whose runners load a model the next model-holding task may reuse."""
    return tuple(k.name for k in kinds().values() if k.holds_model)


def driver_kinds() -> tuple[str, ...]:
    """Kinds that run in the driver between stages (``audit_gate``)."""
    return tuple(k.name for k in kinds().values() if k.driver)


def pair_kinds() -> tuple[str, ...]:
    """Kinds that read two extracted sides (``sides``)."""
    return tuple(k.name for k in kinds().values() if k.pair)
