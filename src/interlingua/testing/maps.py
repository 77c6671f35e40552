"""The map-estimator battery: a :class:`~interlingua.maps.Map` against the estimator contract.

The contract (:mod:`interlingua.maps.estimators`): scikit-learn conventions, float64, the package's errors,
and two declarations on the class, each held to what it says:

- ``params``: hyper-parameters are JSON-ready; ``clone()`` is unfitted, of the same class and parameters;
- ``unfitted_refused``: ``transform`` before ``fit`` raises :class:`MapInputError`;
- ``fit_shapes``: ``fit`` returns the estimator, sets ``n_features_in_`` / ``n_features_out_``, and
  ``transform`` gives ``(m, q)`` float64 for new rows; unequal widths give ``(m, q)`` or are refused with
  :class:`MapInputError`;
- ``refuses_bad_input``: mismatched rows, NaN and a wrong-width ``transform`` raise :class:`MapInputError`;
- ``deterministic``: two fits of clones give the same map; ``inputs_unchanged``: fit, transform and score
  leave their arrays as they were;
- ``score``: ``1 - ||Y - f(X)||_F^2 / ||Y - mean(Y)||_F^2``, computed here independently;
- ``fit_many``: one map per target, each what ``fit`` gives on that target;
- ``save_load``: ``save`` then :func:`~interlingua.maps.load_map` gives the same transform and ``key``;
- ``underdetermined``: fewer training rows than the width is refused (``"refuse"``: :class:`MapInputError`),
  flagged (``"warn"``: a :class:`MapWarning`, and a finite map) or resolved (``"resolve"``: a finite map,
  fitted twice alike), as ``Map.underdetermined`` declares; undeclared fails;
- ``planted_rotation`` (``Map.recovers_rotation``): fitted on ``(X, X Q)`` for a random orthogonal ``Q``,
  held-out rows map to ``X Q`` (a penalised fit, ``fit_info_["alpha"]``: to the ridge solution that penalty
  implies, ``mu_y + (x - mu_x) (G + alpha I)^{-1} G Q``, see :mod:`interlingua.maps.planted`). A transposed
  or mis-oriented map is about ``sqrt(2)`` away.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.maps.errors import MapInputError, MapWarning
from interlingua.maps.estimators import Map, get_map, load_map
from interlingua.testing._core import Check, checks_of, expect, run_checks

__all__ = ["check_map_estimator", "map_estimator_checks"]

#: a planted map is recovered to this (max abs error over held-out rows of unit scale)
PLANTED_TOL = 1e-8
#: two fits (clones, fit_many against fit, a saved and loaded map) agree to this
AGREE_TOL = 1e-10


def _data(seed: int, n: int, p: int, q: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows with uneven column scales and a non-zero mean, and a target related to them (plus noise)."""
    rng = np.random.default_rng(seed)
    q = p if q is None else q
    x = rng.standard_normal((n, p)) * rng.uniform(0.5, 2.0, p) + rng.normal(0, 1, p)
    y = x @ rng.standard_normal((p, q)) / math.sqrt(p) + 0.3 * rng.standard_normal((n, q)) + rng.normal(0, 1, q)
    return x, y


def _orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _raises(fn: Callable[[], Any], what: str) -> None:
    try:
        fn()
    except MapInputError:
        return
    except Exception as err:
        raise AssertionError(f"{what} raised {type(err).__name__} ({err}), not MapInputError") from err
    raise AssertionError(f"{what} was accepted; it must raise MapInputError")


def _params(est: Map) -> None:
    import json

    params = est.params
    expect(isinstance(params, dict), f"params is a {type(params).__name__}, not a dict")
    expect(json.loads(json.dumps(params)) == params, "params must be JSON-ready")
    c = est.clone()
    expect(type(c) is type(est) and c.params == params, "clone() must give the same class and parameters")
    expect(not c.is_fitted, "clone() must be unfitted")
    expect(isinstance(est.name, str) and bool(est.name), "name must be a non-empty string")


def _unfitted_refused(est: Map) -> None:
    x, _ = _data(0, 10, 4)
    _raises(lambda: est.clone().transform(x), "transform before fit")


def _fit_shapes(est: Map) -> None:
    x, y = _data(1, 60, 6)
    m = est.clone()
    expect(m.fit(x[:50], y[:50]) is m, "fit must return the estimator itself")
    expect(
        (m.n_features_in_, m.n_features_out_) == (6, 6),
        f"n_features_in_/out_ are {m.n_features_in_}, {m.n_features_out_} after a fit on widths 6 -> 6",
    )
    out = m.transform(x[50:])
    expect(
        out.shape == (10, 6) and out.dtype == np.float64, f"transform gave {out.shape} {out.dtype}, not (10, 6) float64"
    )
    expect(bool(np.isfinite(out).all()), "transform gave non-finite values")
    x, y = _data(2, 60, 6, 4)
    try:
        m = est.clone().fit(x, y)
    except MapInputError:
        return  # unequal widths refused clearly (identity, procrustes_span)
    out = m.transform(x[:7])
    expect(out.shape == (7, 4), f"a fit on widths 6 -> 4 transforms 7 rows to {out.shape}, not (7, 4)")


def _refuses_bad_input(est: Map) -> None:
    x, y = _data(3, 40, 5)
    _raises(lambda: est.clone().fit(x, y[:-1]), "X and Y with different numbers of rows")
    bad = x.copy()
    bad[3, 2] = np.nan
    _raises(lambda: est.clone().fit(bad, y), "a NaN in X")
    m = est.clone().fit(x, y)
    _raises(lambda: m.transform(x[:, :4]), "transform of rows of another width")


def _deterministic(est: Map) -> None:
    x, y = _data(4, 50, 5)
    a = est.clone().fit(x, y).transform(x)
    b = est.clone().fit(x.copy(), y.copy()).transform(x)
    expect(
        bool(np.allclose(a, b, rtol=0, atol=AGREE_TOL * max(1.0, float(np.abs(a).max())))),
        "two fits on the same rows gave different maps",
    )


def _inputs_unchanged(est: Map) -> None:
    x, y = _data(5, 50, 5)
    x0, y0 = x.copy(), y.copy()
    m = est.clone().fit(x, y)
    m.transform(x)
    m.score(x, y)
    m.fit_many(x, [y])
    expect(np.array_equal(x, x0) and np.array_equal(y, y0), "fit / transform / score modified their input arrays")


def _score(est: Map) -> None:
    x, y = _data(6, 60, 5)
    m = est.clone().fit(x[:45], y[:45])
    xt, yt = x[45:], y[45:]
    resid = yt - m.transform(xt)
    want = 1.0 - float((resid**2).sum()) / float(((yt - yt.mean(0)) ** 2).sum())
    got = m.score(xt, yt)
    expect(math.isclose(got, want, rel_tol=0, abs_tol=1e-10), f"score is {got}; 1 - RSS / TSS is {want}")


def _fit_many(est: Map) -> None:
    x, y1 = _data(7, 50, 5)
    _, y2 = _data(8, 50, 5)
    many = est.clone().fit_many(x, [y1, y2])
    expect(len(many) == 2, f"fit_many on 2 targets gave {len(many)} maps")
    for i, (m, y) in enumerate(zip(many, (y1, y2), strict=True)):
        one = est.clone().fit(x, y).transform(x)
        expect(
            bool(np.allclose(m.transform(x), one, rtol=0, atol=1e-8 * max(1.0, float(np.abs(one).max())))),
            f"fit_many's map {i} differs from fit on that target",
        )


def _save_load(est: Map) -> None:
    from interlingua.maps.estimators import _CLASSES

    expect(
        _CLASSES.get(type(est).__name__) is type(est),
        f"{type(est).__name__} is not registered: load_map "
        "rebuilds a saved map by its class name; register it with interlingua.maps.register_map",
    )
    x, y = _data(9, 50, 5)
    m = est.clone().fit(x, y)
    with tempfile.TemporaryDirectory() as tmp:
        back = load_map(m.save(Path(tmp) / "map.safetensors"))
    expect(type(back) is type(m) and back.params == m.params, "the loaded map has another class or parameters")
    expect(back.key == m.key, "the loaded map's key differs from the saved map's")
    expect(bool(np.array_equal(back.transform(x), m.transform(x))), "the loaded map transforms differently")


def _underdetermined(est: Map) -> None:
    declared = type(est).underdetermined
    expect(
        declared in ("refuse", "warn", "resolve"),
        f"{type(est).__name__}.underdetermined is {declared!r}: declare 'refuse', 'warn' or 'resolve'",
    )
    x, y = _data(10, 12, 16)  # 12 training rows, width 16: the rows do not determine a linear map
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            m = est.clone().fit(x, y)
        except MapInputError:
            expect(declared == "refuse", f"declares underdetermined={declared!r} but refused 12 rows of width 16")
            return
    expect(declared != "refuse", "declares underdetermined='refuse' but fitted 12 rows of width 16")
    flagged = any(issubclass(w.category, MapWarning) for w in caught)
    if declared == "warn":
        expect(flagged, "declares underdetermined='warn' but fitted 12 rows of width 16 without a MapWarning")
    out = m.transform(x)
    expect(bool(np.isfinite(out).all()), "the under-determined fit maps to non-finite values")
    if declared == "resolve":
        again = est.clone().fit(x, y).transform(x)
        expect(
            bool(np.allclose(out, again, rtol=0, atol=1e-8 * max(1.0, float(np.abs(out).max())))),
            "declares underdetermined='resolve' but two fits on the same rows differ",
        )


def _planted_rotation(est: Map) -> None:
    rng = np.random.default_rng(11)
    d, n_fit = 6, 60
    x = rng.standard_normal((n_fit + 20, d)) * rng.uniform(0.5, 2.0, d) + rng.normal(0, 1, d)
    q = _orthogonal(rng, d)
    y = x @ q
    m = est.clone().fit(x[:n_fit], y[:n_fit])
    got = m.transform(x[n_fit:])
    alpha = (m.fit_info_ or {}).get("alpha")
    if alpha is None:
        want = x[n_fit:] @ q
        what = "X Q"
    else:  # the ridge solution for this penalty: R = (G + alpha I)^{-1} G Q on the centred fitting rows
        xf = x[:n_fit]
        mu_x, mu_y = xf.mean(0), y[:n_fit].mean(0)
        g = (xf - mu_x).T @ (xf - mu_x)
        r = np.linalg.solve(g + float(alpha) * np.eye(d), g @ q)
        want = mu_y + (x[n_fit:] - mu_x) @ r
        what = f"the ridge solution for alpha={float(alpha):.3g}"
    err = float(np.abs(got - want).max())
    # the same map read transposed (means still mapped to means): what a mis-oriented estimator gives
    transposed = float(np.abs(got - (y[:n_fit].mean(0) + (x[n_fit:] - x[:n_fit].mean(0)) @ q.T)).max())
    verdict = "a transposed map" if transposed < 1e-6 else "not the planted map"
    expect(
        err <= PLANTED_TOL * max(1.0, float(np.abs(want).max())),
        f"declares recovers_rotation but held-out rows land {err:.3g} from {what} "
        f"({transposed:.3g} from the transposed map: {verdict})",
    )


def map_estimator_checks(estimator: Map | str) -> Iterator[Check]:
    """The battery's checks for ``estimator`` (a :class:`Map` instance or a registered id), one :class:`Check` each."""
    est = get_map(estimator) if isinstance(estimator, str) else estimator
    if not isinstance(est, Map):
        raise TypeError(f"check_map_estimator needs a Map or a map id, not a {type(est).__name__}")
    est = est.clone()  # the battery never touches the caller's object
    pairs: list[tuple[str, Callable[[], None]]] = [
        ("params", lambda: _params(est)),
        ("unfitted_refused", lambda: _unfitted_refused(est)),
        ("fit_shapes", lambda: _fit_shapes(est)),
        ("refuses_bad_input", lambda: _refuses_bad_input(est)),
        ("deterministic", lambda: _deterministic(est)),
        ("inputs_unchanged", lambda: _inputs_unchanged(est)),
        ("score", lambda: _score(est)),
        ("fit_many", lambda: _fit_many(est)),
        ("save_load", lambda: _save_load(est)),
        ("underdetermined", lambda: _underdetermined(est)),
    ]
    if type(est).recovers_rotation:
        pairs.append(("planted_rotation", lambda: _planted_rotation(est)))
    yield from checks_of(pairs, est.name)


def check_map_estimator(estimator: Map | str) -> list[str]:
    """Run the whole map-estimator battery; raises :class:`~interlingua.testing.CheckFailed` naming the first
    failed check, else returns the names of the checks that passed."""
    return run_checks(map_estimator_checks(estimator))
