"""The measure battery: a :class:`~interlingua.analysis.measures.Measure` against what its metadata declares.

Every check is derived from ``measure.metadata`` (so the metadata itself is checked) or from the
contract every measure shares (see :mod:`interlingua.analysis.measures.base`):

- ``metadata``: a :class:`MeasureMetadata`, a non-empty id and estimator, ``min_n >= 2``;
- ``result``: ``compute`` returns a :class:`MeasureResult` naming the measure, ``n`` and the same value as the call;
- ``finite``: a finite float on random related data, inside the declared ``bounds``;
- ``deterministic``: the same inputs give the same value; ``inputs_unchanged``: the inputs are not modified;
- ``refuses_bad_input``: NaN, mismatched rows and a 1-D side raise :class:`MeasureInputError`;
- ``min_n``: ``min_n - 1`` rows raise :class:`MeasureInputError`, ``min_n`` rows give a float;
- ``equal_width``: refused when ``requires_equal_width``, finite otherwise; ``same_model`` likewise;
- ``joint_row_permutation``: permuting the examples (the rows of both sides alike) changes nothing;
- ``symmetry`` (declared symmetric) or ``asymmetry`` (declared not: it differs on some draw);
- ``self_similarity``: ``m(X, X)`` is the best score: the declared bound when finite, and never beaten by a
  related or an unrelated side;
- ``invariance[<name>]``: each declared invariance holds for random maps applied to each side independently;
  ``undeclared_invariance[<name>]``: each undeclared one fails on some draw (declare what holds);
- ``gram_form`` / ``grid_form`` / ``prepared_form``: the declared fast paths equal the plain call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from interlingua.analysis.measures.base import INVARIANCES, Measure, MeasureMetadata, MeasureResult, get_measure
from interlingua.core.errors import MeasureInputError
from interlingua.testing._core import Check, checks_of, expect, run_checks

__all__ = ["check_measure", "measure_checks", "random_map"]

#: invariances hold to this (absolute): the CCA family's rounding grows with the map's condition number (<= 100)
INVARIANCE_TOL = 1e-8
#: two sides of one computation (symmetry, a fast path against the plain call) agree to this
AGREE_TOL = 1e-10
#: an undeclared invariance must move the value by more than this on at least one draw
MOVES = 1e-3


def _orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def random_map(kind: str, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``x`` under a random map of the invariance class ``kind`` (one of :data:`INVARIANCES`)."""
    d = x.shape[1]
    if kind == "orthogonal":
        return x @ _orthogonal(rng, d)
    if kind == "isotropic_scale":
        return x * float(np.exp(rng.uniform(-3, 3)))
    if kind == "translation":
        return x + rng.normal(0, 10 * x.std(), d)
    if kind == "invertible_linear":  # condition number 100: far from orthogonal, numerically well posed
        scales = np.exp(rng.uniform(np.log(0.1), np.log(10), d))
        scales[0], scales[-1] = 0.1, 10.0
        return x @ (_orthogonal(rng, d) * scales) @ _orthogonal(rng, d)
    if kind == "permutation":
        perm = rng.permutation(d)
        while d > 1 and np.all(perm == np.arange(d)):
            perm = rng.permutation(d)
        return x[:, perm]
    raise ValueError(f"unknown invariance {kind!r}; known: {sorted(INVARIANCES)}")


def _related(rng: np.random.Generator, n: int, p: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    """X (n, p) and Y (n, q) sharing a 3-dimensional signal plus noise, uneven column scales, non-zero means."""
    z = rng.standard_normal((n, 3))
    x = z @ rng.standard_normal((3, p)) + 0.7 * rng.standard_normal((n, p))
    y = z @ rng.standard_normal((3, q)) + 0.7 * rng.standard_normal((n, q))
    return x * rng.uniform(0.5, 2.0, p) + rng.normal(0, 2, p), y * rng.uniform(0.5, 2.0, q) + rng.normal(0, 2, q)


class _Subject:
    """The measure, with calls that confirm ``same_model`` where it is required and data shaped for it."""

    def __init__(self, measure: Measure) -> None:
        self.m = measure
        self.meta: MeasureMetadata = measure.metadata

    def kw(self) -> dict[str, Any]:
        return {"same_model": True} if self.meta.requires_same_model else {}

    def __call__(self, x: Any, y: Any) -> float:
        return float(self.m(x, y, **self.kw()))

    def pair(self, seed: int, n: int = 40, p: int = 6, q: int = 5) -> tuple[np.ndarray, np.ndarray]:
        """A related pair the measure accepts: n >= min_n + 5, equal widths or one neuron basis where required."""
        rng = np.random.default_rng(seed)
        n = max(n, self.meta.min_n + 5)
        if self.meta.requires_same_model:  # two states of one model: Y a noisy, rescaled copy of X
            x, _ = _related(rng, n, p, p)
            return x, 0.5 * x + rng.standard_normal(x.shape) * x.std(0) + 1.0
        return _related(rng, n, p, p if self.meta.requires_equal_width else q)


def _metadata(s: _Subject) -> None:
    expect(isinstance(s.meta, MeasureMetadata), f"metadata is a {type(s.meta).__name__}, not a MeasureMetadata")
    expect(isinstance(s.m.id, str) and bool(s.m.id.strip()), f"the id {s.m.id!r} must be a non-empty string")
    expect(bool(s.meta.estimator), "metadata.estimator must say how the value is computed")
    expect(s.meta.min_n >= 2, f"metadata.min_n is {s.meta.min_n}; no similarity is defined on fewer than 2 rows")


def _result(s: _Subject) -> None:
    x, y = s.pair(1)
    res = s.m.compute(x, y, **s.kw())
    expect(isinstance(res, MeasureResult), f"compute returned a {type(res).__name__}, not a MeasureResult")
    expect(res.measure_id == s.m.id, f"the result names measure {res.measure_id!r}, not {s.m.id!r}")
    expect(res.n == x.shape[0], f"the result says n={res.n} for {x.shape[0]} rows")
    expect(bool(res.estimator), "the result must name its estimator")
    value = s(x, y)
    expect(math.isclose(float(res), value, abs_tol=AGREE_TOL), f"compute gives {float(res)}, the call {value}")


def _in_bounds(s: _Subject, value: float, what: str) -> None:
    lo, hi = s.meta.bounds
    slack = 1e-9 * max(1.0, abs(value))
    expect(lo - slack <= value <= hi + slack, f"{what} is {value}, outside the declared bounds {s.meta.bounds}")


def _finite(s: _Subject) -> None:
    for seed in range(3):
        x, y = s.pair(10 + seed)
        value = s(x, y)
        expect(isinstance(value, float) and math.isfinite(value), f"random related data gave {value!r}")
        _in_bounds(s, value, "the value on random related data")
        unrelated = np.random.default_rng(seed).standard_normal(y.shape)
        _in_bounds(s, s(x, unrelated), "the value on unrelated data")


def _deterministic(s: _Subject) -> None:
    x, y = s.pair(2)
    a, b = s(x, y), s(x.copy(), y.copy())
    expect(math.isclose(a, b, rel_tol=0, abs_tol=1e-12), f"two calls on the same inputs gave {a} and {b}")


def _inputs_unchanged(s: _Subject) -> None:
    x, y = s.pair(3)
    x0, y0 = x.copy(), y.copy()
    s(x, y)
    s.m.compute(x, y, **s.kw())
    expect(np.array_equal(x, x0) and np.array_equal(y, y0), "the call modified its input arrays")


def _raises(fn: Callable[[], Any], what: str) -> None:
    try:
        fn()
    except MeasureInputError:
        return
    except Exception as err:
        raise AssertionError(f"{what} raised {type(err).__name__} ({err}), not MeasureInputError") from err
    raise AssertionError(f"{what} was accepted; it must raise MeasureInputError")


def _refuses_bad_input(s: _Subject) -> None:
    x, y = s.pair(4)
    bad = x.copy()
    bad[0, 0] = np.nan
    _raises(lambda: s(bad, y), "a NaN in X")
    _raises(lambda: s(x, y[:-1]), "sides with different numbers of rows")
    _raises(lambda: s(x[:, 0], y), "a 1-D X")


def _min_n(s: _Subject) -> None:
    n = s.meta.min_n
    rng = np.random.default_rng(5)
    short = rng.standard_normal((n - 1, 3))
    _raises(lambda: s(short, short.copy() + rng.standard_normal(short.shape)), f"{n - 1} rows (min_n is {n})")
    value = s(rng.standard_normal((n, 3)), rng.standard_normal((n, 3)))
    expect(isinstance(value, float), f"{n} rows (min_n) gave {value!r}, not a float")


def _equal_width(s: _Subject) -> None:
    rng = np.random.default_rng(6)
    x, y = _related(rng, max(40, s.meta.min_n + 5), 6, 4)
    if s.meta.requires_equal_width:
        _raises(lambda: s(x, y), "sides of widths 6 and 4 (requires_equal_width)")
    else:
        expect(math.isfinite(s(x, y)), "sides of widths 6 and 4 gave a non-finite value")


def _same_model(s: _Subject) -> None:
    x, y = s.pair(7, p=5, q=5)
    if s.meta.requires_same_model:
        _raises(lambda: s.m(x, y, same_model=False), "same_model=False (requires_same_model)")
        _raises(lambda: s.m(x, y), "same_model left unsaid (requires_same_model)")
    else:
        a, b = s.m(x, y, same_model=False), s.m(x, y)
        expect(math.isclose(a, b, rel_tol=0, abs_tol=1e-12), f"same_model=False changed the value ({a} vs {b})")


def _joint_row_permutation(s: _Subject) -> None:
    x, y = s.pair(8)
    perm = np.random.default_rng(8).permutation(x.shape[0])
    a, b = s(x, y), s(x[perm], y[perm])
    expect(abs(a - b) <= INVARIANCE_TOL, f"permuting the examples (both sides alike) moved the value {a} -> {b}")


def _symmetry(s: _Subject) -> None:
    for seed in range(3):
        x, y = s.pair(20 + seed, p=4 + seed, q=7 - seed)
        a, b = s(x, y), s(y, x)
        expect(abs(a - b) <= AGREE_TOL, f"declared symmetric but m(X, Y) = {a} and m(Y, X) = {b}")


def _asymmetry(s: _Subject) -> None:
    gaps = []
    for seed in range(3):
        x, y = s.pair(30 + seed, p=6, q=6)
        gaps.append(abs(s(x, y) - s(y, x)))
    expect(max(gaps) > MOVES, "declared not symmetric but m(X, Y) == m(Y, X) on every draw: declare symmetric=True")


def _self_similarity(s: _Subject) -> None:
    x, y = s.pair(9, n=60)
    best = s(x, x)
    others = {"a related side": s(x, y), "an unrelated side": s(x, np.random.default_rng(9).standard_normal(y.shape))}
    lo, hi = s.meta.bounds
    if s.meta.larger_is_more_similar:
        if math.isfinite(hi):
            expect(abs(best - hi) <= 1e-9, f"m(X, X) = {best}, not the declared maximum {hi}")
        for what, v in others.items():
            expect(best >= v - 1e-12, f"m(X, X) = {best} is beaten by {what} ({v}): larger_is_more_similar")
    else:
        if math.isfinite(lo):
            expect(abs(best - lo) <= 1e-9, f"m(X, X) = {best}, not the declared minimum {lo}")
        for what, v in others.items():
            expect(best <= v + 1e-12, f"m(X, X) = {best} is above {what} ({v}): larger_is_more_similar=False")


def _invariance(s: _Subject, kind: str) -> None:
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        x, y = s.pair(100 + seed, n=20 + 20 * seed, p=3 + seed, q=5 - seed)
        base = s(x, y)
        moved = s(random_map(kind, x, rng), random_map(kind, y, rng))
        expect(math.isfinite(base), f"the value before the map is {base}")
        expect(abs(moved - base) <= INVARIANCE_TOL, f"declares {kind} invariance but {base} became {moved}")


def _undeclared_invariance(s: _Subject, kind: str) -> None:
    changes = []
    for seed in range(5):
        rng = np.random.default_rng(1000 + seed)
        x, y = s.pair(1000 + seed)
        changes.append(abs(s(random_map(kind, x, rng), random_map(kind, y, rng)) - s(x, y)))
    expect(max(changes) > MOVES, f"invariant to {kind} on every draw: declare it in metadata.invariances")


def _gram_form(s: _Subject) -> None:
    x, y = s.pair(11)
    gx, gy = s.m.unit_gram(x), s.m.unit_gram(y)
    n = x.shape[0]
    expect(gx.shape == (n, n), f"unit_gram gave shape {gx.shape}, not {(n, n)}")
    expect(abs(s.m.from_grams(gx, gy) - s(x, y)) <= AGREE_TOL, "from_grams(unit_gram(X), unit_gram(Y)) != m(X, Y)")
    perm = np.random.default_rng(11).permutation(n)
    shuffled = s.m.from_grams(gx, gy[np.ix_(perm, perm)])
    expect(abs(shuffled - s(x, y[perm])) <= AGREE_TOL, "a gathered unit Gram is not the measure on permuted rows")


def _grid_form(s: _Subject) -> None:
    rng = np.random.default_rng(12)
    n = max(30, s.meta.min_n + 5)
    a = rng.standard_normal((3, n, 6))
    b = [rng.standard_normal((n, w)) + a[k][:, :1] for k, w in enumerate((3, 8))]
    grid = np.asarray(s.m.grid(a, b))
    loop = np.array([[s(x, y) for y in b] for x in a])
    expect(grid.shape == loop.shape, f"grid gave shape {grid.shape}, not {loop.shape}")
    expect(bool(np.allclose(grid, loop, rtol=0, atol=AGREE_TOL)), "grid(A, B) differs from the loop over layer pairs")


def _prepared_form(s: _Subject) -> None:
    x, y = s.pair(13)
    sx, sy = s.m.prepare(x, **s.kw()), s.m.prepare(y, **s.kw())
    matched = s.m.from_prepared(sx, sy)
    expect(matched.shape == (1,), f"from_prepared(sx, sy) gave shape {matched.shape}, not (1,)")
    expect(abs(float(matched[0]) - s(x, y)) <= AGREE_TOL, "from_prepared(sx, sy) != m(X, Y)")
    perms = np.stack([np.random.default_rng(13 + i).permutation(x.shape[0]) for i in range(2)])
    got = s.m.from_prepared(sx, sy, None, perms)
    want = [s(x, y[p]) for p in perms]
    expect(bool(np.allclose(got, want, rtol=0, atol=AGREE_TOL)), "from_prepared with permuted rows != m(X, Y[perm])")


def measure_checks(measure: Measure | str) -> Iterator[Check]:
    """The battery's checks for ``measure`` (a :class:`Measure` or a registered id), each a named :class:`Check`."""
    m = get_measure(measure) if isinstance(measure, str) else measure
    if not isinstance(m, Measure):
        raise TypeError(f"check_measure needs a Measure or a measure id, not a {type(m).__name__}")
    s = _Subject(m)
    meta = m.metadata
    pairs: list[tuple[str, Callable[[], None]]] = [
        ("metadata", lambda: _metadata(s)),
        ("result", lambda: _result(s)),
        ("finite", lambda: _finite(s)),
        ("deterministic", lambda: _deterministic(s)),
        ("inputs_unchanged", lambda: _inputs_unchanged(s)),
        ("refuses_bad_input", lambda: _refuses_bad_input(s)),
        ("min_n", lambda: _min_n(s)),
        ("equal_width", lambda: _equal_width(s)),
        ("same_model", lambda: _same_model(s)),
        ("joint_row_permutation", lambda: _joint_row_permutation(s)),
        ("symmetry" if meta.symmetric else "asymmetry", lambda: (_symmetry if meta.symmetric else _asymmetry)(s)),
        ("self_similarity", lambda: _self_similarity(s)),
    ]
    for kind in sorted(INVARIANCES):
        if kind in meta.invariances:
            pairs.append((f"invariance[{kind}]", lambda kind=kind: _invariance(s, kind)))  # type: ignore[misc]
        else:
            pairs.append((f"undeclared_invariance[{kind}]", lambda kind=kind: _undeclared_invariance(s, kind)))  # type: ignore[misc]
    for flag, name, fn in (("gram", "gram_form", _gram_form), ("grid", "grid_form", _grid_form)):
        if getattr(meta, flag):
            pairs.append((name, lambda fn=fn: fn(s)))  # type: ignore[misc]
    if meta.prepared:
        pairs.append(("prepared_form", lambda: _prepared_form(s)))
    yield from checks_of(pairs, m.id)


def check_measure(measure: Measure | str) -> list[str]:
    """Run the whole measure battery on ``measure``; raises :class:`~interlingua.testing.CheckFailed` naming the
    first failed check, else returns the names of the checks that passed."""
    return run_checks(measure_checks(measure))
