"""Input checks shared by every similarity measure.

Every measure converts its inputs here, so the rules are written once:

- inputs are 2-D ``(n, width)`` arrays (numpy arrays, torch tensors or
  anything ``numpy.asarray`` accepts), converted to float64 before any
  arithmetic (float32 activations give float64-accurate results);
- both sides have the same number of rows ``n`` (rows are paired examples);
- every value is finite (NaN / inf raise :class:`MeasureInputError` naming the
  side and how many values are bad);
- ``n`` is at least the measure's minimum (e.g. 4 for debiased HSIC).

Conditions that do not make a measure meaningless but change what it computes
(constant columns dropped, a CCA input reduced because it is wider than the
data allow) emit a :class:`MeasureWarning` that says how many and why.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from interlingua.core.errors import MeasureInputError

__all__ = [
    "MeasureWarning",
    "as_matrix",
    "as_tensor",
    "check_pair",
    "check_rows",
    "check_min_n",
    "constant_columns",
    "centre_columns",
    "warn",
    "rescale",
    "rescale_rows",
    "rescale_columns",
    "SAFE_MAGNITUDE",
    "pairwise_distances",
]


class MeasureWarning(UserWarning):
    """A measure changed its input (dropped or reduced columns) or returned nan; the message says why."""


def warn(message: str) -> None:
    """Emit a :class:`MeasureWarning` attributed to the caller of the public measure."""
    warnings.warn(message, MeasureWarning, stacklevel=3)


def is_torch(a: Any) -> bool:
    """Whether ``a`` is a torch tensor (checked without importing torch)."""
    return type(a).__module__.startswith("torch") and hasattr(a, "detach")


def _to_numpy(a: Any) -> np.ndarray:
    if is_torch(a):
        a = a.detach().cpu()
        if str(a.dtype) in ("torch.bfloat16", "torch.float16"):
            a = a.float()
        a = a.numpy()
    return np.asarray(a)


def as_matrix(a: Any, side: str = "X") -> np.ndarray:
    """Return ``a`` as a C-contiguous float64 ``(n, width)`` array, or raise.

    ``side`` names the input in error messages ("X", "Y", "layers_a[3]", ...).
    """
    try:
        arr = _to_numpy(a)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise MeasureInputError(
            f"{side}: cannot convert input of type {type(a).__name__} to an array ({exc})."
        ) from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise MeasureInputError(f"{side} has dtype {arr.dtype}; pass a numeric (n, width) array.")
    if np.iscomplexobj(arr):
        raise MeasureInputError(f"{side} is complex; similarity measures take real-valued representations.")
    if arr.ndim != 2:
        raise MeasureInputError(
            f"{side} has shape {arr.shape}; expected a 2-D (n_examples, width) array "
            "(reshape a single feature to (n, 1); pass one layer at a time, or use cka_grid for stacks)."
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise MeasureInputError(f"{side} has shape {arr.shape}; both dimensions must be non-empty.")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    # a NaN or inf makes the sum NaN or inf, so one fast reduction clears finite data;
    # the elementwise count runs only when the sum is not finite (bad values, or overflow)
    bad = 0 if math.isfinite(float(arr.sum())) else arr.size - int(np.count_nonzero(np.isfinite(arr)))
    if bad:
        n_nan = int(np.count_nonzero(np.isnan(arr)))
        raise MeasureInputError(
            f"{side} contains {bad} non-finite value(s) ({n_nan} NaN, {bad - n_nan} inf) out of {arr.size}; "
            "similarity measures need finite activations (check the extraction, e.g. fp16 overflow)."
        )
    return arr


def as_tensor(a: Any, side: str = "X", device: Any = None) -> Any:
    """Like :func:`as_matrix` but returns a float64 torch tensor on ``device`` (checked there, no host copy)."""
    import torch

    if not is_torch(a):
        return torch.from_numpy(as_matrix(a, side)).to(device=device)
    if a.ndim != 2:
        raise MeasureInputError(
            f"{side} has shape {tuple(a.shape)}; expected a 2-D (n_examples, width) array "
            "(reshape a single feature to (n, 1); pass one layer at a time, or use cka_grid for stacks)."
        )
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise MeasureInputError(f"{side} has shape {tuple(a.shape)}; both dimensions must be non-empty.")
    if a.is_complex():
        raise MeasureInputError(f"{side} is complex; similarity measures take real-valued representations.")
    t = a.detach().to(device=device if device is not None else a.device, dtype=torch.float64)
    bad = int((~torch.isfinite(t)).sum().item())
    if bad:
        n_nan = int(torch.isnan(t).sum().item())
        raise MeasureInputError(
            f"{side} contains {bad} non-finite value(s) ({n_nan} NaN, {bad - n_nan} inf) out of {t.numel()}; "
            "similarity measures need finite activations (check the extraction, e.g. fp16 overflow)."
        )
    return t.contiguous()


def check_min_n(n: int, min_n: int, what: str) -> None:
    if n < min_n:
        raise MeasureInputError(f"{what} needs at least {min_n} paired examples (rows); got n={n}.")


def check_rows(x: Any, y: Any, *, min_n: int, what: str, names: tuple[str, str] = ("X", "Y")) -> int:
    """Both sides have the same number of rows, and at least ``min_n``; returns n."""
    if x.shape[0] != y.shape[0]:
        raise MeasureInputError(
            f"{names[0]} has {x.shape[0]} rows but {names[1]} has {y.shape[0]}; rows are paired examples, "
            "so both sides need the same examples in the same order."
        )
    check_min_n(x.shape[0], min_n, what)
    return int(x.shape[0])


def check_pair(
    X: Any,
    Y: Any,
    *,
    min_n: int = 2,
    what: str = "this measure",
    equal_width: bool = False,
    names: tuple[str, str] = ("X", "Y"),
) -> tuple[np.ndarray, np.ndarray]:
    """Validate a pair of paired-row inputs and return them as float64 arrays."""
    x = as_matrix(X, names[0])
    y = as_matrix(Y, names[1])
    check_rows(x, y, min_n=min_n, what=what, names=names)
    if equal_width and x.shape[1] != y.shape[1]:
        raise MeasureInputError(
            f"{what} compares neuron j of {names[0]} with neuron j of {names[1]}, so both need the same width; "
            f"got {x.shape[1]} and {y.shape[1]}."
        )
    return x, y


def _column_range(x: Any) -> tuple[Any, Any]:
    """Per-column (max, min) in two reductions, without temporaries the size of ``x``."""
    if is_torch(x):
        return x.amax(0), x.amin(0)
    return np.max(x, axis=0), np.min(x, axis=0)


def _constant_from_range(hi: Any, lo: Any, rtol: float) -> Any:
    # max |x| of a column is max(|max|, |min|): no pass over abs(x) needed
    if is_torch(hi):
        import torch

        return (hi - lo) <= rtol * torch.maximum(hi.abs(), lo.abs())
    return (hi - lo) <= rtol * np.maximum(np.abs(hi), np.abs(lo))


def constant_columns(x: Any, rtol: float = 1e-12) -> Any:
    """Boolean mask of columns that are constant over rows (zero variance up to rounding).

    A column counts as constant when its peak-to-peak range is at most ``rtol``
    times its largest absolute value (exactly zero range for an all-zero column).
    Works on numpy arrays and torch tensors.
    """
    return _constant_from_range(*_column_range(x), rtol)


def _centre(x: Any, out: Any = None) -> tuple[Any, float]:
    """Centred columns (constant ones exactly 0) and the largest range of a non-constant column.

    ``out``: an array of x's shape (and backend) to write the centred data into
    (e.g. a buffer reused across the layers of a grid); a new array otherwise.
    """
    hi, lo = _column_range(x)
    const = _constant_from_range(hi, lo, 1e-12)
    mean = x.sum(0) / x.shape[0]
    if out is None:
        xc = x - mean
    elif is_torch(x):
        import torch

        xc = torch.sub(x, mean, out=out)
    else:
        xc = np.subtract(x, mean, out=out)
    span = hi - lo
    if bool(const.any()):
        xc[:, const] = 0.0
        span[const] = 0.0
    return xc, float(span.max())


def centre_columns(x: Any) -> Any:
    """Subtract column means; columns that are constant (see :func:`constant_columns`) become exactly 0.

    Centring a constant column leaves rounding noise (e.g. 0.1 repeated has a
    float mean of 0.10000000000000002); scale-free measures would normalise that
    noise into an O(1) signal, so it is zeroed here. Costs three reductions and
    one subtraction over ``x`` (numpy or torch).
    """
    return _centre(x)[0]


_SAFE_SPAN = (2.0**-200, 2.0**200)


def centre_columns_rescaled(x: Any, out: Any = None) -> Any:
    """:func:`centre_columns`, times a power of two when the data are extreme, for products of scale-free measures.

    Products of centred data (Grams, cross-covariances, their squared norms)
    overflow or underflow float64 for entries beyond ~1e±70. When the largest
    column range lies outside [2^-200, 2^200] the centred data are multiplied by
    the power of two that brings it to ~1 (exact in binary floating point, so a
    scale-invariant measure is unchanged); otherwise they are returned as is,
    without the extra pass a normalisation would cost. ``out``: optional
    buffer of x's shape for the result (see :func:`_centre`).
    """
    xc, span = _centre(x, out)
    if span > 0 and not _SAFE_SPAN[0] <= span <= _SAFE_SPAN[1]:
        xc *= math.ldexp(1.0, -math.frexp(span)[1])
    return xc


#: Largest absolute entries inside this range are used as given; outside it a side is first multiplied by an
#: exact power of two (see :func:`rescale`). Squares and fourth powers of entries in this range (norms, Grams,
#: squared distances, sums of them over n and the width) stay far inside float64's ~1e+-308.
SAFE_MAGNITUDE = (2.0**-64, 2.0**64)


def _pow2_factor(peak: float) -> float:
    """The power of two ``f`` with ``f * peak`` in [0.5, 1); 1.0 for 0 or a peak already in the safe range."""
    if not peak > 0 or SAFE_MAGNITUDE[0] <= peak <= SAFE_MAGNITUDE[1]:
        return 1.0
    return math.ldexp(1.0, -math.frexp(peak)[1])


def rescale(x: Any) -> Any:
    """``x`` (float64, numpy or torch) times the power of two that brings its largest ``|entry|`` near 1.

    For measures invariant to isotropic scaling: multiplying by a power of two is exact in binary floating
    point (no entry changes except by its exponent, unless it falls below 2^-1022 relative to the largest,
    where float64 could not carry it next to the largest anyway), so the value is the one of the unscaled
    input while norms, Grams and squared distances neither overflow (inputs ~1e300) nor underflow (~1e-300).
    Inputs whose largest entry lies in :data:`SAFE_MAGNITUDE` are returned as they are (no copy).
    """
    empty = (x.numel() if is_torch(x) else x.size) == 0
    f = 1.0 if empty else _pow2_factor(float(abs(x).max()))
    return x if f == 1.0 else x * f


def _axis_factors(peaks: np.ndarray) -> np.ndarray:
    """Per-entry power-of-two factors for :func:`rescale_rows` / :func:`rescale_columns` (1 where safe or 0)."""
    out = np.ones_like(peaks)
    bad = (peaks > 0) & ((peaks < SAFE_MAGNITUDE[0]) | (peaks > SAFE_MAGNITUDE[1]))
    if bad.any():
        out[bad] = np.ldexp(1.0, -np.frexp(peaks[bad])[1])
    return out


def rescale_rows(x: np.ndarray) -> np.ndarray:
    """Each row of the float64 numpy ``x`` times its own power of two (see :func:`rescale`), for measures that
    normalise each row (cosine, row-wise Pearson): exact, and no row underflows next to a huge one."""
    f = _axis_factors(np.max(np.abs(x), axis=1))
    return x if bool((f == 1.0).all()) else x * f[:, None]


def rescale_columns(x: np.ndarray) -> np.ndarray:
    """Each column of the float64 numpy ``x`` times its own power of two (see :func:`rescale`), for measures
    invariant to scaling one neuron (per-neuron Pearson, the column space CCA works in)."""
    f = _axis_factors(np.max(np.abs(x), axis=0))
    return x if bool((f == 1.0).all()) else x * f[None, :]


#: A squared distance from the Gram identity ``|a|^2 + |b|^2 - 2 a.b`` at or below this fraction of
#: ``|a|^2 + |b|^2`` is mostly rounding (the identity's error is ~eps of that sum): such pairs are recomputed.
_CANCELLATION = 2.0**20 * float(np.finfo(np.float64).eps)


def pairwise_distances(xc: Any, rows: Any = None) -> Any:
    """``(n, n)`` Euclidean distances between the rows of ``xc`` (float64, numpy or torch; zero diagonal).

    One matrix product gives ``|a|^2 + |b|^2 - 2 a.b`` for every pair; where that cancels (near-duplicate
    rows, or rows next to an outlier far from them, whose squared distance is within ~1e-10 of the
    squared norms) the pair is recomputed from the difference ``a - b`` itself, scaled by an exact power
    of two so that even a distance of 1e-300 next to norms of 1 neither cancels nor underflows. Only
    identical rows get a distance of exactly 0. Pass column-centred rows (smaller norms, fewer recomputes)
    and, as ``rows``, the uncentred ones the differences are taken from (centring next to an outlier row
    rounds the other rows' differences away; a difference of the given rows is exact).
    """
    src = xc if rows is None else rows
    torch_in = is_torch(xc)
    sq = (xc * xc).sum(1)
    scale = sq[:, None] + sq[None, :]
    d2 = scale - 2.0 * (xc @ xc.T)
    bad = d2 <= _CANCELLATION * scale
    d2 = d2.clip(min=0.0) if torch_in else np.clip(d2, 0.0, None)
    d = d2.sqrt() if torch_in else np.sqrt(d2)
    i_all: Any
    j_all: Any
    if torch_in:
        import torch

        i_all, j_all = torch.nonzero(torch.triu(bad, diagonal=1), as_tuple=True)
    else:
        i_all, j_all = np.nonzero(np.triu(bad, k=1))
    for start in range(0, int(i_all.shape[0]), 4096):
        i, j = i_all[start : start + 4096], j_all[start : start + 4096]
        diff = src[i] - src[j]
        peak = abs(diff).amax(1) if torch_in else np.max(np.abs(diff), axis=1)
        if torch_in:
            f = torch.where(peak > 0, torch.ldexp(torch.ones_like(peak), -torch.frexp(peak)[1]), 1.0)
            dij = (((diff * f[:, None]) ** 2).sum(1)).sqrt() / f
        else:
            f = np.ones_like(peak)
            nz = peak > 0
            f[nz] = np.ldexp(1.0, -np.frexp(peak[nz])[1])
            dij = np.sqrt(np.einsum("ij,ij->i", diff * f[:, None], diff * f[:, None])) / f
        d[i, j] = dij
        d[j, i] = dij
    if torch_in:
        d.fill_diagonal_(0.0)
    else:
        np.fill_diagonal(d, 0.0)
    return d
