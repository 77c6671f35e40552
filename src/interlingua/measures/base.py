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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from interlingua.errors import MeasureInputError

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

    def __post_init__(self) -> None:
        inv = frozenset(self.invariances)
        unknown = inv - INVARIANCES
        if unknown:
            raise ValueError(f"unknown invariance(s) {sorted(unknown)}; allowed: {sorted(INVARIANCES)}")
        object.__setattr__(self, "invariances", inv)


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
    """

    id: str
    metadata: MeasureMetadata
    fn: Callable[..., MeasureResult] = field(repr=False)
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def compute(self, X: Any, Y: Any, *, same_model: bool | None = None, **kw: Any) -> MeasureResult:
        fixed = sorted(set(kw) & set(self.params))
        if fixed:
            raise MeasureInputError(
                f"{self.id}: parameter(s) {fixed} are fixed by the measure id; "
                "pick the measure with the value you want via get_measure(...)."
            )
        if self.metadata.requires_same_model:
            kw["same_model"] = same_model
        result = self.fn(X, Y, **self.params, **kw)
        return replace(result, measure_id=self.id)

    def __call__(self, X: Any, Y: Any, **kw: Any) -> float:
        return self.compute(X, Y, **kw).value


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
