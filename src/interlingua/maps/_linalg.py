"""The two decompositions the maps use, in float64, in one place (LAPACK through SciPy)."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

__all__ = ["svd", "eigh"]


def svd(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thin SVD ``m = U diag(s) Vt`` (divide and conquer; the QR-iteration driver if it fails to converge)."""
    try:
        return sla.svd(m, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    except np.linalg.LinAlgError:  # pragma: no cover - gesdd rarely fails; gesvd is slower but robust
        return sla.svd(m, full_matrices=False, check_finite=False, lapack_driver="gesvd")


def eigh(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and orthonormal eigenvectors of a symmetric matrix (only its lower triangle is read)."""
    return sla.eigh(s, check_finite=False, driver="evd")
