"""A permutation null and a calibrated score for a map's held-out retrieval (``p1``).

A map's held-out precision@1 has a chance level that depends on the widths, n, the folds and the
estimator: a map fitted on unrelated rows still ranks some held-out rows first, and more so when the
widths are large next to n (the fit has freedom to spare). Chance is not ``1 / n_test`` then. The
null here measures it the way the result's own fit is made:

- draw K permutations of the n rows exactly as the similarity null of ``interlingua.compare`` does
  (the k-th call of ``default_rng(seeds.test).permutation(n)``,
  :func:`~interlingua.analysis.inference._gram.permutation_batches`);
- in each fold, restrict draw k to the training rows
  (:func:`~interlingua.maps.folds.restricted_permutation`, a uniform permutation of the training rows,
  held-out rows never enter a fit), refit the same estimator on the training rows paired through it,
  and score the SAME held-out rows, correctly paired, exactly as the observed map is scored
  (cosine ranks, training-mean centring);
- the null value of draw k is the held-out P@1 over every scored row (each row scored by the fold's
  permuted fit), the statistic the row reports as ``p1``.

Under "the rows of A and B are not paired" (B's rows exchangeable given A's) the observed fit and
the K permuted fits are exchangeable draws of one statistic, so the calibration of
:mod:`interlingua.analysis.inference.calibration` applies unchanged: ``tau`` is the
``ceil((1 - alpha)(K + 1))``-th smallest of the K + 1 values (the observed one included),
``calibrated = (p1 - tau) / (1 - tau)`` clipped to [0, 1] (P@1 is bounded by 1), and the add-one
p-value ``(1 + #{null >= p1}) / (K + 1)``. ``P(calibrated > 0) <= alpha`` when the sides are
unrelated.

The null is not drawn for ``mlp`` (K trainings per fold are not cheap), for ``identity`` (nothing is fitted:
every draw would repeat the observed value) and for the Procrustes grid rows; those rows say so in ``note``.
Per-fold rows carry the same null over their fold's rows.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from interlingua.maps.errors import MapInputError, MapWarning
from interlingua.maps.estimators import Identity, Map, Procrustes, _Linear
from interlingua.maps.folds import restricted_permutation

if TYPE_CHECKING:
    from interlingua.maps.config import MapsSpec

__all__ = [
    "NULL_NOT_HERE",
    "MAX_DEFAULT_PERMUTATIONS",
    "NO_NULL_ZERO",
    "null_permutations",
    "has_null",
    "null_fits",
    "calibrate_p1",
    "resolve_permutations",
    "null_seconds",
]

#: ``maps.permutations`` unset: ``inference.permutations``, at most this many (each draw refits every map)
MAX_DEFAULT_PERMUTATIONS = 100

NO_NULL_ZERO = "no permutation null (permutations: 0): calibrated, tau and p_value are NaN"
NULL_NOT_HERE = (
    "no permutation null at this layer pair (inference.layers: last tests only the last layers; all: every pair): "
    "calibrated, tau and p_value are NaN"
)
NO_NULL_MLP = "no permutation null for mlp (K trainings per fold are not cheap): calibrated, tau and p_value are NaN"
NO_NULL_IDENTITY = (
    "no permutation null for identity (nothing is fitted, so a refit on unpaired rows is the same map): "
    "calibrated, tau and p_value are NaN"
)
NO_NULL_GRID = "no permutation null on grid rows"


def resolve_permutations(maps_permutations: int | None, inference_permutations: int) -> int:
    """K for a run: ``maps.permutations`` when set, else ``inference.permutations`` capped at 100."""
    if maps_permutations is not None:
        return int(maps_permutations)
    return min(int(inference_permutations), MAX_DEFAULT_PERMUTATIONS)


def null_permutations(n: int, k: int, seed: int) -> np.ndarray:
    """``(K, n)`` int64: draw k is the k-th ``default_rng(seed).permutation(n)``, as the similarity null draws."""
    from interlingua.analysis.inference._gram import permutation_batches

    if k <= 0:
        return np.zeros((0, n), dtype=np.int64)
    return np.concatenate(list(permutation_batches(n, k, seed, 64)), axis=0).astype(np.int64)


def has_null(est: Map) -> bool:
    """Estimators the null refits: the fitted linear maps (not ``mlp``: K trainings; not ``identity``: nothing is
    fitted, so every draw would repeat the observed value and the score would be 0 whatever it is)."""
    return isinstance(est, _Linear)


def no_null_reason(est: Map) -> str:
    """The note of a row whose estimator draws no null."""
    return NO_NULL_IDENTITY if isinstance(est, Identity) else NO_NULL_MLP


def null_fits(
    est: Map,
    x_tr: np.ndarray,
    y_tr: np.ndarray,
    sigmas: Sequence[np.ndarray],
    directions: Sequence[str],
    chunk: int = 16,
) -> dict[str, list[Map]]:
    """Per direction, the estimator refitted on ``(x_tr[i], y_tr[sigma[i]])`` for every ``sigma`` in ``sigmas``.

    As the shuffled-fit control (:func:`interlingua.maps.evaluate._fit_directions`): Procrustes ``b->a`` is
    the transpose from the same SVD; other estimators fit B onto A's rows paired through ``sigma^-1`` with
    :meth:`Map.fit_many` (one decomposition of the source for ``chunk`` targets at a time). The fits'
    warnings are the observed map's (recorded in its row), so they are not repeated here.
    """
    out: dict[str, list[Map]] = {d: [] for d in directions}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MapWarning)
        if isinstance(est, Procrustes):
            for s in sigmas:
                fwd = est.clone().fit(x_tr, y_tr[s])
                if "a->b" in out:
                    out["a->b"].append(fwd)
                if "b->a" in out:
                    out["b->a"].append(fwd.reverse())
            return out
        for start in range(0, len(sigmas), chunk):
            part = sigmas[start : start + chunk]
            if "a->b" in out:
                out["a->b"] += est.fit_many(x_tr, [y_tr[s] for s in part])
            if "b->a" in out:
                out["b->a"] += est.fit_many(y_tr, [x_tr[np.argsort(s)] for s in part])
    return out


def fold_sigmas(perms: np.ndarray, train: np.ndarray) -> list[np.ndarray]:
    """Each null draw restricted to one fold's training rows (positions into ``train``)."""
    return [restricted_permutation(p, train) for p in perms]


def calibrate_p1(observed: float, null: Any, alpha: float) -> dict[str, float]:
    """``p_value``, ``tau`` and ``calibrated`` of a held-out P@1 against its null (bounds [0, 1])."""
    from interlingua.analysis.inference.calibration import calibrate

    nul = np.asarray(null, dtype=np.float64).ravel()
    if not math.isfinite(observed) or nul.size == 0 or not np.all(np.isfinite(nul)):
        return {"p_value": math.nan, "tau": math.nan, "calibrated": math.nan}
    cal = calibrate(observed, nul, alpha=alpha, bounds=(0.0, 1.0))
    return {"p_value": cal.p_value, "tau": cal.tau, "calibrated": cal.calibrated}


def check_null_args(permutations: Any, seed: Any, alpha: Any) -> tuple[int, int, float]:
    """Validated ``(K, seed, alpha)`` of :func:`~interlingua.maps.evaluate_pair`'s null, or a MapInputError."""
    import numbers

    if isinstance(permutations, bool) or not isinstance(permutations, numbers.Integral) or permutations < 0:
        raise MapInputError(f"permutations must be an integer >= 0 (0: no null); got {permutations!r}.")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise MapInputError(f"permutation_seed must be a non-negative integer; got {seed!r}.")
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        a = math.nan
    if not 0.0 < a < 1.0:
        raise MapInputError(f"alpha must be a number in (0, 1), e.g. 0.05; got {alpha!r}.")
    return int(permutations), int(seed), a


def null_seconds(
    k: int,
    n: int,
    p: int,
    q: int,
    section: MapsSpec,
    *,
    layer_pairs: int,
    rate64: float,
    svd_penalty: float = 1.0,
    ridge_cv: int = 5,
    ridge_alphas: int = 9,
) -> float:
    """Rough seconds of one map pair's permutation null (for ``plan``): K refits per estimator x fold x layer pair.

    A refit costs what the observed fit costs, on ``n_fit = n (folds - 1) / folds`` training rows:

    - Procrustes: the ``p x q`` cross-product (``2 n_fit p q`` flops) and its SVD (``4 max(p, q) min(p, q)^2``
      times ``svd_penalty``), one for both directions;
    - ridge, per direction: its inner cross-validation is run again for every draw (the penalty is chosen
      per target): with ``e = min(p, n_fit)`` the eigenbasis' size, ``(ridge_cv + 2) 2 e^2 q`` to project the
      target and ``ridge_alphas 2 n_fit e q`` to score the grid, plus the cross-product;
    - affine and the rest, per direction: one solve, ``2 n_fit p q``;

    then each draw ranks its fold's held-out rows (``2 n_test^2 max(p, q)`` per direction). ``mlp`` draws
    no null, nor does ``identity``. ``section``: the run's ``maps:`` section (its ``estimators``, ``folds`` and
    ``directions`` are read); ``layer_pairs``: the layer pairs the null is drawn at; ``rate64``: float64
    flop/s; 2 ms of Python per fit and direction.
    Measured at n = 200, p = q = 256, five folds (one thread, load 9 on 2 cores): Procrustes 3.8 ms and
    ridge 68 ms per draw and fold, both directions; this gives 12 ms and 54 ms at the 9.3 GFLOP/s a matmul
    measured then.
    """
    if k <= 0:
        return 0.0
    folds, directions = section.folds, len(section.directions)
    n_fit = n * (folds - 1) / max(folds, 1)
    n_test = n / max(folds, 1)
    rank = directions * 2.0 * n_test * n_test * max(p, q)
    total = 0.0
    for name in section.estimators:
        if name in ("mlp", "identity"):
            continue
        if name.startswith("procrustes"):
            flops = 2.0 * n_fit * p * q + svd_penalty * 4.0 * max(p, q) * min(p, q) ** 2
            calls = 1
        elif name == "ridge":
            e = min(max(p, q), n_fit)
            one = 2.0 * n_fit * p * q + (ridge_cv + 2) * 2.0 * e * e * q + ridge_alphas * 2.0 * n_fit * e * q
            flops = directions * one
            calls = directions
        else:
            flops = directions * 2.0 * n_fit * p * q
            calls = directions
        total += k * folds * layer_pairs * ((flops + rank) / rate64 + calls * 2e-3)
    return total
