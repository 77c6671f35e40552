"""Data and transforms shared by the measure tests (imported as a plain module)."""

from __future__ import annotations

import numpy as np

from interlingua.analysis.measures import get_measure
from interlingua.testing.measures import random_map

#: a random map of an invariance class, as the public battery draws it (the same draws for the same rng)
transform = random_map


def related_pair(rng: np.random.Generator, n: int = 40, p: int = 6, q: int = 5, noise: float = 0.7):
    """X (n x p) and Y (n x q) sharing a 3-dimensional latent signal, plus independent noise, with
    uneven column scales and non-zero means so that no transform is accidentally harmless."""
    z = rng.standard_normal((n, 3))
    x = z @ rng.standard_normal((3, p)) + noise * rng.standard_normal((n, p))
    y = z @ rng.standard_normal((3, q)) + noise * rng.standard_normal((n, q))
    x = x * rng.uniform(0.5, 2.0, p) + rng.normal(0, 2, p)
    y = y * rng.uniform(0.5, 2.0, q) + rng.normal(0, 2, q)
    return x, y


def random_orthogonal(rng: np.random.Generator, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def call(measure_id: str, x, y, **kw) -> float:
    """Call a registered measure, confirming same_model for measures that need it."""
    m = get_measure(measure_id)
    if m.metadata.requires_same_model:
        kw.setdefault("same_model", True)
    return m(x, y, **kw)


def pair_for(measure_id: str, rng: np.random.Generator, n: int = 40, p: int = 6, q: int = 5):
    """A related pair with shapes the measure accepts (equal widths where required, n >= min_n + 5)."""
    meta = get_measure(measure_id).metadata
    n = max(n, meta.min_n + 5)
    if meta.requires_same_model:
        # two states of one model: a shared neuron basis, Y a noisy, rescaled copy of X
        x, _ = related_pair(rng, n=n, p=p, q=p)
        return x, 0.5 * x + rng.standard_normal(x.shape) * x.std(0) + 1.0
    return related_pair(rng, n=n, p=p, q=q)
