"""Cross-model activation patching: does a map carry meaning the target model uses?

The paper's third standard of evidence (seed 002, section 5). For a relation (``capital``) and
a pair of countries ``(A, B)``:

1. the target model reads a target-language prompt about **B** ("Die Hauptstadt von Frankreich ist");
2. at every layer ``k`` from a start ``j`` to the last (``L``), its residual stream at the subject's
   tokens is REPLACED by a vector that, under each condition, stands for country **A**;
3. the outcome is the target's next-token prediction: the log-probability of the first token of
   A's answer against B's, and whether the top-1 token becomes A's (a *flip*).

Conditions (all in one table, :data:`CONDITIONS`):

``none``
    no patch: the reference row (flip = the model already says A's answer).
``within``
    the target's own residual from the target-language prompt about A (the ceiling).
``mapped``
    the donor's residual from its own-language prompt about A, taken at the donor layer matched
    to ``k`` and mapped into the target's basis by that layer's map (a Procrustes map fitted on
    sentence representations of parallel text by default; any estimator of
    :mod:`interlingua.maps`).
``unprojected``
    the donor's residual for A as it is: only when the two widths agree (otherwise every row says
    not applicable and why); a basis-mismatch control.
``shuffled``
    the donor's residual for a random other country C (C not A or B, and C's answer token not
    A's), through the same map: the map without the fact.
``noise``
    Gaussian noise matched to the donor's MAPPED activations at each layer: mean and
    per-dimension variance (a diagonal covariance; a full one is singular with fewer
    countries than dimensions) of the mapped donor vectors of every country of the probe set.

Rules:

* **Layers**: hidden-state indices (0 = embedding output, ``k`` = output of block ``k``); a start
  ``j`` patches ``j, j+1, ..., L`` of the target. The donor layer of target layer ``k`` is the
  layer its map was fitted from; without a map, the nearest in relative depth
  (``round_half_up(k * L_donor / L_target)``, :func:`interlingua.maps.relative_depth_partner`).
* **Span matching** (``span_rule``): the two tokenizers split names differently (and A's name
  differs from B's even within one model), so one vector per (trial, layer) is written.
  ``"mean"`` (default): the mean of the source span's states, written to EVERY position of B's
  span. It is defined for any two span lengths, it is the same pooling as the mean-pooled sentence
  representations the maps are fitted on, and every condition uses it, so the ceiling is measured
  under the same rule. ``"last"``: the source span's last-token state written to B's last span
  token only (B's other span tokens are left as they are).
* **Size** (per trial): ``norm_ratio``, the patched vector's norm over the norm of the vector the
  same rule takes from B's own span, averaged over the patched layers (a map that leaves the
  donor's scale makes it far from 1).
* **Outcome** (per trial): ``logp_a`` / ``logp_b``: log-probability of the first token of A's / B's
  answer (:func:`interlingua.patching.probes.answer_token`) at the last prompt position;
  ``flip``: the top-1 token is A's; ``success``: ``logp_a`` rose over the unpatched run (the paper's
  directional success); ``prefers_a``: ``logp_a > logp_b``. Whole answer: ``logp_answer_a``, the
  log-probability of ALL of A's answer tokens (:func:`interlingua.patching.probes.answer_tokens`;
  ``answer_a_tokens`` of them) after the patched prompt, scored by teacher forcing in the same
  patched pass; ``success_answer``: it rose over the unpatched run. Rates carry 95% Wilson intervals.
  Read success next to the shuffled and noise rows: a patch that merely disrupts the subject
  spreads probability away from B's answer and so raises a low ``logp_a`` whatever it carries
  (measured on the packaged models, benchmarks/bench_patching.py: with scaled-Procrustes maps
  into SmolLM2, and with either map into Gemma 3, mapped, shuffled and noise alike reached
  0.67-0.97 success with no flip); a flip is the specific outcome.
* **Clean run**: ``logp_a_clean`` / ``logp_b_clean`` / ``logp_answer_a_clean`` from the unpatched
  target, run on the same token sequences, in the same batches and from the same position as the
  patched passes (so a patch that changes nothing changes no number); ``clean_correct``: its top-1
  is B's answer's first token (whether the target knows the fact at all).
* **Maps behind a row** (``mapped``, ``shuffled``, ``noise``): ``map_n_fit`` (rows the maps of the
  patched layers were fitted on, smallest), ``map_rank`` (smallest rank of their centred training
  rows) and ``map_underdetermined`` (some patched layer's map was fitted on rows that do not span a
  side's width, as in ``maps.csv``): such a map is not fixed on every direction, and a null through
  it is not a finding (docs/protocol.md, "Maps"). ``map_dev``: the largest ``||R - I||_F / sqrt(d)`` of those
  maps (equal widths only; :func:`identity_deviation`); ``map_site_cos`` / ``map_site_p1``: at the patch site,
  the mapped donor states of the probe countries against the target's own states of the same countries (mean
  cosine; share whose nearest own state is the same country's), worst patched layer (:func:`_site_agreement`).
  The maps can be fitted on sentence vectors or on aligned words (one row per aligned word pair, each the
  mean of the word's sub-word states: the kind of state the ``mean`` span rule writes); a run's
  ``patching.fit`` chooses, and its rows say which (``fit_rows``).
* **Identity control** (:func:`identity_control_verdict`; a run does it first, ``patching.identity_control``):
  donor = target model and language, the map fitted from the target side's rows onto themselves. It must be the
  identity (``map_dev`` near 0, patch-site cosine and P@1 1) and ``mapped`` must patch like ``within`` (no
  rate told apart by :func:`behaviour_tests`: Fisher's exact test, Holm over the control's comparisons at
  :data:`BEHAVIOUR_ALPHA`); else the chain from map to patch is broken and no null through these maps is a
  finding (the run warns, :class:`PatchWarning`, and every row carries the verdict).
* **Gap to unprojected** (``unprojected_gap_flip`` / ``_success``, on ``mapped`` rows): mapped's rate minus
  unprojected's in the same cell. Within one model across languages the raw residual is the ceiling a good
  map should approach.
* **Trials**: ordered pairs ``(A, B)``, A != B, whose answers' first tokens differ in the target's
  tokenizer (a pair with the same first token cannot flip). ``pairs="derangement"`` (default): one
  random A per B; ``"all"``; or an integer: that many random pairs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
import torch

from interlingua.patching.errors import InterventionError
from interlingua.patching.hooks import PatchModel, capture_residuals, run_patched
from interlingua.patching.probes import EncodedPrompt, ProbeSet, answer_tokens, encode_prompt, load_probes

if TYPE_CHECKING:
    from interlingua.patching.config import PatchingSpec

__all__ = [
    "CONDITIONS",
    "SPAN_RULES",
    "TRIAL_COLUMNS",
    "SUMMARY_COLUMNS",
    "CONTROL_COLUMNS",
    "PatchWarning",
    "LayerMaps",
    "donor_layer",
    "as_layer_maps",
    "fit_patch_maps",
    "maps_from_representations",
    "PatchOptions",
    "patch_trials",
    "summarize_trials",
    "patch_experiment",
    "identity_control_verdict",
    "twin_control_verdict",
    "FoldedMaps",
    "country_folds",
    "ProbeFitOptions",
    "fit_probe_maps",
    "TWIN_CONTROL_MAX_DEV",
    "SPAN_MAX_DEV",
    "fit_span",
    "answer_deviation",
    "BEHAVIOUR_ALPHA",
    "behaviour_tests",
    "fisher_two_sided",
    "holm_reject",
    "rejudge_control_rows",
]

CONDITIONS: tuple[str, ...] = ("none", "within", "mapped", "unprojected", "shuffled", "noise")
SPAN_RULES: tuple[str, ...] = ("mean", "last")
NEEDS_MAP = frozenset({"mapped", "shuffled", "noise"})


class _RunArgs(TypedDict):
    """The keyword arguments every pass over one experiment's trials gives :func:`run_patched`."""

    token_ids: list[list[int]]
    continuations: list[tuple[int, ...]]  # each trial's answer tokens (A's whole answer)
    compute_from: list[int]
    batch_size: int


class PatchWarning(UserWarning):
    """A patching result that must not be read as a finding (a failed identity control)."""


TRIAL_COLUMNS = [
    "relation",
    "donor_language",
    "target_language",
    "layer",
    "condition",
    "country_a",
    "country_b",
    "source",
    "token_a",
    "token_b",
    "logp_a",
    "logp_b",
    "logp_a_clean",
    "logp_b_clean",
    "top1",
    "flip",
    "success",
    "prefers_a",
    "norm_ratio",
    "clean_correct",
    "answer_a_tokens",
    "logp_answer_a",
    "logp_answer_a_clean",
    "success_answer",
]
SUMMARY_COLUMNS = [
    "relation",
    "donor_language",
    "target_language",
    "layer",
    "condition",
    "applicable",
    "reason",
    "n",
    "flips",
    "flip_rate",
    "flip_low",
    "flip_high",
    "success_rate",
    "success_low",
    "success_high",
    "prefers_a_rate",
    "mean_delta_logp_a",
    "mean_logp_a_minus_b",
    "mean_norm_ratio",
    "clean_accuracy",
    "success_answer_rate",
    "success_answer_low",
    "success_answer_high",
    "mean_delta_logp_answer_a",
    "target",
    "donor",
    "span_rule",
    "layers_patched",
    "donor_layers",
    "estimator",
    "map_n_fit",
    "map_rank",
    "map_underdetermined",
    "map_dev",
    "map_span_dev",
    "map_span_expected",
    "map_span_excess",
    "map_site_cos",
    "map_site_p1",
    "map_site_dir",
    "unprojected_gap_flip",
    "unprojected_gap_success",
]
#: the identity control's columns, on every row of a run's patching table (:func:`identity_control_verdict`)
CONTROL_COLUMNS = [
    "control",
    "fit_rows",
    "identity_control",
    "identity_control_dev",
    "identity_control_span_dev",
    "identity_control_dir",
    "identity_control_p1",
    "identity_control_cos",
    "identity_control_note",
    "twin_control",
    "twin_control_dev",
    "twin_control_span_dev",
    "twin_control_expected_dev",
    "twin_control_p1",
    "twin_control_note",
    "twin_model",
    "twin_seed",
    "twin_max_logit_diff",
    "chain",
]


# -- layers and maps ------------------------------------------------------------------------------


def donor_layer(k: int, n_target_states: int, n_donor_states: int) -> int:
    """The donor hidden-state index nearest in relative depth to target index ``k`` (halves go deeper)."""
    from interlingua.maps.layers import relative_depth_partner

    return relative_depth_partner(k, n_target_states, n_donor_states)


def identity_deviation(m: Any) -> float:
    """``||R - I||_F / sqrt(d)`` of a linear map's matrix (NaN for unequal widths or a map without one).

    0 for the identity; a random rotation of width d gives about sqrt(2). The identity control's measure of
    how far a side's map onto itself is from the identity (the same as ``identity_control_dev`` in maps.csv).
    """
    coef = getattr(m, "coef_", None)
    if coef is None:
        return math.nan
    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim != 2 or coef.shape[0] != coef.shape[1]:
        return math.nan
    return float(np.linalg.norm(coef - np.eye(coef.shape[0])) / math.sqrt(coef.shape[0]))


#: on the directions its rows determine (:func:`fit_span`), a self-map or twin map that is right equals its answer
#: (I or Q, or ridge's shrinkage of it) to rounding: ~1e-10 from float64 rows, ~1e-4 from two float32 forward
#: passes (fit: probes into the twin); a reflection of one of those r directions is 2 / sqrt(r) away (>= 0.06 up
#: to r = 1024), a 0.5 scale 0.5, a transposed random rotation ~sqrt(2)
SPAN_MAX_DEV = 1e-3


def fit_span(x: np.ndarray, eps: float = float(np.finfo(np.float64).eps)) -> tuple[np.ndarray, np.ndarray]:
    """The directions a map's training rows ``x`` (n, d) determine: ``(V, lam)``, ``V`` (d, r) the centred rows'
    right singular vectors above the rank tolerance of :func:`~interlingua.maps.evaluate.centred_rank` (``eps``:
    the precision the rows were stored in), ``lam`` (r,) the eigenvalues of ``X_c^T X_c`` along them.

    A map fitted on these rows is fixed on the span of ``V`` only; off it Procrustes takes the SVD's arbitrary
    choice and ridge shrinks to zero, so a control judges the map on ``V`` (:func:`answer_deviation`).
    """
    xc = np.asarray(x, dtype=np.float64)
    xc = xc - xc.mean(axis=0)
    if not np.any(xc):
        return np.zeros((xc.shape[1], 0)), np.zeros(0)
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    r = min(int(np.count_nonzero(s > s[0] * max(xc.shape) * eps)), xc.shape[0] - 1)
    return vt[:r].T.copy(), s[:r] ** 2


def answer_deviation(m: Any, span: tuple[np.ndarray, np.ndarray] | None, answer: np.ndarray) -> dict[str, float]:
    """How far a fitted linear map is from its known answer (``I`` for a self-map, ``Q`` for a map onto the twin).

    ``dev``: ``||R - A||_F / sqrt(d)`` over the whole space (information: off the rows' span an under-determined
    map is arbitrary). ``span_dev``: ``||V^T (R - A)||_F / sqrt(r)``, the same restricted to the ``r`` directions
    the training rows determine (``span`` from :func:`fit_span`; ``x R`` maps a row). ``span_expected``: what the
    estimator must give there: 0, or for ridge (penalty ``alpha`` in ``fit_info_``) its shrinkage
    ``sqrt(sum_i (alpha / (lam_i + alpha))^2 / r)`` (``R = (G + alpha I)^{-1} G A``, ``A`` orthogonal: the
    derivation of :mod:`interlingua.maps.planted`, restricted to ``V``). ``span_excess``: ``|span_dev -
    span_expected|``, which a control judges. NaN for a map without a matrix or of another shape.
    """
    from interlingua.maps.planted import ridge_shrinkage_norm

    nan = {"dev": math.nan, "span_dev": math.nan, "span_expected": math.nan, "span_excess": math.nan}
    coef = getattr(m, "coef_", None)
    a = np.asarray(answer, dtype=np.float64)
    if coef is None:
        return nan
    diff = np.asarray(coef, dtype=np.float64) - a if np.shape(coef) == a.shape else None
    if diff is None:
        return nan
    out = {**nan, "dev": float(np.linalg.norm(diff) / math.sqrt(a.shape[0]))}
    if span is None or span[0].shape[1] == 0:
        return out
    v, lam = span
    r = v.shape[1]
    alpha = (getattr(m, "fit_info_", None) or {}).get("alpha")
    expected = 0.0 if alpha is None else ridge_shrinkage_norm(lam, float(alpha)) / math.sqrt(r)
    span_dev = float(np.linalg.norm(v.T @ diff) / math.sqrt(r))
    return {**out, "span_dev": span_dev, "span_expected": expected, "span_excess": abs(span_dev - expected)}


@dataclass(frozen=True)
class LayerMaps:
    """Per target layer: the donor layer it is mapped from and the fitted map (donor width -> target width)."""

    maps: Mapping[int, tuple[int, Any]]
    #: per target layer: ``n_fit``, ``rank``, ``underdetermined`` measured on the fit's rows (else from the map)
    facts: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    #: per target layer: the directions of the donor rows the map was fitted on (:func:`fit_span`), when known
    spans: Mapping[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)

    def answer_deviation(self, k: int, answer: np.ndarray) -> dict[str, float]:
        """:func:`answer_deviation` of target layer k's map against ``answer`` on its rows' span."""
        return answer_deviation(self.maps[k][1], self.spans.get(k), answer)

    def fit_facts(self, k: int) -> dict[str, Any]:
        """``n_fit`` (rows the map of target layer k was fitted on), ``rank`` and ``underdetermined`` (see maps.csv).

        Measured on the training rows when :func:`maps_from_representations` fitted the map; for a map given
        fitted, from what it recorded: ``n_train``, the estimator's rank, and ``n_fit - 1 < width``. ``dev``:
        ``||R - I||_F / sqrt(d)``; ``span_dev`` / ``span_expected`` / ``span_excess``: the same on the directions
        the rows determine (:func:`answer_deviation` against I; NaN for unequal widths or an unknown span).
        """
        m = self.maps[k][1]
        coef = getattr(m, "coef_", None)
        shape: tuple[int, ...] = () if coef is None else tuple(np.asarray(coef).shape)
        square = len(shape) == 2 and shape[0] == shape[1]
        to_i = answer_deviation(m, self.spans.get(k), np.eye(shape[0])) if square else {}
        span = {c: float(to_i.get(c, math.nan)) for c in ("span_dev", "span_expected", "span_excess")}
        if k in self.facts:
            return {**self.facts[k], "dev": identity_deviation(m), **span}
        info = getattr(m, "fit_info_", None) or {}
        n_fit, rank = int(info.get("n_train", -1)), int(info.get("rank", -1))
        widths = [w for w in (getattr(m, "n_features_in_", None), getattr(m, "n_features_out_", None)) if w]
        under = bool(widths) and ((n_fit >= 0 and n_fit - 1 < max(widths)) or 0 <= rank < min(widths))
        return {"n_fit": n_fit, "rank": rank, "underdetermined": bool(under), "dev": identity_deviation(m), **span}

    def __contains__(self, k: int) -> bool:
        return k in self.maps

    def donor_layer(self, k: int) -> int:
        return int(self.maps[k][0])

    def transform(self, k: int, x: np.ndarray) -> np.ndarray:
        return self.maps[k][1].transform(x)

    @property
    def estimator(self) -> str:
        names = sorted({getattr(m, "name", type(m).__name__) for _, m in self.maps.values()})
        return ",".join(names)


def as_layer_maps(maps: Any, n_target_states: int, n_donor_states: int) -> LayerMaps | None:
    """Normalise ``maps``: ``None``; a :class:`LayerMaps`; ``{target_layer: Map}`` (donor layer by
    relative depth); ``{target_layer: (donor_layer, Map)}``; or the records of
    :func:`interlingua.maps.fit_layer_maps` with A = donor, B = target (``direction`` ``"a->b"``)."""
    from interlingua.maps.estimators import Map, load_map

    if maps is None or isinstance(maps, LayerMaps):
        return maps
    out: dict[int, tuple[int, Any]] = {}
    if isinstance(maps, Mapping):
        for k, v in maps.items():
            if isinstance(v, Map):
                out[int(k)] = (donor_layer(int(k), n_target_states, n_donor_states), v)
            elif isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], Map):
                out[int(k)] = (int(v[0]), v[1])
            else:
                raise InterventionError(
                    f"maps[{k!r}] must be a fitted Map or (donor_layer, Map); got {type(v).__name__}."
                )
    elif isinstance(maps, Sequence) and not isinstance(maps, (str, bytes)):
        for rec in maps:
            if not isinstance(rec, Mapping) or not {"layer_a", "layer_b", "path"} <= set(rec):
                raise InterventionError(
                    "map records need layer_a (donor), layer_b (target) and path, as fit_layer_maps returns."
                )
            if rec.get("direction", "a->b") != "a->b":
                continue
            out[int(rec["layer_b"])] = (int(rec["layer_a"]), load_map(rec["path"]))
    else:
        raise InterventionError(f"maps must be None, a mapping or fit_layer_maps records; got {type(maps).__name__}.")
    for k, (d, m) in out.items():
        if not 0 <= k < n_target_states or not 0 <= d < n_donor_states:
            raise InterventionError(
                f"map for target layer {k} from donor layer {d} is out of range (target has {n_target_states} "
                f"hidden states, donor {n_donor_states})."
            )
        if not getattr(m, "is_fitted", False):
            raise InterventionError(f"the map for target layer {k} is not fitted.")
    return LayerMaps(out)


def _extraction_view(model: PatchModel) -> Any:
    from types import SimpleNamespace

    return SimpleNamespace(
        model=model.arch.text_module, tokenizer=model.tokenizer, n_hidden_states=model.n_states, arch=model.arch
    )


def fit_patch_maps(
    donor: PatchModel,
    target: PatchModel,
    donor_sentences: Sequence[str],
    target_sentences: Sequence[str],
    *,
    layers: Sequence[int] | None = None,
    estimator: Any = "procrustes",
    pooling: str = "mean",
    batch_size: int = 16,
    progress: bool = False,
    **params: Any,
) -> LayerMaps:
    """Fit one map per target layer (default: all) from the donor's matched layer, on parallel sentences.

    Sentence representations come from the project's extraction
    (:func:`interlingua.data.representations.extract`, special tokens excluded, ``pooling``); the
    donor layer of target layer ``k`` is :func:`donor_layer`. At ``k = L`` the extraction's state
    is after the final norm while the patch site is before it (patching there cannot move the
    read-out; see :mod:`interlingua.patching.hooks`).
    """
    from interlingua.data.representations.extract import extract

    if len(donor_sentences) != len(target_sentences) or len(donor_sentences) < 2:
        raise InterventionError(
            f"maps need parallel sentences: got {len(donor_sentences)} donor and {len(target_sentences)} target "
            "sentences."
        )
    ks = list(range(target.n_states)) if layers is None else sorted({int(k) for k in layers})
    for k in ks:
        if not 0 <= k < target.n_states:
            raise InterventionError(f"target layer {k} is out of range 0..{target.num_layers}.")
    pairs = {k: donor_layer(k, target.n_states, donor.n_states) for k in ks}
    # each forward stops at the deepest layer a map reads (max_layer): the states are the full extraction's bits
    reps_d = extract(
        _extraction_view(donor),
        list(donor_sentences),
        pooling,
        batch_size=batch_size,
        progress=progress,
        max_layer=max(pairs.values()),
    ).pooled[pooling]
    reps_t = extract(
        _extraction_view(target),
        list(target_sentences),
        pooling,
        batch_size=batch_size,
        progress=progress,
        max_layer=max(ks),
    ).pooled[pooling]
    return _fit_pairs(reps_d, reps_t, pairs, estimator, params)


def maps_from_representations(
    reps_donor: Any,
    reps_target: Any,
    *,
    layers: Sequence[int] | None = None,
    estimator: Any = "procrustes",
    **params: Any,
) -> LayerMaps:
    """:func:`fit_patch_maps` on representations already extracted: ``(n_states, n, d)`` per side, rows paired."""
    rd, rt = np.asarray(reps_donor), np.asarray(reps_target)
    if rd.ndim != 3 or rt.ndim != 3 or rd.shape[1] != rt.shape[1]:
        raise InterventionError(
            f"representations must be (n_states, n_sentences, d) with the same sentences; got {rd.shape} and "
            f"{rt.shape}."
        )
    ks = list(range(rt.shape[0])) if layers is None else sorted({int(k) for k in layers})
    for k in ks:
        if not 0 <= k < rt.shape[0]:
            raise InterventionError(f"target layer {k} is out of range 0..{rt.shape[0] - 1}.")
    return _fit_pairs(rd, rt, {k: donor_layer(k, rt.shape[0], rd.shape[0]) for k in ks}, estimator, params)


def _fit_pairs(
    rd: np.ndarray, rt: np.ndarray, pairs: Mapping[int, int], estimator: Any, params: Mapping[str, Any]
) -> LayerMaps:
    """One map per target layer ``k`` from donor layer ``pairs[k]`` (``rd``/``rt`` cover at least those layers)."""
    from interlingua.maps.estimators import get_map
    from interlingua.maps.evaluate import _precision, centred_rank

    out: dict[int, tuple[int, Any]] = {}
    facts: dict[int, dict[str, Any]] = {}
    rank_d: dict[int, int] = {}
    spans: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    span_d: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k, d in pairs.items():
        out[k] = (d, get_map(estimator, **params).fit(rd[d], rt[k]))
        # as in maps.csv: the centred rows' rank at the precision they were stored in, the smaller side
        if d not in rank_d:
            span_d[d] = fit_span(np.asarray(rd[d], dtype=np.float64), _precision(rd))
            rank_d[d] = span_d[d][0].shape[1]
        spans[k] = span_d[d]
        rank_t = centred_rank(np.asarray(rt[k], dtype=np.float64), _precision(rt))
        facts[k] = {
            "n_fit": int(rd.shape[1]),
            "rank": int(min(rank_d[d], rank_t)),
            "underdetermined": bool(rank_d[d] < rd.shape[2] or rank_t < rt.shape[2]),
        }
    return LayerMaps(out, facts, spans)


# -- maps fitted at the patch site: probe prompts, K-fold over countries --------------------------------


def _worst(values: Sequence[float]) -> float:
    """The largest of ``values`` ignoring NaN; NaN when all are (or there are none)."""
    vals = [float(v) for v in values if not math.isnan(float(v))]
    return max(vals) if vals else math.nan


def country_folds(countries: Sequence[str], k: int, seed: int = 0) -> dict[str, int]:
    """Each country's fold (0..k-1): a seeded shuffle dealt round-robin, so fold sizes differ by at most one.

    A country's patch goes through the map of its own fold, fitted on the other folds' countries only, so no
    evaluated country is ever in the rows of the map it is patched through.
    """
    cs = list(dict.fromkeys(countries))
    if isinstance(k, bool) or not isinstance(k, int) or not 2 <= k <= len(cs):
        raise InterventionError(f"probe folds must be an integer in 2..{len(cs)} (the countries); got {k!r}.")
    order = np.random.default_rng([seed, 0xF01D]).permutation(len(cs))
    return {cs[int(i)]: pos % k for pos, i in enumerate(order)}


@dataclass(frozen=True)
class FoldedMaps(LayerMaps):
    """Per fold of countries, the layer maps fitted without that fold's countries; each country's rows go through
    the map of its own fold (:meth:`transform_countries`). ``maps`` is fold 0's (donor layers, estimator);
    :meth:`fit_facts` is the worst over folds (smallest n_fit and rank, any under-determined, largest deviation)."""

    folds: Mapping[int, LayerMaps] = field(default_factory=dict)
    fold_of: Mapping[str, int] = field(default_factory=dict)
    #: per fold, the countries whose rows its maps were fitted on (none of the fold's own)
    trained_on: Mapping[int, frozenset[str]] = field(default_factory=dict)
    description: str = ""

    def fit_facts(self, k: int) -> dict[str, Any]:
        per = [f.fit_facts(k) for f in self.folds.values() if k in f]
        return {
            "n_fit": int(min(x["n_fit"] for x in per)),
            "rank": int(min(x["rank"] for x in per)),
            "underdetermined": bool(any(x["underdetermined"] for x in per)),
            **{c: _worst([float(x[c]) for x in per]) for c in ("dev", "span_dev", "span_expected", "span_excess")},
        }

    def answer_deviation(self, k: int, answer: np.ndarray) -> dict[str, float]:
        """The worst fold's :func:`answer_deviation` (each column its largest over the folds)."""
        per = [f.answer_deviation(k, answer) for f in self.folds.values() if k in f]
        return {c: _worst([x[c] for x in per]) for c in ("dev", "span_dev", "span_expected", "span_excess")}

    def transform_countries(self, k: int, x: np.ndarray, codes: Sequence[str]) -> np.ndarray:
        """Row i (country ``codes[i]``) through the map of that country's fold."""
        x = np.asarray(x)
        out: np.ndarray | None = None
        for fold, lm in self.folds.items():
            rows = [i for i, c in enumerate(codes) if self.fold_of.get(c) == fold]
            if not rows:
                continue
            y = lm.transform(k, x[rows])
            if out is None:
                out = np.full((x.shape[0], y.shape[1]), np.nan)
            out[rows] = y
        missing = [c for c in codes if c not in self.fold_of]
        if missing or out is None:
            raise InterventionError(f"countries {missing} have no fold; fit the probe maps over every country.")
        return out


@dataclass(frozen=True)
class ProbeFitOptions:
    """How :func:`fit_probe_maps` pairs, folds and reads the probe prompts (a run builds it from its
    ``patching:`` section, :meth:`from_spec`)."""

    #: the probe relations whose prompts give rows (None: every probe relation)
    relations: Sequence[str] | None = None
    #: the countries whose prompts give rows and are folded (None: every probe country)
    countries: Sequence[str] | None = None
    #: K of the K-fold over countries (:func:`country_folds`; 2..the number of countries)
    folds: int = 5
    #: seed of the countries' fold assignment
    seed: int = 0
    #: how a subject span's states become one row (:data:`SPAN_RULES`: mean of the span, or its last token)
    span_rule: str = "mean"
    #: prompts per forward pass
    batch_size: int = 16

    def __post_init__(self) -> None:
        if self.span_rule not in SPAN_RULES:
            raise InterventionError(f"span_rule must be one of {list(SPAN_RULES)}; got {self.span_rule!r}.")

    @classmethod
    def from_spec(cls, spec: PatchingSpec, *, seed: int) -> ProbeFitOptions:
        """The options a run's ``patching:`` section sets (every probe relation; ``seed``: the task's)."""
        return cls(
            countries=spec.countries,
            folds=spec.probe_folds,
            seed=seed,
            span_rule=spec.span_rule,
            batch_size=spec.batch_size,
        )


def fit_probe_maps(
    donor: PatchModel,
    target: PatchModel,
    probes: ProbeSet | None = None,
    *,
    language_pairs: Sequence[tuple[str, str]],
    layers: Sequence[int],
    estimator: Any = "procrustes",
    options: ProbeFitOptions | None = None,
    target_fn: Any = None,
    **params: Any,
) -> FoldedMaps:
    """Per-layer maps fitted where the patch is written: the donor's and the target's subject states on the probe
    prompts, one row pair per (relation, language pair, country), K-fold over countries.

    ``language_pairs``: ``(donor_language, target_language)`` probe languages whose prompts are paired (the
    same country and relation on both sides); ``options``: relations, countries, folds, seed, span rule and
    batch size (:class:`ProbeFitOptions`; default its defaults). Fold ``f``'s map is fitted on the rows of the
    countries outside fold ``f`` (:func:`country_folds`), and a country's state is mapped by its own fold's map
    (``estimator`` with ``params``, :func:`~interlingua.maps.estimators.get_map`). ``target_fn``: optional
    ``(layer, donor_rows) -> target_rows`` replacing the target's states (unused by runs; for tests of a planted
    answer). Returns :class:`FoldedMaps` whose facts are measured on each fold's rows (as
    :func:`maps_from_representations`).
    """
    opts = ProbeFitOptions() if options is None else options
    folds, seed, span_rule, batch_size = opts.folds, opts.seed, opts.span_rule, opts.batch_size
    probes = load_probes() if probes is None else probes
    rels = list(opts.relations or probes.relations)
    cs = list(opts.countries or probes.countries)
    ks = sorted({int(k) for k in layers})
    dl = {k: donor_layer(k, target.n_states, donor.n_states) for k in ks}
    rows_d: dict[int, list[np.ndarray]] = {k: [] for k in ks}
    rows_t: dict[int, list[np.ndarray]] = {k: [] for k in ks}
    labels: list[str] = []
    for d_lang, t_lang in language_pairs:
        for rel in rels:
            rc = probes.countries_for(rel, cs)
            sd, _ = _side(donor, probes.probes(rel, d_lang, rc), sorted(set(dl.values())), span_rule, batch_size, False)
            st = None
            if target_fn is None:
                st, _ = _side(target, probes.probes(rel, t_lang, rc), ks, span_rule, batch_size, False)
            for k in ks:
                rows_d[k].append(sd.vectors[dl[k]])
                rows_t[k].append(target_fn(k, sd.vectors[dl[k]]) if st is None else st.vectors[k])
            labels += rc
    fold_of = country_folds(cs, folds, seed)
    label_fold = np.array([fold_of[c] for c in labels])
    from interlingua.maps.estimators import get_map
    from interlingua.maps.evaluate import centred_rank

    xd = {k: np.concatenate(rows_d[k]).astype(np.float64) for k in ks}
    xt = {k: np.concatenate(rows_t[k]).astype(np.float64) for k in ks}
    per_fold: dict[int, LayerMaps] = {}
    trained_on: dict[int, frozenset[str]] = {}
    for f in range(folds):
        train = label_fold != f
        fitted: dict[int, tuple[int, Any]] = {}
        facts: dict[int, dict[str, Any]] = {}
        spans: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for k in ks:
            x, y = xd[k][train], xt[k][train]
            fitted[k] = (dl[k], get_map(estimator, **params).fit(x, y))
            # float32 states: their rank at float32 precision, as maps.csv counts it
            eps32 = float(np.finfo(np.float32).eps)
            spans[k] = fit_span(x, eps32)
            rank_x, rank_y = spans[k][0].shape[1], centred_rank(y, eps32)
            facts[k] = {
                "n_fit": int(train.sum()),
                "rank": int(min(rank_x, rank_y)),
                "underdetermined": bool(rank_x < x.shape[1] or rank_y < y.shape[1]),
            }
        per_fold[f] = LayerMaps(fitted, facts, spans)
        trained_on[f] = frozenset(c for c, t in zip(labels, train) if t)
    what = (
        f"probe prompts' subject states ({len(rels)} relations x {len(language_pairs)} language pairs, "
        f"{folds}-fold over {len(cs)} countries)"
    )
    return FoldedMaps(
        per_fold[0].maps,
        per_fold[0].facts,
        per_fold[0].spans,
        folds=per_fold,
        fold_of=fold_of,
        trained_on=trained_on,
        description=what,
    )


# -- the experiment ---------------------------------------------------------------------------------


def _resolve_model(model: Any, cache_dir: Any) -> PatchModel:
    if isinstance(model, PatchModel):
        return model
    if isinstance(model, tuple) and len(model) == 2:
        return PatchModel.wrap(*model)
    from interlingua.data.models.spec import ModelSpec

    if isinstance(model, ModelSpec):
        return PatchModel.from_spec(model, cache_dir)
    raise InterventionError(
        f"a model must be a ModelSpec, a PatchModel or (causal_lm, tokenizer); got {type(model).__name__}."
    )


def _pairs_of(languages: Any) -> list[tuple[str, str]]:
    if isinstance(languages, str):
        return [(languages, languages)]
    if isinstance(languages, tuple) and len(languages) == 2 and all(isinstance(x, str) for x in languages):
        return [languages]
    out = []
    for item in languages:
        if isinstance(item, str):
            out.append((item, item))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
        else:
            raise InterventionError(
                f"languages must be codes or (donor_language, target_language) pairs; got {item!r}."
            )
    if not out:
        raise InterventionError("no languages given.")
    return out


def _pool(states: torch.Tensor, span: Sequence[int], rule: str) -> np.ndarray:
    idx = list(span)
    if rule == "mean":
        return states[idx].double().mean(dim=0).numpy()
    return states[idx[-1]].double().numpy()


@dataclass
class _Side:
    """One model's encoded probes and pooled span states per layer."""

    encoded: list[EncodedPrompt]
    vectors: dict[int, np.ndarray]  # layer -> (n_countries, d) float64


def _side(
    model: PatchModel, probes: list[Any], layers: Sequence[int], rule: str, batch_size: int, logprobs: bool
) -> tuple[_Side, torch.Tensor | None]:
    encoded = [encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end) for p in probes]
    states, lps = capture_residuals(
        model, [e.input_ids for e in encoded], sorted(set(layers)), batch_size=batch_size, logprobs=logprobs
    )
    vectors = {k: np.stack([_pool(s[k], e.span, rule) for s, e in zip(states, encoded)]) for k in sorted(set(layers))}
    return _Side(encoded, vectors), lps


def _trial_pairs(tokens: list[int], pairs: Any, rng: np.random.Generator) -> list[tuple[int, int]]:
    n = len(tokens)
    valid = [(a, b) for b in range(n) for a in range(n) if a != b and tokens[a] != tokens[b]]
    if not valid:
        raise InterventionError(
            "no pair of countries has answers with different first tokens in the target's tokenizer."
        )
    if pairs == "all":
        return valid
    if pairs == "derangement":
        out = []
        for b in range(n):
            options = [a for a, bb in valid if bb == b]
            if options:
                out.append((int(rng.choice(options)), b))
        return out
    if isinstance(pairs, int) and not isinstance(pairs, bool) and pairs >= 1:
        pick = rng.choice(len(valid), size=min(pairs, len(valid)), replace=False)
        return [valid[i] for i in sorted(pick)]
    raise InterventionError(f"pairs must be 'derangement', 'all' or a positive integer; got {pairs!r}.")


def _shuffled_sources(trials: list[tuple[int, int]], tokens: list[int], rng: np.random.Generator) -> list[int | None]:
    out: list[int | None] = []
    for a, b in trials:
        options = [c for c in range(len(tokens)) if c not in (a, b) and tokens[c] != tokens[a]]
        out.append(int(rng.choice(options)) if options else None)
    return out


@dataclass(frozen=True)
class PatchOptions:
    """What one patching experiment runs (:func:`patch_experiment`), validated once and passed down whole; a run
    builds it from its ``patching:`` section and the task (:meth:`from_spec`). What needs the probes or the models
    (a relation or language the probes lack, too few countries, a start layer past the target's last) is checked
    when the experiment runs."""

    #: ``(donor_language, target_language)``, a list of such pairs, or one probe language code for both
    languages: Any = ("eng", "eng")
    #: the probe relations patched
    relations: Sequence[str] = ("capital",)
    #: start layers ``j``; each patches the target's layers ``j..L``
    layers: Sequence[int] = (2,)
    #: the conditions run (:data:`CONDITIONS`)
    conditions: Sequence[str] = CONDITIONS
    #: the probe countries (None: every country the relation has)
    countries: Sequence[str] | None = None
    #: trials per cell: ``"derangement"`` (one random A per B), ``"all"`` or a positive integer of random pairs
    pairs: Any = "derangement"
    #: seed of the trial pairs, the shuffled sources and the noise
    seed: int = 0
    #: how a span's states become the one vector written (:data:`SPAN_RULES`; module docstring, "Span matching")
    span_rule: str = "mean"
    #: prompts per forward pass
    batch_size: int = 16

    def __post_init__(self) -> None:
        unknown = [c for c in self.conditions if c not in CONDITIONS]
        if unknown or not self.conditions:
            raise InterventionError(f"unknown condition(s) {unknown}; choose from {list(CONDITIONS)}.")
        if self.span_rule not in SPAN_RULES:
            raise InterventionError(f"span_rule must be one of {list(SPAN_RULES)}; got {self.span_rule!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InterventionError(f"seed must be an integer; got {self.seed!r}.")
        _pairs_of(self.languages)
        if any(isinstance(j, bool) or not isinstance(j, (int, np.integer)) for j in self.layers or ()):
            raise InterventionError(f"layers must be integer start layers; got {list(self.layers)!r}.")
        if not self.layers:
            raise InterventionError("layers: give at least one start layer j (patches j..L).")
        if not (self.pairs in ("derangement", "all") or _positive_int(self.pairs)):
            raise InterventionError(f"pairs must be 'derangement', 'all' or a positive integer; got {self.pairs!r}.")

    @classmethod
    def from_spec(
        cls,
        spec: PatchingSpec,
        *,
        languages: Any,
        layers: Sequence[int],
        conditions: Sequence[str],
        seed: int,
    ) -> PatchOptions:
        """The options a run's ``patching:`` section sets, for one task (its probe languages, start layers,
        conditions and seed)."""
        return cls(
            languages=languages,
            relations=spec.relations,
            layers=layers,
            conditions=conditions,
            countries=spec.countries,
            pairs=spec.pairs,
            seed=seed,
            span_rule=spec.span_rule,
            batch_size=spec.batch_size,
        )


def _positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def patch_trials(
    target: Any,
    donor: Any,
    maps: Any,
    probes: ProbeSet | None = None,
    *,
    options: PatchOptions | None = None,
    cache_dir: Any = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trial-level table (:data:`TRIAL_COLUMNS`) and the not-applicable rows; see :func:`patch_experiment`."""
    opts = PatchOptions() if options is None else options
    relations, conditions, countries = opts.relations, opts.conditions, opts.countries
    seed, span_rule, pairs, batch_size = opts.seed, opts.span_rule, opts.pairs, opts.batch_size
    probes = load_probes() if probes is None else probes
    if not isinstance(probes, ProbeSet):
        raise InterventionError(f"probes must be a ProbeSet (load_probes()); got {type(probes).__name__}.")
    lang_pairs = _pairs_of(opts.languages)
    for rel in relations:
        probes.template(rel, probes.languages[0])  # raises for an unknown relation
    for lang in {x for pair in lang_pairs for x in pair}:
        probes.answer_prefix(lang)  # raises for an unknown language
    target_m = _resolve_model(target, cache_dir)
    donor_m = _resolve_model(donor, cache_dir)
    L = target_m.num_layers
    starts = sorted({int(j) for j in opts.layers})
    for j in starts:
        if not 0 <= j <= L:
            raise InterventionError(f"start layer {j} is out of range for the target: 0..{L}.")
    lmaps = as_layer_maps(maps, target_m.n_states, donor_m.n_states)
    patched = list(range(starts[0], L + 1))

    def dlayer(k: int) -> int:
        return (
            lmaps.donor_layer(k)
            if lmaps is not None and k in lmaps
            else donor_layer(k, target_m.n_states, donor_m.n_states)
        )

    na: list[dict[str, Any]] = []

    def map_reason(j: int) -> str:
        missing = [k for k in range(j, L + 1) if lmaps is None or k not in lmaps]
        return "no maps given" if lmaps is None else f"no map for target layer(s) {missing}" if missing else ""

    same_width = target_m.width == donor_m.width
    width_reason = (
        ""
        if same_width
        else f"widths differ (donor {donor_m.width}, target {target_m.width}): an unprojected residual has no meaning "
        "in the other basis"
    )
    rows: list[dict[str, Any]] = []
    # per (relation, languages) and target layer: the mapped donor states against the target's own, same country
    site: dict[tuple[str, str, str], dict[int, tuple[float, float]]] = {
        (rel, dl, tl): {} for rel in relations for dl, tl in lang_pairs
    }
    # and the worst principal direction's error of those mapped states (:func:`site_direction_error`)
    site_dir: dict[tuple[str, str, str], dict[int, float]] = {
        (rel, dl, tl): {} for rel in relations for dl, tl in lang_pairs
    }
    for ri, rel in enumerate(relations):
        for li, (dl, tl) in enumerate(lang_pairs):
            cs = probes.countries_for(rel, countries)
            if len(cs) < 3:
                raise InterventionError(f"relation {rel!r} needs at least 3 countries; got {cs}.")
            rng = np.random.default_rng([seed, ri, li])
            t_probes = probes.probes(rel, tl, cs)
            d_probes = probes.probes(rel, dl, cs)
            need_t = patched
            need_d = sorted({dlayer(k) for k in patched})
            tgt, _ = _side(target_m, t_probes, need_t, span_rule, batch_size, logprobs=False)
            don = (
                _side(donor_m, d_probes, need_d, span_rule, batch_size, logprobs=False)[0]
                if any(c in conditions for c in ("mapped", "unprojected", "shuffled", "noise"))
                else None
            )
            answers = [answer_tokens(target_m.tokenizer, p.prompt, p.continuation) for p in t_probes]
            tokens = [a[0] for a in answers]
            trials = _trial_pairs(tokens, pairs, rng)
            shuffled = _shuffled_sources(trials, tokens, rng)
            # every pass over the trials (clean and patched) runs the same prompts (B's, with A's answer
            # appended to score it whole) in the same batches from the same position (B's first patched
            # token), so a patch that changes nothing changes no number, bit for bit
            where_b = [
                list(tgt.encoded[b].span) if span_rule == "mean" else list(tgt.encoded[b].span)[-1:] for _, b in trials
            ]
            run_args: _RunArgs = {
                "token_ids": [[tokens[a], tokens[b]] for a, b in trials],
                "continuations": [answers[a] for a, _ in trials],
                "compute_from": [w[0] for w in where_b],
                "batch_size": batch_size,
            }
            prompts_b = [tgt.encoded[b].input_ids for _, b in trials]
            clean = run_patched(target_m, prompts_b, [{} for _ in trials], **run_args)
            assert clean.answer is not None
            mapped: dict[int, np.ndarray] = {}
            if lmaps is not None and don is not None:
                for k in patched:
                    if k in lmaps:
                        mapped[k] = (
                            lmaps.transform_countries(k, don.vectors[dlayer(k)], cs)
                            if isinstance(lmaps, FoldedMaps)
                            else lmaps.transform(k, don.vectors[dlayer(k)])
                        )
                        site[(rel, dl, tl)][k] = _site_agreement(mapped[k], tgt.vectors[k])
                        site_dir[(rel, dl, tl)][k] = site_direction_error(mapped[k], tgt.vectors[k])
            for j in starts:
                ks = list(range(j, L + 1))
                for cond in conditions:
                    label = {
                        "relation": rel,
                        "donor_language": dl,
                        "target_language": tl,
                        "layer": j,
                        "condition": cond,
                    }
                    if cond in NEEDS_MAP and map_reason(j):
                        na.append({**label, "reason": map_reason(j)})
                        continue
                    if cond == "unprojected" and not same_width:
                        na.append({**label, "reason": width_reason})
                        continue
                    if cond == "noise":
                        noise_rng = np.random.default_rng([seed, ri, li, j, 1])
                        stats = {k: (mapped[k].mean(axis=0), mapped[k].std(axis=0, ddof=1)) for k in ks}
                    source: list[int | None] = []
                    ratios: list[float] = []
                    plans: list[dict[int, tuple[list[int], torch.Tensor]]] = []
                    for t, (a, b) in enumerate(trials):
                        where = where_b[t]
                        src: int | None = a
                        vecs: dict[int, np.ndarray] = {}
                        if cond == "within":
                            vecs = {k: tgt.vectors[k][a] for k in ks}
                        elif cond == "mapped":
                            vecs = {k: mapped[k][a] for k in ks}
                        elif cond == "unprojected":
                            assert don is not None
                            vecs = {k: don.vectors[dlayer(k)][a] for k in ks}
                        elif cond == "shuffled":
                            src = shuffled[t]
                            vecs = {} if src is None else {k: mapped[k][src] for k in ks}
                        elif cond == "noise":
                            src = None
                            vecs = {
                                k: stats[k][0] + stats[k][1] * noise_rng.standard_normal(stats[k][0].shape) for k in ks
                            }
                        else:  # none
                            src = None
                        source.append(src)
                        ratios.append(
                            float(
                                np.mean(
                                    [
                                        np.linalg.norm(v) / max(float(np.linalg.norm(tgt.vectors[k][b])), 1e-30)
                                        for k, v in vecs.items()
                                    ]
                                )
                            )
                            if vecs
                            else math.nan
                        )
                        plans.append({k: (where, torch.as_tensor(v, dtype=torch.float32)) for k, v in vecs.items()})
                    out = clean if cond == "none" else run_patched(target_m, prompts_b, plans, **run_args)
                    assert out.answer is not None
                    logp_a = out.selected[:, 0].tolist()
                    logp_b = out.selected[:, 1].tolist()
                    top1 = out.top1.tolist()
                    whole = out.answer.tolist()
                    for t, (a, b) in enumerate(trials):
                        source_t = source[t]
                        la0 = float(clean.selected[t, 0])
                        lb0 = float(clean.selected[t, 1])
                        whole0 = float(clean.answer[t])
                        rows.append(
                            {
                                **label,
                                "country_a": cs[a],
                                "country_b": cs[b],
                                "source": "" if source_t is None else cs[source_t],
                                "token_a": tokens[a],
                                "token_b": tokens[b],
                                "logp_a": logp_a[t],
                                "logp_b": logp_b[t],
                                "logp_a_clean": la0,
                                "logp_b_clean": lb0,
                                "top1": int(top1[t]),
                                "flip": int(top1[t]) == tokens[a],
                                "success": logp_a[t] > la0,
                                "prefers_a": logp_a[t] > logp_b[t],
                                "norm_ratio": ratios[t],
                                "clean_correct": int(clean.top1[t]) == tokens[b],
                                "answer_a_tokens": len(answers[a]),
                                "logp_answer_a": whole[t],
                                "logp_answer_a_clean": whole0,
                                "success_answer": whole[t] > whole0,
                            }
                        )
    meta = {
        "target": target_m.name,
        "donor": donor_m.name,
        "span_rule": span_rule,
        "L": L,
        "estimator": "" if lmaps is None else lmaps.estimator,
        "donor_layers": {k: dlayer(k) for k in patched},
        "map_facts": {} if lmaps is None else {k: lmaps.fit_facts(k) for k in patched if k in lmaps},
        "site": site,
        "site_dir": site_dir,
    }
    trials_df = pd.DataFrame(rows, columns=TRIAL_COLUMNS)
    trials_df.attrs.update(meta)
    na_df = pd.DataFrame(na, columns=["relation", "donor_language", "target_language", "layer", "condition", "reason"])
    return trials_df, na_df


def _site_agreement(mapped: np.ndarray, own: np.ndarray) -> tuple[float, float]:
    """Mapped donor states against the target's own states at the patch site, row i = country i on both sides.

    ``(mean cosine of row i with row i, P@1)``: P@1 is the share of countries whose mapped state is nearest (by
    cosine) to the target's own state of the same country among all the probe countries. These states are held
    out from the map's fit (probe prompts, not corpus rows); for a side mapped onto itself both must be 1.
    """
    a = mapped / np.maximum(np.linalg.norm(mapped, axis=1, keepdims=True), 1e-30)
    b = own / np.maximum(np.linalg.norm(own, axis=1, keepdims=True), 1e-30)
    sim = a @ b.T
    return float(np.mean(np.diag(sim))), float(np.mean(np.argmax(sim, axis=1) == np.arange(len(sim))))


def site_direction_error(mapped: np.ndarray, own: np.ndarray) -> float:
    """The worst held-out direction's error at the patch site: both sides' states of the probe countries centred
    on their own means, then :func:`interlingua.maps.evaluate.direction_errors` (per principal direction ``v_i``
    of the target's own states, ``||(mapped - own) v_i|| / s_i``). 0 for the right self-map; about 2 along a
    reflected direction the states occupy, 0.5 for a 0.5 scale; NaN for fewer than two countries."""
    from interlingua.maps.evaluate import direction_errors

    a, b = np.asarray(mapped, dtype=np.float64), np.asarray(own, dtype=np.float64)
    if a.shape != b.shape or a.shape[0] < 2:
        return math.nan
    errs = direction_errors(a - a.mean(axis=0), b - b.mean(axis=0))
    return float(errs.max()) if errs.size else math.nan


def _map_columns(
    facts: Mapping[int, Mapping[str, Any]],
    ks: Sequence[int],
    site: Mapping[int, tuple[float, float]] | None = None,
    site_dir: Mapping[int, float] | None = None,
    last: int | None = None,
) -> dict[str, Any]:
    """The maps behind a row (target layers ``ks``): smallest n_fit and rank, whether any is under-determined, the
    largest ``||R - I||_F / sqrt(d)`` over the whole space and on the rows' span (:func:`answer_deviation`), the
    worst layer's patch-site cosine and P@1 (:func:`_site_agreement`) and, below the ``last`` layer (whose patch
    cannot move the prediction), the worst patch-site direction error (:func:`site_direction_error`)."""
    used = [facts[k] for k in ks if k in facts]
    if not used:
        return {
            "map_n_fit": -1,
            "map_rank": -1,
            "map_underdetermined": False,
            "map_dev": math.nan,
            "map_span_dev": math.nan,
            "map_span_expected": math.nan,
            "map_span_excess": math.nan,
            "map_site_cos": math.nan,
            "map_site_p1": math.nan,
            "map_site_dir": math.nan,
        }
    at = [site[k] for k in ks if site is not None and k in site]
    dirs = [site_dir[k] for k in ks if site_dir is not None and k in site_dir and (last is None or k < last)]
    return {
        "map_n_fit": int(min(f["n_fit"] for f in used)),
        "map_rank": int(min(f["rank"] for f in used)),
        "map_underdetermined": bool(any(f["underdetermined"] for f in used)),
        **{
            f"map_{c}": _worst([float(f.get(c, math.nan)) for f in used])
            for c in ("dev", "span_dev", "span_expected", "span_excess")
        },
        "map_site_cos": float(min(c for c, _ in at)) if at else math.nan,
        "map_site_p1": float(min(p for _, p in at)) if at else math.nan,
        "map_site_dir": _worst(dirs),
    }


def summarize_trials(trials: pd.DataFrame, not_applicable: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (relation, languages, start layer, condition): rates with 95% Wilson intervals."""
    from interlingua.analysis.stats import wilson_interval

    meta = dict(trials.attrs)
    keys = ["relation", "donor_language", "target_language", "layer", "condition"]
    out: list[dict[str, Any]] = []
    L = meta.get("L")
    donor_layers = meta.get("donor_layers", {})
    for key, g in trials.groupby(keys, sort=False):
        n = len(g)
        flips, succ = int(g["flip"].sum()), int(g["success"].sum())
        fl, fh = wilson_interval(flips, n)
        sl, sh = wilson_interval(succ, n)
        whole = int(g["success_answer"].sum())
        wl, wh = wilson_interval(whole, n)
        j = int(key[3])
        ks = list(range(j, int(L) + 1)) if L is not None else []
        cond = key[4]
        out.append(
            {
                **dict(zip(keys, key)),
                "applicable": True,
                "reason": "",
                "n": n,
                "flips": flips,
                "flip_rate": flips / n,
                "flip_low": fl,
                "flip_high": fh,
                "success_rate": succ / n,
                "success_low": sl,
                "success_high": sh,
                "prefers_a_rate": float(g["prefers_a"].mean()),
                "mean_delta_logp_a": float((g["logp_a"] - g["logp_a_clean"]).mean()),
                "mean_logp_a_minus_b": float((g["logp_a"] - g["logp_b"]).mean()),
                "mean_norm_ratio": float(g["norm_ratio"].mean()) if g["norm_ratio"].notna().any() else math.nan,
                "clean_accuracy": float(g["clean_correct"].mean()) if "clean_correct" in g else math.nan,
                "success_answer_rate": whole / n,
                "success_answer_low": wl,
                "success_answer_high": wh,
                "mean_delta_logp_answer_a": float((g["logp_answer_a"] - g["logp_answer_a_clean"]).mean()),
                "layers_patched": f"{j}..{L}" if cond != "none" and L is not None else "",
                "donor_layers": ",".join(str(donor_layers[k]) for k in ks if k in donor_layers)
                if cond in ("mapped", "unprojected", "shuffled", "noise")
                else "",
                "estimator": meta.get("estimator", "") if cond in NEEDS_MAP else "",
                **_map_columns(
                    meta.get("map_facts", {}),
                    ks if cond in NEEDS_MAP else [],
                    meta.get("site", {}).get(tuple(key[:3])),
                    meta.get("site_dir", {}).get(tuple(key[:3])),
                    None if L is None else int(L),
                ),
            }
        )
    if not_applicable is not None:
        for rec in not_applicable.to_dict("records"):
            out.append({**rec, "applicable": False, "n": 0, "flips": 0})
    table = pd.DataFrame(out, columns=SUMMARY_COLUMNS)
    table["target"] = meta.get("target", "")
    table["donor"] = meta.get("donor", "")
    table["span_rule"] = meta.get("span_rule", "")
    _unprojected_gap(table)
    order = {c: i for i, c in enumerate(CONDITIONS)}
    table["_o"] = table["condition"].map(order)
    table = table.sort_values(["relation", "donor_language", "target_language", "layer", "_o"], kind="stable").drop(
        columns="_o"
    )
    return table.reset_index(drop=True)


def _unprojected_gap(table: pd.DataFrame) -> None:
    """On each applicable ``mapped`` row: its flip and success rates minus the ``unprojected`` row's of the same cell.

    Within one model across languages (Gemma English -> Gemma German) ``unprojected`` is the ceiling a good map
    should approach, so a gap near 0 says the map loses nothing the raw residual carries; NaN where a cell has no
    applicable ``unprojected`` row (unequal widths) or no ``mapped`` one.
    """
    table["unprojected_gap_flip"] = math.nan
    table["unprojected_gap_success"] = math.nan
    ok = table["applicable"].astype(bool)
    keys = ["relation", "donor_language", "target_language", "layer"]
    unproj = table[ok & (table["condition"] == "unprojected")].set_index(keys)
    for i in table.index[ok & (table["condition"] == "mapped")]:
        cell = tuple(table.loc[i, keys])
        if cell in unproj.index:
            ref = unproj.loc[cell]
            table.loc[i, "unprojected_gap_flip"] = float(table.loc[i, "flip_rate"]) - float(ref["flip_rate"])
            table.loc[i, "unprojected_gap_success"] = float(table.loc[i, "success_rate"]) - float(ref["success_rate"])


#: the behavioural rule of both controls: ``mapped`` and ``within`` patch alike unless a two-sided Fisher exact test
#: of their counts rejects equal rates, with Holm's step-down correction over all the control's comparisons (every
#: cell x flip, first-token and whole-answer success) at this family-wise level; so a right map fails its control
#: by chance with probability at most 0.05 however many cells the run has
BEHAVIOUR_ALPHA = 0.05

_RATES = (("flip", "flip_rate"), ("success", "success_rate"), ("success_answer", "success_answer_rate"))
_BEHAVIOUR_NOTE = re.compile(r"^\S+ j=-?\d+: mapped |^no applicable mapped row$")


def fisher_two_sided(k1: int, n1: int, k2: int, n2: int) -> float:
    """Fisher's exact test of equal rates for ``k1`` of ``n1`` against ``k2`` of ``n2``: the two-sided p-value
    (the hypergeometric probability of every table with the same margins no more likely than the observed one)."""
    from scipy.stats import fisher_exact

    if not (0 <= k1 <= n1 and 0 <= k2 <= n2) or n1 < 1 or n2 < 1:
        raise InterventionError(f"counts must satisfy 0 <= k <= n, n >= 1; got {k1}/{n1} and {k2}/{n2}.")
    return float(fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided")[1])


def holm_reject(p: Sequence[float], alpha: float = BEHAVIOUR_ALPHA) -> list[bool]:
    """Holm's step-down procedure: which of the hypotheses with p-values ``p`` are rejected at family-wise error
    ``alpha`` (the i-th smallest, from 0, against ``alpha / (m - i)`` until the first that is not)."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out = [False] * len(p)
    for rank, i in enumerate(order):
        if not p[i] <= alpha / (len(p) - rank):
            break
        out[i] = True
    return out


def behaviour_tests(ok: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, rate): ``mapped`` against ``within`` counts (``round(rate * n)``), Fisher's two-sided p, Holm's
    threshold and whether it rejects "mapped and within patch alike" (:data:`BEHAVIOUR_ALPHA`, family: every
    comparison in ``ok``). The trials are the same prompt pairs for both conditions, so a paired (McNemar) test
    would be more powerful; it needs per-trial outcomes, which the stored summary rows do not keep, so the test
    here is the unpaired exact one on the counts (valid, conservative for positively correlated outcomes)."""
    keys = ["relation", "donor_language", "target_language", "layer"]
    recs: list[dict[str, Any]] = []
    for cell, g in ok.groupby(keys, sort=False):
        by = {c: r for c, r in zip(g["condition"], g.to_dict("records"))}
        if "mapped" not in by or "within" not in by:
            continue
        m, w = by["mapped"], by["within"]
        if "n" not in m or "n" not in w:
            raise InterventionError(
                "the control's summary rows need the trial count column n to test mapped vs within."
            )
        nm, nw = int(m["n"]), int(w["n"])
        for name, rate in _RATES:
            km, kw = int(round(float(m[rate]) * nm)), int(round(float(w[rate]) * nw))
            recs.append(
                {
                    "relation": cell[0],
                    "layer": cell[3],
                    "rate": name,
                    "mapped": float(m[rate]),
                    "within": float(w[rate]),
                    "k_mapped": km,
                    "n_mapped": nm,
                    "k_within": kw,
                    "n_within": nw,
                    "p": fisher_two_sided(km, nm, kw, nw),
                }
            )
    table = pd.DataFrame(recs, columns=list(recs[0]) if recs else ["relation", "layer", "rate", "p"])
    p = table["p"].tolist()
    rank = {i: r for r, i in enumerate(sorted(range(len(p)), key=lambda i: p[i]))}
    table["holm_threshold"] = [BEHAVIOUR_ALPHA / (len(p) - rank[i]) for i in range(len(p))]
    table["rejected"] = holm_reject(p)
    return table


def _mapped_vs_within(ok: pd.DataFrame) -> list[str]:
    """Cells where ``mapped`` and ``within`` patch differently (:func:`behaviour_tests` rejects equal rates for a
    flip, first-token or whole-answer success rate); "no applicable mapped row" when there is none."""
    failures: list[str] = []
    tests = behaviour_tests(ok)
    for r in tests[tests["rejected"].astype(bool)].to_dict("records"):
        failures.append(
            f"{r['relation']} j={r['layer']}: mapped {r['rate']} {r['mapped']:.3f} vs within {r['within']:.3f} "
            f"({r['k_mapped']}/{r['n_mapped']} vs {r['k_within']}/{r['n_within']}, Fisher p = {r['p']:.2g} <= "
            f"Holm's {r['holm_threshold']:.2g} of {len(tests)} comparisons)"
        )
    if (ok["condition"] == "mapped").sum() == 0:
        failures.append("no applicable mapped row")
    return failures


def rejudge_control_rows(rows: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """A control's stored rows with its behavioural rule applied afresh: the stored note's other failures (matrix,
    span, patch site: unchanged functions of the stored fit) kept, the behavioural ones (whatever rule stored them)
    replaced by :func:`_mapped_vs_within` on the rows' own counts, and the verdict set from the result. So rows
    stored under an earlier behavioural rule are judged by the current one without recomputing the patch."""
    if not rows or f"{kind}_control_note" not in rows[0]:
        return rows
    table = pd.DataFrame(rows)
    ok = table[table["applicable"].astype(bool)]
    note = str(rows[0].get(f"{kind}_control_note") or "")
    kept = [part for part in note.split("; ") if part and not _BEHAVIOUR_NOTE.search(part)]
    failures = _mapped_vs_within(ok) + kept
    verdict = {f"{kind}_control": "failed" if failures else "passed", f"{kind}_control_note": "; ".join(failures)}
    return [{**row, **verdict} for row in rows]


#: without a known span (maps given fitted), the twin control falls back to the whole space: every patched layer's
#: map (below the last) this close to Q, ||R - Q||_F / sqrt(d). Procrustes on rows that span the width recovers Q
#: to ~1e-10 from a side's rows and the same rows times Q, and to ~1e-5 from two float32 forward passes; a map
#: wrong by one reflection is 2 / sqrt(d) away (>= 0.06 up to d = 1024), a transposed one ~sqrt(2)
TWIN_CONTROL_MAX_DEV = 1e-3


def _span_failures(span: Mapping[int, Mapping[str, float]], what: str) -> tuple[list[str], float, float]:
    """The span criterion of both controls: on every judged layer, ``|span_dev - span_expected|`` at most
    :data:`SPAN_MAX_DEV` and the expected (ridge's shrinkage) at most :data:`~interlingua.maps.planted.RIDGE_MAX_DEV`.
    Returns the failures, the largest ``span_dev`` and the largest ``span_expected``."""
    from interlingua.maps.planted import RIDGE_MAX_DEV

    excess = _worst([float(v.get("span_excess", math.nan)) for v in span.values()])
    dev = _worst([float(v.get("span_dev", math.nan)) for v in span.values()])
    expected = _worst([float(v.get("span_expected", math.nan)) for v in span.values()])
    failures = []
    if not excess <= SPAN_MAX_DEV:
        failures.append(
            f"on the fit rows' span ||V^T (R - {what})||_F / sqrt(r) = {dev:.3g}, expected {expected:.3g} "
            f"(|difference| {excess:.3g} > {SPAN_MAX_DEV})"
        )
    if expected > RIDGE_MAX_DEV:
        failures.append(
            f"ridge's penalty shrinks the map {expected:.3g} > {RIDGE_MAX_DEV} away from {what} on its span"
        )
    return failures, dev, expected


def twin_control_verdict(
    table: pd.DataFrame,
    q_devs: Mapping[int, float],
    site_p1: Mapping[int, float] | None = None,
    span: Mapping[int, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """Did the map fitted from a model onto its rotated twin (:mod:`interlingua.patching.twin`) pass?

    The twin computes the same function with its residual stream rotated by a known orthogonal ``Q``, so the map
    fitted from the model's states to the twin's must be ``Q`` where its rows determine it: ``span``, per patched
    target layer below the last, :func:`answer_deviation` against ``Q`` (worst fold), whose ``span_dev`` must
    equal ``span_expected`` (0, or ridge's shrinkage of ``Q``) within :data:`SPAN_MAX_DEV`; the model's probe
    states mapped by it must be nearest to the twin's own states of the same country (patch-site P@1 1.0); and
    ``mapped`` (the model's residual through the map into the twin) must patch like ``within`` (the twin's own)
    in every cell (:func:`behaviour_tests`: no rate told apart at family-wise :data:`BEHAVIOUR_ALPHA`). Unlike
    the identity control this fails for a map applied transposed or in the wrong direction (``Q^T``, about
    sqrt(2) from ``Q``) or in another basis; a reflection of one determined direction is ``2 / sqrt(r)`` away,
    a 0.5 scale 0.5. ``q_devs``: ``||R - Q||_F / sqrt(d)`` over the whole space, reported (off the span an
    under-determined map is arbitrary) and judged (:data:`TWIN_CONTROL_MAX_DEV`) only when ``span`` is not given
    or not known.

    Returns ``twin_control`` (``"passed"`` / ``"failed"``), ``twin_control_dev`` (largest, whole space),
    ``twin_control_span_dev`` / ``twin_control_expected_dev`` (largest on the span), ``twin_control_p1`` (worst
    cell), ``twin_control_note`` (what failed). ``site_p1``: the patch-site P@1 per target layer to judge
    (default: the rows' worst over every patched layer). The last layer is left out of ``q_devs``, ``span`` and
    ``site_p1`` by the caller: its stored rows are after the final norm (the twin's ``(h / g) Q``, not ``h Q``)
    while its patch site is before it, and a patch there cannot change the prediction
    (:mod:`interlingua.patching.hooks`).
    """
    ok = table[table["applicable"].astype(bool)]
    failures = _mapped_vs_within(ok)
    mapped_rows = ok[ok["condition"] == "mapped"]
    devs = [float(v) for v in q_devs.values()]
    dev = float(max(devs)) if devs else math.nan
    if site_p1 is not None:
        p1 = float(min(site_p1.values())) if site_p1 else math.nan
    else:
        p1 = float(mapped_rows["map_site_p1"].min()) if not mapped_rows.empty else math.nan
    span_dev = expected = math.nan
    if span and not math.isnan(_worst([float(v.get("span_excess", math.nan)) for v in span.values()])):
        more, span_dev, expected = _span_failures(span, "Q")
        failures += more
    elif not dev <= TWIN_CONTROL_MAX_DEV:
        failures.append(f"||R - Q||_F / sqrt(d) = {dev:.3g} > {TWIN_CONTROL_MAX_DEV}")
    if not p1 >= 1.0:
        failures.append(f"patch-site P@1 {p1:.3g} < 1")
    return {
        "twin_control": "failed" if failures else "passed",
        "twin_control_dev": dev,
        "twin_control_span_dev": span_dev,
        "twin_control_expected_dev": expected,
        "twin_control_p1": p1,
        "twin_control_note": "; ".join(failures),
    }


def identity_control_verdict(table: pd.DataFrame) -> dict[str, Any]:
    """Did a side's map onto itself pass the identity control? Read from that experiment's summary table.

    The control patches the target with its own residual (donor = target, same language) through the map fitted
    from that side onto itself. It passes when, in every (relation, start layer) cell, ``mapped`` and ``within``
    patch alike (:func:`behaviour_tests`: Fisher's exact test of each one's flip, first-token success and
    whole-answer success count, none rejected after Holm's correction over all the control's comparisons at
    family-wise :data:`BEHAVIOUR_ALPHA`; ``unprojected`` is ``within`` here, the same vector), and the map is the
    identity where it is determined and where the patch is written:

    * on the directions the fit rows determine (``map_span_dev``, ``||V^T (R - I)||_F / sqrt(r)``,
      :func:`answer_deviation`): equal to what the estimator must give there (0, or ridge's shrinkage,
      ``map_span_expected``) within :data:`SPAN_MAX_DEV` on every patched layer. Off that span an
      under-determined map is arbitrary: the whole-space ``||R - I||_F / sqrt(d)`` (``map_dev``) and the
      under-determination flag are reported, and judged (at most
      :data:`~interlingua.maps.evaluate.IDENTITY_CONTROL_MAX_DEV`) only for maps whose span is not known;
    * at the patch site: the mapped probe states of the held-out countries, per principal direction of the
      target's own (``map_site_dir``, :func:`site_direction_error`, patched layers below the last) within
      :data:`~interlingua.maps.evaluate.IDENTITY_CONTROL_MAX_DIR` of the data's spread there (a reflection of a
      direction the states occupy gives ~2, a 0.5 scale 0.5), at mean cosine at least
      :data:`~interlingua.maps.evaluate.IDENTITY_CONTROL_MIN_COS` with the true ones and P@1 1.0.

    Returns ``identity_control`` (``"passed"`` / ``"failed"``), ``identity_control_dev`` (largest whole-space
    deviation), ``identity_control_span_dev`` (largest on the span), ``identity_control_dir`` (worst patch-site
    direction), ``_p1`` / ``_cos`` (worst cell) and ``identity_control_note`` (what failed). A table without the
    span or direction columns (stored before they existed) is judged on what it has.
    """
    from interlingua.maps.evaluate import IDENTITY_CONTROL_MAX_DEV, IDENTITY_CONTROL_MAX_DIR, IDENTITY_CONTROL_MIN_COS

    ok = table[table["applicable"].astype(bool)]
    failures = _mapped_vs_within(ok)
    mapped_rows = ok[ok["condition"] == "mapped"]

    def worst(col: str, how: str = "max") -> float:
        if col not in mapped_rows or mapped_rows.empty:
            return math.nan
        v = mapped_rows[col].astype(float)
        return float(v.max() if how == "max" else v.min())

    dev = worst("map_dev")
    p1 = worst("map_site_p1", "min")
    cos = worst("map_site_cos", "min")
    span_dev, direction = worst("map_span_dev"), worst("map_site_dir")
    if not math.isnan(worst("map_span_excess")):
        span = {
            0: {
                "span_dev": span_dev,
                "span_expected": worst("map_span_expected"),
                "span_excess": worst("map_span_excess"),
            }
        }
        failures += _span_failures(span, "I")[0]
    elif not dev <= IDENTITY_CONTROL_MAX_DEV:
        failures.append(f"||R - I||_F / sqrt(d) = {dev:.3g} > {IDENTITY_CONTROL_MAX_DEV}")
    if "map_site_dir" in mapped_rows and not direction <= IDENTITY_CONTROL_MAX_DIR:
        failures.append(
            f"patch-site worst direction error {direction:.3g} > {IDENTITY_CONTROL_MAX_DIR} (the held-out probe "
            "states are not carried to themselves along every direction they occupy)"
        )
    if not cos >= IDENTITY_CONTROL_MIN_COS:
        failures.append(f"patch-site cosine {cos:.3g} < {IDENTITY_CONTROL_MIN_COS}")
    if not p1 >= 1.0:
        failures.append(f"patch-site P@1 {p1:.3g} < 1")
    return {
        "identity_control": "failed" if failures else "passed",
        "identity_control_dev": dev,
        "identity_control_span_dev": span_dev,
        "identity_control_dir": direction,
        "identity_control_p1": p1,
        "identity_control_cos": cos,
        "identity_control_note": "; ".join(failures),
    }


def patch_experiment(
    target_spec: Any,
    donor_spec: Any,
    maps: Any,
    probes: ProbeSet | None = None,
    *,
    options: PatchOptions | None = None,
    cache_dir: Any = None,
    threads: int | None = None,
    return_trials: bool = False,
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Patch the donor's residual for country A into the target's prompt about B; one summary table.

    ``target_spec`` / ``donor_spec``: :class:`~interlingua.data.models.ModelSpec` (loaded with
    ``load_causal_lm``), :class:`~interlingua.patching.hooks.PatchModel` or
    ``(causal_lm, tokenizer)``. ``maps``: per target layer, the map from the donor's matched layer
    (:func:`fit_patch_maps`, :func:`as_layer_maps` for the forms accepted; ``None`` marks the
    mapped, shuffled and noise conditions not applicable). ``probes``: default the packaged
    :func:`~interlingua.patching.probes.load_probes`. ``options``: what the experiment runs
    (:class:`PatchOptions`: languages, relations, start layers, conditions, countries, trial pairs, seed,
    span rule, batch size; default its defaults). See the module docstring for conditions, rules and
    outcomes.

    ``threads``: torch's CPU thread count for the call (restored afterwards); on shared cores 1
    can be several times faster than torch's default.

    Returns the summary (:data:`SUMMARY_COLUMNS`, not-applicable conditions as rows with
    ``applicable`` False and the reason); with ``return_trials=True`` also the trial table.
    Raises :class:`InterventionError` on bad input.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise InterventionError(f"threads must be a positive integer or None; got {threads!r}.")
    before = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        trials, na = patch_trials(
            target_spec,
            donor_spec,
            maps,
            probes,
            options=options,
            cache_dir=cache_dir,
        )
    finally:
        torch.set_num_threads(before)
    summary = summarize_trials(trials, na)
    return (summary, trials) if return_trials else summary
