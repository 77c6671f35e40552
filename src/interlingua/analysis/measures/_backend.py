"""numpy / torch array plumbing for measures that run on either backend.

The numerical code of linear and RBF CKA, the CKA grid and Procrustes is written once against the small
set of operations numpy arrays and torch tensors share (``@``, ``.T``,
``.sum(axis)``, ``.reshape``, ``.diagonal()``, elementwise arithmetic); the few
operations that differ live here. Everything is float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interlingua.analysis.measures.validation import as_matrix, as_tensor, is_torch
from interlingua.core.errors import MeasureInputError

__all__ = ["BACKENDS", "namespace", "to_backend", "zero_diagonal_", "copy", "is_torch", "empty", "median"]

BACKENDS = ("numpy", "torch")


def namespace(a: Any) -> Any:
    """The array module of ``a``: :mod:`numpy` or :mod:`torch`."""
    if is_torch(a):
        import torch

        return torch
    return np


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise MeasureInputError(f"backend must be one of {BACKENDS}; got {backend!r}.")


def to_backend(a: Any, side: str, backend: str = "numpy", device: Any = None) -> Any:
    """Validated float64 ``(n, width)`` array on ``backend`` (and ``device`` for torch)."""
    check_backend(backend)
    if backend == "numpy":
        if device not in (None, "cpu"):
            raise MeasureInputError(f"device={device!r} needs backend='torch'; the numpy backend runs on the CPU.")
        return as_matrix(a, side)
    return as_tensor(a, side, device)


def zero_diagonal_(K: Any) -> Any:
    """Set the diagonal of the square matrix ``K`` to zero in place; returns ``K``."""
    if is_torch(K):
        K.fill_diagonal_(0.0)
    else:
        np.fill_diagonal(K, 0.0)
    return K


def copy(a: Any) -> Any:
    return a.clone() if is_torch(a) else a.copy()


def empty(shape: tuple[int, ...], like: Any) -> Any:
    """Uninitialised float64 array of ``shape`` on the backend / device of ``like``."""
    if is_torch(like):
        import torch

        return torch.empty(shape, dtype=torch.float64, device=like.device)
    return np.empty(shape, dtype=np.float64)


def median(v: Any) -> float:
    """Median of a 1-D array, averaging the two middle values for even length (numpy's convention)."""
    if not is_torch(v):
        return float(np.median(v))
    import torch

    m = v.numel()
    hi = torch.kthvalue(v, m // 2 + 1).values
    if m % 2:
        return float(hi)
    lo = torch.kthvalue(v, m // 2).values
    return float((lo + hi) / 2)
