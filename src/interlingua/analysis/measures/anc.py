"""Averaged neuron-wise correlation (ANC; Del & Fishel 2022).

``ANC = mean_j corr(X[:, j], Y[:, j])`` (Pearson over examples), with the
absolute value inside the mean for ``anc_abs`` (the paper's choice: a sign
flip is undone by a negative weight downstream) and without it for
``anc_signed``.

ANC pairs neuron j of X with neuron j of Y, so it is defined only for two
representations from THE SAME model (e.g. two languages, or two layers joined
by the residual stream): a shared neuron basis. Across independently trained
models neuron j of one has no counterpart j in the other, so the measure is
refused there (``same_model=False`` raises :class:`MeasureInputError`), and it
declares ``requires_same_model=True`` so pipelines can skip it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register
from interlingua.analysis.measures.validation import check_pair, constant_columns, rescale_columns, warn
from interlingua.core.errors import MeasureInputError

__all__ = ["anc", "anc_result", "neuron_correlations"]


def _require_same_model(same_model: bool | None) -> None:
    if same_model is True:
        return
    if same_model is False:
        raise MeasureInputError(
            "ANC is undefined across different models: it correlates neuron j of X with neuron j of Y, "
            "which needs a shared neuron basis (two representations from the same model). Independently "
            "trained models have no such correspondence; use CKA, CCA/SVCCA or Procrustes for them."
        )
    raise MeasureInputError(
        "ANC needs same_model=True: it is defined only for two representations from the same model "
        "(a shared neuron basis). Pass same_model=True to confirm, or use another measure across models."
    )


def neuron_correlations(X: Any, Y: Any, *, same_model: bool | None = None) -> np.ndarray:
    """Pearson correlation of every neuron pair (X[:, j], Y[:, j]); nan where either neuron is constant."""
    _require_same_model(same_model)
    x, y = check_pair(X, Y, min_n=3, what="ANC", equal_width=True)
    return _correlations(x, y)


def _correlations(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # Pearson's r of a neuron is unchanged by scaling that neuron: exact power-of-two rescales per column
    # (before and after centring) keep each column's sum of squares inside float64 at any magnitude
    x, y = rescale_columns(x), rescale_columns(y)
    xc = rescale_columns(x - x.mean(axis=0))
    yc = rescale_columns(y - y.mean(axis=0))
    nx = np.sqrt(np.einsum("ij,ij->j", xc, xc))
    ny = np.sqrt(np.einsum("ij,ij->j", yc, yc))
    dead = constant_columns(x) | constant_columns(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.einsum("ij,ij->j", xc, yc) / (nx * ny)
    r[dead] = np.nan
    return np.clip(r, -1.0, 1.0)


def anc_result(X: Any, Y: Any, *, absolute: bool = True, same_model: bool | None = None) -> MeasureResult:
    """ANC with the per-neuron correlations and excluded neurons recorded (see :func:`anc`)."""
    _require_same_model(same_model)
    x, y = check_pair(X, Y, min_n=3, what="ANC", equal_width=True)
    r = _correlations(x, y)
    dead = np.isnan(r)
    mid = "anc_abs" if absolute else "anc_signed"
    est = f"mean over neurons of the {'absolute ' if absolute else ''}Pearson correlation (Del & Fishel 2022)"
    details: dict[str, Any] = {"excluded_constant_neurons": int(dead.sum()), "correlations": r}
    if dead.all():
        reason = "ANC is undefined: every neuron is constant on X or Y; returned nan."
        warn(reason)
        details["reason"] = reason
        return MeasureResult(math.nan, mid, est, x.shape[0], details)
    if dead.any():
        warn(
            f"ANC: excluded {int(dead.sum())} of {r.size} neurons that are constant on X or Y "
            "(their correlation is undefined); the mean is over the rest."
        )
    kept = r[~dead]
    value = float(np.mean(np.abs(kept) if absolute else kept))
    return MeasureResult(value, mid, est, x.shape[0], details)


def anc(X: Any, Y: Any, *, absolute: bool = True, same_model: bool | None = None) -> float:
    """Averaged neuron-wise correlation of two equal-width representations from the same model.

    ``absolute=True``: mean |Pearson r| (``anc_abs``); ``False``: mean signed r
    (``anc_signed``). ``same_model`` must be ``True``; ``False`` (different
    models) or ``None`` (unstated) raise :class:`MeasureInputError`. Neurons
    constant on either side are excluded with a warning.
    """
    return anc_result(X, Y, absolute=absolute, same_model=same_model).value


def _fn(X: Any, Y: Any, *, absolute: bool, **kw: Any) -> MeasureResult:
    return anc_result(X, Y, absolute=absolute, **kw)


for _absolute in (True, False):
    register(
        Measure(
            id="anc_abs" if _absolute else "anc_signed",
            metadata=MeasureMetadata(
                cost_model="anc",
                larger_is_more_similar=True,
                symmetric=True,
                # per-neuron Pearson: unchanged by shifts and positive scaling, broken by any mixing of
                # neurons (including permuting one side only)
                invariances=frozenset({"isotropic_scale", "translation"}),
                requires_equal_width=True,
                requires_same_model=True,
                min_n=3,
                bounds=(0.0, 1.0) if _absolute else (-1.0, 1.0),
                estimator=f"mean {'absolute ' if _absolute else 'signed '}neuron-wise Pearson correlation",
                reference="Del & Fishel 2022",
            ),
            fn=_fn,
            params={"absolute": _absolute},
        )
    )
