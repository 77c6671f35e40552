"""The ``maps`` capability: maps between two sides fitted on training folds and scored on held-out sentences.

Its section is :class:`~interlingua.maps.config.MapsSpec`; it asks for both sides of every pair it maps
(``maps.pairs``: the run's cross-model pairs, all of them, or listed ones) and plans one task per pair
(kind ``map``), whose rows (every estimator, direction and layer pair, with the fit's ``n_fit``, ``rank``
and under-determination flag, and the calibrated ``p1`` against its permutation null, :mod:`.null`) feed
``maps.csv``. With ``twin_control`` (on by default when a side's model is Llama-family) every row also carries
the rotated-twin control of its estimator, layer and direction. The null's cost for ``plan`` is
:func:`interlingua.maps.cost.map_cost`'s second term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from interlingua.contract.capability import Capability, Kind, section_options
from interlingua.core.store import content_key, json_safe
from interlingua.maps.columns import MAP_COLUMNS, REPORT_COLUMNS
from interlingua.maps.config import MapsSpec
from interlingua.maps.cost import MAPS_PHASE, map_cost, map_figures

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.contract.pairs import Pair
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.maps.evaluate import MapOptions
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["MAPS", "MAP_FORMAT_VERSION", "MapTask", "map_options", "map_pairs", "options"]

#: Bumped whenever stored map rows would change for the same inputs (2: n_fit, rank, underdetermined, identity control;
#: 3: the permutation null of p1: n_permutations, p_value, tau, calibrated).
MAP_FORMAT_VERSION = 3


def map_example() -> tuple[Any, Any]:
    """A sample map task and what a finished one holds."""
    from interlingua.contract.pairs import Pair, Side

    pair = Pair(Side("m", "eng_Latn"), Side("m", "deu_Latn"))
    return MapTask("k-map", pair, "mean", ("k-extract-eng", "k-extract-deu"), 0), [{"row": 1}]


@dataclass(frozen=True)
class MapTask:
    """One pair x pooling: maps fitted on training folds, scored on held-out sentences (every layer pair)."""

    kind: ClassVar[str] = "maps"
    key: str
    pair: Pair
    pooling: str
    sides: tuple[str, str]
    control_seed: int
    depends: tuple[str, ...] = ()
    options: MapsSpec | None = field(default=None, compare=False, repr=False)
    folds_seed: int = field(default=0, compare=False)
    control_base: int = field(default=0, compare=False)  # seeds.control, from which the pair's control is drawn
    standardize: bool = field(default=False, compare=False)
    permutations: int = field(default=0, compare=False)  # K draws of the p1 null (maps.null.resolve_permutations)
    test_seed: int = field(default=0, compare=False)  # seeds.test: the null's draws, as the similarity null's
    alpha: float = field(default=0.05, compare=False)  # inference.alpha
    null_layers: str = field(default="last", compare=False)  # inference.layers: the layer pairs the null is drawn at


options = section_options("maps", MapsSpec)


def preflight(spec: RunSpec, corpus: ParallelCorpus, *, placeholder: bool = False) -> None:
    """Fold counts the sample's n sentences can hold (else NaN columns or a failure after models ran)."""
    from interlingua.core.errors import ConfigError

    opts, n = options(spec), len(corpus)
    if opts is not None and opts.folds > n // 2:
        raise ConfigError(
            f"maps.folds: {opts.folds} folds need at least {2 * opts.folds} sentences (2 held out per "
            f"fold), the run has n={n} ; lower maps.folds to at most {max(n // 2, 2)} or sample more sentences "
            "(corpus.n)"
        )


def check(spec: RunSpec) -> None:
    """Maps need a sentence pooling; listed pairs name run models and corpus languages."""
    opts = options(spec)
    if opts is None:
        return
    if opts.pooling is None and spec.pooling[0] == "word_aligned":
        raise ValueError(
            "maps need a sentence pooling: set maps.pooling, or list word_aligned after a sentence pooling"
        )
    if isinstance(opts.pairs, list):
        spec.check_sides(opts.pairs)


def map_pairs(spec: RunSpec, pairs: list[Pair]) -> list[Pair]:
    """The pairs the ``maps:`` section asks for (none when it is absent)."""
    from interlingua.contract.pairs import Pair, Side
    from interlingua.data.corpora import normalize_language

    opts = options(spec)
    if opts is None:
        return []
    if opts.pairs == "cross_model":
        return [p for p in pairs if p.relation == "cross_model"]
    if opts.pairs == "all":
        return list(pairs)
    return [
        Pair(Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language)))
        for p in opts.pairs
    ]


def request(ctx: PlanContext) -> None:
    """Both sides of every mapped pair."""
    for p in map_pairs(ctx.spec, ctx.pairs):
        ctx.need(p.a.model, p.a.language)
        ctx.need(p.b.model, p.b.language)


def plan(ctx: PlanContext) -> None:
    """One task per mapped pair, keyed by its two stored entries, the section and the seeds."""
    from interlingua.contract.pairs import pair_permutation
    from interlingua.maps.null import resolve_permutations

    spec, corpus = ctx.spec, ctx.corpus
    opts = options(spec)
    if opts is None:
        return
    sentence_poolings = spec.sentence_poolings()
    extract_keys, entry_keys = ctx.extract_keys, ctx.entry_keys
    pooling = opts.pooling or sentence_poolings[0]
    k_null = resolve_permutations(opts.permutations, spec.inference.permutations)
    stored = ctx.versioned(
        {
            "format": MAP_FORMAT_VERSION,
            # the twin control is stored apart (keyed by the map task's key and its seed): the map rows' keys
            # ignore it
            "maps": opts.model_dump(mode="json", exclude={"pairs", "twin_control", "twin_seed"}),
            "folds_seed": spec.seeds.folds,
            "standardize": spec.standardize,
            "null": {
                "permutations": k_null,
                "seed": spec.seeds.test,
                "alpha": spec.inference.alpha,
                "layers": spec.inference.layers,
            }
            if k_null
            else None,
        }
    )
    for pair in map_pairs(spec, ctx.pairs):
        _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
        sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
        key = content_key(
            {
                **stored,
                "pair": pair.label,
                "pooling": pooling,
                "control_seed": seed,
                "sides": [entry_keys[(sides[0], pooling)], entry_keys[(sides[1], pooling)]],
            }
        )
        ctx.add(
            MapTask(
                key,
                pair,
                pooling,
                sides,
                seed,
                depends=sides,
                options=opts,
                folds_seed=spec.seeds.folds,
                control_base=spec.seeds.control,
                standardize=spec.standardize,
                permutations=k_null,
                test_seed=spec.seeds.test,
                alpha=spec.inference.alpha,
                null_layers=spec.inference.layers,
            )
        )


def run(rt: Runtime, task: MapTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Held-out map rows of one pair, from the store or computed (fitted maps saved when asked), with the
    twin control's columns (:func:`twin_columns`) when it is on."""
    rows = rt.stored(task, lambda: _fit_and_score(rt, task, done), valid=lambda v: isinstance(v, list))
    return twin_columns(rt, task, done, rows)


#: bumped whenever the stored twin-control entry would change for the same inputs
TWIN_FORMAT_VERSION = 1


def twin_columns(rt: Runtime, task: MapTask, done: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the rotated-twin control of each row's estimator, layer and direction (``twin_*`` columns).

    The twin's model is side B when its model is Llama-family (``model_type`` in the model's facts), else side A
    (neither: "not applicable", or an error under ``twin_control: true``). Its rows at the row's layer of that
    side, ``X``, and the twin's, ``X Q`` (``Q`` the Haar rotation of ``twin_seed``, as
    :func:`interlingua.analysis.rotation.random_orthogonal` draws it for the twin model; the twin model's own states
    are these at every layer below the last, and ``(h_L / g) Q`` after the final norm, so at the last layer the
    control is the planted rotation of the stored rows), are fitted by the row's estimator in the row's direction:
    ``a->b`` from ``X`` onto ``X Q`` (answer ``Q``), ``b->a`` back (answer ``Q^T``); judged by
    :func:`interlingua.maps.planted.planted_rotation_control` (Procrustes and affine: ``Q`` to 1e-8 when the
    centred rows span the width, ridge: exactly its implied shrinkage). Stored apart from the map rows (keyed by
    the task's key and the seed), so turning it on reuses the stored map rows.
    """
    from interlingua.analysis.rotation import TWIN_FAMILIES, random_orthogonal
    from interlingua.core.errors import ConfigError
    from interlingua.maps.errors import MapInputError
    from interlingua.maps.planted import planted_rotation_control

    opts = task.options
    if opts is None or opts.twin_control is False or not rows:
        return rows
    chosen = None
    for i, side in ((1, task.pair.b), (0, task.pair.a)):
        if str(rt.handle(side.model).facts().get("model_type", "")) in TWIN_FAMILIES:
            chosen = (i, side)
            break
    if chosen is None:
        if opts.twin_control:
            raise ConfigError(
                f"maps.twin_control is true but neither side of {task.pair.label} is a Llama-family model "
                f"({', '.join(TWIN_FAMILIES)}); set maps.twin_control: null or false, or map a Llama-family model"
            )
        return [{**r, "twin_control": "not applicable (no Llama-family model)"} for r in rows]
    i, side = chosen
    layer_col = "layer_b" if i == 1 else "layer_a"
    cells = sorted({(int(r[layer_col]), str(r["direction"]), str(r["estimator"])) for r in rows})
    key = content_key(
        {"twin_of": task.key, "format": TWIN_FORMAT_VERSION, "model": side.model, "twin_seed": opts.twin_seed}
    )
    ns = rt.namespace(task.kind)

    def compute() -> dict[str, Any]:
        reps = np.asarray(done[task.sides[i]].data[task.pooling].reps, dtype=np.float64)
        q = random_orthogonal(reps.shape[-1], opts.twin_seed)
        out: dict[str, Any] = {}
        for layer, direction, estimator in cells:
            x = reps[layer]
            src, tgt, answer = (x, x @ q, q) if direction == "a->b" else (x @ q, x, q.T)
            try:
                (res,) = planted_rotation_control(src, answer, tgt, estimators=(estimator,))
            except MapInputError as e:  # an estimator without a matrix (mlp): nothing to compare with Q
                res = {"dev": math.nan, "expected_dev": math.nan, "held_out_p1": math.nan, "passed": False}
                res["note"] = str(e)
            out[f"{layer}|{direction}|{estimator}"] = json_safe(
                {k: res[k] for k in ("dev", "expected_dev", "held_out_p1", "passed", "note")}, infinite=True
            )
        return out

    cached = rt.store.get_json(ns, key)
    if isinstance(cached, dict) and all(f"{c[0]}|{c[1]}|{c[2]}" in cached for c in cells):
        found = cached
    else:
        found = compute()
        rt.store.put_json(ns, key, found)
    out = []
    for r in rows:
        res = found[f"{int(r[layer_col])}|{r['direction']}|{r['estimator']}"]
        out.append(
            {
                **r,
                "twin_control": "passed" if res["passed"] else "failed",
                "twin_model": side.model,
                "twin_seed": opts.twin_seed,
                "twin_control_dev": res["dev"],
                "twin_control_expected_dev": res["expected_dev"],
                "twin_control_p1": res["held_out_p1"],
                "twin_control_note": res["note"],
            }
        )
    return out


def map_options(task: MapTask) -> MapOptions:
    """The :class:`~interlingua.maps.evaluate.MapOptions` of a map task: its ``maps:`` section, the run's fold seed,
    standardisation and permutation null (the one place a run's settings become the evaluation's options)."""
    from interlingua.maps.evaluate import MapOptions

    opts = task.options
    assert opts is not None
    return MapOptions(
        estimators=tuple(opts.estimators),
        folds=opts.folds,
        seed=task.folds_seed,
        layers=opts.layers,
        directions=tuple(opts.directions),
        bootstrap=opts.bootstrap,
        level=opts.level,
        csls_k=opts.csls_k,
        standardize=task.standardize,
        permutations=task.permutations,
        permutation_seed=task.test_seed,
        alpha=task.alpha,
        null_layers=task.null_layers,
    )


def _fit_and_score(rt: Runtime, task: MapTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    from interlingua.contract.pairs import pair_permutation
    from interlingua.maps.evaluate import evaluate_pair
    from interlingua.maps.fit import fit_layer_maps

    opts = task.options
    assert opts is not None
    reps_a = done[task.sides[0]].data[task.pooling].reps
    reps_b = done[task.sides[1]].data[task.pooling].reps
    perm, _ = pair_permutation(task.pair, len(rt.plan.corpus), task.control_base)
    pair = task.pair
    labels = {
        "pair": pair.label,
        "model_a": pair.a.model,
        "lang_a": pair.a.language,
        "model_b": pair.b.model,
        "lang_b": pair.b.language,
        "pooling": task.pooling,
        "control_seed": task.control_seed,
    }
    # one BLAS thread (Runtime.run pins it for every task): fastest for these many small decompositions on
    # shared cores, and the same sums in every process
    rows = evaluate_pair(reps_a, reps_b, map_options(task), control_permutation=perm, labels=labels)
    if opts.save_maps:
        folder = rt.store.folder(rt.namespace("maps")) / "fitted" / task.key[:32]
        for estimator in opts.estimators:
            fit_layer_maps(
                reps_a,
                reps_b,
                folder / estimator,
                estimator=estimator,
                layers="last" if opts.layers == "last" else "auto",
                direction="a->b",
                metadata={"pair": pair.label, "pooling": task.pooling},
            )
    return rows


def tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``maps``: every held-out map row (``maps.columns.MAP_COLUMNS``); none when the run fits no maps."""
    from interlingua.core.schema import result_table

    tasks = plan.of_kind("maps")
    if not tasks:
        return {}
    return {"maps": result_table((row for task in tasks for row in done[task.key]), MAP_COLUMNS)}


def map_figure(plan: Plan, done: dict[str, Any], maps: pd.DataFrame, folder: Path) -> dict[str, Any] | None:
    """The mapped-vs-target picture for the first map pair at its best held-out layer pair (Procrustes P@1)."""
    from interlingua.maps import plot_map_clouds

    task = next(iter(plan.of_kind("maps")), None)
    if task is None:
        return None
    opts = options(plan.spec)
    assert opts is not None  # map tasks come from the maps: section
    rows = maps[
        (maps["pair"] == task.pair.label)
        & (maps["fold"] == -1)
        & (~maps["grid"])
        & (maps["direction"] == "a->b")
        & maps["p1"].notna()
        & (maps["layer_a"] > 0)
    ]
    # layer 0 is the embedding lookup (a lexical match on the same text): show the best contextual layer
    if rows.empty:
        return None
    preferred = rows[rows["estimator"] == "procrustes"]
    best = (preferred if not preferred.empty else rows).sort_values("p1", ascending=False).iloc[0]
    ka, kb = int(best["layer_a"]), int(best["layer_b"])
    x = done[task.sides[0]].data[task.pooling].reps[ka]
    y = done[task.sides[1]].data[task.pooling].reps[kb]
    name = "map_clouds.png"
    folder.mkdir(parents=True, exist_ok=True)
    plot_map_clouds(
        x,
        y,
        folder / name,
        estimator=str(best["estimator"]),
        folds=opts.folds,
        seed=plan.spec.seeds.folds,
        title=f"{task.pair.label}\nlayers ({ka}, {kb})",
    )
    return {
        "pair": task.pair.label,
        "layer_a": ka,
        "layer_b": kb,
        "estimator": str(best["estimator"]),
        "path": f"figures/{name}",
    }


def write_files(plan: Plan, done: dict[str, Any], tables: dict[str, pd.DataFrame], folder: Path) -> dict[str, Any]:
    """``folds.json`` (the corpus ids and each fold's held-out rows) and the mapped-vs-target picture; returns
    ``run.json``'s ``map_figure`` entry."""
    import json

    from interlingua.maps import make_folds

    if "maps" not in tables:
        return {}
    opts = options(plan.spec)
    assert opts is not None  # map tasks come from the maps: section
    folds = make_folds(len(plan.corpus), opts.folds, plan.spec.seeds.folds)
    (folder / "folds.json").write_text(json.dumps({"ids": list(plan.corpus.ids), **folds.to_dict()}), encoding="utf-8")
    return {"map_figure": map_figure(plan, done, tables["maps"], folder / "figures")}


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The maps section: the best layer pair per pair x estimator x direction, curves, grids, the picture."""
    from interlingua.maps.report import maps_section

    return maps_section(tables["maps"], info, fig_dir) if "maps" in tables else []


MAPS = Capability(
    "maps",
    section=MapsSpec,
    description="fit and score maps between sides (off when absent)",
    kinds=(
        # also maps/fitted/ when save_maps
        Kind(
            "maps",
            ("maps",),
            runner=run,
            pair=True,
            progress="mapping",
            label=lambda t: f"maps {t.pair.label} {t.pooling}",
            phase=MAPS_PHASE,
            cost=map_cost,
            example=map_example,
        ),
    ),
    check=check,
    request=request,
    plan=plan,
    preflight=preflight,
    tables=tables,
    write_files=write_files,
    report=report,
    columns={"maps": MAP_COLUMNS},
    report_columns=REPORT_COLUMNS,
    figure_count=map_figures,
)
