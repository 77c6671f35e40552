"""Fixed arrays of several shapes for the oracle tests (imported as a plain module).

Each case is a related pair (a shared latent signal plus noise), so values sit well inside
their ranges and a convention difference shows: n < d, n > d, p != q, anisotropic columns
(scales over four decades) and a large offset (means ~100 times the spread).
"""

from __future__ import annotations

import numpy as np


def _pair(seed: int, n: int, p: int, q: int, *, scales: bool = False, offset: float = 0.0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    x = z @ rng.standard_normal((4, p)) + 0.8 * rng.standard_normal((n, p))
    y = z @ rng.standard_normal((4, q)) + 0.8 * rng.standard_normal((n, q))
    if scales:
        x = x * np.logspace(-2, 2, p)
        y = y * np.logspace(2, -2, q)
    if offset:
        x = x + offset * rng.uniform(0.5, 1.5, p)
        y = y - offset * rng.uniform(0.5, 1.5, q)
    return x, y


CASES = {
    "n<d": _pair(1, 16, 40, 30),
    "n>d": _pair(2, 90, 6, 6),
    "p!=q": _pair(3, 60, 11, 4),
    "anisotropic": _pair(4, 50, 9, 7, scales=True),
    "offset": _pair(5, 44, 5, 8, offset=100.0),
}
IDS = list(CASES)
