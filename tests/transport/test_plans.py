"""Plans: Sinkhorn (plain and log domain), rescaling, epsilon calibration, the layer OT, the cache, the control."""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.core.errors import InterlinguaError
from interlingua.transport import TransportError
from interlingua.transport.correspond import MIN_PROBE_SENTENCES, ProbeActivations, correlation_cost
from interlingua.transport.plans import (
    EPSILON_GRID,
    PLAIN_DOMAIN_LIMIT,
    PUBLISHED_EPSILON,
    EntropicPlan,
    PlanOptions,
    calibrate_epsilon,
    exact_cost,
    plain_domain_ok,
    plan_diagnostics,
    plan_from_scalings,
    row_stochastic,
    sinkhorn_plan,
    top_m,
    transport_plans,
)


def _costs(n: int, m: int, seed: int = 0, samples: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, n))
    y = 0.8 * x[:, rng.integers(0, n, m)] + rng.standard_normal((samples, m))
    return correlation_cost(x, y)[0]


def test_error_class_is_an_interlingua_value_error():
    assert issubclass(TransportError, InterlinguaError) and issubclass(TransportError, ValueError)


def test_sinkhorn_log_plan_is_rectangular_and_meets_its_marginals():
    cost = _costs(24, 37)
    plan = sinkhorn_plan(cost, 0.05, marginal_tol=1e-8)
    q = plan.coupling
    assert q.shape == (24, 37)
    assert plan.converged
    np.testing.assert_allclose(q.sum(axis=1), 1 / 24, rtol=1e-9)
    np.testing.assert_allclose(q.sum(axis=0), 1 / 37, rtol=1e-6)
    assert q.sum() == pytest.approx(1.0, abs=1e-9)


def test_the_solver_is_pot_log_domain_sinkhorn():
    import ot

    cost = _costs(10, 14, seed=3)
    ours = sinkhorn_plan(cost, 0.05, marginal_tol=1e-10).coupling
    theirs = ot.sinkhorn(
        np.full(10, 0.1), np.full(14, 1 / 14), cost, 0.05, method="sinkhorn_log", numItermax=100_000, stopThr=1e-12
    )
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-12)


def test_the_torch_backend_gives_the_numpy_plan():
    pytest.importorskip("torch")
    cost = _costs(9, 13, seed=12)
    ours = sinkhorn_plan(cost, 0.05, marginal_tol=1e-9)
    torch_cpu = sinkhorn_plan(cost, 0.05, marginal_tol=1e-9, device="cpu")
    assert isinstance(torch_cpu.coupling, np.ndarray) and torch_cpu.iterations == ours.iterations
    np.testing.assert_allclose(torch_cpu.coupling, ours.coupling, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("shape", [(24, 37), (37, 24), (16, 16)])
def test_rescaled_plans_are_row_stochastic(shape):
    plan = sinkhorn_plan(_costs(*shape, seed=1), 0.02, max_iter=3000)
    n, m = shape
    phi, psi = plan.phi(), plan.psi()
    assert phi.shape == (n, m) and psi.shape == (m, n)
    np.testing.assert_allclose(phi.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(psi.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    # phi = n Q and psi = m Q^T up to Sinkhorn's marginal error
    tol = 2 * plan.marginal_error() + 1e-9
    np.testing.assert_allclose(phi, n * plan.coupling, rtol=tol)
    np.testing.assert_allclose(psi, m * plan.coupling.T, rtol=tol)
    rows = np.array([0, 3, 5])
    np.testing.assert_allclose(plan.phi_rows(rows), phi[rows])
    np.testing.assert_allclose(plan.psi_cols(rows), psi[:, rows])
    if n == m:
        np.testing.assert_allclose(psi, phi.T, rtol=2 * tol)


def test_row_stochastic_refuses_an_empty_row():
    with pytest.raises(TransportError, match="no mass"):
        row_stochastic(np.array([[0.5, 0.5], [0.0, 0.0]]))


@pytest.mark.slow
def test_small_epsilon_approaches_the_emd_plan():
    import ot

    cost = _costs(12, 18, seed=2)
    emd = exact_cost(cost)
    q_emd = ot.emd(np.full(12, 1 / 12), np.full(18, 1 / 18), cost)
    assert emd == pytest.approx(float((q_emd * cost).sum()))
    ratios, gaps = [], []
    for eps in (0.1, 0.01, 0.002):
        plan = sinkhorn_plan(cost, eps, max_iter=200_000, marginal_tol=1e-8)
        ratios.append(plan_diagnostics(plan, cost, emd)["cost_ratio"])
        gaps.append(np.abs(plan.coupling - q_emd).sum())
    assert ratios[0] > ratios[1] > ratios[2] >= 1.0 - 1e-12
    assert ratios[2] == pytest.approx(1.0, abs=2e-3)
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.1  # total variation to the EMD plan


def test_identity_costs_concentrate_the_plan_on_the_diagonal():
    rng = np.random.default_rng(4)
    cost = 0.3 + rng.random((20, 20))
    np.fill_diagonal(cost, 0.0)
    plan = sinkhorn_plan(cost, 0.02, max_iter=2000)
    phi = plan.phi()
    assert (phi.argmax(axis=1) == np.arange(20)).all()
    assert np.trace(phi) / 20 > 0.99
    diag = plan_diagnostics(plan, cost, exact_cost(cost))
    assert diag["emd"] == pytest.approx(0.0, abs=1e-12)
    assert math.isnan(diag["cost_ratio"])  # undefined at a zero optimum
    assert diag["row_max_over_uniform"] > 0.99 * 20 and diag["entropy"] < 0.05


def test_diagnostics_of_the_uniform_coupling():
    cost = _costs(8, 10, seed=5)
    uniform = EntropicPlan(np.full((8, 10), 1 / 80), 1.0)
    diag = plan_diagnostics(uniform, cost, exact_cost(cost))
    assert diag["row_max_over_uniform"] == pytest.approx(1.0)
    assert diag["entropy"] == pytest.approx(1.0)
    assert diag["excess"] == pytest.approx(1.0)
    assert diag["cost"] == pytest.approx(cost.mean())


def test_calibration_takes_the_largest_epsilon_within_tolerance_and_reports_the_published_one():
    cost = _costs(30, 40, seed=6)
    cal = calibrate_epsilon(cost, tolerance=0.01)
    assert cal.calibrated and not cal.fixed
    tried = [r["epsilon"] for r in cal.rows]
    assert tried == sorted(tried, reverse=True) and tried[0] == PUBLISHED_EPSILON
    assert tried[-1] == cal.epsilon
    chosen = cal.rows[-1]
    assert chosen["cost"] <= 1.01 * cal.emd and chosen["excess"] <= 0.05
    for row in cal.rows[:-1]:  # every larger epsilon failed a criterion
        assert row["cost"] > 1.01 * cal.emd or row["excess"] > 0.05
    published = cal.at(PUBLISHED_EPSILON)
    assert published["row_max_over_uniform"] < chosen["row_max_over_uniform"]


def test_calibration_of_a_low_contrast_cost_is_not_a_near_uniform_plan():
    rng = np.random.default_rng(7)
    cost = 1.0 + 0.01 * rng.random((6, 9))  # every entry within 1%: the cost ratio alone is met at any epsilon
    cal = calibrate_epsilon(cost)
    assert cal.rows[0]["cost_ratio"] < 1.01  # the published epsilon meets the ratio ...
    assert cal.rows[0]["excess"] > 0.05  # ... on a plan that is nearly the uniform coupling
    assert cal.epsilon < PUBLISHED_EPSILON


def test_calibration_without_a_qualifying_epsilon_says_so():
    cost = _costs(10, 10, seed=8)
    cal = calibrate_epsilon(cost, grid=(0.5, 0.3), tolerance=1e-6)
    assert not cal.calibrated and cal.epsilon == 0.3


@pytest.mark.parametrize("bad", [0, -0.1, math.nan, math.inf, True, "small"])
def test_bad_epsilon_is_refused(bad):
    with pytest.raises(TransportError, match="epsilon"):
        sinkhorn_plan(_costs(4, 5), bad)


def test_top_m_keeps_m_blocks_per_row_renormalised():
    p = np.array([[0.1, 0.3, 0.3, 0.05], [0.4, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.2]])
    eff = top_m(p, 2)
    np.testing.assert_allclose(eff.sum(axis=1), 1.0)
    assert ((eff > 0).sum(axis=1) <= 2).all()
    np.testing.assert_allclose(eff[0], [0, 0.5, 0.5, 0])  # the two 0.3s; 0.1 dropped
    np.testing.assert_allclose(eff[1], [1, 0, 0, 0])
    np.testing.assert_allclose(top_m(p, 10).sum(axis=1), 1.0)


def test_correlation_cost_is_one_minus_pearson_with_constant_units_at_one():
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((30, 5)), rng.standard_normal((30, 4))
    y[:, 1] = 2.5  # constant
    cost, info = correlation_cost(x, y)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref = 1 - np.corrcoef(x.T, y.T)[:5, 5:]
    ok = np.ones(4, bool)
    ok[1] = False
    np.testing.assert_allclose(cost[:, ok], ref[:, ok], atol=1e-12)
    np.testing.assert_allclose(cost[:, 1], 1.0)
    assert (info.constant_target, info.constant_donor) == (0, 1)
    assert cost.min() >= 0 and cost.max() <= 2


def test_correlation_cost_input_errors():
    with pytest.raises(TransportError, match="parallel"):
        correlation_cost(np.zeros((20, 3)), np.zeros((21, 3)))
    with pytest.raises(TransportError, match="at least"):
        correlation_cost(np.ones((MIN_PROBE_SENTENCES - 1, 3)), np.ones((MIN_PROBE_SENTENCES - 1, 3)))


def _acts(layers: list[np.ndarray], residual: list[np.ndarray]) -> ProbeActivations:
    n = layers[0].shape[0]
    return ProbeActivations("synthetic", n, "x", {"mlp": layers, "residual": residual}, np.ones(n, np.int64), ())


def test_transport_plans_on_synthetic_activations_shapes_weights_and_the_shuffled_control():
    rng = np.random.default_rng(10)
    n = 50
    t_mlp = [rng.standard_normal((n, 12)) for _ in range(3)]
    t_res = [rng.standard_normal((n, 6)) for _ in range(3)]
    d_mlp = [np.c_[t[:, ::-1], rng.standard_normal((n, 4))] for t in t_mlp[:2]]  # 16 units, 2 blocks
    d_res = [np.c_[t, rng.standard_normal((n, 3))] for t in t_res[:2]]  # 9 units
    plans = transport_plans(
        _acts(t_mlp, t_res),
        _acts(d_mlp, d_res),
        PlanOptions(interfaces=("mlp", "residual"), m=2, epsilon={"layer": 0.01}, seed=3),
    )
    assert plans.layer_weights.shape == (3, 2)
    np.testing.assert_allclose(plans.layer_weights.sum(axis=1), 1.0)
    assert set(plans.epsilon) == {"mlp", "residual", "layer"} and plans.epsilon["layer"] == 0.01
    assert plans.calibration["layer"].fixed and plans.calibration["mlp"].calibrated
    for pp in plans.pairs.values():
        assert pp.plans["mlp"].shape == (12, 16) and pp.plans["residual"].shape == (6, 9)
        np.testing.assert_allclose(pp.plans["mlp"].phi().sum(axis=1), 1.0, atol=1e-9)
    # the learned correspondence: target unit a <-> donor unit 11 - a in the matched block
    phi = plans.pairs[(0, 0)].plans["mlp"].phi()
    assert (phi.argmax(axis=1) == np.arange(11, -1, -1)).all()
    assert plans.kept(0)[0][0] == 0 and plans.kept(1)[0][0] == 1

    control = plans.shuffled()
    assert control.control == "shuffled" and plans.control == "ot"
    np.testing.assert_array_equal(control.layer_weights, plans.layer_weights)
    for key, pp in plans.pairs.items():
        for iface, plan in pp.plans.items():
            q, qs = plan.coupling, control.pairs[key].plans[iface].coupling
            assert not np.array_equal(q, qs)
            # the same multiset of rows: every shuffled row is one of the plan's rows, each used once
            order = np.lexsort(q.T[::-1])
            order_s = np.lexsort(qs.T[::-1])
            np.testing.assert_array_equal(q[order], qs[order_s])
            np.testing.assert_allclose(qs.sum(axis=0), q.sum(axis=0))
    again = plans.shuffled()
    np.testing.assert_array_equal(
        again.pairs[(0, 0)].plans["mlp"].coupling, control.pairs[(0, 0)].plans["mlp"].coupling
    )
    other = plans.shuffled(seed=99)
    assert not np.array_equal(other.pairs[(0, 0)].plans["mlp"].coupling, control.pairs[(0, 0)].plans["mlp"].coupling)
    table = plans.diagnostics_table()
    assert set(table["interface"]) == {"mlp", "residual", "layer"}
    summary = plans.summary()
    assert summary["mlp"]["row_max_over_uniform"] > summary["mlp"]["published_row_max_over_uniform"]


def test_transport_plans_input_errors():
    rng = np.random.default_rng(11)
    a = _acts([rng.standard_normal((20, 4))], [rng.standard_normal((20, 3))])
    b = _acts([rng.standard_normal((25, 4))], [rng.standard_normal((25, 3))])
    with pytest.raises(TransportError, match="probe sentences"):
        transport_plans(a, b, PlanOptions(interfaces=("mlp", "residual")))
    with pytest.raises(TransportError, match="no shared interface"):
        transport_plans(a, a, PlanOptions(interfaces=("attn", "residual")))
    with pytest.raises(TransportError, match="m "):
        transport_plans(a, a, PlanOptions(interfaces=("mlp", "residual"), m=0))
    with pytest.raises(TransportError, match="epsilon has keys"):
        transport_plans(a, a, PlanOptions(interfaces=("mlp", "residual"), epsilon={"qkv": 0.1}))
    assert EPSILON_GRID[0] == PUBLISHED_EPSILON


# ---------------------------------------------------------------------- the fast path and the cache
@pytest.mark.parametrize(
    ("shape", "eps", "seed"),
    [  # fast: the first two shapes; the full suite: all five
        ((24, 37), 0.05, 0),
        ((37, 24), 0.02, 1),
        *(
            pytest.param(*c, marks=pytest.mark.slow)
            for c in (((16, 16), 0.05, 2), ((60, 45), 0.01, 3), ((9, 200), 0.02, 4))
        ),
    ],
)
def test_the_plain_domain_path_equals_pot_log_domain_sinkhorn(shape, eps, seed):
    import ot

    cost = _costs(*shape, seed=seed)
    n, m = shape
    fast = sinkhorn_plan(cost, eps, max_iter=20_000, marginal_tol=1e-7)
    assert fast.method == "plain" and fast.converged
    log = sinkhorn_plan(cost, eps, max_iter=20_000, marginal_tol=1e-7, method="log")
    assert log.method == "log" and fast.iterations == log.iterations and log.converged
    theirs = ot.sinkhorn(
        np.full(n, 1 / n),
        np.full(m, 1 / m),
        cost,
        eps,
        method="sinkhorn_log",
        numItermax=20_000,
        stopThr=1e-7 / math.sqrt(m),
    )
    np.testing.assert_allclose(log.coupling, theirs, rtol=0, atol=0)  # "log" is POT's solver, untouched
    np.testing.assert_allclose(fast.coupling, theirs, rtol=1e-9, atol=0)  # every entry, relative
    np.testing.assert_allclose(fast.phi().sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.psi().sum(axis=1), 1.0, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_a_column_shift_of_the_cost_leaves_the_plan_and_the_iterations_unchanged():
    rng = np.random.default_rng(13)
    cost = _costs(20, 30, seed=13)
    shifted = cost + rng.uniform(-3, 3, size=(1, 30))  # constant per column: the same OT problem
    a = sinkhorn_plan(cost, 0.02, marginal_tol=1e-8, method="log")
    b = sinkhorn_plan(shifted, 0.02, marginal_tol=1e-8, method="plain")
    assert a.iterations == b.iterations
    np.testing.assert_allclose(b.coupling, a.coupling, rtol=1e-9, atol=0)


@pytest.mark.slow
def test_the_log_domain_is_used_where_the_kernel_would_underflow():
    cost = _costs(12, 15, seed=14)
    spread = float((cost - cost.min(axis=0)).max())
    assert plain_domain_ok(cost, spread / PLAIN_DOMAIN_LIMIT)
    assert not plain_domain_ok(cost, 0.5 * spread / PLAIN_DOMAIN_LIMIT)
    eps = 0.2 * spread / PLAIN_DOMAIN_LIMIT  # exp(-1000) is 0 in float64: the scaling Sinkhorn would fail
    plan = sinkhorn_plan(cost, eps, max_iter=200_000, marginal_tol=1e-6)
    assert plan.method == "log" and np.isfinite(plan.coupling).all()
    np.testing.assert_allclose(plan.phi().sum(axis=1), 1.0, atol=1e-12)


def test_a_plan_rebuilt_from_its_scalings_is_the_solved_plan():
    cost = _costs(25, 18, seed=15)
    for method, eps in (("plain", 0.02), ("log", 0.02)):
        plan = sinkhorn_plan(cost, eps, method=method)
        again = plan_from_scalings(cost, eps, plan.method, plan.scalings)
        np.testing.assert_array_equal(again.coupling, plan.coupling)
    with pytest.raises(TransportError, match="do not fit"):
        plan_from_scalings(cost, 0.02, "plain", (np.ones(3), np.ones(18)))


def _planted(n: int, blocks_t: int, blocks_d: int, width_t: int, width_d: int, match: list[int], seed: int):
    """Blocks whose units mix a few latent signals: target block i shares donor block match[i]'s latents."""
    rng = np.random.default_rng(seed)
    latents = [rng.standard_normal((n, 6)) for _ in range(blocks_d)]

    def block(z: np.ndarray, width: int) -> np.ndarray:
        return z @ rng.standard_normal((6, width)) + 0.5 * rng.standard_normal((n, width))

    donor = [block(latents[j], width_d) for j in range(blocks_d)]
    target = [block(latents[match[i]], width_t) for i in range(blocks_t)]
    res_t = [block(latents[match[i]], 20) for i in range(blocks_t)]
    res_d = [block(latents[j], 16) for j in range(blocks_d)]
    return _acts(target, res_t), _acts(donor, res_d)


@pytest.mark.slow
def test_the_subsampled_layer_pass_selects_the_layers_of_the_full_one():
    match = [3, 0, 4, 1]
    target, donor = _planted(80, 4, 5, 300, 240, match, seed=16)
    opts = {"interfaces": ("mlp", "residual"), "m": 2, "seed": 0}
    sub = transport_plans(target, donor, PlanOptions(layer_sample=32, **opts))
    full = transport_plans(target, donor, PlanOptions(layer_sample=10_000, **opts))
    assert sub.epsilon == full.epsilon  # calibrated on the full costs of one block pair either way
    np.testing.assert_array_equal(sub.layer_weights > 0, full.layer_weights > 0)  # the same kept pairs
    assert sub.layer_weights.argmax(axis=1).tolist() == full.layer_weights.argmax(axis=1).tolist() == match
    assert sorted(sub.pairs) == sorted(full.pairs)
    # the subsample is recorded: 32 sorted distinct units per block on the wide side, all units otherwise
    rec = sub.layer_pass
    assert rec["layer_sample"] == 32
    for units in rec["mlp"]["target_units"]:
        assert len(units) == 32 and units == sorted(set(units)) and max(units) < 300
    assert rec["residual"]["donor_units"] == [list(range(16))] * 5 == full.layer_pass["residual"]["donor_units"]
    assert full.layer_pass["mlp"]["target_units"] == [list(range(300))] * 4
    # the same seed draws the same subsample; another seed another one
    assert transport_plans(target, donor, PlanOptions(layer_sample=32, **opts)).layer_pass == rec
    other = transport_plans(target, donor, PlanOptions(layer_sample=32, **{**opts, "seed": 1})).layer_pass
    assert other["mlp"]["target_units"] != rec["mlp"]["target_units"]


@pytest.mark.slow
def test_the_fast_plans_equal_the_log_domain_plans(tmp_path):
    target, donor = _planted(60, 3, 4, 40, 30, [2, 0, 3], seed=17)
    opts = {"interfaces": ("mlp", "residual"), "m": 2, "seed": 0, "layer_sample": 16}
    fast = transport_plans(target, donor, PlanOptions(**opts))
    log = transport_plans(target, donor, PlanOptions(method="log", **opts))
    assert fast.epsilon == log.epsilon
    np.testing.assert_allclose(fast.layer_cost, log.layer_cost, rtol=1e-10, atol=0)
    np.testing.assert_array_equal(fast.layer_weights > 0, log.layer_weights > 0)
    np.testing.assert_allclose(fast.layer_weights, log.layer_weights, rtol=1e-6, atol=1e-12)
    for key, pp in fast.pairs.items():
        for f, plan in pp.plans.items():
            assert plan.method == "plain" and log.pairs[key].plans[f].method == "log"
            np.testing.assert_allclose(plan.coupling, log.pairs[key].plans[f].coupling, rtol=1e-9, atol=0)
            assert plan.iterations == log.pairs[key].plans[f].iterations


@pytest.mark.slow
def test_the_plans_cache_serves_a_rerun_without_solving(tmp_path, monkeypatch):
    from interlingua.core.store import Store
    from interlingua.transport import plans as plans_module

    target, donor = _planted(60, 3, 4, 40, 30, [2, 0, 3], seed=18)
    opts = {"interfaces": ("mlp", "residual"), "m": 2, "seed": 0, "layer_sample": 16}
    store = Store(tmp_path / "cache")
    first = transport_plans(target, donor, PlanOptions(**opts), cache=store)
    assert not first.from_cache and first.cache_key
    assert list((tmp_path / "cache" / "transport" / "plans").glob("*.safetensors"))

    def no_solve(*args, **kwargs):
        raise AssertionError("a cached plan set was solved again")

    monkeypatch.setattr(plans_module, "_pot_sinkhorn", no_solve)
    monkeypatch.setattr(plans_module, "exact_cost", no_solve)
    again = transport_plans(target, donor, PlanOptions(**opts), cache=tmp_path / "cache")  # a folder works as well
    assert again.from_cache and again.cache_key == first.cache_key
    np.testing.assert_array_equal(again.layer_weights, first.layer_weights)
    np.testing.assert_array_equal(again.layer_cost, first.layer_cost)
    assert again.epsilon == first.epsilon and again.layer_pass == first.layer_pass
    assert sorted(again.pairs) == sorted(first.pairs)
    for key, pp in first.pairs.items():
        for f, plan in pp.plans.items():
            np.testing.assert_array_equal(again.pairs[key].plans[f].coupling, plan.coupling)
            np.testing.assert_array_equal(again.pairs[key].row_cost[f], pp.row_cost[f])
            assert again.pairs[key].diagnostics[f] == pytest.approx(pp.diagnostics[f], nan_ok=True)
    summary = first.summary()
    assert again.summary().keys() == summary.keys()
    for f, values in again.summary().items():
        assert values == pytest.approx(summary[f], nan_ok=True)
    monkeypatch.undo()
    # other inputs or parameters are other entries
    assert transport_plans(target, donor, PlanOptions(**{**opts, "seed": 1}), cache=store).cache_key != first.cache_key
    # a damaged entry is recomputed, never served
    path = next((tmp_path / "cache" / "transport" / "plans").glob(f"*{first.cache_key[:32]}*"))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="rebuilt"):
        redone = transport_plans(target, donor, PlanOptions(**opts), cache=store)
    assert not redone.from_cache
    np.testing.assert_array_equal(redone.layer_weights, first.layer_weights)


@pytest.mark.slow
def test_the_batched_layer_pass_solves_each_problem_as_its_own_solve_would():
    from interlingua.transport.plans import batched_transport_costs

    costs = np.stack([_costs(20, 14, seed=s) for s in range(6)])
    costs[2] += np.linspace(0, 1, 14)  # a column shift: the same plan, another cost level
    got, iterations, converged = batched_transport_costs(costs, 0.02, max_iter=1000, marginal_tol=1e-3)
    for b, cost in enumerate(costs):
        ref = sinkhorn_plan(cost, 0.02, max_iter=1000, marginal_tol=1e-3, method="log")
        assert iterations[b] == ref.iterations and converged[b] == ref.converged
        assert got[b] == pytest.approx(float((ref.coupling * cost).sum()), rel=1e-12)
    assert len(set(iterations.tolist())) > 1  # the problems stopped at different iterations
    # a member outside the plain-domain limit is solved in the log domain, the others are unaffected
    wide = costs.copy()
    wide[4] *= 20.0
    got_wide, it_wide, _ = batched_transport_costs(wide, 0.02, max_iter=1000, marginal_tol=1e-3)
    assert not plain_domain_ok(wide[4], 0.02)
    ref = sinkhorn_plan(wide[4], 0.02, max_iter=1000, marginal_tol=1e-3, method="log")
    assert got_wide[4] == pytest.approx(float((ref.coupling * wide[4]).sum()), rel=1e-12)
    assert it_wide[4] == ref.iterations
    np.testing.assert_allclose(np.delete(got_wide, 4), np.delete(got, 4), rtol=1e-13)
    with pytest.raises(TransportError, match="cost stack"):
        batched_transport_costs(costs[0], 0.02)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"interfaces": ()}, "interfaces must be a non-empty subset"),
        ({"interfaces": ("mlp", "qkv")}, "interfaces must be a non-empty subset"),
        ({"m": 0}, "m "),
        ({"seed": -1}, "seed must be an int"),
        ({"layer_sample": 1}, "layer_sample must be an int >= 2"),
        ({"method": "fast"}, "method must be"),
        ({"epsilon": {"qkv": 0.1}}, "epsilon has keys"),
        ({"epsilon": -0.1}, "epsilon"),
    ],
)
def test_plan_options_refuse_bad_values_when_made(kw, match):
    with pytest.raises(TransportError, match=match):
        PlanOptions(**kw)


def test_plan_options_drop_repeated_interfaces_and_a_fusion_sets_its_plan_options():
    from interlingua.transport.fuse import FusionOptions

    assert PlanOptions(interfaces=("residual", "mlp", "residual")).interfaces == ("residual", "mlp")
    o = FusionOptions(m=2, epsilon=0.05, seed=4, sublayers=("mlp",), layer_sample=64, ot_device="cuda").plan_options()
    assert o == PlanOptions(m=2, epsilon=0.05, seed=4, interfaces=("mlp", "residual"), layer_sample=64, device="cuda")
