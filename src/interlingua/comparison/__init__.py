"""The compare capability's analysis: a pair's matched / shuffled / length-control rows, and arrays in, a table out.

Which sides are compared, at which layers, and each pair's one shuffled-control
permutation are the pipeline's vocabulary (:mod:`interlingua.contract.pairs`).
Every row carries a *length control* (the same measure between the two sides'
sentence length features) and the dominant-dimension diagnostics of both sides,
so a reader sees when a matched value is no more than length agreement or a few
outlier coordinates. :func:`compare_arrays` is the public ``interlingua.compare``;
the package is named ``comparison`` so that no submodule import can replace that
function on the ``interlingua`` package (importing a subpackage sets the parent's
attribute of the same name).

Rows follow :data:`interlingua.core.schema.RESULT_COLUMNS`. A value that cannot be
computed (e.g. a layer whose representation is constant) is NaN with its
reason in ``note``; nothing is NaN silently.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from interlingua.analysis.inference import (
    DEFAULT_QUANTILES,
    calibrate_grid_result,
    calibrate_result,
    grid_permutation_test,
    pair_seed,
    permutation_test,
    shuffle_permutation,
)
from interlingua.analysis.inference.config import InferenceSpec
from interlingua.analysis.measures import MeasureWarning, get_measure
from interlingua.contract.pairs import Pair, SideData, layer_pairs
from interlingua.core.errors import ConfigError, MeasureInputError
from interlingua.core.numerics import with_analysis_blas
from interlingua.core.schema import join_notes
from interlingua.data.representations.diagnostics import standardize, top_k_shares

if TYPE_CHECKING:
    import pandas as pd


def length_features(lengths: np.ndarray) -> np.ndarray:
    """Z-scored length features ``(n, k)``; constant columns are dropped (they carry nothing)."""
    x = np.asarray(lengths, dtype=np.float64)
    sd = x.std(axis=0)
    keep = sd > 0
    return (x[:, keep] - x[:, keep].mean(axis=0)) / sd[keep]


def remove_length(x: np.ndarray, features: np.ndarray) -> np.ndarray:
    """``x`` (n, d) minus its least-squares fit on [1, length features]: the part length cannot explain."""
    design = np.column_stack([np.ones(x.shape[0]), features])
    coef, *_ = np.linalg.lstsq(design, x, rcond=None)
    return x - design @ coef


def _guarded(fn: Callable[[], Any], said: list[str] | None = None) -> tuple[Any, str]:
    """Run one measure evaluation; a refused input or a non-finite value becomes (nan, reason).

    The measure's own warning (e.g. "CKA is undefined for this side: ...") is
    the reason when the value is NaN; otherwise its warnings pass through, and
    the messages of its ``MeasureWarning``s (e.g. SVCCA reducing its components)
    are appended to ``said`` when given, for the row's ``note``.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn()
        except MeasureInputError as err:
            return np.nan, str(err)
    if np.all(np.isfinite(value)):
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if said is not None and issubclass(w.category, MeasureWarning) and str(w.message) not in said:
                said.append(str(w.message))
        return value, ""
    said = [str(w.message) for w in caught]
    return np.nan, (said[-1] if said else "the measure returned a non-finite value")


def _side_columns(pair: Pair) -> dict[str, Any]:
    return {
        "pair": pair.label,
        "kind": pair.relation,
        "model_a": pair.a.model,
        "lang_a": pair.a.language,
        "model_b": pair.b.model,
        "lang_b": pair.b.language,
    }


def _applies(measure: Any, pair: Pair, width_a: int, width_b: int) -> bool:
    meta = measure.metadata
    if meta.requires_same_model and pair.relation != "within_model":
        return False  # e.g. ANC: undefined across models; recorded in run.json as skipped
    return not (meta.requires_equal_width and width_a != width_b)


def _length_control(measure: Any, fa: np.ndarray, fb: np.ndarray, kw: dict[str, Any]) -> tuple[float, str]:
    """The measure on the two sides' z-scored length features alone (NaN with a reason when undefined)."""
    if fa.shape[1] == 0 or fb.shape[1] == 0:
        return np.nan, "length control undefined: every sentence of a side has the same length"
    if measure.metadata.requires_equal_width and fa.shape[1] != fb.shape[1]:
        return np.nan, "length control undefined: the sides have different numbers of non-constant length features"
    value, why = _guarded(lambda: float(measure(fa, fb, **kw)))
    return value, (f"length control: {why}" if why else "")


def matched_and_shuffled(
    measure: Any, x: np.ndarray, y: np.ndarray, permutation: np.ndarray | None, kw: dict[str, Any]
) -> tuple[float, float, list[str]]:
    """The measure on the matched rows and on ``y``'s rows permuted (NaN when ``permutation`` is None).

    Returns (matched, shuffled, notes): a value that cannot be computed is NaN
    with its reason in the notes, followed by what the measure warned about the
    matched value (e.g. SVCCA reducing its components; the shuffled one says the
    same). A Gram-form measure computes one unit Gram per side and reads both
    values from them (the shuffled one an O(n^2) gather).
    """
    said: list[str] = []
    if measure.metadata.gram:
        grams, why = _guarded(lambda: np.stack([measure.unit_gram(x), measure.unit_gram(y)]), said)
        if why:
            matched, shuffled, why_s = np.nan, np.nan, ""
        else:
            gx, gy = grams
            matched = measure.from_grams(gx, gy)
            shuffled = np.nan
            if permutation is not None:
                shuffled = measure.from_grams(gx, gy[np.ix_(permutation, permutation)])
            why_s = ""
    else:
        matched, why = _guarded(lambda: float(measure(x, y, **kw)), said)
        shuffled, why_s = (
            _guarded(lambda: float(measure(x, y[permutation], **kw))) if permutation is not None else (np.nan, "")
        )
    return matched, shuffled, [w for w in (why, why_s and f"shuffled: {why_s}") if w] + said


def _prepare(reps: np.ndarray, layer: int, standardized: bool) -> np.ndarray:
    x = reps[layer].astype(np.float64, copy=False)
    return standardize(x) if standardized else x


def compare_pair(
    pair: Pair,
    a: SideData,
    b: SideData,
    *,
    pooling: str,
    measures: Sequence[str],
    permutation: np.ndarray,
    control_seed: int,
    inference: InferenceSpec,
    test_seed: int,
    standardized: bool = False,
    on_step: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Matched, shuffled and length-control values (with inference) at the pair's layers.

    ``on_step`` is told each measure and layer as it starts (a progress bar's postfix)."""
    if a.reps.shape[1] != b.reps.shape[1]:
        raise MeasureInputError(
            f"{pair.label}: sides have {a.reps.shape[1]} and {b.reps.shape[1]} sentences; "
            "both sides must be computed over the same sentence ids"
        )
    n = a.reps.shape[1]
    if permutation.shape != (n,):
        raise MeasureInputError(f"{pair.label}: permutation has length {permutation.shape[0]}, expected {n}")
    la_n, lb_n = a.reps.shape[0], b.reps.shape[0]
    layers = layer_pairs(la_n, lb_n)
    fa, fb = length_features(a.lengths), length_features(b.lengths)  # the same for every measure and layer
    rows: list[dict[str, Any]] = []
    for mid in measures:
        measure = get_measure(mid)
        meta = measure.metadata
        if not _applies(measure, pair, a.reps.shape[2], b.reps.shape[2]):
            continue
        kw = {"same_model": True} if meta.requires_same_model else {}
        length_value, length_note = _length_control(measure, fa, fb, kw)
        for i, (ka, kb) in enumerate(layers):
            if on_step is not None:
                on_step(f"{mid} layer {ka}:{kb} ({i + 1}/{len(layers)})")
            x, y = _prepare(a.reps, ka, standardized), _prepare(b.reps, kb, standardized)
            # _guarded calls the function at once, so the loop variables' late binding is safe
            removed, why_r = _guarded(
                lambda: float(measure(remove_length(x, fa), remove_length(y, fb), **kw))  # noqa: B023
            )
            matched, shuffled, notes = matched_and_shuffled(measure, x, y, permutation, kw)
            row: dict[str, Any] = {
                **_side_columns(pair),
                "pooling": pooling,
                "measure": mid,
                "estimator": meta.estimator,
                "layer_a": ka,
                "layer_b": kb,
                "depth_a": ka / max(la_n - 1, 1),
                "depth_b": kb / max(lb_n - 1, 1),
                "matched": matched,
                "shuffled": shuffled,
                "length_control": length_value,
                "matched_length_removed": removed,
                "n": n,
                "control_seed": control_seed,
                "n_permutations": 0,
                **_diagnostics(a, ka, "a"),
                **_diagnostics(b, kb, "b"),
            }
            if np.isfinite(matched) and (inference.layers == "all" or (ka, kb) == layers[-1]):
                row.update(_inference_columns(measure, x, y, inference, test_seed, kw, notes, mid))
            elif np.isfinite(matched):
                notes.append(NO_NULL_LAST)
            if length_note:
                notes.append(length_note)
            if why_r:
                notes.append(f"length removed: {why_r}")
            row["note"] = join_notes(notes)
            rows.append(row)
    return rows


def _diagnostics(side: SideData, layer: int, suffix: str) -> dict[str, float]:
    top1, top3 = top_k_shares(side.reps[layer], (1, 3))
    return {
        f"top1_share_{suffix}": top1,
        f"top3_share_{suffix}": top3,
        f"special_share_{suffix}": float(side.special_share[layer]),
    }


def compare_grid(
    pair: Pair,
    a: SideData,
    b: SideData,
    *,
    pooling: str,
    measures: Sequence[str],
    permutation: np.ndarray,
    control_seed: int,
    inference: InferenceSpec,
    test_seed: int,
    standardized: bool = False,
    on_step: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """The full layer x layer grid of a pair, matched and shuffled, for measures that have one.

    The grid maximum's permutation p-value applies the same maximum to every
    permuted grid, so the search over layers is paid for.
    """
    rows: list[dict[str, Any]] = []
    reps_a, reps_b = a.reps, b.reps
    if standardized:
        reps_a = np.stack([standardize(layer.astype(np.float64)) for layer in reps_a])
        reps_b = np.stack([standardize(layer.astype(np.float64)) for layer in reps_b])
    n = reps_a.shape[1]
    la_n, lb_n = reps_a.shape[0], reps_b.shape[0]
    draws = inference.permutations if inference.grid_permutations is None else inference.grid_permutations
    for mid in measures:
        measure = get_measure(mid)
        if not measure.metadata.grid:
            continue
        if on_step is not None:
            on_step(f"{mid} layer grid {la_n}x{lb_n}, {draws} permutations")
        matched = measure.grid(reps_a, reps_b)
        shuffled = measure.grid(reps_a, reps_b[:, permutation])
        p_max = np.nan
        cal = None
        if draws > 0 and np.isfinite(matched).any():
            res = grid_permutation_test(reps_a, reps_b, measure=measure, n_permutations=draws, seed=test_seed)
            p_max = float(res.p_value)
            cal = calibrate_grid_result(res, alpha=inference.alpha)
        finite = np.isfinite(matched)
        best = np.unravel_index(int(np.nanargmax(matched)), matched.shape) if finite.any() else (-1, -1)
        for ka in range(la_n):
            for kb in range(lb_n):
                is_best = (ka, kb) == tuple(best)
                extra = _grid_calibration_columns(cal, ka, kb, is_best)
                note = "" if finite[ka, kb] else "undefined: a side's representation is constant at this layer"
                if cal is None and finite[ka, kb]:
                    note = NO_GRID_NULL
                rows.append(
                    {
                        **_side_columns(pair),
                        "pooling": pooling,
                        "measure": mid,
                        "estimator": measure.metadata.estimator,
                        "layer_a": ka,
                        "layer_b": kb,
                        "depth_a": ka / max(la_n - 1, 1),
                        "depth_b": kb / max(lb_n - 1, 1),
                        "grid": True,
                        "matched": float(matched[ka, kb]),
                        "shuffled": float(shuffled[ka, kb]),
                        "n": n,
                        "control_seed": control_seed,
                        "grid_max": is_best,
                        "p_grid_max": p_max if is_best else np.nan,
                        "n_permutations": draws,
                        **extra,
                        "note": note,
                    }
                )
    return rows


#: the ``note`` of a row whose calibrated score is NaN because no null was drawn
NO_NULL_ZERO = "calibrated: no permutation null (permutations: 0), so no tau and no calibrated score"
NO_GRID_NULL = (
    "calibrated: no permutation null of the grid (inference.grid_permutations, or permutations, is 0), "
    "so no tau and no calibrated score"
)
NO_NULL_LAST = (
    "calibrated: no permutation null at this layer (inference.layers: last tests only the last layers), "
    "so no tau and no calibrated score"
)


def _grid_calibration_columns(cal: Any, ka: int, kb: int, is_best: bool) -> dict[str, Any]:
    """One grid cell's calibration columns: its own ``tau`` / ``calibrated``, and each search it wins.

    The grid maximum's row carries the calibrated maximum and mean of the grid; the cell that is layer
    ``ka``'s best match in B carries ``*_best_b``, the cell that is layer ``kb``'s best match in A ``*_best_a``.
    """
    if cal is None:
        return {}
    out: dict[str, Any] = {"tau": float(cal.cell_tau[ka, kb]), "calibrated": float(cal.cell_calibrated[ka, kb])}
    if is_best:
        out.update(
            tau_grid_max=cal.maximum.tau,
            calibrated_grid_max=cal.maximum.calibrated,
            grid_mean=cal.mean.observed,
            p_grid_mean=cal.mean.p_value,
            tau_grid_mean=cal.mean.tau,
            calibrated_grid_mean=cal.mean.calibrated,
        )
    if int(cal.best_b_index[ka]) == kb:
        c = cal.best_b[ka]
        out.update(p_best_b=c.p_value, tau_best_b=c.tau, calibrated_best_b=c.calibrated)
    if int(cal.best_a_index[kb]) == ka:
        c = cal.best_a[kb]
        out.update(p_best_a=c.p_value, tau_best_a=c.tau, calibrated_best_a=c.calibrated)
    return out


def _inference_columns(
    measure: Any,
    x: np.ndarray,
    y: np.ndarray,
    opts: InferenceSpec,
    seed: int,
    kw: dict[str, Any],
    notes: list[str],
    measure_id: str = "",
) -> dict[str, Any]:
    out: dict[str, Any] = {"n_permutations": opts.permutations}
    if opts.permutations == 0:
        notes.append(NO_NULL_ZERO)
    try:
        if opts.permutations > 0:
            # the analytic null exists for biased linear CKA (the RV coefficient) only; others stay Monte-Carlo
            moments = opts.null_method == "moments" and measure_id == "cka_linear_biased"
            res = permutation_test(
                measure,
                x,
                y,
                n_permutations=opts.permutations,
                seed=seed,
                null_method="moments" if moments else "monte_carlo",
                quantiles=(*DEFAULT_QUANTILES, 1.0 - opts.alpha),
                **kw,
            )
            cal = calibrate_result(res, alpha=opts.alpha)
            out["p_value"] = float(res.p_value)
            out["null_q95"] = float(res.null_quantiles.get(0.95, np.nan))
            out["tau"] = cal.tau
            out["calibrated"] = cal.calibrated
            out["p_method"] = "moments" if moments else "monte carlo"
            if moments:
                out["n_permutations"] = 0
        if opts.jackknife_groups > 0:
            # the intervals import scipy.stats: here, not when the package is imported (seconds of every start)
            from interlingua.analysis.inference.intervals import jackknife_interval

            jk = jackknife_interval(measure, x, y, n_groups=opts.jackknife_groups, level=opts.level, seed=seed, **kw)
            out.update(jackknife_low=float(jk.low), jackknife_high=float(jk.high), jackknife_se=float(jk.se))
        if opts.bootstrap > 0:
            from interlingua.analysis.inference.intervals import bootstrap_interval

            bs = bootstrap_interval(measure, x, y, n_boot=opts.bootstrap, level=opts.level, seed=seed, **kw)
            out.update(bootstrap_low=float(bs.low), bootstrap_high=float(bs.high))
    except MeasureInputError as err:
        notes.append(f"inference: {err}")
    return out


# --------------------------------------------------------------------------- arrays in, a table out

ARRAY_COLUMNS: tuple[str, ...] = (
    "measure",
    "estimator",
    "layer_a",
    "layer_b",
    "depth_a",
    "depth_b",
    "matched",
    "shuffled",
    "p_value",
    "null_q95",
    "tau",
    "calibrated",
    "p_method",
    "n_permutations",
    "jackknife_low",
    "jackknife_high",
    "jackknife_se",
    "bootstrap_low",
    "bootstrap_high",
    "n",
    "control_seed",
    "note",
)


def _as_stack(a: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise MeasureInputError(f"{name} is not a numeric array ({err}); pass an (n, d) or (L, n, d) array") from None
    if arr.ndim not in (2, 3):
        raise MeasureInputError(
            f"{name} has shape {arr.shape}; pass an (n, d) array (rows = examples) or an (L, n, d) stack of layers"
        )
    return arr


def _inference_spec(inference: InferenceSpec | Mapping[str, Any] | None) -> InferenceSpec:
    """``inference`` as an :class:`InferenceSpec` (a dict is validated into one), or a MeasureInputError."""
    from pydantic import ValidationError

    if isinstance(inference, InferenceSpec):
        return inference
    if inference is None:
        return InferenceSpec()
    if not isinstance(inference, Mapping):
        raise MeasureInputError(
            f"inference is a {type(inference).__name__}; pass an InferenceSpec or a dict of its fields, e.g. "
            '{"permutations": 199}'
        )
    try:
        return InferenceSpec(**inference)
    except ValidationError as err:
        first = err.errors()[0]
        raise MeasureInputError(
            f"{first['loc'][0]}={first.get('input')!r}: {first['msg']}; permutations, jackknife_groups and "
            "bootstrap are counts >= 0 (0 turns one off), level and alpha lie in (0, 1), null_method is "
            "monte_carlo or moments"
        ) from None


@with_analysis_blas
def compare_arrays(
    X: Any,
    Y: Any,
    *,
    measures: str | Sequence[str] = ("cka_linear_biased",),
    inference: InferenceSpec | Mapping[str, Any] | None = None,
    seed: int = 0,
    control: bool = True,
    control_seed: int | None = None,
    standardize: bool = False,
    same_model: bool = False,
) -> pd.DataFrame:
    """Compare two arrays of paired rows with every measure: a tidy table, one row per measure (x layer).

    ``X`` and ``Y``: ``(n, d)`` arrays whose row i is the same example (sentence) on both sides, or
    ``(L, n, d)`` stacks of layers, compared layer by layer when their depths agree and at their last layers
    otherwise (as a run pairs layers). The columns are those of a run's rows (``results.csv``) that arrays
    can give: ``matched``; ``shuffled``, the measure after ONE seeded permutation of ``Y``'s rows (drawn
    with ``control_seed``, by default derived from ``seed`` so that it is not one of the test's draws;
    ``control=False`` leaves it out); ``p_value`` and ``null_q95`` of a permutation test with
    ``permutations`` draws seeded by ``seed`` (``null_method="moments"``: the analytic null of biased linear
    CKA); ``tau`` and ``calibrated``, the critical value (the null's ``1 - alpha`` order statistic with the
    observed value included) and the calibrated score (``(matched - tau) / (s_max - tau)`` clipped to [0, 1]
    for a bounded measure, ``max(matched - tau, 0)`` otherwise; see
    :mod:`interlingua.analysis.inference.calibration`); ``jackknife_low/high/se`` with ``jackknife_groups`` > 0
    and ``bootstrap_low/high`` with ``bootstrap`` > 0 (at ``level``); ``n`` and ``note``, the reason whenever a
    value is NaN. The columns of inference not asked for are there, NaN (``n_permutations`` 0), so the schema
    does not depend on the options; the layer columns are left out for 2-D inputs, ``shuffled`` with
    ``control=False``.

    ``inference``: the inference settings, as a run's ``inference:`` section
    (:class:`~interlingua.analysis.inference.config.InferenceSpec`, or a dict of its fields, e.g.
    ``interlingua.compare(X, Y, inference={"permutations": 199, "jackknife_groups": 8})``; default: its
    defaults, 1000 permutations). Its ``permutations``, ``null_method``, ``alpha``, ``jackknife_groups``,
    ``bootstrap`` and ``level`` are read; ``grid_permutations``, ``layers`` and ``score`` concern a run's
    grid and questions and are not used here.
    ``standardize`` z-scores each column first; ``same_model=True`` says both sides come from one model
    (needed by measures such as ANC that compare neuron by neuron). Bad input raises
    :class:`~interlingua.core.errors.MeasureInputError`.
    """
    import pandas as pd

    _check_seed("seed", seed)
    _check_seed("control_seed", control_seed, optional=True)
    for flag, value in (("control", control), ("standardize", standardize), ("same_model", same_model)):
        _check_flag(flag, value)
    x_all, y_all = _as_stack(X, "X"), _as_stack(Y, "Y")
    if x_all.ndim != y_all.ndim:
        raise MeasureInputError(
            f"X has shape {x_all.shape} and Y {y_all.shape}; pass two (n, d) arrays or two (L, n, d) stacks "
            "(select one layer of a stack with stack[k])"
        )
    layered = x_all.ndim == 3
    if not layered:
        x_all, y_all = x_all[None], y_all[None]
    n = x_all.shape[1]
    if y_all.shape[1] != n:
        raise MeasureInputError(
            f"X has {n} rows and Y {y_all.shape[1]}: rows must be paired (row i = the same example on both "
            "sides); pass the two sides' representations of the same examples"
        )
    ids = _measure_ids(measures)
    inference = _inference_spec(inference)
    permutation = None
    if control:
        control_seed = pair_seed(seed, "X", "Y", ordered=True) if control_seed is None else control_seed
        permutation = shuffle_permutation(n, control_seed)
    la_n, lb_n = x_all.shape[0], y_all.shape[0]
    rows: list[dict[str, Any]] = []
    for mid in ids:
        measure = get_measure(mid)
        meta = measure.metadata
        kw = {"same_model": same_model} if meta.requires_same_model else {}
        for ka, kb in layer_pairs(la_n, lb_n):
            x, y = _prepare(x_all, ka, standardize), _prepare(y_all, kb, standardize)
            row: dict[str, Any] = {
                "measure": mid,
                "estimator": meta.estimator,
                "layer_a": ka,
                "layer_b": kb,
                "depth_a": ka / max(la_n - 1, 1),
                "depth_b": kb / max(lb_n - 1, 1),
                "n": n,
                "control_seed": control_seed,
                "n_permutations": 0,
            }
            if meta.requires_equal_width and x.shape[1] != y.shape[1]:
                row.update(
                    matched=np.nan,
                    shuffled=np.nan,
                    note=f"{mid} needs sides of equal width, got {x.shape[1]} and {y.shape[1]}",
                )
                rows.append(row)
                continue
            matched, shuffled, notes = matched_and_shuffled(measure, x, y, permutation, kw)
            row.update(matched=matched, shuffled=shuffled)
            if np.isfinite(matched):
                row.update(_inference_columns(measure, x, y, inference, seed, kw, notes, mid))
            row["note"] = join_notes(notes)
            rows.append(row)
    drop = set() if layered else {"layer_a", "layer_b", "depth_a", "depth_b"}
    if not control:
        drop |= {"shuffled", "control_seed"}
    # inference columns not asked for are kept, NaN (n_permutations 0): code written against the defaults
    # reads the same schema with permutations=0
    table = pd.DataFrame(rows).reindex(columns=[c for c in ARRAY_COLUMNS if c not in drop])
    if "n_permutations" in table:
        table["n_permutations"] = table["n_permutations"].fillna(0).astype(int)
    return table


def _measure_ids(measures: Any) -> list[str]:
    """``measures`` as a non-empty list of id strings, or a :class:`MeasureInputError` naming the fix."""
    hint = (
        "pass a measure id or a list of ids, e.g. measures=['cka_linear_debiased'] (`interlingua measures` lists them)"
    )
    if isinstance(measures, str):
        return [measures]
    if measures is None or isinstance(measures, (bytes, dict)) or not isinstance(measures, Iterable):
        raise MeasureInputError(f"measures={measures!r} is not a measure id or a list of ids; {hint}")
    ids = list(measures)
    if not ids:
        raise MeasureInputError(f"measures is empty; {hint}")
    bad = [m for m in ids if not isinstance(m, str)]
    if bad:
        raise MeasureInputError(f"measures holds {bad[0]!r} ({type(bad[0]).__name__}), not an id string; {hint}")
    return ids


def _check_seed(name: str, value: Any, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise MeasureInputError(f"{name}={value!r}: a seed is an integer >= 0 (e.g. {name}=0)")


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise MeasureInputError(f"{name}={value!r}: pass True or False")
