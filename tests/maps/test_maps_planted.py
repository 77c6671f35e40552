"""Planted answers the identity cannot give: a side and its rotated twin (map = Q), and the identity control's
per-direction criterion (a one-direction reflection and a 0.5 scale fail, the identity passes)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.analysis.rotation import random_orthogonal
from interlingua.maps import get_map
from interlingua.maps.estimators import Procrustes
from interlingua.maps.evaluate import (
    IDENTITY_CONTROL_MAX_DEV,
    IDENTITY_CONTROL_MAX_DIR,
    IDENTITY_CONTROL_MIN_COS,
    MapOptions,
    direction_errors,
    evaluate_pair,
)
from interlingua.maps.planted import EXACT_TOL, planted_rotation_control, rotation_deviation


def _massive(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Rows like a residual stream: 3 massive dimensions (scale 800) over a bulk of scale 1..0.2, plus an offset."""
    scales = np.geomspace(1.0, 0.2, d)
    scales[:3] = 800.0
    return rng.standard_normal((n, d)) * scales + 2.0


def test_procrustes_and_affine_recover_q_and_ridge_its_implied_shrinkage() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 24)) * np.geomspace(5.0, 0.2, 24) + 1.0
    q = random_orthogonal(24, 3)
    rows = {r["estimator"]: r for r in planted_rotation_control(x, q, estimators=("procrustes", "affine", "ridge"))}
    for name in ("procrustes", "affine"):
        assert rows[name]["dev"] <= EXACT_TOL and rows[name]["passed"], rows[name]
        assert rows[name]["held_out_p1"] == 1.0
        # read transposed, the same map is ~sqrt(2) from Q: the error the identity control could not see
        assert rows[name]["dev_transposed"] > 1.0
    ridge = rows["ridge"]
    # ridge: ||R - Q||_F = sqrt(sum (alpha / (lambda_i + alpha))^2), lambda_i the centred Gram's eigenvalues
    xc = x - x.mean(axis=0)
    lam = np.linalg.eigvalsh(xc.T @ xc)
    want = math.sqrt(np.sum((ridge["alpha"] / (lam + ridge["alpha"])) ** 2)) / math.sqrt(24)
    assert ridge["expected_dev"] == pytest.approx(want, rel=1e-10)
    assert abs(ridge["dev"] - want) <= EXACT_TOL and ridge["passed"]
    # a fixed large penalty: the same law, now far from Q, and the control says so
    big = planted_rotation_control(x, q, estimators=(get_map("ridge", alpha=float(lam.mean())),))[0]
    assert abs(big["dev"] - big["expected_dev"]) <= EXACT_TOL and big["expected_dev"] > 0.1 and not big["passed"]


def test_procrustes_recovers_q_from_the_tiny_llama_twin_states() -> None:
    """On a real twin: states of a tiny Llama and of its twin (float64) at one layer, n_fit > width."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from interlingua.patching.twin import make_twin

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    lm = LlamaForCausalLM(cfg).double().eval()
    twin, q = make_twin(lm, seed=4)
    ids = torch.randint(0, 97, (8, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        xs = lm(input_ids=ids, output_hidden_states=True).hidden_states[1].reshape(-1, 16).numpy()
        ys = twin(input_ids=ids, output_hidden_states=True).hidden_states[1].reshape(-1, 16).numpy()
    row = planted_rotation_control(xs, q, ys, estimators=("procrustes",), tol=1e-5)[0]
    # the twin's states carry float32 rounding of RMSNorm and softmax (transformers computes them in float32)
    assert row["dev"] <= 1e-5 and row["passed"] and row["held_out_p1"] == 1.0
    assert rotation_deviation(np.eye(16), q) > 1.0  # the identity is not the answer here


def test_underdetermined_rows_do_not_pass_the_planted_control() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((10, 24))
    row = planted_rotation_control(x, random_orthogonal(24, 0), estimators=("procrustes",))[0]
    assert not row["passed"] and "span" in row["note"]


class _Reflected(Procrustes):
    """Procrustes followed by a reflection along one fixed random direction (a map wrong in one direction)."""

    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        super()._fit(x, y)
        v = np.random.default_rng(9).standard_normal(x.shape[1])
        v /= np.linalg.norm(v)
        self.coef_ = self.coef_ - 2.0 * np.outer(self.coef_ @ v, v)
        self.intercept_ = self.y_mean_ - self.x_mean_ @ self.coef_


class _Halved(Procrustes):
    def _fit(self, x: np.ndarray, y: np.ndarray) -> None:
        super()._fit(x, y)
        self.coef_ = 0.5 * self.coef_
        self.intercept_ = self.y_mean_ - self.x_mean_ @ self.coef_


def test_direction_errors_known_values() -> None:
    rng = np.random.default_rng(2)
    t = _massive(rng, 300, 40)
    t = t - t.mean(axis=0)
    assert np.max(direction_errors(t, t)) == 0.0
    np.testing.assert_allclose(direction_errors(0.5 * t, t), 0.5, rtol=1e-12)
    v = np.linalg.svd(t, full_matrices=False)[2][30]  # a reflection of one (small) principal direction: error 2
    refl = t - 2.0 * np.outer(t @ v, v)
    errs = direction_errors(refl, t)
    assert errs[30] == pytest.approx(2.0, rel=1e-8) and np.max(np.delete(errs, 30)) < 1e-8


@pytest.mark.slow
def test_identity_control_reflection_and_half_scale_fail_identity_passes() -> None:
    rng = np.random.default_rng(5)
    d = 420  # 2 / sqrt(420) = 0.098: a one-direction reflection passes ||R - I||_F / sqrt(d) <= 0.1
    a = _massive(rng, 1000, d)[None]  # 500 training rows per fold > width
    b = (a[0] @ random_orthogonal(d, 1))[None]
    rows = evaluate_pair(
        a,
        b,
        MapOptions(
            estimators=[get_map("procrustes"), _Reflected(), _Halved()],
            folds=2,
            bootstrap=0,
            residual=False,
            directions=("a->b",),
        ),
    )
    by = {type_name: r for type_name, r in zip(("identity", "reflected", "halved"), rows)}
    ok, refl, half = by["identity"], by["reflected"], by["halved"]
    assert ok["identity_control"] == "passed" and ok["identity_control_dir"] < 1e-8, ok
    # the reflection passes the two averaged criteria and fails only the per-direction one
    assert refl["identity_control_dev"] <= IDENTITY_CONTROL_MAX_DEV
    assert refl["identity_control_cos"] >= IDENTITY_CONTROL_MIN_COS
    assert refl["identity_control_dir"] > IDENTITY_CONTROL_MAX_DIR and refl["identity_control"] == "failed"
    assert half["identity_control_dir"] == pytest.approx(0.5, rel=1e-6) and half["identity_control"] == "failed"
