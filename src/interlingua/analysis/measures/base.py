"""Measure objects, their metadata, results and the id registry.

A :class:`Measure` is a small, honest object: a stable descriptive id that
names the variant ("cka_linear_debiased", "svcca_var0.99", "pwcca_x"), the
metadata tests and reports read instead of guessing, and a call that returns
a float (``measure(X, Y)``) or a :class:`MeasureResult` that also says which
estimator produced the number (``measure.compute(X, Y)``).

Invariance convention: a measure declares invariance to a class of maps G
when ``m(g1(X), g2(Y)) == m(X, Y)`` for g1, g2 drawn *independently* from G
and applied to each side (columns mixed by a matrix, or every row shifted by
one vector). Names:

- ``"orthogonal"``: X -> X Q, Q orthogonal (any width-preserving rotation or reflection);
- ``"isotropic_scale"``: X -> c X, c > 0;
- ``"translation"``: X -> X + 1 b^T (the same shift added to every row);
- ``"invertible_linear"``: X -> X A, A any invertible matrix;
- ``"permutation"``: X -> X P, P a permutation of the neurons (columns).

Capabilities (declared in the metadata, provided by the measure object):

- ``gram``: the measure is an inner product of per-side matrices,
  ``m(X, Y) == np.vdot(m.unit_gram(X), m.unit_gram(Y))`` (to rounding), where
  ``unit_gram(X)`` is an ``(n, n)`` float64 matrix that is equivariant under
  row permutations (``unit_gram(X[p]) == unit_gram(X)[p][:, p]``). One Gram
  per side then serves the matched value, the shuffled control and every
  permutation of a permutation test (an O(n^2) gather each):
  ``m.from_grams(gx, gy)``.
- ``grid``: ``m.grid(layers_a, layers_b)`` returns the ``(La, Lb)`` array of
  ``m`` between every layer of A and every layer of B, faster than a loop.
- ``prepared``: the per-side work (centring, scaling, a thin SVD, an RDM and its
  ranks) is done once by ``state = m.prepare(X)``, and
  ``m.from_prepared(sx, sy, rows_x, rows_y)`` returns, for each row of the
  ``(b, m)`` index arrays, ``m(X[rows_x[i]], Y[rows_y[i]])`` (``None``: all rows
  in order) paying only the small per-resample step. A permutation test passes
  ``rows_x=None, rows_y=perms``; a jackknife or bootstrap passes the same
  indices on both sides. Values agree with the direct call to float64 rounding
  (each measure's ``prepared_fn`` docstring says how, and where it falls back
  to the direct call).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from interlingua.analysis.measures.validation import constant_columns, is_torch, rescale, warn
from interlingua.core.errors import MeasureInputError
from interlingua.core.named import Registry

__all__ = [
    "COST_MODELS",
    "INVARIANCES",
    "MEASURES",
    "MeasureMetadata",
    "MeasureResult",
    "Measure",
    "register",
    "register_family",
    "get_measure",
    "list_measures",
]

INVARIANCES = frozenset({"orthogonal", "isotropic_scale", "translation", "invertible_linear", "permutation"})
#: How the cost model prices a measure (``MeasureMetadata.cost_model``; the arithmetic of each path is
#: :func:`interlingua.analysis.inference.cost.measure_flops`): ``gram`` (linear CKA: unit Grams gathered per draw),
#: ``rbf`` (an RBF kernel recomputed per draw), ``svd`` (Procrustes/CCA: a thin SVD per side, then ``r x s``),
#: ``rsa`` (RDMs ranked once), ``anc`` (column correlations), ``knn`` (neighbour lists once, then a gather),
#: ``recompute`` (a full recompute per draw).
COST_MODELS = frozenset({"gram", "rbf", "svd", "rsa", "anc", "knn", "recompute"})


@dataclass(frozen=True)
class MeasureMetadata:
    """What a measure promises. Property tests derive their checks from these fields."""

    larger_is_more_similar: bool
    symmetric: bool
    invariances: frozenset[str]
    requires_equal_width: bool = False
    requires_same_model: bool = False
    min_n: int = 2
    estimator: str = ""
    reference: str = ""
    gram: bool = False  # has unit_gram / from_grams (see the module docstring)
    grid: bool = False  # has grid(layers_a, layers_b)
    # every finite value lies in [lo, hi] (to rounding); (-inf, inf) when no range is promised
    bounds: tuple[float, float] = (-math.inf, math.inf)
    prepared: bool = False  # has prepare / from_prepared (see the module docstring)
    # defined only on distinct examples (a duplicated row would be its own neighbour): a bootstrap
    # resamples its leave-one-out influence values instead of rows (has leave_one_out; see
    # inference.bootstrap_interval)
    resample_distinct: bool = False
    # how the cost model prices it (one of COST_MODELS): the path its call and its inference take
    cost_model: str = "recompute"

    def __post_init__(self) -> None:
        if self.cost_model not in COST_MODELS:
            raise ValueError(f"unknown cost_model {self.cost_model!r}; allowed: {sorted(COST_MODELS)}")
        inv = frozenset(self.invariances)
        unknown = inv - INVARIANCES
        if unknown:
            raise ValueError(f"unknown invariance(s) {sorted(unknown)}; allowed: {sorted(INVARIANCES)}")
        object.__setattr__(self, "invariances", inv)
        lo, hi = self.bounds
        if not lo < hi:
            raise ValueError(f"bounds must be (lo, hi) with lo < hi; got {self.bounds}")


@dataclass(frozen=True)
class MeasureResult:
    """A score together with the estimator that produced it and what was done to the inputs.

    ``details`` records decisions such as the CKA form used ("gram"/"feature"),
    the number of components SVCCA kept, columns dropped, or the ``reason`` a
    value is nan.
    """

    value: float
    measure_id: str
    estimator: str
    n: int
    details: Mapping[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.value)


@dataclass(frozen=True)
class Measure:
    """A similarity measure with a stable id and declared metadata.

    ``measure(X, Y, **kw) -> float``; ``measure.compute(X, Y, **kw) -> MeasureResult``.
    Keyword arguments may set options that do not change what is measured
    (``backend``, ``device``, ``method``, ...); parameters fixed by the id
    (e.g. ``debiased`` for "cka_linear_biased") cannot be overridden. Pass
    ``same_model=True/False`` to say whether X and Y come from one model;
    measures with ``requires_same_model`` refuse anything but ``True``.

    Capabilities: ``unit_gram_fn(X, **params) -> (n, n)`` when
    ``metadata.gram``, ``grid_fn(layers_a, layers_b, **params, **options) ->
    (La, Lb)`` when ``metadata.grid``; ``prepare_fn(X, **params, **options) -> state``
    and ``prepared_fn(sx, sy, rows_x, rows_y, **params) -> (b,)`` when
    ``metadata.prepared``; ``leave_one_out_fn(X, Y, **params) -> (n,)`` when
    ``metadata.resample_distinct``; call them through :meth:`unit_gram`,
    :meth:`from_grams`, :meth:`grid`, :meth:`prepare`, :meth:`from_prepared`
    and :meth:`leave_one_out`.
    """

    id: str
    metadata: MeasureMetadata
    fn: Callable[..., MeasureResult] = field(repr=False)
    params: Mapping[str, Any] = field(default_factory=dict)
    unit_gram_fn: Callable[..., Any] | None = field(default=None, repr=False)
    grid_fn: Callable[..., Any] | None = field(default=None, repr=False)
    prepare_fn: Callable[..., Any] | None = field(default=None, repr=False)
    prepared_fn: Callable[..., Any] | None = field(default=None, repr=False)
    leave_one_out_fn: Callable[..., Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        for name, declared, fn_name in (
            ("gram", self.metadata.gram, "unit_gram_fn"),
            ("grid", self.metadata.grid, "grid_fn"),
            ("prepared", self.metadata.prepared, "prepare_fn"),
            ("prepared", self.metadata.prepared, "prepared_fn"),
            ("resample_distinct", self.metadata.resample_distinct, "leave_one_out_fn"),
        ):
            fn = getattr(self, fn_name)
            if declared != (fn is not None):
                raise ValueError(
                    f"measure {self.id!r}: metadata.{name}={declared} but "
                    f"{fn_name} is {'missing' if fn is None else 'given'}."
                )

    def _check_options(self, kw: Mapping[str, Any]) -> None:
        fixed = sorted(set(kw) & set(self.params))
        if fixed:
            raise MeasureInputError(
                f"{self.id}: parameter(s) {fixed} are fixed by the measure id; "
                "pick the measure with the value you want via get_measure(...)."
            )

    def compute(self, X: Any, Y: Any, *, same_model: bool | None = None, **kw: Any) -> MeasureResult:
        self._check_options(kw)
        if self.metadata.requires_same_model:
            kw["same_model"] = same_model
        if "isotropic_scale" in self.metadata.invariances:  # a safety net: the measures also rescale themselves
            X, Y = _scale_free(X), _scale_free(Y)
        result = self.fn(X, Y, **self.params, **kw)
        if math.isfinite(result.value):
            flat = [side for side, a in (("X", X), ("Y", Y)) if _all_rows_equal(a)]
            if flat:  # e.g. uncentred Procrustes: two single points align perfectly
                reason = (
                    f"{self.id} is undefined: every row of {' and '.join(flat)} is the same (a constant side "
                    "carries nothing about how the examples differ, and its shuffled control equals the matched "
                    "value); returned nan (check the extraction, or use a layer or pooling whose rows differ)."
                )
                warn(reason)
                details = {**result.details, "reason": reason}
                result = replace(result, value=math.nan, details=details)
        return replace(result, measure_id=self.id)

    def __call__(self, X: Any, Y: Any, **kw: Any) -> float:
        return self.compute(X, Y, **kw).value

    def unit_gram(self, X: Any) -> np.ndarray:
        """The ``(n, n)`` float64 matrix of one side whose inner product with the other side's is the
        measure: ``self(X, Y) == self.from_grams(self.unit_gram(X), self.unit_gram(Y))`` (to rounding).

        Row-permutation equivariant: ``unit_gram(X[p]) == unit_gram(X)[p][:, p]``.
        All nan (with a :class:`~interlingua.analysis.measures.MeasureWarning`) when the
        measure is undefined for this side (no variance). Only for measures with
        ``metadata.gram``; others raise :class:`MeasureInputError`.
        """
        if self.unit_gram_fn is None:
            raise MeasureInputError(
                f"{self.id} has no Gram form (metadata.gram is False); call the measure on both sides instead."
            )
        return self.unit_gram_fn(X, **self.params)

    def from_grams(self, gx: Any, gy: Any) -> float:
        """The measure from two sides' :meth:`unit_gram` matrices: ``np.vdot(gx, gy)`` (nan if either is nan)."""
        if self.unit_gram_fn is None:
            raise MeasureInputError(f"{self.id} has no Gram form (metadata.gram is False).")
        gx, gy = np.asarray(gx, dtype=np.float64), np.asarray(gy, dtype=np.float64)
        if gx.ndim != 2 or gx.shape[0] != gx.shape[1] or gx.shape != gy.shape:
            raise MeasureInputError(
                f"{self.id}: unit Grams must be square and of equal shape (the same n rows on both sides); "
                f"got {gx.shape} and {gy.shape}."
            )
        return float(np.vdot(gx, gy))

    def grid(self, layers_a: Any, layers_b: Any = None, **options: Any) -> np.ndarray:
        """The measure between every layer of A and every layer of B: an ``(La, Lb)`` float64 array.

        ``layers_a`` / ``layers_b``: ``(L, n, p)`` arrays or sequences of ``(n, p_i)``
        arrays over the same n rows; ``layers_b=None`` compares A with itself.
        ``options`` that do not change what is measured pass through (e.g.
        ``backend``, ``device``, ``method``). Only for measures with
        ``metadata.grid``; others raise :class:`MeasureInputError`.
        """
        if self.grid_fn is None:
            raise MeasureInputError(
                f"{self.id} has no layer grid (metadata.grid is False); loop over the layer pairs instead."
            )
        self._check_options(options)
        return self.grid_fn(layers_a, layers_b, **self.params, **options)

    def prepare(self, X: Any, *, same_model: bool | None = None, **options: Any) -> Any:
        """One side's state for :meth:`from_prepared`: the per-side work of the measure, done once.

        ``options`` as for :meth:`compute` (``same_model`` for measures that
        require it). Only for measures with ``metadata.prepared``; others raise
        :class:`MeasureInputError`.
        """
        if self.prepare_fn is None:
            raise MeasureInputError(
                f"{self.id} has no prepared form (metadata.prepared is False); call the measure on each resample."
            )
        self._check_options(options)
        if self.metadata.requires_same_model:
            options["same_model"] = same_model
        if "isotropic_scale" in self.metadata.invariances:
            X = _scale_free(X)
        return self.prepare_fn(X, **self.params, **options)

    def leave_one_out(self, X: Any, Y: Any) -> np.ndarray:
        """``(n,)``: the measure on the n - 1 rows other than r, for each r (nan where undefined).

        Only for measures with ``metadata.resample_distinct`` (computed from one pass over the full sample);
        others raise :class:`MeasureInputError` (use ``inference.jackknife_interval``).
        """
        if self.leave_one_out_fn is None:
            raise MeasureInputError(f"{self.id} has no leave-one-out form; use inference.jackknife_interval.")
        if "isotropic_scale" in self.metadata.invariances:
            X, Y = _scale_free(X), _scale_free(Y)
        return np.asarray(self.leave_one_out_fn(X, Y, **self.params), dtype=np.float64)

    def from_prepared(self, state_x: Any, state_y: Any, rows_x: Any = None, rows_y: Any = None) -> np.ndarray:
        """``m(X[rows_x[i]], Y[rows_y[i]])`` for each row i of the ``(b, m)`` index arrays, from two
        :meth:`prepare` states: a ``(b,)`` float64 array.

        ``None`` stands for all n rows in order (both ``None``: the matched value, ``b = 1``).
        A permutation null is ``from_prepared(sx, sy, None, perms)``; a resample
        (jackknife, bootstrap) passes the same indices on both sides.
        """
        if self.prepared_fn is None:
            raise MeasureInputError(f"{self.id} has no prepared form (metadata.prepared is False).")
        nx, ny = int(state_x.n), int(state_y.n)
        if nx != ny:
            raise MeasureInputError(
                f"{self.id}: prepared sides hold {nx} and {ny} rows; prepare both sides from the same n examples."
            )
        rx, ry = _rows(rows_x, nx, "rows_x"), _rows(rows_y, ny, "rows_y")
        shapes = [r.shape for r in (rx, ry) if r is not None]
        if len(shapes) == 2 and shapes[0] != shapes[1]:
            raise MeasureInputError(f"{self.id}: rows_x {shapes[0]} and rows_y {shapes[1]} must have the same shape.")
        if len(shapes) == 1 and shapes[0][1] != nx:
            raise MeasureInputError(
                f"{self.id}: with one side's rows None (all {nx} rows) the other side must also index {nx} rows; "
                f"got {shapes[0][1]}."
            )
        return np.asarray(self.prepared_fn(state_x, state_y, rx, ry, **self.params), dtype=np.float64)


def _scale_free(a: Any) -> Any:
    """A float array or tensor times an exact power of two when its magnitude lies outside
    :data:`~interlingua.analysis.measures.validation.SAFE_MAGNITUDE` (see :func:`rescale`); anything else
    (lists, integer arrays, non-finite data, which the measure's own checks report) as given."""
    if is_torch(a):
        ok = a.is_floating_point() and a.ndim == 2 and a.numel() > 0 and bool(a.isfinite().all())
    else:
        ok = isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.ndim == 2 and a.size > 0
        ok = ok and bool(np.isfinite(a).all())
    return rescale(a) if ok else a


def _all_rows_equal(a: Any) -> bool:
    """Whether every column of the 2-D input is constant over its rows (one point repeated n times)."""
    x = a if is_torch(a) else np.asarray(a)
    return x.ndim == 2 and x.shape[0] > 1 and bool(constant_columns(x).all())


def _rows(rows: Any, n: int, name: str) -> np.ndarray | None:
    """A validated ``(b, m)`` int64 index array into n rows, or None (all rows in order)."""
    if rows is None:
        return None
    r = np.asarray(rows)
    if r.ndim == 1:
        r = r[None, :]
    if r.ndim != 2 or r.shape[1] < 1 or not np.issubdtype(r.dtype, np.integer):
        raise MeasureInputError(f"{name} must be a (b, m) integer index array; got shape {r.shape}, dtype {r.dtype}.")
    if r.size and (r.min() < 0 or r.max() >= n):
        raise MeasureInputError(f"{name} indexes rows outside 0..{n - 1}.")
    return r.astype(np.int64, copy=False)


#: The measures by id (:class:`~interlingua.core.named.Registry`): each measure module declares its
#: measures at import with :func:`register` and its parameterised ids with :func:`register_family`.
MEASURES: Registry[Measure] = Registry(
    "measure id",
    error=MeasureInputError,
    unknown="unknown measure id {name!r}. Known ids: {names}. Parameterised families: {families}.",
)


def register(measure: Measure) -> Measure:
    """Add ``measure`` to the ids :func:`list_measures` returns."""
    return MEASURES.add(measure.id, measure)


def register_family(pattern: str, factory: Callable[[re.Match[str]], Measure], example: str) -> None:
    """Parameterised ids (e.g. ``mknn_k(\\d+)``): ``factory(match)`` builds the measure on demand."""
    MEASURES.add_family(pattern, factory, example)


def get_measure(measure_id: str) -> Measure:
    """The measure with id ``measure_id`` (a listed id or a parameterised one such as ``"mknn_k5"``)."""
    return MEASURES.get(measure_id)


def list_measures() -> list[str]:
    """Ids of the registered measures (default parameters), in registration order."""
    return MEASURES.names()
