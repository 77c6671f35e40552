"""Fit maps on all (or chosen) sentences and save them for later use (e.g. activation patching).

A saved map is a safetensors file (:meth:`Map.save`): its tensors, the
estimator and hyper-parameters, what the fit decided, your ``metadata``
(models, languages, layers, pooling, corpus ids...) and a content ``key``.
Read it back with :func:`interlingua.maps.load_map`; ``map.transform(h)``
maps representations of the source side's layer into the target side's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.maps._checks import as_stack, check_pair
from interlingua.maps.errors import MapInputError
from interlingua.maps.estimators import Map, Procrustes, get_map
from interlingua.maps.layers import layer_pairs

__all__ = ["fit_and_save", "fit_layer_maps"]


def _rows(rows: Any, n: int) -> np.ndarray | None:
    if rows is None:
        return None
    idx = np.asarray(rows)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or idx.size < 2:
        raise MapInputError(
            "rows must be a 1-D integer array of at least 2 sentence indices (e.g. a fold's training rows)."
        )
    if idx.min() < 0 or idx.max() >= n or np.unique(idx).size != idx.size:
        raise MapInputError(f"rows must be distinct indices in [0, {n}).")
    return idx


def fit_and_save(
    X: Any,
    Y: Any,
    path: str | Path,
    *,
    estimator: str | Map = "procrustes",
    rows: Any = None,
    metadata: Mapping[str, Any] | None = None,
    **params: Any,
) -> Map:
    """Fit ``estimator`` (an id, with ``params``, or a :class:`Map`) from X to Y and save it to ``path``.

    ``rows``: the sentence indices to fit on (default all; pass a fold's
    training rows to keep held-out sentences unseen). ``metadata`` (JSON-ready)
    goes into the file's header with the rows used. Returns the fitted map;
    ``map.key`` is its content key.
    """
    x, y = check_pair(X, Y, ("X (source)", "Y (target)"))
    idx = _rows(rows, x.shape[0])
    if idx is not None:
        x, y = x[idx], y[idx]
    m = get_map(estimator, **params).fit(x, y)
    meta = dict(metadata or {})
    meta.setdefault("n_rows", int(x.shape[0]))
    if idx is not None:
        meta.setdefault("rows", idx.tolist())
    m.save(path, metadata=meta)
    return m


def fit_layer_maps(
    reps_a: Any,
    reps_b: Any,
    folder: str | Path,
    *,
    estimator: str | Map = "procrustes",
    layers: str | Sequence[tuple[int, int]] = "auto",
    direction: str = "a->b",
    rows: Any = None,
    metadata: Mapping[str, Any] | None = None,
    **params: Any,
) -> list[dict[str, Any]]:
    """One saved map per layer pair (:func:`~interlingua.maps.layers.layer_pairs`), from A to B or B to A.

    Files are ``<folder>/<estimator>.<a2b|b2a>.a<layer_a>.b<layer_b>.safetensors``
    (written atomically; an existing file is replaced). Returns one record per
    map: ``layer_a``, ``layer_b``, ``direction``, ``estimator``, ``path``, ``key``.
    With ``direction="both"`` Procrustes maps of B to A come from the same SVD.
    """
    la = as_stack(reps_a, "reps_a")
    lb = as_stack(reps_b, "reps_b")
    if direction not in ("a->b", "b->a", "both"):
        raise MapInputError(f"direction must be 'a->b', 'b->a' or 'both'; got {direction!r}.")
    folder = Path(folder)
    out: list[dict[str, Any]] = []
    for a, b in layer_pairs(len(la), len(lb), layers):
        x, y = check_pair(la[a], lb[b], (f"reps_a[{a}]", f"reps_b[{b}]"))
        idx = _rows(rows, x.shape[0])
        if idx is not None:
            x, y = x[idx], y[idx]
        meta = {**dict(metadata or {}), "layer_a": a, "layer_b": b, "n_rows": int(x.shape[0])}
        if idx is not None:
            meta["rows"] = idx.tolist()
        fitted: dict[str, Map] = {}
        proto = get_map(estimator, **params)
        if direction in ("a->b", "both"):
            fitted["a->b"] = proto.clone().fit(x, y)
        if direction in ("b->a", "both"):
            fwd = fitted.get("a->b")
            fitted["b->a"] = fwd.reverse() if isinstance(fwd, Procrustes) else proto.clone().fit(y, x)
        for d, m in fitted.items():
            path = folder / f"{m.name}.{d.replace('->', '2')}.a{a}.b{b}.safetensors"
            m.save(path, metadata={**meta, "direction": d})
            out.append(
                {"layer_a": a, "layer_b": b, "direction": d, "estimator": m.name, "path": str(path), "key": m.key}
            )
    return out
