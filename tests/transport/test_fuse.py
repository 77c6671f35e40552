"""Fusion on tiny GPT-2s: rectangular plans, alpha = 0 is the target, q/k/v untouched, the control, folders."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from interlingua.transport import TransportError
from interlingua.transport.correspond import INTERFACES, ParallelProbe, resolve_blocks
from interlingua.transport.evaluate import FUSION_COLUMNS, SweepOptions, _nll, fuse_models, fuse_pair, plot_fusion
from interlingua.transport.fuse import (
    RECORD_FILE,
    FusionOptions,
    build_fused_model,
    fusion_key,
    fusion_recipe,
    load_transport_model,
    model_activations,
    prepare_fusion,
    write_fused,
)
from interlingua.transport.plans import PlanOptions, transport_plans

#: Fixed epsilons keep the tests quick (calibration is tested in test_plans.py and by fuse_pair below).
EPS = {"mlp": 0.02, "attn": 0.02, "residual": 0.02, "layer": 0.01}


@pytest.fixture(scope="module")
def models(gpt2_a: Path, gpt2_b: Path, gpt2_a_permuted: Path):
    return {
        "a": load_transport_model(gpt2_a, label="a"),
        "b": load_transport_model(gpt2_b, label="b"),
        "a_perm": load_transport_model(gpt2_a_permuted, label="a_perm"),
    }


@pytest.fixture(scope="module")
def plans_ab(models, probe):
    at = model_activations(models["a"], probe["eng"])
    bt = model_activations(models["b"], probe["deu"])
    return transport_plans(at, bt, PlanOptions(epsilon=EPS, m=2, seed=0, marginal_tol=1e-5))


def _state(lm) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in lm.state_dict().items()}


def test_plans_between_different_widths_and_depths_are_rectangular_and_row_stochastic(plans_ab):
    assert (plans_ab.target_layers, plans_ab.donor_layers) == (3, 2)
    assert plans_ab.layer_weights.shape == (3, 2)
    np.testing.assert_allclose(plans_ab.layer_weights.sum(axis=1), 1.0)
    shapes = {"mlp": (64, 96), "attn": (32, 48), "residual": (32, 48)}
    assert len(plans_ab.pairs) == 6  # m = 2 donor blocks for each of 3 target blocks
    for pp in plans_ab.pairs.values():
        for iface in INTERFACES:
            plan = pp.plans[iface]
            assert plan.shape == shapes[iface]
            np.testing.assert_allclose(plan.phi().sum(axis=1), 1.0, rtol=0, atol=1e-9)
            np.testing.assert_allclose(plan.psi().sum(axis=1), 1.0, rtol=0, atol=1e-9)
            np.testing.assert_allclose(plan.coupling.sum(axis=1), 1 / plan.shape[0], rtol=1e-9)


def test_hooks_are_removed_and_activations_are_sentence_means(models, probe):
    lm = models["a"].lm
    _, blocks, _ = resolve_blocks(lm)
    acts = model_activations(models["a"], probe["eng"])
    assert all(not b.block._forward_hooks and not b.mlp_out._forward_pre_hooks for b in blocks)
    assert acts.widths == {"mlp": [64] * 3, "attn": [32] * 3, "residual": [32] * 3}
    # the residual interface is the block output averaged over the sentence's tokens (no special token here)
    tok = models["a"].tokenizer
    ids = torch.tensor([tok(probe["eng"][0])["input_ids"]])
    with torch.no_grad():
        hidden = lm(input_ids=ids, output_hidden_states=True).hidden_states
    np.testing.assert_allclose(
        acts.layers["residual"][1][0], hidden[2][0].double().mean(0).numpy(), rtol=1e-5, atol=1e-6
    )


def test_alpha_zero_reproduces_the_target_exactly(models, plans_ab, evals):
    target = models["a"]
    before = _state(target.lm)
    nll_before = _nll(target, evals["eng"], 16, 512)
    fusion = prepare_fusion(target, models["b"], plans_ab, top_k=16)
    for control in ("ot", "shuffled"):
        fusion.apply(0.0, control)
        after = target.lm.state_dict()
        assert all(torch.equal(before[k], after[k]) for k in before)
        assert _nll(target, evals["eng"], 16, 512) == nll_before
        fusion.restore()


def test_only_mlp_and_attention_output_entries_change_and_qkv_never(models, plans_ab):
    target = models["a"]
    before = _state(target.lm)
    fusion = prepare_fusion(target, models["b"], plans_ab, top_k=16)
    assert fusion.record["fused_roles"] == ["in"]
    names = set(fusion.parameters)
    assert names == {
        f"transformer.h.{i}.{p}"
        for i in range(3)
        for p in ("mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "attn.c_proj.weight")
    }
    try:
        for control in ("ot", "shuffled"):
            for alpha in (0.3, 1.0):
                fusion.apply(alpha, control)
                after = target.lm.state_dict()
                for k in before:
                    if ".attn.c_attn." in k or k not in names:
                        assert torch.equal(before[k], after[k]), k  # q/k/v, embeddings, head, norms, biases
                for i in range(3):
                    # c_fc is Conv1D (in x out): only the masked MLP units' columns changed
                    h = f"transformer.h.{i}."
                    w0, w1 = before[h + "mlp.c_fc.weight"], after[h + "mlp.c_fc.weight"]
                    changed = (w0 != w1).any(dim=0).nonzero().flatten().tolist()
                    assert set(changed) <= set(fusion.masks["mlp"][i]) and len(fusion.masks["mlp"][i]) == 16
                    p0, p1 = before[h + "mlp.c_proj.weight"], after[h + "mlp.c_proj.weight"]
                    assert set((p0 != p1).any(dim=1).nonzero().flatten().tolist()) <= set(fusion.masks["mlp"][i])
                    o0, o1 = before[h + "attn.c_proj.weight"], after[h + "attn.c_proj.weight"]
                    assert set((o0 != o1).any(dim=1).nonzero().flatten().tolist()) <= set(fusion.masks["attn"][i])
                fusion.restore()
        restored = target.lm.state_dict()
        assert all(torch.equal(before[k], restored[k]) for k in before)
    finally:
        fusion.restore()


def test_fused_entries_are_the_documented_formula(models, plans_ab):
    target, donor = models["a"], models["b"]
    fusion = prepare_fusion(target, donor, plans_ab, top_k=None)
    i = 1
    kept = plans_ab.kept(i)
    control = plans_ab.shuffled()  # the control: the same plans with their rows permuted
    expected, expected_control = 0, 0
    for j, w in kept:
        w_in = donor.lm.transformer.h[j].mlp.c_fc.weight.detach().double().numpy().T  # out x in
        pp, cp = plans_ab.pairs[(i, j)], control.pairs[(i, j)]
        expected = expected + w * pp.plans["mlp"].phi() @ w_in @ pp.plans["residual"].psi()
        expected_control = expected_control + w * cp.plans["mlp"].phi() @ w_in @ cp.plans["residual"].psi()
    name = f"transformer.h.{i}.mlp.c_fc.weight"
    np.testing.assert_allclose(fusion.transported("ot")[name][0][2].numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        fusion.transported("shuffled")[name][0][2].numpy(), expected_control, rtol=1e-10, atol=1e-12
    )
    original = target.lm.transformer.h[i].mlp.c_fc.weight.detach().double().numpy().T.copy()
    try:
        fusion.apply(0.25, "ot")
        fused = target.lm.transformer.h[i].mlp.c_fc.weight.detach().double().numpy().T
        np.testing.assert_allclose(fused, 0.75 * original + 0.25 * expected, rtol=1e-6, atol=1e-7)
    finally:
        fusion.restore()


def test_a_permuted_copy_is_recovered_and_its_shuffled_control_is_not(models, probe, evals, a_mlp_permutations):
    target, donor = models["a"], models["a_perm"]
    at = model_activations(target, probe["eng"])
    dt = model_activations(donor, probe["eng"])
    plans = transport_plans(at, dt, PlanOptions(epsilon=EPS, m=1, marginal_tol=1e-4, max_iter=3000))
    np.testing.assert_array_equal(plans.layer_weights, np.eye(3))  # identical blocks matched
    # the recovery below is the fast path's: every neuron plan was solved by the plain-domain Sinkhorn
    assert {pp.plans[f].method for pp in plans.pairs.values() for f in pp.plans} == {"plain"}
    perms = a_mlp_permutations
    for i in range(3):
        pp = plans.pairs[(i, i)]
        phi_m, phi_r = pp.plans["mlp"].phi(), pp.plans["residual"].phi()
        assert (phi_m.argmax(axis=1) == perms[i]).all()  # the permutation, found from activations alone
        assert (phi_r.argmax(axis=1) == np.arange(32)).all()  # identical residual streams: the identity
        assert phi_m[np.arange(64), perms[i]].mean() > 0.9 and np.trace(phi_r) / 32 > 0.9
    before = _state(target.lm)
    nll = _nll(target, evals["eng"], 16, 512)[0]
    fusion = prepare_fusion(target, donor, plans, top_k=None)
    errors = {}
    try:
        for control in ("ot", "shuffled"):
            fusion.apply(1.0, control)
            after = target.lm.state_dict()
            errors[control] = max(float((after[k] - before[k]).norm() / before[k].norm()) for k in fusion.parameters)
            errors[control + "_nll"] = _nll(target, evals["eng"], 16, 512)[0] - nll
            fusion.restore()
    finally:
        fusion.restore()
    # alpha = 1 through the OT plans rebuilds the target's weights (up to the plans' softness) and its NLL;
    # through the shuffled plans it does neither (a random model near chance: the sign of its change is noise)
    assert errors["ot"] < 0.05 and errors["shuffled"] > 0.8
    assert abs(errors["ot_nll"]) < 0.01 < abs(errors["shuffled_nll"])


def test_fused_folder_loads_is_content_keyed_and_a_rebuild_is_a_no_op(models, probe, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target, donor = models["a"], models["b"]
    out = tmp_path / "fused"
    opts = dict(alpha=0.5, options=FusionOptions(top_k=16, m=2, epsilon=EPS, seed=0))
    record = build_fused_model(target, donor, ParallelProbe(probe["eng"], probe["deu"]), out, **opts)
    assert (out / RECORD_FILE).is_file() and (out / "config.json").is_file() and list(out.glob("*.safetensors"))
    recipe = fusion_recipe(target, donor, ParallelProbe(probe["eng"], probe["deu"]), **opts)
    assert record["key"] == fusion_key(recipe)
    assert record["recipe"]["alpha"] == 0.5 and record["recipe"]["control"] == "ot"
    assert record["recipe"]["target"]["fingerprint"] == target.identity["fingerprint"]
    lm = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.get_vocab() == target.tokenizer.get_vocab()
    assert lm.transformer.h[0].mlp.c_fc.weight.shape == (32, 64)
    # the folder holds the fused weights: the target's own where nothing was fused, others elsewhere
    own = target.lm.state_dict()
    saved = lm.state_dict()
    assert torch.equal(saved["transformer.h.0.attn.c_attn.weight"], own["transformer.h.0.attn.c_attn.weight"])
    assert not torch.equal(saved["transformer.h.0.mlp.c_fc.weight"], own["transformer.h.0.mlp.c_fc.weight"])
    assert build_fused_model(target, donor, ParallelProbe(probe["eng"], probe["deu"]), out, **opts) == record  # no-op
    with pytest.raises(TransportError, match="exists and holds something other"):
        build_fused_model(target, donor, ParallelProbe(probe["eng"], probe["deu"]), out, **{**opts, "alpha": 0.25})
    seed_1 = {**opts, "options": FusionOptions(top_k=16, m=2, epsilon=EPS, seed=1)}
    assert (
        fusion_key(fusion_recipe(target, donor, ParallelProbe(probe["eng"], probe["deu"]), **seed_1)) != record["key"]
    )
    assert (
        fusion_key(fusion_recipe(target, donor, ParallelProbe(probe["eng"][::-1], probe["deu"][::-1]), **opts))
        != record["key"]
    )


def test_an_interrupted_build_leaves_nothing(models, plans_ab, probe, tmp_path, monkeypatch):
    target, donor = models["a"], models["b"]
    before = _state(target.lm)
    fusion = prepare_fusion(target, donor, plans_ab, top_k=16)
    recipe = fusion_recipe(
        target,
        donor,
        ParallelProbe(probe["eng"], probe["deu"]),
        alpha=0.5,
        options=FusionOptions(top_k=16, m=2, epsilon=EPS),
    )
    out = tmp_path / "parent" / "fused"

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(target.tokenizer, "save_pretrained", boom)
    with pytest.raises(KeyboardInterrupt):
        write_fused(out, target, fusion, recipe, plans_ab)
    assert not out.exists()
    assert list((tmp_path / "parent").iterdir()) == []  # no temporary folder left either
    after = target.lm.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the in-memory target is restored


@pytest.mark.slow
def test_fuse_pair_table(models, probe, evals, tmp_path):
    table = fuse_pair(
        models["a"],
        models["b"],
        ParallelProbe(probe["eng"], probe["deu"], "eng", "deu"),
        evals,
        SweepOptions(alphas=(0.0, 0.5), fusion=FusionOptions(top_k=16, m=2, seed=0)),
        out=tmp_path / "built",
    )
    assert list(table.columns) == [c.name for c in FUSION_COLUMNS]
    assert len(table) == 4 and set(table["role"]) == {"target", "donor"}
    zero = table[table["alpha"] == 0.0]
    assert (zero["delta_ot"] == 0).all() and (zero["ot_minus_rand"] == 0).all() and (zero["delta_shuffled"] == 0).all()
    half = table[table["alpha"] == 0.5]
    assert (half["nll_ot"] != half["nll_target"]).all() and (half["nll_ot"] != half["nll_shuffled"]).all()
    np.testing.assert_allclose(table["ot_minus_rand"], table["nll_ot"] - table["nll_shuffled"])
    row = table.iloc[0]
    for f in ("mlp", "attn", "residual", "layer"):
        assert row[f"eps_{f}"] > 0 and row[f"rowmax_uniform_{f}"] >= 1 and 0 <= row[f"entropy_{f}"] <= 1
    assert row["calibrated"] and row["n_probe"] == len(probe["eng"])
    assert row["self_control"] in ("passed", "failed") and row["stability_k"] == 1
    assert (row["self_control"] == "failed") == ("self-plan control FAILED" in str(row["note"]))
    # auto epsilon: the plans are well inside the seed's "1% of the optimum" and far from uniform
    assert row["cost_ratio_mlp"] < 1.02 and row["rowmax_uniform_mlp"] > 2 * row["published_rowmax_uniform_mlp"]
    for folder in (*table["folder_ot"], *table["folder_shuffled"]):
        assert (Path(folder) / RECORD_FILE).is_file()
    rec = json.loads((Path(half["folder_shuffled"].iloc[0]) / RECORD_FILE).read_text())
    assert rec["recipe"]["control"] == "shuffled" and rec["recipe"]["alpha"] == 0.5


@pytest.mark.slow
def test_fuse_models_runs_every_directed_pair_and_draws_the_figure(models, probe, evals, tmp_path):
    figure = tmp_path / "fusion.png"
    table, fig = fuse_models(
        {"a": models["a"], "b": models["b"]},
        {"a": "eng", "b": "deu"},
        probe,
        evals,
        options=SweepOptions(alphas=(0.0, 0.25), fusion=FusionOptions(top_k=8, m=1, epsilon=EPS)),
        figure=figure,
    )
    assert set(zip(table["target"], table["donor"])) == {("a", "b"), ("b", "a")}
    assert len(table) == 2 * 2 * 2
    assert figure.stat().st_size > 0 and len(fig.axes) == 4
    b_rows = table[table["target"] == "b"]
    assert set(b_rows["role"]) == {"target", "donor"}
    assert (b_rows[b_rows["language"] == "deu"]["role"] == "target").all()
    assert plot_fusion(table.iloc[:0]) is not None


@pytest.mark.slow
def test_cross_family_roles(models, tiny_llama_path, probe):
    llama = load_transport_model(tiny_llama_path, label="llama")
    gpt = models["a"]
    la = model_activations(llama, probe["deu"])
    ga = model_activations(gpt, probe["eng"])
    fusion = prepare_fusion(
        gpt, llama, transport_plans(ga, la, PlanOptions(epsilon=EPS, m=1, marginal_tol=1e-4)), top_k=8
    )
    assert fusion.record["fused_roles"] == ["in"] and fusion.record["kept_roles"] == []  # c_fc <- gate_proj
    back = prepare_fusion(
        llama, gpt, transport_plans(la, ga, PlanOptions(epsilon=EPS, m=1, marginal_tol=1e-4)), top_k=8
    )
    assert back.record["fused_roles"] == ["in"] and back.record["kept_roles"] == ["up"]
    before = _state(llama.lm)
    try:
        back.apply(1.0, "ot")
        after = llama.lm.state_dict()
        for k in before:
            if any(p in k for p in ("q_proj", "k_proj", "v_proj", "up_proj", "embed", "norm")):
                assert torch.equal(before[k], after[k]), k
        gate = "model.layers.0.mlp.gate_proj.weight"
        assert not torch.equal(before[gate], after[gate])
    finally:
        back.restore()


@pytest.mark.parametrize("alpha", [-0.1, 1.5, math.nan, True, "0.5"])
def test_alpha_outside_unit_interval_is_refused(models, plans_ab, alpha):
    fusion = prepare_fusion(models["a"], models["b"], plans_ab, top_k=4)
    with pytest.raises(TransportError, match="alpha"):
        fusion.apply(alpha)
    with pytest.raises(TransportError, match="alpha"):
        fuse_pair(
            models["a"],
            models["b"],
            ParallelProbe(["x"] * 20, ["y"] * 20),
            {"eng": ["x"]},
            SweepOptions(alphas=[alpha]),
        )


def test_bad_inputs_are_transport_errors(models, probe, tiny_bert_path, plans_ab):
    a, b = models["a"], models["b"]
    with pytest.raises(TransportError, match="at least"):
        fuse_pair(a, b, ParallelProbe(probe["eng"][:5], probe["deu"][:5]), {"eng": probe["eng"]})
    with pytest.raises(TransportError, match="parallel"):
        fuse_pair(a, b, ParallelProbe(probe["eng"], probe["deu"][:-1]), {"eng": probe["eng"]})
    with pytest.raises(TransportError, match="no shared interface"):
        fuse_pair(
            a,
            b,
            ParallelProbe(probe["eng"], probe["deu"]),
            {"eng": probe["eng"]},
            SweepOptions(fusion=FusionOptions(sublayers=())),
        )
    with pytest.raises(TransportError, match="top_k"):
        prepare_fusion(a, b, plans_ab, top_k=0)
    with pytest.raises(TransportError, match="other models"):
        prepare_fusion(b, a, plans_ab)
    with pytest.raises(TransportError, match="shuffled"):
        prepare_fusion(a, b, plans_ab.shuffled())
    from transformers import AutoModel, AutoTokenizer

    from interlingua.transport.correspond import probe_activations

    bert = AutoModel.from_pretrained(tiny_bert_path)
    with pytest.raises(TransportError, match="no shared interface"):
        probe_activations(bert, AutoTokenizer.from_pretrained(tiny_bert_path), probe["eng"])
    with pytest.raises(TransportError, match="adapter"):
        from interlingua.data.models.spec import ModelSpec

        load_transport_model(ModelSpec(path=str(tiny_bert_path), adapter=str(tiny_bert_path)))


def test_fusion_options_keep_the_recipe_keys_of_the_keyword_api():
    """The keys the keyword-list API gave before FusionOptions (computed at its last commit): builds stay found."""
    from types import SimpleNamespace

    t, d = SimpleNamespace(identity={"fingerprint": "a"}), SimpleNamespace(identity={"fingerprint": "b"})
    probe_t, probe_d = [f"sentence {i}" for i in range(40)], [f"Satz {i}" for i in range(40)]
    cases = {
        "6e19acac381d040fb8c061be934836482ce96a1af9106186388fad183abc0156": FusionOptions(
            top_k=16, m=2, epsilon=EPS, seed=3, sublayers=("mlp",)
        ),
        "c8de1b33bbbd2baaf4ce621c488113a5b5d334629966ee3a1a4b18678c2b6962": FusionOptions(),
        "361987f5aa9cf04f337951040c0e22dbcc2460b6758e013978c9c4dd289325e4": FusionOptions(
            top_k=None, epsilon=0.05, grid=[0.1, 0.2], max_length=96
        ),
    }
    for key, options in cases.items():
        recipe = fusion_recipe(t, d, ParallelProbe(probe_t, probe_d), alpha=0.25, control="shuffled", options=options)  # type: ignore[arg-type]
        assert fusion_key(recipe) == key


def test_a_parallel_probe_is_checked_when_made():
    """Both sides at least MIN_PROBE_SENTENCES non-empty strings, index by index: else a TransportError."""
    from interlingua.transport.correspond import MIN_PROBE_SENTENCES

    en, de = [f"s {i}" for i in range(MIN_PROBE_SENTENCES)], [f"t {i}" for i in range(MIN_PROBE_SENTENCES)]
    probe = ParallelProbe(en, de, "eng", "deu")
    assert probe.target == tuple(en) and probe.donor == tuple(de) and probe.target_language == "eng"
    with pytest.raises(TransportError, match="probe_target_sentences must be a list"):
        ParallelProbe("one sentence", de)
    with pytest.raises(TransportError, match=r"probe_donor_sentences: entries \[1\]"):
        ParallelProbe(en, [de[0], " ", *de[2:]])
    with pytest.raises(TransportError, match="at least"):
        ParallelProbe(en[:-1], de[:-1])
    with pytest.raises(TransportError, match="parallel"):
        ParallelProbe(en, [*de, "t x"])
