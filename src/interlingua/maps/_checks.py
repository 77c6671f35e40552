"""Input checks of the mapping package: float64 matrices, paired rows, finite values named where they are."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from interlingua.maps.errors import MapInputError, MapNonFiniteError

__all__ = ["as_matrix", "check_pair", "as_stack", "describe_nonfinite", "check_finite_output"]


def _to_numpy(a: Any) -> np.ndarray:
    if type(a).__module__.startswith("torch") and hasattr(a, "detach"):
        a = a.detach().cpu()
        if str(a.dtype) in ("torch.bfloat16", "torch.float16"):
            a = a.float()
        a = a.numpy()
    return np.asarray(a)


def _row_list(rows: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:limit])
    return shown + (f" and {rows.size - limit} more" if rows.size > limit else "")


def describe_nonfinite(arr: np.ndarray) -> str:
    """'3 NaN and 1 inf in rows 4, 17' for a 2-D array with non-finite values ('' when all are finite)."""
    bad = ~np.isfinite(arr)
    if not bad.any():
        return ""
    n_nan = int(np.count_nonzero(np.isnan(arr)))
    n_bad = int(np.count_nonzero(bad))
    rows = np.flatnonzero(bad.reshape(arr.shape[0], -1).any(axis=1))
    return f"{n_nan} NaN and {n_bad - n_nan} inf in row(s) {_row_list(rows)}"


def as_matrix(a: Any, name: str = "X", *, min_rows: int = 1) -> np.ndarray:
    """``a`` as a C-contiguous float64 ``(n, width)`` array, or a :class:`MapInputError` naming ``name``.

    Non-finite values raise :class:`MapNonFiniteError` with their count and rows.
    """
    try:
        arr = _to_numpy(a)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise MapInputError(f"{name}: cannot convert {type(a).__name__} to an array ({exc}).") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool) or np.iscomplexobj(arr):
        raise MapInputError(f"{name} has dtype {arr.dtype}; pass a real numeric (n_sentences, width) array.")
    if arr.ndim != 2:
        raise MapInputError(
            f"{name} has shape {arr.shape}; expected a 2-D (n_sentences, width) array (one layer; "
            "reshape a single feature to (n, 1))."
        )
    if arr.shape[0] < min_rows or arr.shape[1] == 0:
        raise MapInputError(f"{name} has shape {arr.shape}; it needs at least {min_rows} row(s) and one column.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not math.isfinite(float(arr.sum())):
        what = describe_nonfinite(arr)
        if what:
            raise MapNonFiniteError(
                f"{name} contains {what}; maps need finite representations (check the extraction, "
                "e.g. float16 overflow, or drop those sentences on both sides)."
            )
    return arr


def check_pair(
    X: Any, Y: Any, names: tuple[str, str] = ("X", "Y"), *, min_rows: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as float64 matrices over the same rows (row i of X and row i of Y are one sentence)."""
    x = as_matrix(X, names[0], min_rows=1)
    y = as_matrix(Y, names[1], min_rows=1)
    if x.shape[0] != y.shape[0]:
        raise MapInputError(
            f"{names[0]} has {x.shape[0]} rows but {names[1]} has {y.shape[0]}; rows are paired sentences, "
            "so both sides need the same sentences in the same order."
        )
    if x.shape[0] < min_rows:
        raise MapInputError(f"fitting a map needs at least {min_rows} paired rows; got {x.shape[0]}.")
    return x, y


def as_stack(reps: Any, name: str) -> list[Any]:
    """A ``(L, n, d)`` array or a sequence of ``(n, d)`` arrays as a list of per-layer arrays (not yet float64).

    Every layer must have the same n; non-finite values raise
    :class:`MapNonFiniteError` naming the layers and the rows.
    """
    if isinstance(reps, np.ndarray) or (type(reps).__module__.startswith("torch") and hasattr(reps, "detach")):
        arr = _to_numpy(reps)
        if arr.ndim != 3:
            raise MapInputError(
                f"{name} has shape {arr.shape}; expected (n_layers, n_sentences, width) "
                "(the pooled hidden states of one side)."
            )
        layers: list[Any] = list(arr)
    elif isinstance(reps, Sequence) and not isinstance(reps, (str, bytes)):
        layers = [_to_numpy(layer) for layer in reps]
    else:
        raise MapInputError(f"{name} must be an (n_layers, n, width) array or a sequence of (n, width) arrays.")
    if not layers:
        raise MapInputError(f"{name} has no layers.")
    n = None
    problems = []
    for i, layer in enumerate(layers):
        if layer.ndim != 2 or layer.shape[0] == 0 or layer.shape[1] == 0:
            raise MapInputError(
                f"{name}[{i}] has shape {layer.shape}; every layer must be a non-empty (n, width) array."
            )
        if not (np.issubdtype(layer.dtype, np.number) or layer.dtype == bool) or np.iscomplexobj(layer):
            raise MapInputError(f"{name}[{i}] has dtype {layer.dtype}; pass real numbers.")
        if n is None:
            n = layer.shape[0]
        elif layer.shape[0] != n:
            raise MapInputError(
                f"{name}[{i}] has {layer.shape[0]} rows but {name}[0] has {n}; layers must share the sentences."
            )
        if not math.isfinite(float(np.sum(layer, dtype=np.float64))):
            what = describe_nonfinite(layer)
            if what:
                problems.append(f"layer {i}: {what}")
    if problems:
        raise MapNonFiniteError(
            f"{name} contains non-finite values ({'; '.join(problems)}); maps need finite representations "
            "(check the extraction, or drop those sentences on both sides)."
        )
    return layers


def check_finite_output(out: np.ndarray, what: str) -> np.ndarray:
    """Raise :class:`MapNonFiniteError` when a map produced NaN/inf (e.g. an MLP that diverged, or overflow)."""
    if not math.isfinite(float(out.sum())):
        desc = describe_nonfinite(out)
        if desc:
            raise MapNonFiniteError(
                f"{what} produced {desc} of its output; the inputs are finite, so the map itself is unusable "
                "(refit it: lower the MLP learning rate, or rescale the inputs)."
            )
    return out
