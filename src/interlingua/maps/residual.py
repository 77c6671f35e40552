"""Where a map's error lives: spectral summaries of the held-out residual against the target.

Conventions (all on held-out rows):

- the target ``Y`` and the residual ``E = Y - f(X)`` are each centred over
  their rows before any spectrum is taken (a constant offset is an error the
  MSE columns already count; here the question is its shape);
- singular values come from the eigenvalues of the smaller Gram matrix
  (``A^T A`` or ``A A^T``); eigenvalues below ``max(rows, cols) * eps`` times
  the largest are rounding and are set to 0;
- **effective rank** (Roy & Vetterli 2007) normalises the singular values
  themselves, not their squares: ``p_i = s_i / sum_j s_j``,
  ``erank = exp(-sum_i p_i log p_i)`` (with 0 log 0 = 0). k equal non-zero
  singular values give exactly k; one dominant direction gives ~1;
- **energy** is the squared Frobenius norm (sum of squared singular values):
  ``n_energy(f)`` is the fewest leading singular values whose squares reach
  the fraction f of the total (``resid_n50``, ``resid_n90``);
- **fraction outside the target's top-k directions**:
  ``1 - ||E_c P_k||_F^2 / ||E_c||_F^2`` with ``P_k`` the target's k leading
  right singular vectors (principal directions); k is cut to the target's
  width when smaller;
- **relative residual norm**: ``||E_c||_F / ||Y_c||_F``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla

from interlingua.maps._checks import as_matrix
from interlingua.maps.errors import MapInputError

__all__ = [
    "effective_rank",
    "energy_count",
    "fraction_outside",
    "spectrum",
    "TargetSpectrum",
    "target_spectrum",
    "residual_analysis",
]

_EPS = np.finfo(np.float64).eps


def effective_rank(singular_values: Any) -> float:
    """``exp`` of the entropy of ``s / sum(s)`` (singular values, not their squares); nan when all are 0."""
    s = np.asarray(singular_values, dtype=np.float64).ravel()
    if s.size == 0 or np.any(s < 0) or not np.all(np.isfinite(s)):
        raise MapInputError("effective_rank needs finite, non-negative singular values.")
    total = s.sum()
    if total <= 0:
        return math.nan
    p = s[s > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


def energy_count(singular_values: Any, fraction: float) -> int:
    """Fewest leading singular values whose squares reach ``fraction`` of the total energy (0 if there is none).

    Values are sorted in decreasing order first. A relative slack of 1e-12
    absorbs the rounding of the cumulative sum, so k equal values reach half
    the energy at exactly ``ceil(k / 2)``.
    """
    if not 0.0 < fraction <= 1.0:
        raise MapInputError(f"fraction must lie in (0, 1]; got {fraction!r}.")
    e = np.sort(np.asarray(singular_values, dtype=np.float64).ravel())[::-1] ** 2
    total = e.sum()
    if total <= 0:
        return 0
    cum = np.cumsum(e)
    return int(np.searchsorted(cum, fraction * total * (1.0 - 1e-12)) + 1)


def _centred(a: np.ndarray) -> np.ndarray:
    return a - a.mean(axis=0)


def spectrum(a: Any, *, centre: bool = True) -> np.ndarray:
    """Singular values (decreasing) of ``a`` (centred over rows by default), from the smaller Gram's eigenvalues."""
    x = as_matrix(a, "matrix")
    if centre:
        x = _centred(x)
    g = x.T @ x if x.shape[1] <= x.shape[0] else x @ x.T
    lam = sla.eigvalsh(g, check_finite=False)[::-1]
    cut = max(x.shape) * _EPS * max(float(lam[0]), 0.0)
    lam = np.where(lam > cut, lam, 0.0)
    return np.sqrt(lam)


@dataclass(frozen=True, eq=False)
class TargetSpectrum:
    """A centred target's singular values, principal directions (columns, decreasing) and squared norm."""

    singular_values: np.ndarray
    directions: np.ndarray
    sq_norm: float


def target_spectrum(Y: Any) -> TargetSpectrum:
    """Spectrum and right singular vectors of the centred target (eigendecomposition of ``Y_c^T Y_c``)."""
    y = _centred(as_matrix(Y, "target"))
    lam, vecs = sla.eigh(y.T @ y, check_finite=False)
    lam, vecs = lam[::-1], vecs[:, ::-1]
    cut = max(y.shape) * _EPS * max(float(lam[0]), 0.0)
    lam = np.where(lam > cut, lam, 0.0)
    return TargetSpectrum(np.sqrt(lam), np.ascontiguousarray(vecs), float(np.einsum("ij,ij->", y, y)))


def fraction_outside(residual: Any, directions: np.ndarray, k: int) -> float:
    """Share of the (centred) residual's energy outside the span of the first k columns of ``directions``."""
    e = _centred(as_matrix(residual, "residual"))
    total = float(np.einsum("ij,ij->", e, e))
    if total <= 0:
        return math.nan
    k = min(int(k), directions.shape[1])
    proj = e @ directions[:, :k]
    return float(max(0.0, 1.0 - float(np.einsum("ij,ij->", proj, proj)) / total))


def residual_analysis(
    target: Any,
    mapped: Any,
    *,
    ks: Sequence[int] = (10, 50),
    fractions: Sequence[float] = (0.5, 0.9),
    target_spec: TargetSpectrum | None = None,
) -> dict[str, float]:
    """Spectral summaries of ``E = target - mapped`` on held-out rows (see the module docstring).

    Returns ``target_erank``, ``resid_erank``, ``resid_n50`` / ``resid_n90``
    (for the default fractions), ``resid_out10`` / ``resid_out50`` (for the
    default ks) and ``resid_rel_norm``. ``target_spec`` reuses a
    :func:`target_spectrum` of the same target (several maps, one target).
    """
    y = as_matrix(target, "target")
    f = as_matrix(mapped, "mapped")
    if y.shape != f.shape:
        raise MapInputError(f"target {y.shape} and mapped {f.shape} must have the same shape.")
    ts = target_spec if target_spec is not None else target_spectrum(y)
    e = y - f
    es = spectrum(e)
    e_c = _centred(e)
    e_sq = float(np.einsum("ij,ij->", e_c, e_c))
    out: dict[str, float] = {
        "target_erank": effective_rank(ts.singular_values),
        "resid_erank": effective_rank(es),
    }
    for frac in fractions:
        out[f"resid_n{int(round(frac * 100))}"] = energy_count(es, frac)
    for k in ks:
        out[f"resid_out{k}"] = fraction_outside(e, ts.directions, k)
    out["resid_rel_norm"] = math.sqrt(e_sq / ts.sq_norm) if ts.sq_norm > 0 else math.nan
    return out
