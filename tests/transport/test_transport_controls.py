"""The correspondence controls: a self-plan is the identity, half-split stability against its chance level."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from interlingua.transport import TransportError, TransportWarning
from interlingua.transport.controls import (
    SELF_MATCH_THRESHOLD,
    Controls,
    half_split,
    plan_stability,
    self_plan_control,
    self_plan_stats,
    topk_overlap,
    topk_overlap_chance,
    transport_controls,
)
from interlingua.transport.correspond import ProbeActivations, correlation_cost
from interlingua.transport.plans import PlanOptions, transport_plans

EPS = {"mlp": 0.02, "attn": 0.02, "residual": 0.02, "layer": 0.01}
EPS2 = {"mlp": 0.02, "residual": 0.02, "layer": 0.01}  # the synthetic sets have no attn


def _acts(layers: dict[str, list[np.ndarray]]) -> ProbeActivations:
    n = len(next(iter(layers.values()))[0])
    return ProbeActivations("synthetic", n, "", layers, np.ones(n, dtype=np.int64), ())


def test_the_exact_self_plan_is_the_identity_and_a_small_epsilon_approaches_it():
    import ot

    x = np.random.default_rng(0).normal(size=(120, 40))
    cost, _ = correlation_cost(x, x)
    n = cost.shape[0]
    exact = ot.emd(np.full(n, 1 / n), np.full(n, 1 / n), cost)
    np.testing.assert_allclose(exact, np.eye(n) / n, atol=1e-15)
    assert self_plan_stats(exact) == (1.0, 1.0)
    match, diag = self_plan_control(x, 0.01)
    assert match == 1.0 and diag > 0.999
    # a larger epsilon blurs the diagonal mass (self_diag) before it moves any argmax (self_match)
    blurred = self_plan_control(x, 1.0)
    assert blurred[0] == 1.0 and blurred[1] < 0.5


def test_a_planted_permutation_is_stable_and_its_chance_is_one_over_the_units():
    rng = np.random.default_rng(1)
    units = 100
    x = rng.normal(size=(200, units))
    perm = rng.permutation(units)
    y = x[:, perm] + 0.1 * rng.normal(size=x.shape)  # donor unit b carries target unit perm[b]
    stability, chance = plan_stability(x, y, 0.01)
    assert stability == 1.0
    assert chance == pytest.approx(1 / units)  # each half's argmaxes are a permutation: sum_b 1 * 1 / n^2


def test_random_independent_activations_are_as_stable_as_chance():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(200, 150)), rng.normal(size=(200, 150))
    stability, chance = plan_stability(x, y, 0.01)
    assert 0 < chance < 0.03
    assert abs(stability - chance) < 0.03


def test_the_chance_level_is_the_mean_over_row_permutations():
    rng = np.random.default_rng(3)
    a = rng.dirichlet(np.full(12, 0.3), size=30)
    b = rng.dirichlet(np.full(12, 0.3), size=30)
    for k in (1, 3):
        draws = [topk_overlap(a, b[rng.permutation(30)], k) for _ in range(20000)]
        assert np.mean(draws) == pytest.approx(topk_overlap_chance(a, b, k), abs=0.005)
    assert topk_overlap(a, a, 3) == 1.0


def test_the_halves_are_disjoint_and_cover_the_probe():
    first, second = half_split(41)
    assert not set(first) & set(second) and sorted([*first, *second]) == list(range(41))
    with pytest.raises(TransportError, match="per half"):
        plan_stability(np.ones((15, 4)), np.ones((15, 4)), 0.02)
    with pytest.raises(TransportError, match="stability_k"):
        topk_overlap(np.eye(4), np.eye(4), 0)


@pytest.mark.parametrize(
    "activations",
    [
        np.ones((50, 30)),  # constant units: no correlation, a uniform self-plan
        np.repeat(np.random.default_rng(4).normal(size=(50, 20)), 3, axis=1),  # every unit three times
    ],
    ids=["constant", "duplicated"],
)
def test_a_failing_self_plan_is_flagged_with_the_warning_and_the_note(activations):
    match, _ = self_plan_control(activations, 0.02)
    assert match < SELF_MATCH_THRESHOLD
    rng = np.random.default_rng(5)
    good = rng.normal(size=(50, 16))
    target = _acts({"mlp": [good, activations, good], "residual": [good, good, good]})
    donor = _acts({"mlp": [rng.normal(size=(50, 24))] * 2, "residual": [rng.normal(size=(50, 24))] * 2})
    plans = transport_plans(
        target, donor, PlanOptions(epsilon=EPS2, m=1, interfaces=("mlp", "residual"), marginal_tol=1e-4)
    )
    controls = transport_controls(target, donor, plans)
    assert controls.target_block == 1 and controls.verdict == "failed" and controls.failing == ["mlp"]
    assert controls.self_match["residual"] == 1.0
    note = controls.note()
    assert "self-plan control FAILED" in note and "mlp" in note
    row = controls.columns()
    assert row["self_control"] == "failed" and row["self_match_mlp"] == match and np.isnan(row["self_match_attn"])
    with pytest.warns(TransportWarning, match="self-plan control FAILED"):
        controls.warn("t", "d")


@pytest.mark.slow
def test_a_passing_control_is_silent_and_the_report_leads_with_its_verdict(tmp_path):
    from interlingua.core.schema import result_table
    from interlingua.transport.evaluate import FUSION_COLUMNS
    from interlingua.transport.report import transport_section

    rng = np.random.default_rng(6)
    x = rng.normal(size=(60, 20))
    target = _acts({"mlp": [x, x + 0.01 * rng.normal(size=x.shape)], "residual": [x, x]})
    donor = _acts({"mlp": [x[:, ::-1].copy()] * 2, "residual": [x[:, ::-1].copy()] * 2})
    plans = transport_plans(
        target, donor, PlanOptions(epsilon=EPS2, m=1, interfaces=("mlp", "residual"), marginal_tol=1e-4)
    )
    controls = transport_controls(target, donor, plans)
    assert controls.verdict == "passed" and controls.note() == ""
    assert controls.stability["mlp"] == 1.0 and controls.stability_chance["mlp"] == pytest.approx(1 / 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        controls.warn()
    row = {"target": "t", "donor": "d", "language": "x", "alpha": 0.0, "nll_target": 1.0, "nll_ot": 1.0}
    row = {**row, "nll_shuffled": 1.0, **controls.columns()}
    md = "\n".join(transport_section(result_table([row], FUSION_COLUMNS), tmp_path))
    assert md.index("Self-plan control **passed** for t <- d") < md.index("The donor's MLP")
    failed = Controls(1, 0, {"mlp": 0.02}, {"mlp": 0.4}, {"mlp": 0.3})
    md = "\n".join(transport_section(result_table([{**row, **failed.columns()}], FUSION_COLUMNS), tmp_path))
    assert "**SELF-PLAN CONTROL FAILED** for t <- d" in md and "self_match 0.400" in md
    off = {**row, "self_control": ""}  # transport.controls: false
    md = "\n".join(transport_section(result_table([off], FUSION_COLUMNS), tmp_path))
    assert "controls were not run" in md


def test_the_controls_of_a_permuted_copy_of_a_model(gpt2_a, gpt2_a_permuted, probe):
    """A real model against its MLP-permuted copy: the self-plan passes and the plans are stable across halves."""
    from interlingua.transport.fuse import load_transport_model, model_activations

    at = model_activations(load_transport_model(gpt2_a, label="a"), probe["eng"])
    dt = model_activations(load_transport_model(gpt2_a_permuted, label="p"), probe["eng"])
    plans = transport_plans(at, dt, PlanOptions(epsilon=EPS, m=1, marginal_tol=1e-4, max_iter=3000))
    controls = transport_controls(at, dt, plans)
    assert controls.verdict == "passed" and (controls.target_block, controls.donor_block) == (1, 1)
    for f in ("mlp", "attn", "residual"):
        assert controls.stability[f] >= 0.9 > 0.2 > controls.stability_chance[f]
