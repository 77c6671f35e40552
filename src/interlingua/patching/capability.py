"""The ``patching`` capability: does a map carry meaning the target model uses? Cross-model activation patching.

Its section is :class:`~interlingua.patching.config.PatchingSpec`. Each experiment reads two stored
sides (the donor's and the target's corpus side; with ``fit: words`` their word-aligned rows), fits the
maps on them and patches the donor's residuals, mapped, into the target on the probe prompts (kind
``patch``). With ``identity_control`` each target side first gets a control (the side patched with itself
through its own self-map), whose verdict every experiment on that side carries.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from interlingua.contract.capability import Capability, Kind, section_options
from interlingua.core.store import content_key, json_safe
from interlingua.patching.columns import PATCHING_COLUMNS
from interlingua.patching.config import PatchExperimentSpec, PatchingSpec
from interlingua.patching.cost import PATCHING_PHASE, patch_cost

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.contract.pairs import Pair
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import Runtime
    from interlingua.pipeline.plan import Plan

__all__ = ["PATCHING", "PATCH_FORMAT_VERSION", "PatchTask", "options", "sides_of"]

#: Bumped whenever stored patching rows would change for the same inputs (2: whole-answer columns; 3: the maps'
#: n_fit, rank and under-determination flag; 4: the identity control, word rows, map_dev and the patch-site agreement;
#: 5: the twin control, fit: probes and the chain column; 6: both controls judged on the fit rows' span and, the
#: identity, per held-out patch-site direction; the twin ridge-aware).
PATCH_FORMAT_VERSION = 6


def patch_example() -> tuple[Any, Any]:
    """A sample patch task and what a finished one holds (its rows, each naming its experiment)."""
    task = PatchTask("k-patch", "m", "n", ("eng_Latn", "deu_Latn"), "mean", ("k-extract-eng", "k-extract-deu"))
    return task, [{"experiment": "m -> n", "row": 1}]


@dataclass(frozen=True)
class PatchTask:
    """Cross-model activation patching: maps fitted on two stored sides, then the probe experiment."""

    kind: ClassVar[str] = "patching"
    key: str
    target: str
    donor: str
    languages: tuple[str, str]  # corpus sides (donor, target)
    pooling: str
    sides: tuple[str, str]  # extract task keys (donor side, target side)
    experiment: PatchExperimentSpec | None = field(default=None, compare=False)  # None only in tests of kinds
    depends: tuple[str, ...] = ()
    alignment: str | None = None  # fit "words": the align task whose word pairs are the maps' rows
    control: str = ""  # "identity": the target side patched with itself through its own self-map
    layers: tuple[int, ...] = ()  # start layers (default: the experiment's)
    options: PatchingSpec | None = field(default=None, compare=False, repr=False)
    seed: int = field(default=0, compare=False)  # seeds.test: the shuffled and noise conditions' draws
    fit: str = "sentences"  # the maps' rows: sentences, words or probes (one of patching.fit)


options = section_options("patching", PatchingSpec)


def check(spec: RunSpec) -> None:
    """Every experiment's models are run models, its languages corpus languages, its start layers >= 0, and
    the section's pooling one of the run's."""
    pt = options(spec)
    if pt is None:
        return
    names = spec.model_names()
    for i, exp in enumerate(pt.resolved()):
        where = "patching" if pt.experiments is None else f"patching.experiments[{i}]"
        for role, name in (("target", exp.target), ("donor", exp.donor)):
            if name not in names:
                raise ValueError(f"{where}.{role} {name!r} is not among models {names}")
        for role in ("donor_language", "target_language"):
            spec.check_languages(f"{where}.{role}", getattr(exp, role))
        if any(j < 0 for j in exp.layers or []):
            raise ValueError(f"{where}.layers {exp.layers} must be start layers >= 0 (hidden-state indices)")
    if pt.pooling not in spec.pooling:
        raise ValueError(f"patching.pooling {pt.pooling!r} is not among the run's poolings {spec.pooling}")


def preflight(spec: RunSpec, corpus: ParallelCorpus, *, placeholder: bool = False) -> None:
    """Every patching experiment's donor and target languages are languages of the factual probes."""
    from interlingua.core.errors import ConfigError
    from interlingua.data.corpora import normalize_language
    from interlingua.patching.probes import load_probes, probe_language

    pt = options(spec)
    if pt is None:
        return
    probes = load_probes()
    for i, exp in enumerate(pt.resolved(), start=1):
        donor = normalize_language(exp.donor_language or spec.corpus.languages[0])
        target = normalize_language(exp.target_language) if exp.target_language else donor
        for role, code in (("donor_language", donor), ("target_language", target)):
            if probe_language(code) not in probes.languages:
                where = f"patching.experiments.{i}" if pt.experiments else "patching"
                raise ConfigError(
                    f"{where}.{role}: the factual probes have no {code} prompts (they have "
                    f"{', '.join(probes.languages)}) ; patch in one of those languages"
                )


def wants_words(spec: RunSpec) -> bool:
    """``fit: words``: the maps are fitted on aligned word rows."""
    pt = options(spec)
    return pt is not None and "words" in pt.fits


def sides_of(spec: RunSpec) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Per patching experiment, the (model, language) of the donor's and the target's sides its maps are fitted on."""
    from interlingua.data.corpora import normalize_language

    pt = options(spec)
    if pt is None:
        return []
    out = []
    for exp in pt.resolved():
        donor_lang = normalize_language(exp.donor_language or spec.corpus.languages[0])
        target_lang = normalize_language(exp.target_language) if exp.target_language else donor_lang
        out.append(((exp.donor, donor_lang), (exp.target, target_lang)))
    return out


def _word_pairs(spec: RunSpec) -> list[Pair]:
    """Per experiment, its (donor side, target side) pair when the maps are fitted on aligned words."""
    from interlingua.contract.pairs import Pair, Side

    return [Pair(Side(*d), Side(*t)) for d, t in sides_of(spec)] if wants_words(spec) else []


def request(ctx: PlanContext) -> None:
    """Both sides of every experiment; their aligned words under ``fit: words``."""
    for donor, target in sides_of(ctx.spec):
        ctx.need(*donor)
        ctx.need(*target)
    for pair in _word_pairs(ctx.spec):
        ctx.request_words(pair)


def plan(ctx: PlanContext) -> None:
    """The patch tasks: one identity control per target side first (``identity_control``), then the twin controls,
    then the experiments; each once per fit of ``patching.fit`` (a list runs the fits side by side).

    A control patches the target side with itself through the map fitted from its fit rows onto themselves, at
    every start layer its experiments use; each experiment depends on its target side's control of the same fit
    and carries the verdict in its rows. A task's key holds its own fit only (``patching.fit`` replaced by it),
    so a single fit keeps the keys it always had and a fit listed beside others reuses its stored rows.
    """
    from interlingua.alignment.capability import AlignTask, language_pair, word_entry

    spec = ctx.spec
    pt = options(spec)
    if pt is None:
        return
    patch_sides = sides_of(spec)
    patch_pairs = _word_pairs(spec)
    aligns: dict[tuple[str, str], AlignTask] = ctx.shared.get("alignment", {})
    extract_keys, entry_keys, fingerprints = ctx.extract_keys, ctx.entry_keys, ctx.fingerprints
    shared = pt.model_dump(
        mode="json",
        exclude={"experiments", "target", "donor", "donor_language", "target_language", "layers", "threads"},
    )
    experiments = pt.resolved()
    fits = pt.fits

    def base_of(fit: str) -> dict[str, Any]:
        """The key's common part for one fit: the section as a single-fit section would dump it."""
        return ctx.versioned(
            {"format": PATCH_FORMAT_VERSION, "patching": {**shared, "fit": fit}, "seed": spec.seeds.test}
        )

    def fit_of(i: int, fit: str) -> tuple[tuple[str, str], list[str], AlignTask | None]:
        donor_side, target_side = patch_sides[i]
        sides = (extract_keys[donor_side], extract_keys[target_side])
        if fit == "words":
            align = aligns[language_pair(patch_pairs[i])]
            entries = [
                entry_keys[(sides[0], word_entry(align.key, align.role(donor_side[1])))],
                entry_keys[(sides[1], word_entry(align.key, align.role(target_side[1])))],
            ]
            return sides, entries, align
        return sides, [entry_keys[(sides[0], pt.pooling)], entry_keys[(sides[1], pt.pooling)]], None

    controls: dict[tuple[tuple[str, str], str], str] = {}
    by_target: dict[tuple[str, str], list[int]] = {}
    for i, (_, target_side) in enumerate(patch_sides):
        by_target.setdefault(target_side, []).append(i)
    for fit in fits if pt.identity_control else ():
        for target_side, idx in by_target.items():
            first = idx[0]
            sides, entries, align = fit_of(first, fit)
            layers = tuple(sorted({j for i in idx for j in (experiments[i].layers or pt.layers)}))
            model = experiments[first].target
            key = content_key(
                {
                    **base_of(fit),
                    "control": "identity",
                    "target": model,
                    "layers": list(layers),
                    "sides": [entries[1]],
                    "fingerprints": [fingerprints[model]],
                }
            )
            depends = (sides[1],) if align is None else (sides[1], align.key)
            ctx.add(
                PatchTask(
                    key,
                    model,
                    model,
                    (target_side[1], target_side[1]),
                    pt.pooling,
                    (sides[1], sides[1]),
                    experiments[first],
                    depends=depends,
                    alignment=None if align is None else align.key,
                    control="identity",
                    layers=layers,
                    options=pt,
                    seed=spec.seeds.test,
                    fit=fit,
                )
            )
            controls[(target_side, fit)] = key

    def experiment_task(
        key: str,
        i: int,
        fit: str,
        depends: tuple[str, ...],
        control: str | None = None,
        layers: tuple[int, ...] | None = None,
    ) -> PatchTask:
        """Experiment ``i``'s patch task (donor -> target) for one fit, or its twin control's (``control="twin"``)."""
        exp, (donor_side, target_side) = experiments[i], patch_sides[i]
        sides, _, align = fit_of(i, fit)
        extra: dict[str, Any] = {} if control is None else {"control": control, "layers": layers}
        return PatchTask(
            key,
            exp.target,
            exp.donor,
            (donor_side[1], target_side[1]),
            pt.pooling,
            sides,
            exp,
            depends=tuple(dict.fromkeys(depends)),
            alignment=None if align is None else align.key,
            options=pt,
            seed=spec.seeds.test,
            fit=fit,
            **extra,
        )

    twins: dict[tuple[int, str], str] = {}
    for fit in fits if pt.twin_control is not False else ():
        for i, exp in enumerate(experiments):
            sides, entries, align = fit_of(i, fit)
            layers = tuple(sorted(set(exp.layers or pt.layers)))
            key = content_key(
                {
                    **base_of(fit),
                    "control": "twin",
                    "experiment": exp.model_dump(mode="json"),
                    "layers": list(layers),
                    "sides": entries,
                    "fingerprints": [fingerprints[exp.donor], fingerprints[exp.target]],
                }
            )
            depends = (*sides, *(() if align is None else (align.key,)))
            ctx.add(experiment_task(key, i, fit, depends, "twin", layers))
            twins[(i, fit)] = key
    for fit in fits:
        for i, (exp, (_, target_side)) in enumerate(zip(experiments, patch_sides)):
            sides, entries, align = fit_of(i, fit)
            control = controls.get((target_side, fit))
            twin = twins.get((i, fit))
            key = content_key(
                {
                    **base_of(fit),
                    "experiment": exp.model_dump(mode="json"),
                    "sides": entries,
                    "fingerprints": [fingerprints[exp.donor], fingerprints[exp.target]],
                    "identity_control": control,
                    "twin_control": twin,
                }
            )
            depends = (
                *sides,
                *(() if align is None else (align.key,)),
                *(() if control is None else (control,)),
                *(() if twin is None else (twin,)),
            )
            ctx.add(experiment_task(key, i, fit, depends))


def _patch_fit_rows(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, str]:
    """The rows the patching maps are fitted on, ``(n_states, n, d)`` per side, and what they are.

    ``fit: sentences``: the two sides' ``pooling`` vectors of the corpus sentences. ``fit: words``: one row per
    aligned word pair (both words covered), each the mean of the word's sub-word states, the kind of state the
    patch writes (``span_rule: mean`` over the subject's tokens). The identity control fits the target side onto
    itself: its sentence vectors, or every covered word of its word entry.
    """
    donor_out, target_out = done[task.sides[0]], done[task.sides[1]]
    if task.alignment is None:
        what = f"{task.pooling}-pooled sentences"
        rt_ = target_out.data[task.pooling].reps
        return (rt_ if task.control else donor_out.data[task.pooling].reps), rt_, what
    from interlingua.alignment.capability import AlignTask, WordSide, word_entry, word_sides

    align = rt.plan.task(task.alignment)
    assert isinstance(align, AlignTask)
    what = "aligned words (mean of each word's sub-word states)"
    if task.control:
        ws: WordSide = target_out.data[word_entry(align.key, align.role(task.languages[1]))]
        reps = ws.reps[:, ws.covered]
        return reps, reps, what
    from interlingua.contract.pairs import Pair, Side

    pair = Pair(Side(task.donor, task.languages[0]), Side(task.target, task.languages[1]))
    side_d, side_t, _ = word_sides(rt, align.key, pair, donor_out, target_out, done)
    return side_d.reps, side_t.reps, what


def _control_of(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> dict[str, Any]:
    """The controls' verdict columns for an experiment's rows: its target side's identity control and its twin
    control ("not run" when the run has none; the twin's "not applicable" when no model is Llama-family), and
    ``chain``: ``broken`` when a control failed, ``intact`` when every control run passed."""
    from interlingua.patching.patch import CONTROL_COLUMNS

    out: dict[str, Any] = {"identity_control": "not run", "twin_control": "not run"}
    for kind in ("identity", "twin"):
        controls = [t for t in rt.plan.of_kind("patching") if t.control == kind and t.key in task.depends]
        if not controls:
            continue
        rows = done.get(controls[0].key)
        if not isinstance(rows, list):
            rows = run(rt, controls[0], done)
        if not rows:
            out[f"{kind}_control"] = "not applicable (no Llama-family model)"
            continue
        out.update({c: rows[0][c] for c in CONTROL_COLUMNS if c.startswith(kind) and c in rows[0]})
    verdicts = [str(out.get("identity_control")), str(out.get("twin_control"))]
    out["chain"] = "broken" if "failed" in verdicts else "intact" if "passed" in verdicts else ""
    return out


def run(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Patching rows from the store, or maps fitted on the two stored sides and the probe experiment run.

    An identity control (``task.control``) patches the target side with itself through its own self-map and
    judges the result (:func:`interlingua.patching.patch.identity_control_verdict`); an experiment's rows
    carry its target side's verdict, and a failed one is warned about (``PatchWarning``).
    """
    from interlingua.patching.patch import PatchWarning, rejudge_control_rows

    control = {} if task.control else _control_of(rt, task, done)
    build = _twin if task.control == "twin" else _patch
    rows = rt.stored(task, lambda: build(rt, task, done), valid=lambda v: isinstance(v, list))
    if task.control:  # the behavioural rule applied to the stored counts (rows stored under an earlier rule too)
        rows = rejudge_control_rows(rows, task.control)
    # the fit is named on every row (not stored: keys and entries are the single fit's); with several fits side by
    # side the experiment's label says which, so each fit's rows (and its controls) are their own group
    several = task.options is not None and len(task.options.fits) > 1
    rows = [
        {
            **row,
            "experiment": f"{row['experiment']} [fit: {task.fit}]" if several else row["experiment"],
            "fit": task.fit,
            **control,
        }
        for row in rows
    ]
    if rows and rows[0].get("twin_control") == "failed":
        head = rows[0]
        warnings.warn(
            f"patching twin control FAILED for {head.get('twin_model', '')}: {head.get('twin_control_note', '')}. "
            "The map fitted from a model onto its rotated twin is not the rotation Q or does not patch like the "
            f"twin's own residual, so the chain is broken and a result from "
            f"{'this control' if task.control else head['experiment']} is not a finding.",
            PatchWarning,
            stacklevel=2,
        )
    verdict = rows[0].get("identity_control") if rows else None
    if verdict == "failed":
        head = rows[0]
        warnings.warn(
            f"patching identity control FAILED for {head['target']} ({task.languages[1]}): "
            f"{head.get('identity_control_note', '')}. The map fitted from a side onto itself is not the identity "
            f"or does not reproduce the within-model patch, so the chain is broken and a null from "
            f"{'this control' if task.control else head['experiment']} is not a finding; fit on more rows "
            "(patching.fit: words, corpus.n) or another estimator (procrustes_span within one model).",
            PatchWarning,
            stacklevel=2,
        )
    return rows


def _patch(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Maps fitted on the task's fit rows, then the probe experiment through them (rows as stored)."""
    from interlingua.data.models.loading import hf_progress
    from interlingua.patching import PatchModel, maps_from_representations, patch_experiment
    from interlingua.patching.patch import PatchOptions, identity_control_verdict

    pt, exp = task.options, task.experiment
    assert pt is not None and exp is not None
    layers = list(task.layers) or exp.layers or pt.layers
    from interlingua.patching.probes import probe_language

    languages = tuple(probe_language(code) for code in task.languages)
    maps: Any = None
    if task.fit != "probes":
        reps_donor, reps_target, fit_rows = _patch_fit_rows(rt, task, done)
        n_states = len(reps_target)
        maps = maps_from_representations(
            reps_donor, reps_target, estimator=pt.estimator, layers=range(min(min(layers), n_states - 1), n_states)
        )
    rt.release_except(None)  # the two causal LMs are loaded by the experiment
    # the control: unprojected is within here (the same vector), shuffled and noise say nothing about identity
    conditions = ["none", "within", "mapped"] if task.control else pt.conditions
    with hf_progress():
        cache = rt.store.folder("models")
        target = PatchModel.from_spec(rt.plan.models[task.target], cache)
        donor = target if task.donor == task.target else PatchModel.from_spec(rt.plan.models[task.donor], cache)
        if maps is None:
            maps = _probe_maps(donor, target, languages, layers, pt, task.seed)
            fit_rows = maps.description
        options = PatchOptions.from_spec(pt, languages=languages, layers=layers, conditions=conditions, seed=task.seed)
        table = patch_experiment(target, donor, maps, options=options, threads=pt.threads)
        del target, donor
    label = f"{task.donor}:{task.languages[0]}->{task.target}:{task.languages[1]}"
    if task.control:
        label = f"identity control: {label}"
    extra = identity_control_verdict(table) if task.control else {}
    rows = [
        json_safe(
            {
                **row,
                "experiment": label,
                "target": task.target,
                "donor": task.donor,
                "estimator": pt.estimator,
                "pooling": task.pooling,
                "pairs": str(pt.pairs),
                "control": task.control,
                "fit_rows": fit_rows,
                **extra,
            },
            infinite=True,
        )
        for row in table.to_dict("records")
    ]
    return rows


def _probe_maps(donor: Any, target: Any, languages: tuple[str, ...], layers: list[int], pt: PatchingSpec, seed: int):
    """``fit: probes``: per-layer maps fitted on the probe prompts' subject states, K-fold over countries (every
    probe relation; the experiment's language pair, and with ``probe_languages: all`` every probe language with
    itself), for the patched layers ``min(layers)..L``."""
    from interlingua.patching.patch import ProbeFitOptions, fit_probe_maps
    from interlingua.patching.probes import load_probes

    probes = load_probes()
    pairs = [(languages[0], languages[1])]
    if pt.probe_languages == "all":
        pairs += [(lang, lang) for lang in probes.languages if (lang, lang) not in pairs]
    return fit_probe_maps(
        donor,
        target,
        probes,
        language_pairs=pairs,
        layers=range(min(layers), target.n_states),
        estimator=pt.estimator,
        options=ProbeFitOptions.from_spec(pt, seed=seed),
    )


def _side_rows(rt: Runtime, task: PatchTask, done: dict[str, Any], i: int) -> np.ndarray:
    """One side's own fit rows, ``(n_states, n, d)``: its ``pooling`` sentence vectors, or every covered word of its
    word entry (``fit: words``); ``i`` 0 = the donor's side, 1 = the target's."""
    out = done[task.sides[i]]
    if task.alignment is None:
        return out.data[task.pooling].reps
    from interlingua.alignment.capability import AlignTask, word_entry

    align = rt.plan.task(task.alignment)
    assert isinstance(align, AlignTask)
    ws = out.data[word_entry(align.key, align.role(task.languages[i]))]
    return ws.reps[:, ws.covered]


def _twin(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """The twin control: a Llama-family model of the experiment patched into its rotated twin.

    The model is the target when it is Llama-family, else the donor (none: no rows, unless ``twin_control: true``
    asked for it: an error). Its twin is built in memory (:func:`interlingua.patching.twin.make_twin`, seed
    ``patching.twin_seed``) and checked (max logit difference on the check sentences, on the rows). The maps are
    fitted from the model's own fit rows (its side of the experiment: sentence vectors or aligned words) onto the
    twin's, which are those rows times Q (the last, after the final norm, ``/ g`` first; exact for these mean
    pooled rows, :func:`~interlingua.patching.twin.twin_rows`); the patch runs through the twin model itself.
    """
    from interlingua.data.models.loading import hf_progress
    from interlingua.patching import PatchModel, maps_from_representations, patch_experiment
    from interlingua.patching.errors import InterventionError
    from interlingua.patching.patch import PatchOptions, twin_control_verdict
    from interlingua.patching.probes import probe_language
    from interlingua.patching.twin import final_gain, is_twinnable, make_twin, twin_check, twin_rows

    pt, exp = task.options, task.experiment
    assert pt is not None and exp is not None
    layers = list(task.layers) or exp.layers or pt.layers
    rt.release_except(None)
    cache = rt.store.folder("models")
    with hf_progress():
        chosen = None
        for i, name in ((1, task.target), (0, task.donor)):
            model = PatchModel.from_spec(rt.plan.models[name], cache)
            if is_twinnable(model.lm):
                chosen = (i, name, model)
                break
            del model
        if chosen is None:
            if pt.twin_control:
                raise InterventionError(
                    f"patching.twin_control is true but neither {task.target} nor {task.donor} is a Llama-family "
                    "model (llama, mistral, qwen2); set twin_control: null or false, or add a Llama-family model"
                )
            return []
        i, name, model = chosen
        twin_lm, q = make_twin(model.lm, pt.twin_seed)
        check = twin_check(model.lm, twin_lm, model.tokenizer, q)
        twin = PatchModel.wrap(twin_lm, model.tokenizer, f"{name}~twin{pt.twin_seed}")
        lang = probe_language(task.languages[i])
        last = model.n_states - 1
        if task.fit == "probes":  # the twin's own probe states (a real forward pass of the twin), per fold
            maps = _probe_maps(model, twin, (lang, lang), layers, pt, task.seed)
            fit_rows = maps.description
        else:
            reps = np.asarray(_side_rows(rt, task, done, i), dtype=np.float64)
            maps = maps_from_representations(
                reps,
                twin_rows(reps, q, final_gain(model.lm)),
                estimator=pt.estimator,
                layers=range(min(min(layers), last), last + 1),
            )
            fit_rows = "the model's own rows and the same rows times Q"
        # the map against Q where its rows determine it (ridge: against its shrinkage of Q), and over the whole space
        to_q = {k: maps.answer_deviation(k, q) for k in maps.maps if k < last}
        q_devs = {k: v["dev"] for k, v in to_q.items()}
        options = PatchOptions.from_spec(
            pt, languages=(lang, lang), layers=layers, conditions=["none", "within", "mapped"], seed=task.seed
        )
        table, trials = patch_experiment(twin, model, maps, options=options, threads=pt.threads, return_trials=True)
        del model, twin, twin_lm
    site_p1: dict[int, float] = {}
    for per_layer in trials.attrs.get("site", {}).values():
        for k, (_, p1) in per_layer.items():
            if k < last:
                site_p1[k] = min(site_p1.get(k, 1.0), p1)
    extra = {
        **twin_control_verdict(table, q_devs, site_p1, to_q),
        "twin_model": name,
        "twin_seed": pt.twin_seed,
        "twin_max_logit_diff": check["max_logit_diff"],
    }
    side = task.languages[i]
    label = f"twin control: {name}:{side}->{name}~twin:{side}"
    return [
        json_safe(
            {
                **row,
                "experiment": label,
                "target": f"{name}~twin",
                "donor": name,
                "estimator": pt.estimator,
                "pooling": task.pooling,
                "pairs": str(pt.pairs),
                "control": "twin",
                "fit_rows": fit_rows,
                **extra,
            },
            infinite=True,
        )
        for row in table.to_dict("records")
    ]


def tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``patching``: the summary, one row per experiment x relation x start layer x condition."""
    tasks = plan.of_kind("patching")
    if not tasks:
        return {}
    import pandas as pd

    from interlingua.core.schema import column_names

    rows = [row for t in tasks for row in done[t.key]]
    # experiment: donor:lang->target:lang; the identity controls' rows first, every row with its side's verdict
    return {"patching": pd.DataFrame(rows).reindex(columns=column_names(PATCHING_COLUMNS))}


def report(tables: dict[str, pd.DataFrame], info: dict[str, Any], fig_dir: Path) -> list[str]:
    """The patching section: controls first, then flips and directional success per condition."""
    from interlingua.patching.report import patching_section

    return patching_section(tables["patching"], fig_dir) if "patching" in tables else []


PATCHING = Capability(
    "patching",
    section=PatchingSpec,
    description="cross-model activation patching (off when absent)",
    kinds=(
        Kind(
            "patching",
            ("patching",),
            runner=run,
            pair=True,
            label=lambda t: f"patching {t.donor} -> {t.target}",
            phase=PATCHING_PHASE,
            cost=patch_cost,
            example=patch_example,
        ),
    ),
    check=check,
    request=request,
    plan=plan,
    wants_words=wants_words,
    preflight=preflight,
    tables=tables,
    report=report,
    columns={"patching": PATCHING_COLUMNS},
)
