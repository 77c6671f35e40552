"""Held-out evaluation of maps between two sides, layer by layer: the rows of ``maps.csv``.

:func:`evaluate_pair` is the one call per pair (and pooling). For each layer
pair (:func:`~interlingua.maps.layers.layer_pairs`), each fold, each
estimator and each direction it fits the map on the fold's training
sentences and scores the held-out ones:

- **retrieval**: every held-out mapped source row is a query against all the
  fold's held-out target rows (:mod:`~interlingua.maps.retrieval`): P@1,
  P@5, MRR by cosine and by CSLS. Before the cosine, each space is centred
  with a TRAINING mean: queries with the mean of the mapped training rows
  (for an affine map, ``f(mean of training sources)``), targets with the mean
  of the training targets; no held-out statistic enters;
- **reconstruction**: ``mse`` (per coordinate), ``rel_mse`` =
  ``sum ||y - f(x)||^2 / sum ||y - mean_fold(y)||^2`` (the mean over each
  fold's held-out targets), linear CKA (biased and debiased,
  :func:`interlingua.analysis.measures.linear_cka`) between the held-out mapped rows of
  all folds and their targets (each row mapped by the one map that did not
  see it);
- **baselines and controls, in the same row**: chance (``1 / n_test`` of each
  row's fold, averaged), the identity (no map; equal widths only), and the
  shuffled-fit control: the same estimator fitted on the training rows paired
  through the pair's fixed permutation (``control_permutation``, restricted to
  the training rows by :func:`~interlingua.maps.folds.restricted_permutation`,
  so no held-out sentence enters a fit) and scored on the correctly paired
  held-out rows; its retrieval should sit at chance;
- **identity control** (a positive control with a known answer, on by
  default): the same estimator fitted from the row's SOURCE side onto itself
  on the same training rows must be the identity. Each row carries
  ``identity_control_dev`` = ``||R - I||_F / sqrt(d)`` of the fitted matrix
  (worst fold; NaN for a map without one), the held-out P@1 of the self-map
  (cosine, training-mean centring as above) and ``identity_control_cos``, the
  mean cosine of mapped and true held-out rows (both centred with the training
  mean), and ``identity_control_dir``, the worst held-out direction: the
  held-out rows (training-mean centred) are decomposed into their principal
  directions ``v_i`` (spread ``s_i``, those above :data:`IDENTITY_CONTROL_DIR_FLOOR`
  of the largest) and each gets ``||(f(X) - X) v_i|| / s_i``, the self-map's
  error along that direction relative to the data's own spread there (worst
  direction, worst fold). The first two are averages over the width and over
  rows, which a residual stream with a few massive dimensions lets a map pass
  while it reflects one direction (``||R - I||_F / sqrt(d) = 2 / sqrt(d)``,
  cosine 0.995 at d = 640: measured to break patching); the per-direction
  error of that reflection is about 2 in the directions it touches and that
  of a 0.5 scale is 0.5, of the identity 0. ``identity_control`` is ``passed``
  when the cosine is at least :data:`IDENTITY_CONTROL_MIN_COS`, the deviation
  at most :data:`IDENTITY_CONTROL_MAX_DEV` and the worst direction's error at
  most :data:`IDENTITY_CONTROL_MAX_DIR`, else ``failed`` (and the note says
  that a null from this map is not a finding). One extra fit per fold and direction
  (ridge and affine reuse the decompositions of their matched fit: one more
  target; Procrustes: one more SVD of a width x width matrix); not run for
  ``mlp`` (no matrix, and an MLP fit is not cheap);
- **under-determination**: ``n_fit`` (rows each map was fitted on, smallest
  fold), ``rank`` (numerical rank of the centred training rows, the smaller of
  the two sides, smallest fold; at the precision the rows were stored in, so
  float32 rounding is not counted as a direction) and ``underdetermined``:
  some fold's centred training rows do not span the width of a side
  (``rank < width``; always when ``n_fit - 1 < width``, also for collinear
  columns or a LayerNorm output's mean-zero rows), so the data do not fix the map on every
  direction: Procrustes takes the SVD's arbitrary choice there, ridge shrinks
  those directions to zero, ``procrustes_span`` keeps them (identity);
- **intervals**: percentile bootstrap over the held-out sentences (maps held
  fixed): B resamples of the n scored rows with replacement,
  ``default_rng(bootstrap_seed).integers(0, n, n)`` per resample, shared by
  every row of the call; the interval is the ``(1 -/+ level) / 2`` quantiles.
  CKA has no interval (it is not a mean over sentences);
- **residual analysis** (:mod:`~interlingua.maps.residual`) on the pooled
  held-out residual.

Directions: ``a->b`` fits A to B and queries with A; ``b->a`` fits the same
estimator from B to A (Procrustes: the transpose from the same SVD, which
is exactly that fit; ridge and affine: their own fit). Row ``layer_a`` /
``layer_b`` always name the layers of sides A and B.

With ``layers="grid"`` the rows of the paired layers are followed by a
Procrustes retrieval grid over every ``(layer_a, layer_b)``: rows with
``grid = True``, estimator ``procrustes`` (cosine is scale-free, so
``procrustes_scaled`` gives the same ranks), retrieval only.
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from interlingua.core.schema import join_notes
from interlingua.maps import _linalg
from interlingua.maps._checks import as_matrix, as_stack
from interlingua.maps.errors import MapInputError, MapWarning
from interlingua.maps.estimators import Identity, Map, Procrustes, _Linear, get_map
from interlingua.maps.folds import Folds, make_folds, restricted_permutation
from interlingua.maps.layers import layer_pairs
from interlingua.maps.null import (
    NO_NULL_GRID,
    NO_NULL_ZERO,
    NULL_NOT_HERE,
    calibrate_p1,
    check_null_args,
    fold_sigmas,
    has_null,
    no_null_reason,
    null_fits,
    null_permutations,
)
from interlingua.maps.residual import residual_analysis, target_spectrum
from interlingua.maps.retrieval import DEFAULT_MEMORY_BYTES, rank_metrics, retrieval_ranks

__all__ = [
    "DIRECTIONS",
    "LABEL_COLUMNS",
    "MapOptions",
    "IDENTITY_CONTROL_MIN_COS",
    "IDENTITY_CONTROL_MAX_DEV",
    "IDENTITY_CONTROL_MAX_DIR",
    "IDENTITY_CONTROL_DIR_FLOOR",
    "direction_errors",
    "evaluate_pair",
    "procrustes_grid",
    "check_permutation",
    "centred_rank",
]

DIRECTIONS = ("a->b", "b->a")
#: columns the caller fills through ``labels=`` (every other column is computed)
LABEL_COLUMNS = ("pair", "model_a", "lang_a", "model_b", "lang_b", "pooling", "control_seed")
_FIT_INFO_KEYS = (
    "alpha",
    "alpha_relative",
    "alpha_at_grid_edge",
    "rank",
    "free_directions",
    "scale",
    "epochs",
    "best_epoch",
)
#: the identity control passes when the self-map carries held-out rows to at least this mean cosine ...
IDENTITY_CONTROL_MIN_COS = 0.99
#: ... and its matrix is this close to the identity, ||R - I||_F / sqrt(d) (about one free direction of 640)
IDENTITY_CONTROL_MAX_DEV = 0.1
#: ... and no held-out principal direction is moved by more than this share of the data's spread along it
#: (a reflection of one direction gives ~2 there, a 0.5 scale 0.5, the identity 0)
IDENTITY_CONTROL_MAX_DIR = 0.1
#: principal directions of the held-out rows with a spread under this share of the largest are not judged
#: (float32 rows carry ~1e-7 relative rounding; a direction below 1e-6 of the largest is rounding, not data)
IDENTITY_CONTROL_DIR_FLOOR = 1e-6
#: how each estimator resolves directions the training rows do not fix (the under-determination note)
_UNFIXED = {
    "procrustes": "Procrustes takes the SVD's arbitrary choice on the directions the rows do not fix",
    "procrustes_span": "procrustes_span keeps the directions the rows do not fix unchanged (identity)",
    "ridge": "ridge shrinks the directions the rows do not fix to zero",
    "affine": "affine takes the minimum-norm solution (zero on the directions the rows do not fix)",
    "mlp": "nothing constrains the MLP on the directions the rows do not fix",
}
_UNDERDETERMINED = (
    "under-determined: the centred training rows do not span both sides' widths (see n_fit, rank), and {how}. "
    "Fit on more sentences (n_fit - 1 >= width, 4 x width is safer) or use a regularised map (ridge, or "
    "procrustes_span for equal widths): docs/protocol.md, Maps"
)
_CONTROL_FAILED = (
    "IDENTITY CONTROL FAILED: this estimator fitted from the source side onto itself is not the identity "
    "(see identity_control_dev, identity_control_cos), so the chain cannot pass its positive control and a null "
    "from this map is not a finding"
)


def centred_rank(a: np.ndarray, eps: float = float(np.finfo(np.float64).eps)) -> int:
    """Numerical rank of ``a`` after subtracting its column means (at most ``n - 1``).

    Tolerance ``s_max * max(n, d) * eps``; ``eps``: the precision the rows were stored in (float32
    representations carry float32 rounding, which a float64 tolerance would count as directions; see
    :func:`_precision`).
    """
    import scipy.linalg as sla

    ac = a - a.mean(axis=0)
    if not np.any(ac):
        return 0
    s = sla.svdvals(ac, check_finite=False)
    rank = int(np.count_nonzero(s > s[0] * max(ac.shape) * eps))
    return min(rank, ac.shape[0] - 1)


def _precision(layer: Any) -> float:
    """Machine epsilon of the dtype a layer was stored in (float64's for integers and float64)."""
    dtype = getattr(layer, "dtype", np.dtype(np.float64))
    try:
        return max(float(np.finfo(dtype).eps), float(np.finfo(np.float64).eps))
    except (TypeError, ValueError):
        return float(np.finfo(np.float64).eps)


def _family(est: Map) -> str:
    name = est.name
    for key in ("procrustes_span", "procrustes", "ridge", "affine", "mlp"):
        if name.startswith(key):
            return key
    return ""


def _self_dev(m: Map) -> float:
    """``||R - I||_F / sqrt(d)`` of a fitted self-map (0 for the identity; NaN without a matrix)."""
    if isinstance(m, Identity):
        return 0.0
    if isinstance(m, _Linear):
        coef = m.coef_
        return float(np.linalg.norm(coef - np.eye(coef.shape[0])) / math.sqrt(coef.shape[0]))
    return math.nan


def check_permutation(permutation: Any, n: int) -> np.ndarray:
    """``permutation`` as an int64 array that is a permutation of ``range(n)``, or a MapInputError."""
    perm = np.asarray(permutation)
    if perm.shape != (n,) or not np.issubdtype(perm.dtype, np.integer):
        raise MapInputError(
            f"control_permutation must be an integer array of length n={n} (the pair's shuffle permutation); "
            f"got shape {perm.shape}, dtype {perm.dtype}."
        )
    perm = perm.astype(np.int64)
    if not np.array_equal(np.sort(perm), np.arange(n)):
        raise MapInputError("control_permutation is not a permutation of 0..n-1 (repeated or missing rows).")
    return perm


def _standardize(tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    m = tr.mean(axis=0)
    s = tr.std(axis=0)
    s = np.where(s > 0, s, 1.0)
    return (tr - m) / s, (te - m) / s


def _estimators(estimators: Any) -> list[Map]:
    if isinstance(estimators, (str, Map)):
        estimators = [estimators]
    out: list[Map] = []
    for e in estimators:
        if isinstance(e, tuple) and len(e) == 2 and isinstance(e[1], Mapping):
            out.append(get_map(e[0], **e[1]))
        else:
            out.append(get_map(e))
    if not out:
        raise MapInputError("estimators is empty; name at least one map (e.g. 'procrustes').")
    return out


def _check_labels(labels: Mapping[str, Any] | None) -> dict[str, Any]:
    labels = dict(labels or {})
    extra = sorted(set(labels) - set(LABEL_COLUMNS))
    if extra:
        raise MapInputError(f"labels {extra} are not label columns; allowed: {list(LABEL_COLUMNS)} (see MAP_COLUMNS).")
    return labels


@dataclass
class _Scores:
    """Per-held-out-row scores of one (estimator, direction, variant), filled fold by fold."""

    n: int
    rank_cos: np.ndarray = field(init=False)
    rank_csls: np.ndarray = field(init=False)
    sq_err: np.ndarray = field(init=False)
    denom: np.ndarray = field(init=False)
    undefined: np.ndarray = field(init=False)  # rows of a fold whose retrieval is undefined (a constant side)
    pred: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.undefined = np.zeros(self.n, dtype=bool)
        self.rank_cos = np.full(self.n, -1, dtype=np.int64)
        self.rank_csls = np.full(self.n, -1, dtype=np.int64)
        self.sq_err = np.full(self.n, np.nan)
        self.denom = np.full(self.n, np.nan)

    def put(self, te: np.ndarray, ranks: Any, pred: np.ndarray, target: np.ndarray, keep_pred: bool) -> None:
        self.rank_cos[te] = ranks.cosine
        self.undefined[te] = bool(getattr(ranks, "reason", ""))
        if ranks.csls is not None:
            self.rank_csls[te] = ranks.csls
        diff = target - pred
        self.sq_err[te] = np.einsum("ij,ij->i", diff, diff)
        tc = target - target.mean(axis=0)
        self.denom[te] = np.einsum("ij,ij->i", tc, tc)
        if keep_pred:
            if self.pred is None:
                self.pred = np.full((self.n, pred.shape[1]), np.nan)
            self.pred[te] = pred

    def kept_pred(self) -> np.ndarray:
        """The out-of-fold predictions, ``(n, width)`` (those put with ``keep_pred=True``)."""
        assert self.pred is not None, "no predictions kept: put(..., keep_pred=True) first"
        return self.pred

    def metrics(self, rows: np.ndarray, width: int) -> dict[str, float]:
        out = rank_metrics(self.rank_cos[rows])
        if np.all(self.rank_csls[rows] >= 0):
            out.update({f"{k}_csls": v for k, v in rank_metrics(self.rank_csls[rows]).items()})
        if self.undefined[
            rows
        ].any():  # retrieval against a constant side ranks nothing: NaN, the reason is in the note
            out = {k: math.nan for k in out}
        sq, den = self.sq_err[rows].sum(), self.denom[rows].sum()
        out["mse"] = float(sq / (rows.size * width))
        out["rel_mse"] = float(sq / den) if den > 0 else math.nan
        return out


@dataclass
class _SelfScores:
    """The identity control of one (estimator, direction): self-map ranks, cosines and matrix deviation per fold."""

    n: int
    n_folds: int
    rank_cos: np.ndarray = field(init=False)
    cos: np.ndarray = field(init=False)
    dev: np.ndarray = field(init=False)
    worst_dir: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.rank_cos = np.full(self.n, -1, dtype=np.int64)
        self.cos = np.full(self.n, np.nan)
        self.dev = np.full(self.n_folds, np.nan)
        self.worst_dir = np.full(self.n_folds, np.nan)

    def put(self, f: int, te: np.ndarray, m: Map, src_tr: np.ndarray, src_te: np.ndarray, memory_bytes: int) -> None:
        pred = m.transform(src_te)
        q_mean = m.transform(src_tr.mean(axis=0)[None, :])[0] if m.is_affine else m.transform(src_tr).mean(axis=0)
        q, t = pred - q_mean, src_te - src_tr.mean(axis=0)
        self.rank_cos[te] = retrieval_ranks(q, t, csls_k=0, memory_bytes=memory_bytes).cosine
        norms = np.linalg.norm(q, axis=1) * np.linalg.norm(t, axis=1)
        self.cos[te] = np.where(norms > 0, np.einsum("ij,ij->i", q, t) / np.where(norms > 0, norms, 1.0), np.nan)
        self.dev[f] = _self_dev(m)
        errs = direction_errors(q, t)
        self.worst_dir[f] = float(errs.max()) if errs.size else math.nan

    def columns(self, rows: np.ndarray, folds: Sequence[int]) -> dict[str, Any]:
        """The identity-control columns over ``rows`` (fits of ``folds``); empty when the control did not run."""
        if np.any(self.rank_cos[rows] < 0):
            return {}
        dev = self.dev[list(folds)]
        worst = float(np.max(dev)) if np.all(np.isfinite(dev)) else math.nan
        cos = float(np.nanmean(self.cos[rows])) if np.any(np.isfinite(self.cos[rows])) else math.nan
        dirs = self.worst_dir[list(folds)]
        worst_dir = float(np.max(dirs)) if np.all(np.isfinite(dirs)) else math.nan
        ok = (
            cos >= IDENTITY_CONTROL_MIN_COS
            and not worst > IDENTITY_CONTROL_MAX_DEV
            and not worst_dir > IDENTITY_CONTROL_MAX_DIR
        )
        return {
            "identity_control": "passed" if ok else "failed",
            "identity_control_dev": worst,
            "identity_control_dir": worst_dir,
            "identity_control_p1": float(np.mean(self.rank_cos[rows] == 0)),
            "identity_control_cos": cos,
        }


def direction_errors(pred: np.ndarray, true: np.ndarray, floor: float = IDENTITY_CONTROL_DIR_FLOOR) -> np.ndarray:
    """Per principal direction ``v_i`` of ``true`` (rows, already centred): ``||(pred - true) v_i|| / s_i``.

    ``s_i`` is the singular value of ``true`` along ``v_i``: the error of a map along each direction the data
    occupy, relative to the data's own spread there, so a direction with little variance counts as much as a
    massive one. Directions whose ``s_i`` is under ``floor`` times the largest are left out (rounding).
    """
    true = np.asarray(true, dtype=np.float64)
    diff = np.asarray(pred, dtype=np.float64) - true
    _, s, vt = np.linalg.svd(true, full_matrices=False)
    if s.size == 0 or not s[0] > 0:
        return np.zeros(0)
    keep = s > s[0] * floor
    return np.linalg.norm(diff @ vt[keep].T, axis=0) / s[keep]


def _retrieve(
    m: Map,
    src_tr: np.ndarray,
    src_te: np.ndarray,
    tgt_tr_mean: np.ndarray,
    tgt_te: np.ndarray,
    csls_k: int,
    memory_bytes: int,
) -> tuple[Any, np.ndarray]:
    pred = m.transform(src_te)
    q_mean = m.transform(src_tr.mean(axis=0)[None, :])[0] if m.is_affine else m.transform(src_tr).mean(axis=0)
    ranks = retrieval_ranks(pred - q_mean, tgt_te - tgt_tr_mean, csls_k=csls_k, memory_bytes=memory_bytes)
    return ranks, pred


_Fitted = tuple[Map, Map | None, Map | None]


def _fit_directions(
    est: Map,
    x_tr: np.ndarray,
    y_tr: np.ndarray,
    sigma: np.ndarray | None,
    directions: Sequence[str],
    with_self: bool = False,
) -> dict[str, _Fitted]:
    """Matched, control and self maps per direction (control: None without a permutation; self: without ``with_self``).

    The self map is the estimator fitted from the direction's source side onto itself (the identity control);
    ridge and affine fit it from the decompositions their matched fit already made.
    """
    out: dict[str, _Fitted] = {}
    if isinstance(est, Procrustes):  # one SVD per fit serves both directions
        fwd = est.clone().fit(x_tr, y_tr)
        ctl = est.clone().fit(x_tr, y_tr[sigma]) if sigma is not None else None
        selfs: dict[str, Map | None] = {d: None for d in directions}
        if with_self:
            with warnings.catch_warnings():  # the matched fit's warnings are the row's; the self fit's repeat them
                warnings.simplefilter("ignore", MapWarning)
                for d in directions:
                    src = x_tr if d == "a->b" else y_tr
                    selfs[d] = est.clone().fit(src, src)
        if "a->b" in directions:
            out["a->b"] = (fwd, ctl, selfs["a->b"])
        if "b->a" in directions:
            out["b->a"] = (fwd.reverse(), ctl.reverse() if ctl is not None else None, selfs["b->a"])
        return out
    if "a->b" in directions:
        targets = [y_tr] + ([y_tr[sigma]] if sigma is not None else []) + ([x_tr] if with_self else [])
        maps = est.fit_many(x_tr, targets)
        out["a->b"] = (maps[0], maps[1] if sigma is not None else None, maps[-1] if with_self else None)
    if "b->a" in directions:
        # the control's pairs (x_k, y_sigma(k)) seen from B: y_m with x_{sigma^-1(m)}
        inv = np.argsort(sigma) if sigma is not None else None
        targets = [x_tr] + ([x_tr[inv]] if inv is not None else []) + ([y_tr] if with_self else [])
        maps = est.fit_many(y_tr, targets)
        out["b->a"] = (maps[0], maps[1] if inv is not None else None, maps[-1] if with_self else None)
    return out


def _bootstrap(
    values: Mapping[str, np.ndarray], ratio: tuple[np.ndarray, np.ndarray] | None, n_boot: int, level: float, seed: int
) -> dict[str, float]:
    """Percentile intervals of means (and of one ratio of sums) over resampled rows."""
    n = next(iter(values.values())).size
    rng = np.random.default_rng(seed)
    reps: dict[str, list[np.ndarray]] = {k: [] for k in values}
    ratio_reps: list[np.ndarray] = []
    done = 0
    chunk = max(1, min(n_boot, 2_000_000 // max(n, 1)))
    while done < n_boot:
        b = min(chunk, n_boot - done)
        idx = np.stack([rng.integers(0, n, size=n) for _ in range(b)])
        for k, v in values.items():
            reps[k].append(v[idx].mean(axis=1))
        if ratio is not None:
            den = ratio[1][idx].sum(axis=1)
            ratio_reps.append(np.where(den > 0, ratio[0][idx].sum(axis=1) / np.where(den > 0, den, 1.0), np.nan))
        done += b
    lo, hi = (1 - level) / 2, (1 + level) / 2
    out: dict[str, float] = {}
    for k, parts in reps.items():
        r = np.concatenate(parts)
        out[f"{k}_low"], out[f"{k}_high"] = (float(v) for v in np.quantile(r, [lo, hi]))
    if ratio is not None:
        r = np.concatenate(ratio_reps)
        r = r[np.isfinite(r)]
        out["rel_mse_low"], out["rel_mse_high"] = (
            (float(v) for v in np.quantile(r, [lo, hi])) if r.size >= 2 else (math.nan, math.nan)
        )
    return out


def _cka(pred: np.ndarray, target: np.ndarray) -> tuple[float, float, str]:
    from interlingua.analysis.measures import MeasureWarning, linear_cka

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MeasureWarning)
        biased = linear_cka(pred, target, debiased=False)
        debiased = linear_cka(pred, target, debiased=True) if pred.shape[0] >= 4 else math.nan
    said = join_notes(sorted({str(w.message) for w in caught if issubclass(w.category, MeasureWarning)}))
    return float(biased), float(debiased), (f"cka: {said}" if said else "")


def _chance(sizes: np.ndarray) -> dict[str, float]:
    """Chance P@1, P@5 and MRR of a uniformly random ranking among each row's n_f candidates."""
    s = sizes.astype(np.float64)
    harmonic = np.array([np.sum(1.0 / np.arange(1, int(k) + 1)) for k in sizes])
    return {
        "chance_p1": float(np.mean(1.0 / s)),
        "chance_p5": float(np.mean(np.minimum(5.0, s) / s)),
        "chance_mrr": float(np.mean(harmonic / s)),
    }


def _info_json(infos: list[dict[str, Any]]) -> str:
    slim = [{k: v for k, v in info.items() if k in _FIT_INFO_KEYS} for info in infos]
    return json.dumps(slim, separators=(",", ":"), default=float) if any(slim) else ""


@dataclass(frozen=True)
class MapOptions:
    """How :func:`evaluate_pair` (and :func:`procrustes_grid`) fits and scores maps, validated once and passed down
    whole. A run builds it from its ``maps:`` section and its inference settings
    (``interlingua.maps.capability.map_options``); bad values raise :class:`MapInputError` when it is made."""

    estimators: Any = ("procrustes", "ridge")
    """map ids, :class:`Map` instances, or ``(id, {params})`` tuples"""
    folds: int | float | Folds = 5
    """k (k-fold), a test fraction in (0, 1) (one split), or a :class:`Folds` (e.g. read back from a run)"""
    seed: int = 0
    """seed of the folds (``make_folds(n, folds, seed)`` reproduces them); the bootstrap's by default"""
    layers: str | Sequence[tuple[int, int]] = "auto"
    """``"auto"``, ``"last"``, an explicit list of ``(layer_a, layer_b)``, or ``"grid"`` (auto + Procrustes grid)"""
    directions: Sequence[str] = DIRECTIONS
    """a non-empty subset of ``("a->b", "b->a")``"""
    bootstrap: int = 1000
    """resamples of the held-out sentences for the intervals (0: none)"""
    level: float = 0.95
    """the intervals' confidence level, in (0, 1)"""
    bootstrap_seed: int | None = None
    """seed of the bootstrap resamples (None: ``seed``)"""
    csls_k: int = 10
    """neighbours of CSLS retrieval (0: no CSLS)"""
    residual: bool = True
    """add the residual analysis of the pooled held-out residual"""
    standardize: bool = False
    """z-score each side per column with each fold's training statistics before fitting"""
    per_fold: bool = False
    """also one row per fold (no intervals or residual analysis)"""
    grid_folds: int | None = None
    """folds the ``"grid"`` layers' Procrustes grid runs on (the first ones; None: all)"""
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    """memory bound of one retrieval's similarity blocks"""
    identity_control: bool = True
    """fit each estimator from the source side onto itself (the positive control; never for ``mlp``)"""
    permutations: int = 0
    """K draws of the permutation null of ``p1`` (0: no null; its columns are NaN)"""
    permutation_seed: int = 0
    """seed of the null's permutations (``default_rng(permutation_seed).permutation(n)``)"""
    alpha: float = 0.05
    """level of the null's ``calibrated`` score, in (0, 1)"""
    null_layers: str = "last"
    """the layer pairs the null is drawn at: ``"last"`` or ``"all"`` (as ``inference.layers``)"""

    def __post_init__(self) -> None:
        dirs = tuple(self.directions)
        if not dirs or any(d not in DIRECTIONS for d in dirs) or len(set(dirs)) != len(dirs):
            raise MapInputError(f"directions must be a non-empty subset of {DIRECTIONS}; got {self.directions!r}.")
        b = self.bootstrap
        if isinstance(b, bool) or not isinstance(b, numbers.Integral) or b < 0 or b == 1:
            raise MapInputError(f"bootstrap must be 0 (off) or an integer >= 2; got {b!r}.")
        if not 0 < float(self.level) < 1:
            raise MapInputError(f"level must lie in (0, 1); got {self.level!r}.")
        k = self.csls_k
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise MapInputError(f"csls_k must be an integer >= 0 (0: no CSLS); got {k!r}.")
        mb = self.memory_bytes
        if isinstance(mb, bool) or not isinstance(mb, numbers.Integral) or mb < 1:
            raise MapInputError(f"memory_bytes must be a positive integer; got {mb!r}.")
        boot_seed = self.seed if self.bootstrap_seed is None else self.bootstrap_seed
        if isinstance(boot_seed, bool) or not isinstance(boot_seed, numbers.Integral) or boot_seed < 0:
            raise MapInputError(f"bootstrap_seed must be a non-negative integer; got {self.bootstrap_seed!r}.")
        if not isinstance(self.identity_control, bool):
            raise MapInputError(f"identity_control must be True or False; got {self.identity_control!r}.")
        k_null, null_seed, null_alpha = check_null_args(self.permutations, self.permutation_seed, self.alpha)
        if self.null_layers not in ("last", "all"):
            raise MapInputError(f"null_layers must be 'last' or 'all' (as inference.layers); got {self.null_layers!r}.")
        for name, value in (
            ("directions", dirs),
            ("bootstrap", int(b)),
            ("level", float(self.level)),
            ("csls_k", int(k)),
            ("memory_bytes", int(mb)),
            ("residual", bool(self.residual)),
            ("standardize", bool(self.standardize)),
            ("per_fold", bool(self.per_fold)),
            ("permutations", k_null),
            ("permutation_seed", null_seed),
            ("alpha", null_alpha),
        ):
            object.__setattr__(self, name, value)

    @property
    def resampling_seed(self) -> int:
        """The bootstrap's seed: ``bootstrap_seed``, else ``seed``."""
        return int(self.seed if self.bootstrap_seed is None else self.bootstrap_seed)


def evaluate_pair(
    reps_a: Any,
    reps_b: Any,
    options: MapOptions | None = None,
    *,
    control_permutation: Any = None,
    labels: Mapping[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Held-out map evaluation of one pair at its layer pairs: rows declared in ``maps.columns.MAP_COLUMNS``.

    ``reps_a``: ``(La, n, da)`` pooled hidden states of side A (array or
    sequence of ``(n, da)`` layers); ``reps_b``: ``(Lb, n, db)``, the same n
    sentences in the same order. ``options``: the estimators, folds, layers,
    directions, intervals, controls and null (:class:`MapOptions`; default: its
    defaults), e.g. ``evaluate_pair(a, b, MapOptions(estimators=["procrustes"], folds=5))``.
    The folds are drawn with ``options.seed`` (``make_folds(n, folds, seed)``
    reproduces them). ``layers``: ``"auto"`` (one-to-one when depths agree, else
    by relative depth, see :mod:`~interlingua.maps.layers`), ``"last"``, an
    explicit list of ``(layer_a, layer_b)``, or ``"grid"`` (auto rows plus the
    Procrustes retrieval grid, on the first ``grid_folds`` folds, all by default).
    ``standardize``: every metric is then in the z-scored units. ``per_fold``:
    ``fold`` = the fold's index on the extra rows. ``identity_control``: one extra
    fit per fold and direction. ``permutations``: K draws of the permutation null
    of ``p1`` (:mod:`~interlingua.maps.null`: every estimator but ``mlp`` refitted
    on training rows paired through the k-th ``default_rng(permutation_seed).permutation(n)``,
    scored on the same held-out rows), giving each row ``p_value``, ``tau`` and
    ``calibrated`` at level ``alpha``; 0 (default): those are NaN and the note says
    so. ``null_layers``: ``"last"`` (the last layers only, as ``inference.layers:
    last`` tests compare's rows; the other rows' notes say so) or ``"all"``.

    ``control_permutation``: the pair's fixed shuffle permutation of the n rows
    (``interlingua.analysis.inference.shuffle_permutation``); None leaves the
    shuffled-fit columns NaN. ``labels``: values for the label columns (``pair``,
    ``model_a``, ``lang_a``, ``model_b``, ``lang_b``, ``pooling``,
    ``control_seed``) copied into every row. ``progress``: called with a line
    per layer pair.

    A map that cannot be fitted (e.g. ``affine`` with fewer training rows
    than width, ``identity`` across widths) gives a row of NaN metrics whose
    ``note`` says why; warnings of a fit (non-unique rotation, minimum-norm
    solution) are recorded in ``note`` too. Invalid arguments and non-finite
    inputs raise :class:`MapInputError` before any work.
    """
    opts = MapOptions() if options is None else options
    if not isinstance(opts, MapOptions):
        raise MapInputError(f"options must be a MapOptions; got {type(opts).__name__}.")
    layers_a = as_stack(reps_a, "reps_a")
    layers_b = as_stack(reps_b, "reps_b")
    n = layers_a[0].shape[0]
    if layers_b[0].shape[0] != n:
        raise MapInputError(
            f"reps_a has {n} sentences but reps_b has {layers_b[0].shape[0]}; both sides must cover the same "
            "sentences in the same order."
        )
    fold_set = make_folds(n, opts.folds, opts.seed)
    perm = check_permutation(control_permutation, n) if control_permutation is not None else None
    ests = _estimators(opts.estimators)
    lab = _check_labels(labels)
    grid = isinstance(opts.layers, str) and opts.layers == "grid"
    grid_folds = opts.grid_folds
    if (
        grid
        and grid_folds is not None
        and not (isinstance(grid_folds, numbers.Integral) and 1 <= grid_folds <= fold_set.k)
    ):
        raise MapInputError(
            f"grid_folds must be an integer in [1, {fold_set.k}] (the number of folds); got {grid_folds!r}."
        )
    pairs = layer_pairs(len(layers_a), len(layers_b), "auto" if grid else opts.layers)
    ctx = _Context(
        layers_a,
        layers_b,
        opts,
        fold_set,
        perm,
        ests,
        lab,
        null_permutations(n, opts.permutations, opts.permutation_seed),
    )
    rows: list[dict[str, Any]] = []
    last = (len(layers_a) - 1, len(layers_b) - 1)
    last = last if last in pairs else pairs[-1]
    for a, b in pairs:
        if progress is not None:
            progress(f"maps: layers ({a}, {b})")
        rows.extend(ctx.layer_pair(a, b, null=opts.null_layers == "all" or (a, b) == last))
    if grid:
        if progress is not None:
            progress("maps: Procrustes layer grid")
        rows.extend(procrustes_grid(layers_a, layers_b, replace(opts, folds=fold_set), labels=lab, _checked=True))
    return [_complete(r) for r in rows]


_MISSING = {"str": "", "int": -1, "float": math.nan, "bool": False}


def _complete(row: dict[str, Any]) -> dict[str, Any]:
    """Every computed column of MAP_COLUMNS present (NaN / -1 / "" where undefined), in the declared order."""
    from interlingua.maps.columns import MAP_COLUMNS

    out = {}
    for c in MAP_COLUMNS:
        if c.name in row:
            out[c.name] = row[c.name]
        elif c.name not in LABEL_COLUMNS:
            out[c.name] = _MISSING[c.dtype]
    extra = set(row) - set(out)
    if extra:  # a programming error: every key must be declared
        raise KeyError(f"map row has undeclared columns {sorted(extra)}; declare them in maps/columns.py")
    return out


@dataclass(frozen=True)
class _HeldOut:
    """What one estimator kept of the held-out rows in one direction over all folds (read back per fold)."""

    matched: _Scores
    """the fitted map's ranks and predictions"""
    control: _Scores
    """the shuffled-fit control's ranks"""
    identity: _Scores | None
    """the identity baseline's ranks (None across widths)"""
    target: np.ndarray
    """the held-out targets as every metric sees them, ``(n, width)``"""
    width: int
    """the target side's width"""
    infos: list[dict[str, Any]]
    """the matched fit's ``fit_info_`` per fold"""
    selfs: _SelfScores
    """the identity control's scores"""


@dataclass
class _Context:
    """One pair's evaluation: its checked layers, folds, control permutation, estimators and labels, and the options."""

    layers_a: list[Any]
    layers_b: list[Any]
    opts: MapOptions
    folds: Folds
    perm: np.ndarray | None
    ests: list[Map]
    labels: dict[str, Any]
    null_perms: np.ndarray | None = None  # (K, n): the permutation null's draws over all n rows

    def _base(self, a: int, b: int, direction: str, widths: tuple[int, int]) -> dict[str, Any]:
        la, lb = len(self.layers_a), len(self.layers_b)
        w_src, w_tgt = widths if direction == "a->b" else widths[::-1]
        n = self.folds.n
        return {
            **self.labels,
            "direction": direction,
            "layer_a": a,
            "layer_b": b,
            "depth_a": a / max(la - 1, 1),
            "depth_b": b / max(lb - 1, 1),
            "grid": False,
            "fold": -1,
            "protocol": self.folds.scheme,
            "n_folds": self.folds.k,
            "fold_seed": self.folds.seed,
            "folds_key": self.folds.key,
            "n": n,
            "n_train": int(min(n - t.size for t in self.folds.tests)),
            "n_fit": int(min(n - t.size for t in self.folds.tests)),
            "width_source": w_src,
            "width_target": w_tgt,
            "standardized": self.opts.standardize,
            "bootstrap": self.opts.bootstrap,
            "level": self.opts.level,
        }

    def _fold_data(
        self, x: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray
    ) -> dict[str, tuple[np.ndarray, ...]]:
        """(source train, source test, target train, target test) per direction for one fold."""
        x_tr, x_te, y_tr, y_te = x[tr], x[te], y[tr], y[te]
        if self.opts.standardize:
            x_tr, x_te = _standardize(x_tr, x_te)
            y_tr, y_te = _standardize(y_tr, y_te)
        return {"a->b": (x_tr, x_te, y_tr, y_te), "b->a": (y_tr, y_te, x_tr, x_te)}

    def layer_pair(self, a: int, b: int, *, null: bool = True) -> list[dict[str, Any]]:
        """Rows of one layer pair: every estimator and direction (and fold, with ``per_fold``); ``null``: draw the
        permutation null here (``null_layers: all``, or the last pair).

        Estimators are evaluated one after another, so only one estimator's
        held-out predictions (n x width per direction) are held at a time.
        """
        x = as_matrix(self.layers_a[a], f"reps_a[{a}]")
        y = as_matrix(self.layers_b[b], f"reps_b[{b}]")
        n, p, q = x.shape[0], x.shape[1], y.shape[1]
        width_of = {"a->b": q, "b->a": p}
        scored = np.concatenate(self.folds.tests)
        sizes = np.zeros(n, dtype=np.int64)
        for te in self.folds.tests:
            sizes[te] = te.size
        has_control = self.perm is not None
        same_width = p == q
        k_used = min([self.opts.csls_k] + [t.size for t in self.folds.tests]) if self.opts.csls_k else 0
        # pass 1: the held-out targets (as every metric sees them) and the identity baseline
        targets = {d: np.full((n, width_of[d]), np.nan) for d in self.opts.directions}
        identity = {d: _Scores(n) for d in self.opts.directions} if same_width else {}
        fold_ranks: list[tuple[int, int]] = []  # centred training rank of (A, B) per fold, as the fits see them
        eps_a, eps_b = _precision(self.layers_a[a]), _precision(self.layers_b[b])
        for tr, te in self.folds:
            side = self._fold_data(x, y, tr, te)
            fold_ranks.append((centred_rank(side["a->b"][0], eps_a), centred_rank(side["a->b"][2], eps_b)))
            for d in self.opts.directions:
                src_tr, src_te, tgt_tr, tgt_te = side[d]
                targets[d][te] = tgt_te
                if same_width:
                    ranks = retrieval_ranks(
                        src_te - src_tr.mean(axis=0),
                        tgt_te - tgt_tr.mean(axis=0),
                        csls_k=self.opts.csls_k,
                        memory_bytes=self.opts.memory_bytes,
                    )
                    identity[d].put(te, ranks, src_te, tgt_te, keep_pred=False)
        tspec: dict[str, Any] = {}
        rows: list[dict[str, Any]] = []
        chance = _chance(sizes[scored])
        for est in self.ests:  # pass 2, per estimator
            scores = {(d, v): _Scores(n) for d in self.opts.directions for v in ("matched", "control")}
            infos: dict[str, list[dict[str, Any]]] = {d: [] for d in self.opts.directions}
            run_self = self.opts.identity_control and isinstance(est, (_Linear, Identity))
            selfs = {d: _SelfScores(n, self.folds.k) for d in self.opts.directions}
            k_null = 0 if self.null_perms is None or not null else self.null_perms.shape[0]
            run_null = k_null > 0 and has_null(est)
            null_hits = {d: np.zeros((k_null, n), dtype=bool) for d in self.opts.directions} if run_null else {}
            notes: list[str] = []
            failed = ""
            for f, (tr, te) in enumerate(self.folds):
                side = self._fold_data(x, y, tr, te)
                sigma = restricted_permutation(self.perm, tr) if self.perm is not None else None  # has_control
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", MapWarning)
                    try:
                        fitted = _fit_directions(
                            est, side["a->b"][0], side["a->b"][2], sigma, self.opts.directions, run_self
                        )
                        for d, (matched, control, own) in fitted.items():
                            src_tr, src_te, tgt_tr, tgt_te = side[d]
                            if own is not None:
                                selfs[d].put(f, te, own, src_tr, src_te, self.opts.memory_bytes)
                            t_mean = tgt_tr.mean(axis=0)
                            ranks, pred = _retrieve(
                                matched, src_tr, src_te, t_mean, tgt_te, self.opts.csls_k, self.opts.memory_bytes
                            )
                            scores[(d, "matched")].put(te, ranks, pred, tgt_te, keep_pred=True)
                            infos[d].append(matched.fit_info_)
                            if control is not None:
                                ranks, pred = _retrieve(
                                    control, src_tr, src_te, t_mean, tgt_te, self.opts.csls_k, self.opts.memory_bytes
                                )
                                scores[(d, "control")].put(te, ranks, pred, tgt_te, keep_pred=False)
                        if run_null:
                            assert self.null_perms is not None
                            self._null_fold(est, side, tr, te, null_hits)
                    except MapInputError as err:
                        failed = f"{est.name}: {err}"
                for w in caught:
                    if issubclass(w.category, MapWarning):
                        if not any(str(w.message) in s for s in notes):
                            notes.append(f"fold {f}: {w.message}")
                    else:
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                if failed:
                    break
            for d in self.opts.directions:
                row: dict[str, Any] = {
                    **self._base(a, b, d, (p, q)),
                    "estimator": est.name,
                    "estimator_params": json.dumps(est.params, sort_keys=True, separators=(",", ":")),
                    "n_test": int(scored.size),
                    "csls_k": k_used,
                    **chance,
                }
                row_notes: list[str] = []
                if k_used and k_used < self.opts.csls_k:
                    row_notes.append(f"CSLS k cut to {k_used} (the smallest fold's held-out rows)")
                self._baselines(
                    row, row_notes, identity.get(d), scores[(d, "control")], scored, width_of[d], p, q, has_control
                )
                self._determination(row, row_notes, est, fold_ranks, range(self.folds.k), p, q)
                if not failed:
                    self._control_columns(row, row_notes, est, selfs[d], scored, range(self.folds.k), run_self)
                if failed:
                    row["n_permutations"] = 0
                    row["note"] = join_notes([f"map not fitted: {failed}", *row_notes, *notes])
                    rows.append(row)
                    continue
                sc = scores[(d, "matched")]
                row.update(sc.metrics(scored, width_of[d]))
                self._null_columns(row, row_notes, est, null_hits.get(d), scored)
                row["cka"], row["cka_debiased"], cka_note = _cka(sc.kept_pred()[scored], targets[d][scored])
                if cka_note:
                    row_notes.append(cka_note)
                alphas = [i["alpha"] for i in infos[d] if "alpha" in i]
                if alphas:
                    row["alpha"] = float(np.median(alphas))
                    if any(i.get("alpha_at_grid_edge") for i in infos[d]):
                        row_notes.append(
                            "ridge: the chosen alpha is at the edge of the grid in some fold; widen the grid"
                        )
                row["fit_info"] = _info_json(infos[d])
                if self.opts.bootstrap:
                    vals = {
                        "p1": (sc.rank_cos[scored] == 0).astype(np.float64),
                        "mrr": 1.0 / (sc.rank_cos[scored] + 1.0),
                    }
                    if self.opts.csls_k:
                        vals["p1_csls"] = (sc.rank_csls[scored] == 0).astype(np.float64)
                    boot = _bootstrap(
                        vals,
                        (sc.sq_err[scored], sc.denom[scored]),
                        self.opts.bootstrap,
                        self.opts.level,
                        self.opts.resampling_seed,
                    )
                    if sc.undefined[scored].any():  # no interval for a retrieval that is undefined
                        boot.update({f"{k}_{end}": math.nan for k in vals for end in ("low", "high")})
                    row.update(boot)
                if self.opts.residual:
                    if d not in tspec:
                        tspec[d] = target_spectrum(targets[d][scored])
                    row.update(residual_analysis(targets[d][scored], sc.kept_pred()[scored], target_spec=tspec[d]))
                    if width_of[d] < 50:
                        row_notes.append(f"resid_out50 uses all {width_of[d]} target directions (width < 50)")
                row["note"] = join_notes(row_notes + notes)
                rows.append(row)
                if self.opts.per_fold:
                    held = _HeldOut(
                        sc, scores[(d, "control")], identity.get(d), targets[d], width_of[d], infos[d], selfs[d]
                    )
                    rows.extend(self._fold_rows(row, held, est, run_self, fold_ranks, (p, q), null_hits.get(d)))
        return rows

    def _null_fold(
        self,
        est: Map,
        side: dict[str, tuple[np.ndarray, ...]],
        tr: np.ndarray,
        te: np.ndarray,
        hits: dict[str, np.ndarray],
    ) -> None:
        """One fold of the permutation null: K refits on permuted training pairs, held-out hits (rank 0) per draw."""
        assert self.null_perms is not None
        fits = null_fits(est, side["a->b"][0], side["a->b"][2], fold_sigmas(self.null_perms, tr), self.opts.directions)
        for d, maps in fits.items():
            src_tr, src_te, tgt_tr, tgt_te = side[d]
            t_mean = tgt_tr.mean(axis=0)
            for k, m in enumerate(maps):
                ranks, _ = _retrieve(m, src_tr, src_te, t_mean, tgt_te, 0, self.opts.memory_bytes)
                hits[d][k, te] = ranks.cosine == 0

    def _null_columns(
        self, row: dict[str, Any], notes: list[str], est: Map, hits: np.ndarray | None, rows: np.ndarray
    ) -> None:
        """``n_permutations``, ``p_value``, ``tau`` and ``calibrated`` of ``row["p1"]`` over ``rows``."""
        k = 0 if self.null_perms is None else self.null_perms.shape[0]
        if hits is None:
            row["n_permutations"] = 0
            # a null that exists for this estimator but was not drawn: not at this layer pair (null_layers)
            notes.append(NO_NULL_ZERO if k == 0 else NULL_NOT_HERE if has_null(est) else no_null_reason(est))
            return
        row["n_permutations"] = k
        row.update(calibrate_p1(float(row["p1"]), hits[:, rows].mean(axis=1), self.opts.alpha))

    @staticmethod
    def _determination(
        row: dict[str, Any],
        notes: list[str],
        est: Map,
        fold_ranks: Sequence[tuple[int, int]],
        folds: Sequence[int],
        p: int,
        q: int,
    ) -> None:
        """``rank`` and ``underdetermined`` over ``folds`` (the identity map is fixed whatever the rows)."""
        ranks = [fold_ranks[f] for f in folds]
        row["rank"] = int(min(min(ra, rb) for ra, rb in ranks))
        under = any(ra < p or rb < q for ra, rb in ranks) and not isinstance(est, Identity)
        row["underdetermined"] = bool(under)
        if under:
            how = _UNFIXED.get(_family(est), "the estimator decides the directions the rows do not fix")
            notes.append(_UNDERDETERMINED.format(how=how))

    @staticmethod
    def _control_columns(
        row: dict[str, Any],
        notes: list[str],
        est: Map,
        sc: _SelfScores,
        rows: np.ndarray,
        folds: Sequence[int],
        run_self: bool,
    ) -> None:
        if not run_self:
            if isinstance(est, (_Linear, Identity)):
                return  # switched off by the caller
            notes.append(f"identity control not run for {est.name} (no matrix; an extra fit per fold is not cheap)")
            return
        cols = sc.columns(rows, folds)
        row.update(cols)
        if cols.get("identity_control") == "failed":
            notes.insert(0, _CONTROL_FAILED)

    def _baselines(
        self,
        row: dict[str, Any],
        notes: list[str],
        ident: _Scores | None,
        control: _Scores,
        rows: np.ndarray,
        width: int,
        p: int,
        q: int,
        has_control: bool,
    ) -> None:
        if ident is not None:
            m = ident.metrics(rows, width)
            row.update(identity_p1=m["p1"], identity_mrr=m["mrr"], identity_rel_mse=m["rel_mse"])
        else:
            notes.append(f"identity baseline undefined: widths differ ({p} and {q})")
        if has_control and np.all(control.rank_cos[rows] >= 0):
            m = control.metrics(rows, width)
            row.update(shuffled_p1=m["p1"], shuffled_mrr=m["mrr"], shuffled_rel_mse=m["rel_mse"])
            if "p1_csls" in m:
                row["shuffled_p1_csls"] = m["p1_csls"]
        elif not has_control:
            notes.append("no shuffled-fit control (no control_permutation given)")

    def _fold_rows(
        self,
        agg: dict[str, Any],
        held: _HeldOut,
        est: Map,
        run_self: bool,
        fold_ranks: Sequence[tuple[int, int]],
        widths: tuple[int, int],
        null_hits: np.ndarray | None = None,
    ) -> list[dict[str, Any]]:
        """One row per fold of the aggregate row ``agg``, from what ``held`` kept of each held-out row."""
        out = []
        keep = {
            k: agg[k]
            for k in (
                *self.labels,
                "estimator",
                "estimator_params",
                "direction",
                "layer_a",
                "layer_b",
                "depth_a",
                "depth_b",
                "grid",
                "protocol",
                "n_folds",
                "fold_seed",
                "folds_key",
                "n",
                "width_source",
                "width_target",
                "standardized",
                "csls_k",
                "level",
            )
            if k in agg
        }
        for f, te in enumerate(self.folds.tests):
            row = {
                **keep,
                "fold": f,
                "n_test": int(te.size),
                "n_train": int(self.folds.n - te.size),
                "n_fit": int(self.folds.n - te.size),
                "bootstrap": 0,
                **_chance(np.full(te.size, te.size)),
            }
            notes: list[str] = []
            self._baselines(
                row,
                notes,
                held.identity,
                held.control,
                te,
                held.width,
                agg["width_source"],
                agg["width_target"],
                self.perm is not None,
            )
            self._determination(row, notes, est, fold_ranks, [f], *widths)
            self._control_columns(row, notes, est, held.selfs, te, [f], run_self)
            row.update(held.matched.metrics(te, held.width))
            self._null_columns(row, notes, est, null_hits, te)
            cka, cka_u, cka_note = _cka(held.matched.kept_pred()[te], held.target[te])
            row["cka"], row["cka_debiased"] = cka, cka_u
            if f < len(held.infos):
                row["fit_info"] = _info_json([held.infos[f]])
                if "alpha" in held.infos[f]:
                    row["alpha"] = float(held.infos[f]["alpha"])
            if cka_note:
                notes.append(cka_note)
            row["note"] = join_notes(notes)
            out.append(row)
        return out


def procrustes_grid(
    reps_a: Any,
    reps_b: Any,
    options: MapOptions | None = None,
    *,
    labels: Mapping[str, Any] | None = None,
    _checked: bool = False,
) -> list[dict[str, Any]]:
    """Held-out Procrustes retrieval for EVERY ``(layer_a, layer_b)``: rows with ``grid = True``.

    For each fold (the first ``options.grid_folds`` of them; all by default) and each
    cell: centre both layers with the training means, ``R = U V^T`` from the
    SVD of ``X_c^T Y_c`` (one SVD serves both directions: ``b->a`` uses
    ``R^T``), then cosine and CSLS ranks of the held-out rows as in
    :func:`evaluate_pair`. Of ``options`` (:class:`MapOptions`) it reads ``folds``,
    ``seed``, ``grid_folds``, ``directions``, ``csls_k``, ``standardize`` and
    ``memory_bytes``. Rows carry ``p1``, ``p5``, ``mrr``, their CSLS
    versions, chance, ``n_fit``, ``rank`` and ``underdetermined``; no
    controls, intervals or residual analysis.
    """
    opts = MapOptions() if options is None else options
    layers_a = reps_a if _checked else as_stack(reps_a, "reps_a")
    layers_b = reps_b if _checked else as_stack(reps_b, "reps_b")
    n = layers_a[0].shape[0]
    if layers_b[0].shape[0] != n:
        raise MapInputError(f"reps_a has {n} sentences but reps_b has {layers_b[0].shape[0]}.")
    fold_set = make_folds(n, opts.folds, opts.seed)
    dirs = tuple(opts.directions)
    csls_k, standardize, memory_bytes, grid_folds = opts.csls_k, opts.standardize, opts.memory_bytes, opts.grid_folds
    lab = labels if _checked and labels is not None else _check_labels(labels)
    k_folds = fold_set.k if grid_folds is None else int(grid_folds)
    if not 1 <= k_folds <= fold_set.k:
        raise MapInputError(f"grid_folds must lie in [1, {fold_set.k}]; got {grid_folds!r}.")
    la, lb = len(layers_a), len(layers_b)
    ranks = {
        (a, b, d): [np.empty(0, np.int64), np.empty(0, np.int64)] for a in range(la) for b in range(lb) for d in dirs
    }
    used = fold_set.tests[:k_folds]
    notes = []
    rank_a = np.zeros((la, k_folds), dtype=np.int64)  # centred training rank per layer and fold
    rank_b = np.zeros((lb, k_folds), dtype=np.int64)
    for f in range(k_folds):
        tr, te = fold_set.train(f), fold_set.tests[f]

        def prepared(
            layer: Any, name: str, *, tr: np.ndarray = tr, te: np.ndarray = te
        ) -> tuple[np.ndarray, np.ndarray]:
            z = as_matrix(layer, name)
            z_tr, z_te = z[tr], z[te]
            if standardize:
                z_tr, z_te = _standardize(z_tr, z_te)
            m = z_tr.mean(axis=0)
            return z_tr - m, z_te - m

        ys = [prepared(layers_b[b], f"reps_b[{b}]") for b in range(lb)]
        for b in range(lb):
            rank_b[b, f] = centred_rank(ys[b][0], _precision(layers_b[b]))
        for a in range(la):
            xc, xt = prepared(layers_a[a], f"reps_a[{a}]")
            rank_a[a, f] = centred_rank(xc, _precision(layers_a[a]))
            for b in range(lb):
                yc, yt = ys[b]
                if not (np.any(xc) and np.any(yc)):
                    notes.append(f"({a}, {b}) fold {f}: a side has no variance; ranks are the worst")
                u, _, vt = _linalg.svd(xc.T @ yc)
                for d in dirs:  # R = U V^T applied as two thin products, never formed
                    q_, t_ = ((xt @ u) @ vt, yt) if d == "a->b" else ((yt @ vt.T) @ u.T, xt)
                    rr = retrieval_ranks(q_, t_, csls_k=csls_k, memory_bytes=memory_bytes)
                    acc = ranks[(a, b, d)]
                    acc[0] = np.concatenate([acc[0], rr.cosine])
                    acc[1] = np.concatenate([acc[1], rr.csls if rr.csls is not None else np.empty(0, np.int64)])
    sizes = np.concatenate([np.full(t.size, t.size) for t in used])
    chance = _chance(sizes)
    k_used = min([csls_k] + [t.size for t in used]) if csls_k else 0
    rows = []
    for a in range(la):
        for b in range(lb):
            for d in dirs:
                rc, rs = ranks[(a, b, d)]
                p, q = layers_a[a].shape[1], layers_b[b].shape[1]
                row = {
                    **lab,
                    "estimator": "procrustes",
                    "estimator_params": json.dumps(Procrustes().params, sort_keys=True, separators=(",", ":")),
                    "direction": d,
                    "layer_a": a,
                    "layer_b": b,
                    "depth_a": a / max(la - 1, 1),
                    "depth_b": b / max(lb - 1, 1),
                    "grid": True,
                    "fold": -1,
                    "protocol": fold_set.scheme,
                    "n_folds": k_folds,
                    "fold_seed": fold_set.seed,
                    "folds_key": fold_set.key,
                    "n": n,
                    "n_test": int(rc.size),
                    "n_train": int(min(n - t.size for t in used)),
                    "n_fit": int(min(n - t.size for t in used)),
                    "rank": int(min(rank_a[a].min(), rank_b[b].min())),
                    "underdetermined": bool(np.any(rank_a[a] < p) or np.any(rank_b[b] < q)),
                    "width_source": p if d == "a->b" else q,
                    "width_target": q if d == "a->b" else p,
                    "standardized": bool(standardize),
                    "csls_k": k_used,
                    **chance,
                    **rank_metrics(rc),
                    "bootstrap": 0,
                    "n_permutations": 0,
                }
                if rs.size:
                    row.update({f"{k}_csls": v for k, v in rank_metrics(rs).items()})
                cell_notes = [
                    "grid row: Procrustes retrieval only (no controls, intervals or residual analysis)",
                    NO_NULL_GRID,
                ]
                if k_folds < fold_set.k:
                    cell_notes.append(f"first {k_folds} of {fold_set.k} folds")
                cell_notes += [s for s in notes if s.startswith(f"({a}, {b})")]
                if row["underdetermined"]:
                    cell_notes.append(_UNDERDETERMINED.format(how=_UNFIXED["procrustes"]))
                row["note"] = join_notes(cell_notes)
                rows.append(row)
    return [_complete(r) for r in rows]
