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
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from interlingua.errors import MeasureInputError
from interlingua.measures.validation import constant_columns, is_torch, warn

__all__ = [
    "INVARIANCES",
    "MeasureMetadata",
    "MeasureResult",
    "Measure",
    "register",
    "register_family",
    "get_measure",
    "list_measures",
]

INVARIANCES = frozenset({"orthogonal", "isotropic_scale", "translation", "invertible_linear", "permutation"})


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

    def __post_init__(self) -> None:
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
    (La, Lb)`` when ``metadata.grid``; call them through :meth:`unit_gram`,
    :meth:`from_grams` and :meth:`grid`.
    """

    id: str
    metadata: MeasureMetadata
    fn: Callable[..., MeasureResult] = field(repr=False)
    params: Mapping[str, Any] = field(default_factory=dict)
    unit_gram_fn: Callable[..., Any] | None = field(default=None, repr=False)
    grid_fn: Callable[..., Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        for name, declared, fn in (
            ("gram", self.metadata.gram, self.unit_gram_fn),
            ("grid", self.metadata.grid, self.grid_fn),
        ):
            if declared != (fn is not None):
                raise ValueError(
                    f"measure {self.id!r}: metadata.{name}={declared} but "
                    f"{'unit_gram_fn' if name == 'gram' else 'grid_fn'} is {'missing' if fn is None else 'given'}."
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
        All nan (with a :class:`~interlingua.measures.MeasureWarning`) when the
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


def _all_rows_equal(a: Any) -> bool:
    """Whether every column of the 2-D input is constant over its rows (one point repeated n times)."""
    x = a if is_torch(a) else np.asarray(a)
    return x.ndim == 2 and x.shape[0] > 1 and bool(constant_columns(x).all())


_REGISTRY: dict[str, Measure] = {}
_FAMILIES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], Measure], str]] = []


def register(measure: Measure) -> Measure:
    """Add ``measure`` to the ids :func:`list_measures` returns."""
    if measure.id in _REGISTRY:
        raise ValueError(f"measure id {measure.id!r} registered twice")
    _REGISTRY[measure.id] = measure
    return measure


def register_family(pattern: str, factory: Callable[[re.Match[str]], Measure], example: str) -> None:
    """Parameterised ids (e.g. ``mknn_k(\\d+)``): ``factory(match)`` builds the measure on demand."""
    _FAMILIES.append((re.compile(pattern + r"\Z"), factory, example))


def get_measure(measure_id: str) -> Measure:
    """The measure with id ``measure_id`` (a listed id or a parameterised one such as ``"mknn_k5"``)."""
    if measure_id in _REGISTRY:
        return _REGISTRY[measure_id]
    for pattern, factory, _ in _FAMILIES:
        match = pattern.match(measure_id)
        if match:
            return factory(match)
    families = ", ".join(example for _, _, example in _FAMILIES)
    raise MeasureInputError(
        f"unknown measure id {measure_id!r}. Known ids: {', '.join(list_measures())}. "
        f"Parameterised families: {families}."
    )


def list_measures() -> list[str]:
    """Ids of the registered measures (default parameters), in registration order."""
    return list(_REGISTRY)
