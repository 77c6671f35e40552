"""The planted-correspondence control: a permuted noisy copy whose partners correlate at a known rho."""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.transport import TransportError
from interlingua.transport.controls import Controls, planted_copy, planted_recovery


def test_planted_partners_correlate_at_rho() -> None:
    x = np.random.default_rng(0).standard_normal((40000, 5)) * [1.0, 3.0, 0.1, 10.0, 2.0] + 4.0
    for rho in (0.3, 0.1):
        copy, partner = planted_copy(x, rho, seed=1)
        for a in range(5):
            r = np.corrcoef(x[:, a], copy[:, partner[a]])[0, 1]
            assert r == pytest.approx(rho, abs=0.02)  # 4 standard errors at N = 40000
        # a permutation: every target unit has exactly one partner, and the copy is not the identity order
        assert sorted(partner) == list(range(5))
    with pytest.raises(TransportError, match=r"\(0, 1\]"):
        planted_copy(x, 0.0)


def test_recovery_grows_with_rho_and_the_probe_size() -> None:
    """At 128 units: a strong planted partner is found from 128 probes, a weak one only from many more."""
    rng = np.random.default_rng(0)
    small, large = rng.standard_normal((128, 128)), rng.standard_normal((1024, 128))
    assert planted_recovery(small, 0.9, 0.01) == 1.0
    weak_small = planted_recovery(small, 0.1, 0.01)
    weak_large = planted_recovery(large, 0.1, 0.01)
    assert weak_small < 0.5 < weak_large  # 128 probes cannot find rho = 0.1; 1024 mostly can
    assert planted_recovery(large, 0.3, 0.01) >= 0.95


def test_planted_found_is_the_weakest_level_recovered() -> None:
    c = Controls(0, 0, {}, {}, {}, planted={"mlp": {0.3: 0.9, 0.2: 0.55, 0.1: 0.04}, "residual": {0.3: 0.2}})
    assert c.planted_found("mlp") == 0.2
    assert math.isnan(c.planted_found("residual")) and math.isnan(c.planted_found("attn"))
    cols = c.columns()
    assert cols["planted_recovery_mlp"] == "0.3: 0.90 / 0.2: 0.55 / 0.1: 0.04" and cols["planted_found_mlp"] == 0.2
