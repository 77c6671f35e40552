"""The rotated twin's shared definitions: the families that have one and the rotation a seed draws.

A Llama-family model and its rotated twin compute the same function with the residual stream rotated by a
Haar-random orthogonal ``Q`` (:mod:`interlingua.patching.twin` builds the twin model). Two controls rest on
that known ``Q``: patching's twin control (a map fitted from the model onto its twin must be ``Q``) and the
maps' twin control (the same check on a map row's side, without building the model). Both draw ``Q`` here, so
a map row's twin is exactly the model patching builds for the same seed.
"""

from __future__ import annotations

import numpy as np

from interlingua.core.errors import ConfigError

__all__ = ["TWIN_FAMILIES", "random_orthogonal"]

#: model types whose blocks the rotation knows (pre-norm, RMSNorm ``x * g``, no post-norms, no embedding scale)
TWIN_FAMILIES = ("llama", "mistral", "qwen2")


def random_orthogonal(d: int, seed: int) -> np.ndarray:
    """A Haar-random ``d x d`` orthogonal matrix (float64) from ``seed``: QR of a Gaussian matrix, signs fixed so
    the diagonal of R is positive (Mezzadri 2007; without the fix QR's sign convention biases the draw)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"the twin's seed must be a non-negative integer; got {seed!r}")
    if d < 1:
        raise ConfigError(f"the twin's width must be positive; got {d}")
    a = np.random.default_rng([int(seed), 0x7731]).standard_normal((d, d))
    q, r = np.linalg.qr(a)
    return q * np.sign(np.diag(r))[None, :]
