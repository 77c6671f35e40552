"""Shuffled controls and permutation tests for paired-row similarity measures.

Two different things use permutations of the rows of side B:

- the *shuffled control* of a run: ONE permutation per pair
  (:func:`shuffle_permutation`, seeded by :func:`pair_seed`), drawn once and
  reused at every layer and for every measure, stored with the results;
- a *permutation test*: K seeded permutations give the null distribution of a
  measure under "rows are not paired". The p-value is
  ``(1 + #{null at least as extreme as observed}) / (1 + K)`` (the observed
  pairing counts as one permutation, so p is never 0), with "extreme" read
  from the measure's metadata: ``>=`` for similarities, ``<=`` for distances.

For measures with a Gram form (``metadata.gram``: linear CKA, biased and
debiased) the null reuses each side's ``measure.unit_gram``: each permutation
is an O(n^2) gather (see :mod:`interlingua.analysis.inference._gram`) instead of an
O(n^2 p) recomputation (timings: benchmarks/README.md). Measures with a
prepared form (``metadata.prepared``: Procrustes, CCA, SVCCA, PWCCA, RSA)
prepare each side once (``measure.prepare``) and evaluate the permutations in
batches from the prepared sides (``measure.from_prepared``): e.g. Procrustes
pays an ``r x r`` singular-value step per permutation (r <= min(n, width))
instead of a width x width SVD (timings: benchmarks/results/nulls.md). The
observed value is always the direct call. Other measures are recomputed on ``Y[p]``.

``permutation_test(..., null_method="moments")`` (biased linear CKA only)
draws no permutations: the p-value comes from the exact mean, variance and
skewness of the permutation distribution and a Pearson type III fit
(:mod:`interlingua.analysis.inference.moments`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.analysis.inference._common import (
    as_pair,
    check_count,
    check_seed,
    exceedances,
    resolve_measure,
)
from interlingua.analysis.inference._gram import (
    DEFAULT_MEMORY_BYTES,
    FeatureNull,
    GramGather,
    feature_null_is_cheaper,
    gram_path_is_cheaper,
    permutation_batches,
)
from interlingua.core.errors import MeasureInputError
from interlingua.core.numerics import with_analysis_blas

__all__ = [
    "PermutationResult",
    "GridPermutationResult",
    "shuffle_permutation",
    "pair_seed",
    "permutation_test",
    "grid_permutation_test",
    "DEFAULT_QUANTILES",
]

DEFAULT_QUANTILES = (0.01, 0.05, 0.5, 0.95, 0.99)


def shuffle_permutation(n: int, seed: int) -> np.ndarray:
    """The fixed shuffled control of one pair: ``default_rng(seed).permutation(n)`` (int64, length n).

    A plain uniform permutation, NOT a derangement: about one row (in
    expectation) stays paired with itself, as in each draw of a permutation
    test, so the control is distributed like one draw of the test's null. In
    a run it is drawn from the pair's own seed (``seeds.control``), not from
    the test's seed (``seeds.test``), so it is not one of the test's draws.
    Deterministic given ``(n, seed)``. Apply it to the rows of side B
    (``Y[perm]``) at every layer and for every measure, and store it with
    the results.
    """
    n = check_count(n, "n (number of rows)", minimum=2)
    return np.random.default_rng(check_seed(seed)).permutation(n)


def pair_seed(base_seed: int, name_a: str, name_b: str, *, ordered: bool = False) -> int:
    """A per-pair seed derived from the run's base seed and the two side names.

    ``sha256`` of the JSON list ``[base_seed, name_a, name_b]`` (names sorted
    unless ``ordered=True``), first 8 bytes, top bit cleared: a non-negative
    int64. Stable across Python processes and versions (no ``hash()``), and
    independent of the order in which a run visits its pairs; unordered by
    default, so ``(a, b)`` and ``(b, a)`` share a seed.
    """
    base = check_seed(base_seed)
    for nm in (name_a, name_b):
        if not isinstance(nm, str) or not nm:
            raise MeasureInputError(f"pair names must be non-empty strings; got {nm!r}.")
    names = [name_a, name_b] if ordered else sorted([name_a, name_b])
    digest = hashlib.sha256(json.dumps([base, *names]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


@dataclass(frozen=True, eq=False)
class PermutationResult:
    """A permutation test of one measure on one pair of representations.

    ``p_value = (1 + #{null at least as extreme}) / (1 + n_permutations)``;
    ``null`` holds the K permuted values in the order the seeded permutations
    were drawn; ``null_quantiles`` maps a probability to the null's quantile.
    ``method`` says how the null was computed: ``"gram_gather"`` (a measure
    with ``metadata.gram``: its unit Grams re-indexed), ``"feature"`` (linear
    CKA: ``||X^T Y[p]||^2`` from the centred data, no n x n matrix), ``"prepared"`` (a
    measure with ``metadata.prepared``: from each side prepared once) or
    ``"recompute"`` (measure called on ``Y[p]``),
    or ``"moments"`` (``null_method="moments"``: no draws, ``null`` is empty,
    ``n_permutations`` is 0, the p-value and ``null_quantiles`` come from the
    Pearson type III fit to the exact permutation moments).
    """

    measure_id: str
    observed: float
    p_value: float
    null: np.ndarray = field(repr=False)
    null_quantiles: dict[float, float]
    n_permutations: int
    seed: int
    larger_is_more_similar: bool
    method: str

    def to_dict(self, include_null: bool = False) -> dict[str, Any]:
        """JSON-ready fields (the null array only when asked)."""
        out = {
            "measure_id": self.measure_id,
            "observed": self.observed,
            "p_value": self.p_value,
            "null_quantiles": {str(k): v for k, v in self.null_quantiles.items()},
            "n_permutations": self.n_permutations,
            "seed": self.seed,
            "larger_is_more_similar": self.larger_is_more_similar,
            "method": self.method,
        }
        if include_null:
            out["null"] = self.null.tolist()
        return out


@dataclass(frozen=True, eq=False)
class GridPermutationResult:
    """Permutation test of the maximum of a layer x layer linear-CKA grid.

    ``observed`` is ``max(grid)`` (nan cells ignored), reached at ``argmax``;
    the null applies the same maximum to every permuted grid (one permutation
    shared by all layers of side B), so the search over La x Lb cells is paid
    for. ``cell_p_values`` are the uncorrected per-cell p-values (same
    permutations); ``adjusted_p_values`` compare each cell with the null of the
    maximum (single-step max-T, family-wise error controlled over the grid).
    ``cell_null``: the (K, La, Lb) permuted grids themselves (``null`` is their
    nan-ignoring maximum), from which
    :func:`~interlingua.analysis.inference.calibration.calibrate_grid` calibrates
    the maximum, the mean and each layer's best match in the other model.
    """

    observed: float
    argmax: tuple[int, int]
    p_value: float
    grid: np.ndarray = field(repr=False)
    null: np.ndarray = field(repr=False)
    null_quantiles: dict[float, float]
    cell_p_values: np.ndarray = field(repr=False)
    adjusted_p_values: np.ndarray = field(repr=False)
    n_permutations: int
    seed: int
    debiased: bool
    measure_id: str = ""
    cell_null: np.ndarray | None = field(default=None, repr=False)


def _quantiles(null: np.ndarray, quantiles: Sequence[float]) -> dict[float, float]:
    qs = [float(q) for q in quantiles]
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise MeasureInputError(f"quantiles must lie in [0, 1]; got {q}.")
    finite = null[np.isfinite(null)]
    if finite.size == 0:
        return {q: float("nan") for q in qs}
    return {q: float(v) for q, v in zip(qs, np.quantile(finite, qs))}


def _p_value(null: np.ndarray, observed: float, larger: bool) -> float:
    if not np.isfinite(observed) or not np.all(np.isfinite(null)):
        return float("nan")
    return (1 + exceedances(null, observed, larger)) / (1 + null.size)


@with_analysis_blas
def permutation_test(
    measure: Any,
    X: Any,
    Y: Any,
    n_permutations: int = 1000,
    seed: int = 0,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    fast: bool | None = None,
    device: Any = None,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    larger_is_more_similar: bool | None = None,
    null_method: str = "monte_carlo",
    **measure_kwargs: Any,
) -> PermutationResult:
    """Permutation test of ``measure(X, Y)`` against K seeded row permutations of ``Y``.

    ``measure``: an id (``"cka_linear_debiased"``), a :class:`Measure`, or a
    callable ``(X, Y) -> float`` (then ``larger_is_more_similar`` says which
    tail; default similarity). ``fast``: for measures with a Gram form
    (``metadata.gram``, e.g. linear CKA), ``None`` picks the cheaper of the
    Gram gather and recomputation, ``True`` forces the gather,
    ``False`` recomputes; for measures with a prepared form
    (``metadata.prepared``) ``None`` and ``True`` use it, ``False`` recomputes
    (the reference path, equal to rounding). For linear CKA ``None`` picks between the Gram gather and the
    feature form ``||X^T Y[p]||^2`` (no n x n matrix, method ``"feature"``) by the cost model
    (:func:`~interlingua.analysis.inference._gram.feature_null_is_cheaper`).
    ``device`` (e.g. ``"cuda"``) runs the gather in torch
    there. ``memory_bytes`` bounds the gathered Grams held at once.
    ``measure_kwargs`` go to every measure call (e.g. ``same_model=True``).

    The observed value is ``measure(X, Y)`` itself. A nan observed value (a
    side with no variance) or a nan in the null gives ``p_value = nan``.

    ``null_method``: ``"monte_carlo"`` (default: the K seeded permutations
    above) or ``"moments"`` (only for the measures in
    :data:`interlingua.analysis.inference.moments.MOMENTS_MEASURES`, i.e. biased linear
    CKA: no permutations are drawn, the p-value is the Pearson type III tail
    of the exact permutation mean, variance and skewness; ``null`` is empty,
    ``n_permutations`` 0, ``method`` ``"moments"``; needs n >= 4).
    """
    if null_method not in ("monte_carlo", "moments"):
        raise MeasureInputError(f"null_method must be 'monte_carlo' or 'moments'; got {null_method!r}.")
    m = resolve_measure(measure, larger_is_more_similar)
    k = check_count(n_permutations, "n_permutations", minimum=1)
    seed = check_seed(seed)
    if null_method == "moments":
        return _moments_test(m, X, Y, seed, quantiles, measure_kwargs)
    x, y = as_pair(X, Y, m.min_n, m.id)
    n = x.shape[0]
    observed = float(m.fn(x, y, **measure_kwargs))
    use_gram = m.unit_gram is not None and fast is not False
    use_feature = False
    if use_gram and fast is None and device is None and m.linear_cka_debiased is not None:
        # linear CKA: the feature form (no n x n Gram) or the Gram gather, whichever the cost model prices lower
        use_feature = feature_null_is_cheaper(n, [x.shape[1]], [y.shape[1]])
        use_gram = not use_feature
    elif use_gram and fast is None:
        use_gram = device is not None or gram_path_is_cheaper(n, x.shape[1], y.shape[1])
    null = np.empty(k)
    if use_feature:
        feat = FeatureNull([x], [y], debiased=bool(m.linear_cka_debiased))
        done = 0
        for perms in permutation_batches(n, k, seed, feat.batch_size):
            null[done : done + len(perms)] = feat.values(perms)[:, 0, 0]
            done += len(perms)
        method = "feature"
    elif use_gram:
        assert m.unit_gram is not None  # use_gram needs the measure's Gram form
        gather = GramGather([m.unit_gram(x)], [m.unit_gram(y)], device=device, memory_bytes=memory_bytes)
        done = 0
        for perms in permutation_batches(n, k, seed, gather.batch_size):
            null[done : done + len(perms)] = gather.values(perms)[:, 0, 0]
            done += len(perms)
        method = "gram_gather"
    elif m.prepared is not None and fast is not False:
        sx, sy = _prepared_sides(m, x, y, measure_kwargs)
        done = 0
        for perms in permutation_batches(n, k, seed, 64):
            null[done : done + len(perms)] = m.prepared.from_prepared(sx, sy, None, perms)
            done += len(perms)
        method = "prepared"
    else:
        done = 0
        for perms in permutation_batches(n, k, seed, 64):
            for p in perms:
                null[done] = float(m.fn(x, y[p], **measure_kwargs))
                done += 1
        method = "recompute"
    return PermutationResult(
        measure_id=m.id,
        observed=observed,
        p_value=_p_value(null, observed, m.larger_is_more_similar),
        null=null,
        null_quantiles=_quantiles(null, quantiles),
        n_permutations=k,
        seed=seed,
        larger_is_more_similar=m.larger_is_more_similar,
        method=method,
    )


def _prepared_sides(m: Any, x: np.ndarray, y: np.ndarray, measure_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """Both sides prepared once, without repeating the warnings the observed call already gave."""
    import warnings

    from interlingua.analysis.measures.validation import MeasureWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return m.prepared.prepare(x, **measure_kwargs), m.prepared.prepare(y, **measure_kwargs)


def _moments_test(
    m: Any, X: Any, Y: Any, seed: int, quantiles: Sequence[float], measure_kwargs: dict[str, Any]
) -> PermutationResult:
    """``permutation_test(..., null_method="moments")``: the analytic null of biased linear CKA."""
    from interlingua.analysis.inference.moments import MOMENTS_MEASURES, rv_side, rv_test_from_sides

    if m.id not in MOMENTS_MEASURES:
        raise MeasureInputError(
            f"{m.id}: null_method='moments' (analytic permutation moments) supports only "
            f"{', '.join(MOMENTS_MEASURES)}; use null_method='monte_carlo' for other measures."
        )
    x, y = as_pair(X, Y, max(m.min_n, 4), m.id)
    observed = float(m.fn(x, y, **measure_kwargs))
    qs = [float(q) for q in quantiles]
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise MeasureInputError(f"quantiles must lie in [0, 1]; got {q}.")
    if np.isfinite(observed):
        res = rv_test_from_sides(observed, rv_side(x, name="X"), rv_side(y, name="Y"))
        p_value = res.p_value
        null_quantiles = {q: float(v) for q, v in zip(qs, np.atleast_1d(res.quantile(np.array(qs))))}
    else:  # a side without variance: nan, as in the Monte-Carlo path
        p_value = float("nan")
        null_quantiles = {q: float("nan") for q in qs}
    return PermutationResult(
        measure_id=m.id,
        observed=observed,
        p_value=p_value,
        null=np.empty(0),
        null_quantiles=null_quantiles,
        n_permutations=0,
        seed=seed,
        larger_is_more_similar=m.larger_is_more_similar,
        method="moments",
    )


def _layers(layers: Any, name: str) -> list[np.ndarray]:
    from interlingua.analysis.measures.validation import as_matrix

    if isinstance(layers, (str, bytes)) or layers is None:
        raise MeasureInputError(f"{name} must be a sequence of (n, p) arrays or an (L, n, p) array.")
    ndim = getattr(layers, "ndim", None)
    if ndim is not None and ndim != 3:
        raise MeasureInputError(f"{name} has shape {tuple(layers.shape)}; expected (L, n, p) or a list of (n, p).")
    seq = [layers[i] for i in range(layers.shape[0])] if ndim is not None else list(layers)
    if not seq:
        raise MeasureInputError(f"{name} is empty; pass at least one layer.")
    return [as_matrix(a, f"{name}[{i}]") for i, a in enumerate(seq)]


@with_analysis_blas
def grid_permutation_test(
    layers_a: Any,
    layers_b: Any,
    *,
    debiased: bool = False,
    n_permutations: int = 1000,
    seed: int = 0,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    device: Any = None,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    measure: Any = None,
) -> GridPermutationResult:
    """Permutation test of the maximum linear CKA over all (layer of A, layer of B) cells.

    ``measure``: any similarity with a Gram form (``metadata.gram``), as an id
    or a :class:`~interlingua.analysis.measures.Measure`; by default linear CKA, biased
    or ``debiased``.

    ``layers_a`` / ``layers_b``: ``(L, n, p)`` arrays or sequences of ``(n, p_i)``
    arrays over the same n examples. Each null permutation reorders the rows of
    EVERY layer of side B at once and the statistic is the maximum over the
    permuted grid, so ``p_value`` accounts for picking the best cell. Permutation
    k is the same as in :func:`permutation_test` with the same ``seed``, hence
    the max-null dominates every single-cell null draw by draw.

    Linear CKA takes the feature form (``_gram.FeatureNull``: ``||X_a^T Y_b[p]||^2`` and diagonal terms,
    memory linear in n, ``2 n sum(p) sum(q)`` flops a draw) when the cost model prices it below the Gram
    gather (:func:`~interlingua.analysis.inference._gram.feature_null_is_cheaper`: widths' product below
    about 3 n, or n above 12,000), and no ``device`` is given. Otherwise:

    Memory: quadratic in n, since every draw gathers side B's permuted Grams:
    ``(Lb + La / 2) n^2`` floats on the CPU (side B's unit Grams whole, side
    A's weighted upper triangles, built one Gram at a time), e.g. 25 + 25
    layers at n = 1012 take ~300 MB;
    :func:`interlingua.analysis.inference._gram.grid_null_peak_bytes` estimates it; the kept permuted grids
    ``cell_null`` add ``K La Lb`` floats (5 MB for 25 x 25 layers and K = 1000).
    """
    k = check_count(n_permutations, "n_permutations", minimum=1)
    seed = check_seed(seed)
    A = _layers(layers_a, "layers_a")
    B = _layers(layers_b, "layers_b")
    n = A[0].shape[0]
    for name, Ls in (("layers_a", A), ("layers_b", B)):
        for i, a in enumerate(Ls):
            if a.shape[0] != n:
                raise MeasureInputError(
                    f"{name}[{i}] has {a.shape[0]} rows but layers_a[0] has {n}; every layer must hold the same "
                    "n examples in the same order."
                )
    if measure is None:
        measure = "cka_linear_debiased" if debiased else "cka_linear_biased"
    elif debiased:
        raise MeasureInputError("pass either measure= or debiased=True, not both (the measure id fixes the estimator).")
    m = resolve_measure(measure)
    if m.unit_gram is None or not m.larger_is_more_similar:
        raise MeasureInputError(
            f"{m.id}: a grid permutation test needs a similarity with a Gram form (metadata.gram), "
            "e.g. cka_linear_biased or cka_linear_debiased."
        )
    debiased = bool(m.linear_cka_debiased)
    min_n = max(m.min_n, 3)
    if n < min_n:
        raise MeasureInputError(f"a permutation test of {m.id} needs at least {min_n} paired examples; got n={n}.")
    unit_gram = m.unit_gram
    gather: GramGather | FeatureNull
    if (
        device is None
        and m.linear_cka_debiased is not None
        and feature_null_is_cheaper(n, [a.shape[1] for a in A], [b.shape[1] for b in B])
    ):
        gather = FeatureNull(A, B, debiased=debiased)  # linear in n: no n x n matrix
    else:
        grams_b = np.empty((len(B), n, n))  # side B's Grams written one by one: no list and stacked copy
        for j, b in enumerate(B):
            grams_b[j] = unit_gram(b)
        gather = GramGather(_GramsOnAccess(A, unit_gram), grams_b, device=device, memory_bytes=memory_bytes)
    grid = gather.values(np.arange(n)[None, :])[0]
    observed, argmax = _nanmax(grid)
    null = np.empty(k)
    cell_null = np.empty((k, *grid.shape))
    cell_counts = np.zeros(grid.shape, dtype=np.int64)
    tol = 1e-12
    done = 0
    for perms in permutation_batches(n, k, seed, gather.batch_size):
        vals = gather.values(perms)  # (b, La, Lb)
        cell_null[done : done + len(perms)] = vals
        with np.errstate(invalid="ignore"):
            cell_counts += (vals >= grid[None] - tol).sum(axis=0)
        for j in range(len(perms)):
            null[done + j] = _nanmax(vals[j])[0]
        done += len(perms)
    finite_cells = np.isfinite(grid)
    cell_p = np.where(finite_cells, (1 + cell_counts) / (1 + k), np.nan)
    adjusted = np.full(grid.shape, np.nan)
    if np.all(np.isfinite(null)):
        with np.errstate(invalid="ignore"):
            counts_max = (null[None, None, :] >= grid[..., None] - tol).sum(axis=-1)
        adjusted = np.where(finite_cells, (1 + counts_max) / (1 + k), np.nan)
    return GridPermutationResult(
        observed=observed,
        argmax=argmax,
        p_value=_p_value(null, observed, True),
        grid=grid,
        null=null,
        null_quantiles=_quantiles(null, quantiles),
        cell_p_values=cell_p,
        adjusted_p_values=adjusted,
        n_permutations=k,
        seed=seed,
        debiased=debiased,
        measure_id=m.id,
        cell_null=cell_null,
    )


class _GramsOnAccess(Sequence[np.ndarray]):
    """Side A's unit Grams computed when read, so :class:`GramGather` holds one at a time."""

    def __init__(self, layers: list[np.ndarray], unit_gram: Any) -> None:
        self._layers, self._unit_gram = layers, unit_gram

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return self._unit_gram(self._layers[i])


def _nanmax(grid: np.ndarray) -> tuple[float, tuple[int, int]]:
    if not np.isfinite(grid).any():
        return float("nan"), (-1, -1)
    flat = int(np.nanargmax(grid))
    i, j = np.unravel_index(flat, grid.shape)
    return float(grid[i, j]), (int(i), int(j))
