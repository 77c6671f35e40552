"""Score transport fusion: NLL per language for the OT plans and the shuffled control, over an alpha grid.

:func:`fuse_pair` fuses one donor into one target (directed) and returns one
row per (alpha, evaluation language) with the columns of
:data:`FUSION_COLUMNS`. Every NLL is :func:`interlingua.data.causal_lm.mean_nll`
of the TARGET model (fused or not) read with the TARGET's tokenizer: on the
target's own language, and on the donor's language, where transferred donor
knowledge would show up. ``delta_ot = nll_ot - nll_target`` (negative: fusion
helped), ``delta_shuffled`` likewise for the control, ``ot_minus_rand =
nll_ot - nll_shuffled`` (negative: the learned correspondence beat a shuffled
plan with the same marginals, mask and alpha). At ``alpha = 0`` both fused
models are the target itself and every delta is 0.

With ``controls=True`` (default) every row also carries the two controls of
:mod:`.controls`, computed once per pair before any fusion: the self-plan
control (``self_control`` passed / failed, ``self_match_<interface>``,
``self_diag_<interface>``) and the stability of the plans between two probe
halves beside its chance level (``stability_<interface>``,
``stability_chance_<interface>``). A failed self-plan control is warned about
(:class:`~.errors.TransportWarning`) and named in every row's ``note``.

:func:`fuse_models` runs every directed pair of a set of models (each model
loaded once, its probe activations computed once) and draws the figure
(:func:`plot_fusion`: NLL against alpha, OT solid, shuffled dashed, the unfused
target dotted; one row per directed pair, one column per language).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlingua.core.schema import result_table
from interlingua.transport.columns import FUSION_COLUMNS, PLAN_INTERFACES
from interlingua.transport.controls import PLANTED_LEVELS, transport_controls
from interlingua.transport.correspond import ParallelProbe
from interlingua.transport.errors import TransportError
from interlingua.transport.fuse import (
    FusionOptions,
    TransportModel,
    check_alpha,
    fusion_key,
    fusion_recipe,
    interfaces_for,
    load_transport_model,
    model_activations,
    prepare_fusion,
    write_fused,
)
from interlingua.transport.plans import transport_plans

if TYPE_CHECKING:
    from interlingua.transport.config import TransportSpec

__all__ = ["DEFAULT_ALPHAS", "FUSION_COLUMNS", "SweepOptions", "fuse_models", "fuse_pair", "plot_fusion"]

DEFAULT_ALPHAS: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)


def _role(language: str, target_language: str, donor_language: str) -> str:
    if language and language == target_language:
        return "target"
    if language and language == donor_language:
        return "donor"
    return "other"


def _check_alphas(alphas: Any) -> list[float]:
    if isinstance(alphas, (str, bytes)) or not isinstance(alphas, Sequence) or not alphas:
        raise TransportError(f"alphas must be a non-empty list of numbers in [0, 1], got {alphas!r}")
    return [check_alpha(a) for a in alphas]


def _check_eval(eval_sentences_by_language: Any) -> dict[str, list[str]]:
    if not isinstance(eval_sentences_by_language, Mapping) or not eval_sentences_by_language:
        raise TransportError("eval_sentences_by_language must map a language name to its sentences")
    out = {}
    for lang, sents in eval_sentences_by_language.items():
        if isinstance(sents, str) or not isinstance(sents, Sequence) or not sents:
            raise TransportError(f"eval sentences of {lang!r} must be a non-empty list of strings")
        out[str(lang)] = list(sents)
    return out


def _nll(model: TransportModel, sentences: list[str], batch_size: int, max_length: int) -> tuple[float, int]:
    from interlingua.data.causal_lm import mean_nll

    nll, count, _vocab, _truncated = mean_nll(
        model.lm, model.tokenizer, sentences, batch_size=batch_size, max_length=max_length
    )
    return float(nll), int(count)


@dataclass(frozen=True)
class SweepOptions:
    """What :func:`fuse_pair` sweeps and checks, validated once and passed down whole.

    ``alphas``: the fusion strengths (each in [0, 1]); ``controls``: run the self-plan and half-split
    stability controls (:mod:`~interlingua.transport.controls`, top-``stability_k`` overlap) and the planted
    correspondences at ``planted_levels``; ``fusion``: how each fused model is made
    (:class:`~interlingua.transport.fuse.FusionOptions`). :meth:`from_spec` builds it from a run's
    ``transport:`` section.
    """

    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    controls: bool = True
    stability_k: int = 1
    planted_levels: tuple[float, ...] = PLANTED_LEVELS
    fusion: FusionOptions = field(default_factory=FusionOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphas", tuple(_check_alphas(self.alphas)))
        object.__setattr__(self, "planted_levels", tuple(self.planted_levels))

    @classmethod
    def from_spec(cls, spec: TransportSpec, *, max_length: int) -> SweepOptions:
        """The options a run's ``transport:`` section sets (``max_length``: the run's)."""
        return cls(
            alphas=tuple(spec.alphas),
            controls=spec.controls,
            stability_k=spec.stability_k,
            planted_levels=tuple(spec.planted_levels),
            fusion=FusionOptions(
                top_k=spec.top_k, m=spec.m, epsilon=spec.epsilon, seed=spec.seed, max_length=max_length
            ),
        )


def fuse_pair(
    target: Any,
    donor: Any,
    probe: ParallelProbe,
    eval_sentences_by_language: Mapping[str, Sequence[str]],
    options: SweepOptions | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    cache_dir: Any = None,
    plans_cache: Any = None,
    _nll_cache: dict[tuple[str, str], tuple[float, int]] | None = None,
):
    """Fuse ``donor`` into ``target`` over ``options.alphas`` (OT and shuffled control); one row per (alpha, language).

    ``target`` / ``donor``: folders, Hub ids, ModelSpecs or loaded
    :class:`~interlingua.transport.fuse.TransportModel` s.
    ``probe``: the two sides of one parallel probe set
    (:class:`~interlingua.transport.correspond.ParallelProbe`: each model reads
    its own side with its own tokenizer; its languages label the rows).
    ``eval_sentences_by_language``: language -> held-out sentences, all read by
    the target. ``options``: the alphas, the controls and how each fused model
    is made (:class:`SweepOptions`; default: its defaults).
    ``out``: when given, every fused model (each alpha, both controls) is
    written to ``out/<recipe key>`` (see :func:`~.fuse.build_fused_model`).
    ``plans_cache``: a :class:`interlingua.core.store.Store`
    or folder where the transport plans are cached by content
    (:func:`~interlingua.transport.plans.transport_plans`); None: no cache.
    A failed self-plan control warns (:class:`~.errors.TransportWarning`).
    Returns a DataFrame with the columns of :data:`FUSION_COLUMNS`. The target
    model is modified in place during the sweep and restored afterwards.
    """
    opts = SweepOptions() if options is None else options
    fo = opts.fusion
    alphas, top_k, sublayers = opts.alphas, fo.top_k, fo.sublayers
    batch_size, max_length = fo.batch_size, fo.max_length
    evals = _check_eval(eval_sentences_by_language)
    if not isinstance(probe, ParallelProbe):
        raise TransportError(
            f"probe must be a ParallelProbe (the two sides of one parallel probe set), got {type(probe).__name__}"
        )
    probe_t, probe_d = list(probe.target), list(probe.donor)
    target_language, donor_language = probe.target_language, probe.donor_language
    tm = load_transport_model(target, cache_dir=cache_dir)
    dm = load_transport_model(donor, cache_dir=cache_dir)
    if tm is dm:
        raise TransportError("target and donor are the same loaded model object; load the donor separately")
    interfaces = interfaces_for(sublayers)

    t0 = time.perf_counter()
    at = model_activations(tm, probe_t, interfaces=interfaces, batch_size=batch_size, max_length=max_length)
    ad = model_activations(dm, probe_d, interfaces=interfaces, batch_size=batch_size, max_length=max_length)
    t1 = time.perf_counter()
    plans = transport_plans(at, ad, fo.plan_options(), cache=plans_cache)
    t2 = time.perf_counter()
    checks = (
        transport_controls(
            at, ad, plans, stability_k=opts.stability_k, planted_levels=opts.planted_levels, planted_seed=fo.seed
        )
        if opts.controls
        else None
    )
    if checks is not None:
        checks.warn(tm.label, dm.label)
    t2c = time.perf_counter()
    fusion = prepare_fusion(tm, dm, plans, top_k=top_k, sublayers=sublayers, seed=fo.seed)
    t3 = time.perf_counter()
    summary = plans.summary()

    cache = _nll_cache if _nll_cache is not None else {}
    base: dict[str, tuple[float, int]] = {}
    for lang, sents in evals.items():
        key = (tm.label, lang)
        if key not in cache:
            cache[key] = _nll(tm, sents, batch_size, max_length)
        base[lang] = cache[key]

    rows = []
    common = {
        "target": tm.label,
        "donor": dm.label,
        "target_language": target_language,
        "donor_language": donor_language,
        "top_k": -1 if top_k is None else top_k,
        "m": plans.m,
        "seed": plans.seed,
        "n_probe": plans.n_probe,
        "sublayers": "+".join(sublayers),
        "calibrated": all(summary[f]["calibrated"] or summary[f]["fixed"] for f in summary),
        "converged": all(summary[f]["converged"] for f in summary),
        "seconds_activations": t1 - t0,
        "seconds_plans": t2 - t1,
        "seconds_fusion": t3 - t2c,
        **(checks.columns() if checks is not None else {}),
        "note": checks.note() if checks is not None else "",
    }
    for f in PLAN_INTERFACES:
        s = summary.get(f)
        if s is None:
            continue
        common[f"eps_{f}"] = s["epsilon"]
        common[f"cost_ratio_{f}"] = s["cost_ratio"]
        common[f"rowmax_uniform_{f}"] = s["row_max_over_uniform"]
        common[f"entropy_{f}"] = s["entropy"]
        if f != "layer":
            common[f"published_rowmax_uniform_{f}"] = s["published_row_max_over_uniform"]
    try:
        for alpha in alphas:
            nll: dict[str, dict[str, float]] = {}
            folders = {"ot": "", "shuffled": ""}
            for control in ("ot", "shuffled"):
                fusion.apply(alpha, control)
                nll[control] = {lang: _nll(tm, sents, batch_size, max_length)[0] for lang, sents in evals.items()}
                fusion.restore()
                if out is not None:
                    recipe = fusion_recipe(tm, dm, probe, alpha=alpha, control=control, options=fo)
                    folder = Path(out).expanduser() / fusion_key(recipe)
                    write_fused(folder, tm, fusion, recipe, plans)
                    folders[control] = str(folder)
            for lang in evals:
                b, n_tok = base[lang]
                rows.append(
                    {
                        **common,
                        "language": lang,
                        "role": _role(lang, target_language, donor_language),
                        "alpha": alpha,
                        "nll_target": b,
                        "nll_ot": nll["ot"][lang],
                        "nll_shuffled": nll["shuffled"][lang],
                        "delta_ot": nll["ot"][lang] - b,
                        "delta_shuffled": nll["shuffled"][lang] - b,
                        "ot_minus_rand": nll["ot"][lang] - nll["shuffled"][lang],
                        "n_tokens": n_tok,
                        "folder_ot": folders["ot"],
                        "folder_shuffled": folders["shuffled"],
                    }
                )
    finally:
        fusion.restore()
    return result_table(rows, FUSION_COLUMNS)


def fuse_models(
    models: Mapping[str, Any],
    languages: Mapping[str, str],
    probe_by_language: Mapping[str, Sequence[str]],
    eval_by_language: Mapping[str, Sequence[str]],
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    options: SweepOptions | None = None,
    figure: str | os.PathLike[str] | None = None,
    cache_dir: Any = None,
):
    """Every directed pair (target, donor) of ``models``: one table and one figure.

    ``models``: name -> folder / Hub id / ModelSpec / TransportModel (each
    loaded once). ``languages``: name -> the language of that model's probe
    side (a key of ``probe_by_language``). ``eval_by_language``: language ->
    sentences every target is scored on (all of them, so each row set has the
    target's and the donor's language). ``pairs``: (target, donor) names to
    run instead of all directed pairs. ``options``: as :func:`fuse_pair`
    (:class:`SweepOptions`: ``alphas``, the controls, ``fusion``'s ``top_k``, ``m``, ``epsilon``, ...). Returns
    ``(table, matplotlib Figure)``; ``figure`` also saves it there.
    """
    import pandas as pd

    if not isinstance(models, Mapping) or len(models) < 2:
        raise TransportError("models must map at least two names to models")
    missing = [n for n in models if n not in languages or languages[n] not in probe_by_language]
    if missing:
        raise TransportError(f"models {missing} have no language with probe sentences (languages / probe_by_language)")
    if pairs is None:
        pairs = [(t, d) for t in models for d in models if t != d]
    bad = [p for p in pairs if p[0] not in models or p[1] not in models or p[0] == p[1]]
    if bad:
        raise TransportError(f"pairs {bad} name unknown models or a model with itself")
    loaded = {n: load_transport_model(ref, label=n, cache_dir=cache_dir) for n, ref in models.items()}
    cache: dict[tuple[str, str], tuple[float, int]] = {}
    tables = []
    for t, d in pairs:
        tables.append(
            fuse_pair(
                loaded[t],
                loaded[d],
                ParallelProbe(
                    probe_by_language[languages[t]], probe_by_language[languages[d]], languages[t], languages[d]
                ),
                eval_by_language,
                options,
                _nll_cache=cache,
            )
        )
    table = pd.concat(tables, ignore_index=True) if tables else result_table([], FUSION_COLUMNS)
    fig = plot_fusion(table, figure)
    return table, fig


def plot_fusion(table: Any, path: str | os.PathLike[str] | None = None):
    """NLL against alpha: OT (solid), shuffled control (dashed), unfused target (dotted), per pair and language.

    Uses matplotlib's Agg canvas (no window, no pyplot state); saves to
    ``path`` when given (format from the suffix). Returns the Figure.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pairs = list(dict.fromkeys(zip(table["target"], table["donor"])))
    langs = list(dict.fromkeys(table["language"]))
    nrows, ncols = max(len(pairs), 1), max(len(langs), 1)
    fig = Figure(figsize=(3.6 * ncols, 2.6 * nrows), constrained_layout=True)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for r, (t, d) in enumerate(pairs):
        for c, lang in enumerate(langs):
            ax = axes[r][c]
            sub = table[(table["target"] == t) & (table["donor"] == d) & (table["language"] == lang)]
            sub = sub.sort_values("alpha")
            if sub.empty:
                ax.set_axis_off()
                continue
            ax.plot(sub["alpha"], sub["nll_ot"], "o-", color="C0", label="OT plan")
            ax.plot(sub["alpha"], sub["nll_shuffled"], "s--", color="C3", label="shuffled plan")
            ax.axhline(float(sub["nll_target"].iloc[0]), color="0.4", linestyle=":", label="unfused target")
            role = sub["role"].iloc[0]
            ax.set_title(f"{t} \u2190 {d}\non {lang} ({role})", fontsize=9)
            ax.set_xlabel("alpha")
            ax.set_ylabel("NLL (nats/token)")
            ax.tick_params(labelsize=8)
            if r == 0 and c == 0:
                ax.legend(fontsize=7)
    if not pairs:
        axes[0][0].text(0.5, 0.5, "no fusion rows", ha="center", va="center")
        axes[0][0].set_axis_off()
    if path is not None:
        fig.savefig(str(path), dpi=120)
    return fig
