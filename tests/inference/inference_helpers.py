"""Independent reference computations and data generators for the inference tests.

The references are written the slow, textbook way (explicit centring matrix H,
Song et al.'s unbiased HSIC formula term by term), so they share no code with
the library's Gram gathers.
"""

from __future__ import annotations

import numpy as np


def ref_cka(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA from the definitions: biased via H K H, debiased via Song et al. (2012) eq. 5."""
    n = X.shape[0]
    K = X @ X.T
    L = Y @ Y.T
    if not debiased:
        H = np.eye(n) - np.ones((n, n)) / n

        def hsic(A: np.ndarray, B: np.ndarray) -> float:
            return float(np.trace(A @ H @ B @ H))

    else:

        def hsic(A: np.ndarray, B: np.ndarray) -> float:
            A = A - np.diag(np.diag(A))
            B = B - np.diag(np.diag(B))
            one = np.ones(n)
            t1 = np.trace(A @ B)
            t2 = (one @ A @ one) * (one @ B @ one) / ((n - 1) * (n - 2))
            t3 = 2.0 / (n - 2) * (one @ A @ B @ one)
            return float((t1 + t2 - t3) / (n * (n - 3)))

    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def null_pair(rng: np.random.Generator, n: int, p: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    """Independent Gaussian X, Y: the null hypothesis of every permutation test holds exactly."""
    return rng.standard_normal((n, p)), rng.standard_normal((n, q))


def signal_pair(rng: np.random.Generator, n: int, p: int, q: int, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Y = X W + noise: rows are genuinely paired."""
    X = rng.standard_normal((n, p))
    return X, X @ rng.standard_normal((p, q)) + noise * rng.standard_normal((n, q))


def correlated_layers(
    rng: np.random.Generator, n_layers: int, n: int, width: int, rank: int = 8
) -> tuple[np.ndarray, np.ndarray]:
    """Two stacks of layers sharing a low-rank latent, strength varying with depth."""
    Z = rng.standard_normal((n, rank))
    a = np.stack(
        [
            Z @ rng.standard_normal((rank, width)) * (k + 1) / n_layers + rng.standard_normal((n, width))
            for k in range(n_layers)
        ]
    )
    b = np.stack(
        [
            Z @ rng.standard_normal((rank, width)) * (n_layers - k) / n_layers + rng.standard_normal((n, width))
            for k in range(n_layers)
        ]
    )
    return a, b
