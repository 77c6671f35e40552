"""The task kinds of a run, registered once: where each stores its output and how executors treat it.

Every kind the plan can emit has one :class:`Kind` line in :data:`KINDS`, and
everything that used to keep its own per-kind list reads it instead: the
store's entry namespaces (so :meth:`interlingua.store.Store.sweep` tidies the
temporary files of every namespace a task writes), where
:func:`interlingua.execute.output_paths` looks for a finished task, which
kinds keep a model loaded across tasks (the local executor and the Ray
executor's grouping and release), which run in the driver between stages,
and which read two extracted sides (Ray's side blocks). This module imports
nothing of the package, so the store can read it.

Adding a kind: its task dataclass in :mod:`interlingua.plan` (``kind``
ClassVar, in ``Task``), its runner in ``execute._RUNNERS``, and one line here;
``tests/test_kinds.py`` checks that the three agree and that every kind's
output is stored, tidied after a kill and grouped alike by both executors.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "Kind", "driver_kinds", "entry_namespaces", "kind", "model_kinds", "namespace", "pair_kinds"]


@dataclass(frozen=True)
class Kind:
    """One task kind.

    ``namespaces``: the store folders its runner writes entries into (the first holds the task's own
    output; empty: it stores nothing and always runs). ``holds_model``: its runner loads a model that
    the next task of a model-holding kind may reuse (the local executor keeps it; Ray groups these tasks
    by ``group`` so each model loads once on one worker); every other kind releases all models before it
    runs (it loads its own, or none). ``group``: how Ray groups a model-holding kind's tasks, ``"model"``
    (one group per model and kind) or ``"base"`` (one per base model: audits and NLL over adapters).
    ``driver``: it runs in the driver between stages, everything after it waits. ``pair``: it reads two
    extracted sides (``sides``), so Ray's ``side_block`` may batch it. ``progress``: counted by the local
    progress bar. ``tables``: the output tables its rows feed, in the report's order.
    """

    name: str
    namespaces: tuple[str, ...] = ()
    holds_model: bool = False
    group: str = ""
    driver: bool = False
    pair: bool = False
    progress: bool = False
    tables: tuple[str, ...] = ()

    @property
    def namespace(self) -> str | None:
        """The namespace of the task's own output (None: the kind stores nothing)."""
        return self.namespaces[0] if self.namespaces else None


#: Every task kind, in the order a plan emits them.
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("audit", ("audit",), holds_model=True, group="base", tables=("audit",)),
        Kind("audit_gate", driver=True),
        Kind("quality", ("quality",), holds_model=True, group="base", tables=("quality", "predictors")),
        Kind("weights", ("weights",), tables=("coverage", "mergeability")),
        Kind("barrier", ("barriers",), tables=("barriers", "barrier_curves", "checkpoint_correlations")),
        Kind("align", ("alignments",), holds_model=True, group="model", tables=("alignments",)),
        Kind("extract", ("representations",), holds_model=True, group="model"),
        Kind(
            "compare", ("comparisons",), pair=True, progress=True, tables=("results", "sweeps", "trends", "contrasts")
        ),
        Kind("transport", ("transport",), tables=("transport",)),  # also transport/plans/: the OT plans by their inputs
        Kind("patch", ("patching",), pair=True, tables=("patching",)),
        Kind("map", ("maps",), pair=True, progress=True, tables=("maps",)),  # also maps/fitted/ when save_maps
    )
}

#: Store namespaces written by something other than a task's runner (a model's facts at its first load).
_OTHER_ENTRY_NAMESPACES = ("facts",)


def kind(name: str) -> Kind:
    """The registered kind ``name``; KeyError for an unknown one."""
    return KINDS[name]


def namespace(name: str) -> str:
    """The store namespace of kind ``name``'s output (the runners write there, ``output_paths`` looks there)."""
    ns = KINDS[name].namespace
    if ns is None:
        raise KeyError(f"task kind {name!r} stores nothing")
    return ns


def entry_namespaces() -> tuple[str, ...]:
    """Every namespace whose entries the store's atomic writer writes: each kind's, then the others'."""
    out: list[str] = []
    for k in KINDS.values():
        out += [ns for ns in k.namespaces if ns not in out]
    return (*out, *(ns for ns in _OTHER_ENTRY_NAMESPACES if ns not in out))


def model_kinds() -> tuple[str, ...]:
    """Kinds whose runners load a model the next model-holding task may reuse."""
    return tuple(k.name for k in KINDS.values() if k.holds_model)


def driver_kinds() -> tuple[str, ...]:
    """Kinds that run in the driver between stages (``audit_gate``)."""
    return tuple(k.name for k in KINDS.values() if k.driver)


def pair_kinds() -> tuple[str, ...]:
    """Kinds that read two extracted sides (``sides``)."""
    return tuple(k.name for k in KINDS.values() if k.pair)
