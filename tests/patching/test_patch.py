"""Patching mechanics on tiny models: hook sites, identity patches, hook removal, the experiment table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from interlingua.core.errors import InterlinguaError
from interlingua.patching import (
    CONDITIONS,
    InterventionError,
    PatchModel,
    PatchOptions,
    as_layer_maps,
    capture_residuals,
    donor_layer,
    encode_prompt,
    fit_patch_maps,
    load_probes,
    patch_experiment,
    residual_hooks,
    run_patched,
)

COUNTRIES = ["FR", "DE", "RU", "JP", "ES", "IT", "PT", "GR", "PL", "SE", "EG", "KE"]


def _prompts(model: PatchModel, lang: str = "eng", relation: str = "capital", countries=COUNTRIES):
    probes = load_probes()
    ps = probes.probes(relation, lang, countries)
    return ps, [encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end) for p in ps]


def _hooks(model: PatchModel) -> set[tuple[str, str, int]]:
    """Every forward (pre-)hook on the model. transformers 5 installs its own output-capturing hooks the
    first time a model runs with output_hidden_states (the extraction does) and keeps them; ours must
    leave the set as it was."""
    return {
        (name, kind, key)
        for name, m in model.lm.named_modules()
        for kind, hooks in (("post", m._forward_hooks), ("pre", m._forward_pre_hooks))
        for key in hooks
    }


@pytest.fixture(scope="module")
def parallel():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fixtures import tiny_models

    return tiny_models.parallel_sentences(48)


@pytest.fixture(scope="module")
def maps_llama_to_gpt2(llama_patch, gpt2_patch, parallel):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank-deficient Procrustes on 48 invented sentences
        return fit_patch_maps(llama_patch, gpt2_patch, parallel["eng"], parallel["deu"])


# -- hook sites ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2_patch", "llama_patch", "gemma3_patch"])
def test_captured_states_are_the_hidden_states(name, request):
    """Site k < L reads output_hidden_states[k]; site L reads the last block's output (before the final norm)."""
    model: PatchModel = request.getfixturevalue(name)
    _, enc = _prompts(model)
    ids = [e.input_ids for e in enc[:3]]
    before = _hooks(model)
    states, _ = capture_residuals(model, ids, list(range(model.n_states)))
    assert _hooks(model) == before
    for i, prompt in enumerate(ids):
        with torch.inference_mode():
            hs = model.arch.text_module(input_ids=torch.tensor([prompt]), output_hidden_states=True).hidden_states
        for k in range(model.num_layers):
            torch.testing.assert_close(states[i][k], hs[k][0].float(), rtol=1e-5, atol=1e-5)
        normed = model.arch.final_norm(states[i][model.num_layers][None].to(model.dtype))[0]
        torch.testing.assert_close(normed.float(), hs[-1][0].float(), rtol=1e-5, atol=1e-5)


# -- identity patches --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2_patch", "llama_patch", "gemma3_patch"])
def test_own_residual_from_the_same_prompt_changes_nothing(name, request):
    """Writing each prompt's own states back, at every layer and every subject token, leaves the logits as they were."""
    model: PatchModel = request.getfixturevalue(name)
    _, enc = _prompts(model)
    ids = [e.input_ids for e in enc]
    layers = list(range(model.n_states))
    states, clean = capture_residuals(model, ids, layers, batch_size=5, logprobs=True)
    patches = [{k: (list(e.span), states[i][k][list(e.span)]) for k in layers} for i, e in enumerate(enc)]
    out = run_patched(model, ids, patches, batch_size=5, full=True)
    torch.testing.assert_close(out.full, clean, rtol=0, atol=1e-6)
    # every position, not just the subject
    patches = [{k: (list(range(len(e.input_ids))), states[i][k]) for k in layers} for i, e in enumerate(enc)]
    out = run_patched(model, ids, patches, batch_size=5, full=True)
    torch.testing.assert_close(out.full, clean, rtol=0, atol=1e-6)


def test_layer_L_patch_reproduces_the_unpatched_run(gpt2_patch):
    """At j = L the subject's states feed no later layer, so any patch there leaves the read-out unchanged:
    the within-model vector of the same country, and another country's too."""
    model = gpt2_patch
    _, enc = _prompts(model)
    ids = [e.input_ids for e in enc]
    L = model.num_layers
    states, clean = capture_residuals(model, ids, [L], logprobs=True)
    means = [states[i][L][list(e.span)].mean(dim=0) for i, e in enumerate(enc)]
    same = run_patched(model, ids, [{L: (list(e.span), means[i])} for i, e in enumerate(enc)], full=True)
    torch.testing.assert_close(same.full, clean, rtol=0, atol=1e-6)
    other = run_patched(
        model, ids, [{L: (list(e.span), means[(i + 1) % len(enc)])} for i, e in enumerate(enc)], full=True
    )
    torch.testing.assert_close(other.full, clean, rtol=0, atol=1e-6)


def test_layer_0_patch_with_another_prompts_states_becomes_that_prompt(gpt2_patch):
    """Writing A's embedding-output states over B's subject (same token count) turns B's run into A's run."""
    model = gpt2_patch
    probes = load_probes()
    ps = probes.probes("capital", "eng")
    enc = {p.country: encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end) for p in ps}
    by_len: dict[tuple[int, int], list[str]] = {}
    for c, e in enc.items():
        by_len.setdefault((len(e.input_ids), e.span[0]), []).append(c)
    a, b = next(v[:2] for v in by_len.values() if len(v) >= 2)
    ids = [enc[a].input_ids, enc[b].input_ids]
    states, clean = capture_residuals(model, ids, [0], logprobs=True)
    span = list(enc[b].span)
    out = run_patched(model, [enc[b].input_ids], [{0: (span, states[0][0][span])}], full=True)
    torch.testing.assert_close(out.full[0], clean[0], rtol=0, atol=1e-5)
    assert not torch.allclose(clean[0], clean[1])


def test_batching_does_not_change_results(llama_patch):
    model = llama_patch
    _, enc = _prompts(model)
    ids = [e.input_ids for e in enc]
    rng = torch.Generator().manual_seed(0)
    patches = [{1: (list(e.span), torch.randn(model.width, generator=rng))} for e in enc]
    one = run_patched(model, ids, patches, batch_size=1, full=True)
    many = run_patched(model, ids, patches, batch_size=7, full=True)
    torch.testing.assert_close(one.full, many.full, rtol=1e-5, atol=1e-5)
    assert torch.equal(one.top1, many.top1)


# -- hooks always removed ---------------------------------------------------------------------------------


def test_hooks_removed_after_calls_and_errors(fresh_gpt2):
    """A fresh model (never run with output_hidden_states): every module's hook dicts are empty after each call,
    also when the forward pass raises inside a block, and when the caller's own code raises inside residual_hooks."""
    model = fresh_gpt2()

    def empty() -> bool:
        return all(not m._forward_hooks and not m._forward_pre_hooks for m in model.lm.modules())

    _, enc = _prompts(model)
    ids = [e.input_ids for e in enc[:4]]
    capture_residuals(model, ids, [0, 1, 2], logprobs=True)
    assert empty()
    run_patched(model, ids, [{0: ([enc[i].span[0]], torch.zeros(model.width))} for i in range(4)])
    assert empty()

    block = model.arch.blocks[-1]

    def broken(*args, **kwargs):
        raise RuntimeError("boom in the last block")

    block.forward = broken
    try:
        with pytest.raises(RuntimeError, match="boom"):
            run_patched(
                model, ids, [{k: ([enc[i].span[0]], torch.zeros(model.width)) for k in (0, 1, 2)} for i in range(4)]
            )
        assert empty()
        with pytest.raises(RuntimeError, match="boom"):
            capture_residuals(model, ids, [0, 1, 2])
        assert empty()
    finally:
        del block.forward

    with pytest.raises(ValueError, match="inside"), residual_hooks(model, [0, 2], lambda k, h: None):
        assert not empty()
        raise ValueError("inside the block")
    assert empty()
    patch_experiment(model, model, None, options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[0]))
    assert empty()


def test_hooks_removed_after_the_experiment(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    before = _hooks(gpt2_patch), _hooks(llama_patch)
    patch_experiment(
        gpt2_patch,
        llama_patch,
        maps_llama_to_gpt2,
        options=PatchOptions(languages=("eng", "deu"), countries=COUNTRIES, layers=[0]),
    )
    assert (_hooks(gpt2_patch), _hooks(llama_patch)) == before


# -- bad input -------------------------------------------------------------------------------------------------


def test_patch_input_errors(gpt2_patch):
    model = gpt2_patch
    _, enc = _prompts(model)
    ids = [enc[0].input_ids]
    span = list(enc[0].span)
    bad = [
        [{1: (span, torch.zeros(model.width + 1))}],  # wrong width
        [{1: ([len(ids[0])], torch.zeros(model.width))}],  # position past the prompt
        [{1: ([], torch.zeros(model.width))}],  # no position
        [{1: (span, torch.full((model.width,), float("nan")))}],
        [{9: (span, torch.zeros(model.width))}],  # layer out of range
        [],  # one patch set per prompt
    ]
    for patches in bad:
        with pytest.raises(InterventionError):
            run_patched(model, ids, patches)
    before = _hooks(model)
    with pytest.raises(InterventionError):
        capture_residuals(model, ids, [-1])
    assert _hooks(model) == before


def test_patch_options_reject_bad_values_before_any_model_is_read():
    """What needs no probes or model is checked when the options are made, with the experiment's own errors."""
    bad = [
        (dict(conditions=["mapped", "telepathy"]), "unknown condition"),
        (dict(conditions=[]), "unknown condition"),
        (dict(span_rule="median"), "span_rule"),
        (dict(seed=1.5), "seed"),
        (dict(seed=True), "seed"),
        (dict(layers=[]), "at least one start layer"),
        (dict(layers=["1"]), "integer start layers"),
        (dict(pairs="some"), "pairs"),
        (dict(pairs=0), "pairs"),
        (dict(pairs=True), "pairs"),
        (dict(languages=[]), "no languages"),
        (dict(languages=[("eng",)]), "pairs"),
    ]
    for extra, match in bad:
        with pytest.raises(InterventionError, match=match):
            PatchOptions(**extra)
    assert PatchOptions(pairs=3, layers=[0, 2], languages="eng").pairs == 3


def test_patch_options_from_the_section_carry_its_values():
    from interlingua.patching.config import PatchingSpec
    from interlingua.patching.patch import ProbeFitOptions

    spec = PatchingSpec(
        target="m",
        donor="d",
        relations=["capital", "continent"],
        countries=["FR", "DE", "JP"],
        pairs=7,
        span_rule="last",
        batch_size=8,
        probe_folds=3,
    )
    got = PatchOptions.from_spec(spec, languages=("eng", "deu"), layers=[1], conditions=["mapped"], seed=4)
    assert got == PatchOptions(
        languages=("eng", "deu"),
        relations=["capital", "continent"],
        layers=[1],
        conditions=["mapped"],
        countries=["FR", "DE", "JP"],
        pairs=7,
        seed=4,
        span_rule="last",
        batch_size=8,
    )
    fit = ProbeFitOptions.from_spec(spec, seed=4)
    assert fit == ProbeFitOptions(countries=["FR", "DE", "JP"], folds=3, seed=4, span_rule="last", batch_size=8)
    with pytest.raises(InterventionError, match="span_rule"):
        ProbeFitOptions(span_rule="median")


def test_experiment_input_errors(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    kw = dict(languages=("eng", "deu"), countries=COUNTRIES)
    bad = [
        dict(conditions=["mapped", "telepathy"]),
        dict(layers=[gpt2_patch.num_layers + 1]),
        dict(layers=[]),
        dict(span_rule="median"),
        dict(pairs="some"),
        dict(languages=("eng", "xxx")),
        dict(relations=["birthday"]),
        dict(seed=1.5),
        dict(threads=0),
        dict(layers=["1"]),
        dict(countries=["FR", "DE"]),
    ]
    for extra in bad:
        threads = extra.pop("threads", None)
        with pytest.raises(InterventionError) as info:
            options = PatchOptions(**{**kw, **extra})
            patch_experiment(gpt2_patch, llama_patch, maps_llama_to_gpt2, options=options, threads=threads)
        assert isinstance(info.value, InterlinguaError) and isinstance(info.value, ValueError)
    with pytest.raises(InterventionError):
        patch_experiment("gpt2", llama_patch, None, options=PatchOptions(**kw))
    with pytest.raises(InterventionError):
        as_layer_maps({1: "not a map"}, gpt2_patch.n_states, llama_patch.n_states)
    with pytest.raises(InterventionError):
        as_layer_maps({7: maps_llama_to_gpt2.maps[1][1]}, gpt2_patch.n_states, llama_patch.n_states)


# -- the experiment -------------------------------------------------------------------------------------------


def test_experiment_table(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    summary, trials = patch_experiment(
        gpt2_patch,
        llama_patch,
        maps_llama_to_gpt2,
        options=PatchOptions(
            languages=("eng", "deu"), relations=["capital", "continent"], countries=COUNTRIES, layers=[0, 1], seed=3
        ),
        return_trials=True,
    )
    assert set(summary["condition"]) == set(CONDITIONS)
    assert summary["applicable"].all()  # both widths 32: unprojected applies
    assert len(summary) == 2 * 2 * len(CONDITIONS)
    ok = summary[summary["n"] > 0]
    assert ((ok["flip_low"] <= ok["flip_rate"]) & (ok["flip_rate"] <= ok["flip_high"])).all()
    assert ((ok["success_low"] <= ok["success_rate"]) & (ok["success_rate"] <= ok["success_high"])).all()
    from interlingua.analysis.stats import wilson_interval

    row = ok.iloc[1]
    assert (row["flip_low"], row["flip_high"]) == pytest.approx(wilson_interval(row["flips"], row["n"]))
    # trials: A != B, different answer tokens; shuffled source is neither; none = the clean run
    assert (trials["country_a"] != trials["country_b"]).all()
    assert (trials["token_a"] != trials["token_b"]).all()
    sh = trials[trials["condition"] == "shuffled"]
    assert ((sh["source"] != sh["country_a"]) & (sh["source"] != sh["country_b"])).all()
    none = trials[trials["condition"] == "none"]
    np.testing.assert_allclose(none["logp_a"], none["logp_a_clean"])
    assert not none["success"].any()
    # whole answers: every token of A's answer scored; the first token's log p is part of the sum
    from interlingua.patching import answer_tokens

    probes = load_probes()
    n_tokens = {
        (rel, c): len(answer_tokens(gpt2_patch.tokenizer, p.prompt, p.continuation))
        for rel in ("capital", "continent")
        for c in COUNTRIES
        for p in [probes.probe(rel, "deu", c)]
    }
    assert trials["answer_a_tokens"].tolist() == [
        n_tokens[(r, c)] for r, c in zip(trials["relation"], trials["country_a"])
    ]
    assert (trials["answer_a_tokens"] > 1).any()  # the tiny tokenizers split some answers
    assert (trials["logp_answer_a"] <= trials["logp_a"] + 1e-5).all()  # adding log p <= 0 terms
    single = trials[trials["answer_a_tokens"] == 1]
    np.testing.assert_allclose(single["logp_answer_a"], single["logp_a"], atol=1e-5)
    np.testing.assert_array_equal(none["logp_answer_a"], none["logp_answer_a_clean"])
    assert not none["success_answer"].any()
    patched = trials[trials["condition"] != "none"]
    assert (patched["success_answer"] == (patched["logp_answer_a"] > patched["logp_answer_a_clean"])).all()
    row = ok[ok["condition"] == "within"].iloc[0]
    g = trials[
        (trials["condition"] == "within") & (trials["relation"] == row["relation"]) & (trials["layer"] == row["layer"])
    ]
    assert row["success_answer_rate"] == pytest.approx(g["success_answer"].mean())
    assert (row["success_answer_low"], row["success_answer_high"]) == pytest.approx(
        wilson_interval(int(g["success_answer"].sum()), len(g))
    )
    assert row["mean_delta_logp_answer_a"] == pytest.approx((g["logp_answer_a"] - g["logp_answer_a_clean"]).mean())
    assert (
        trials.groupby(["relation", "layer", "condition"]).size() == len(COUNTRIES)
    ).all()  # derangement: one A per B
    # donor layers by relative depth: llama has 3 blocks, gpt2 2
    assert [donor_layer(k, 3, 4) for k in range(3)] == [0, 2, 3]
    assert summary.loc[summary["condition"] == "mapped", "donor_layers"].tolist()[:2] in (
        ["0,2,3", "2,3"],
        ["2,3", "0,2,3"],
    )
    # the same seed gives the same table
    again = patch_experiment(
        gpt2_patch,
        llama_patch,
        maps_llama_to_gpt2,
        options=PatchOptions(
            languages=("eng", "deu"), relations=["capital", "continent"], countries=COUNTRIES, layers=[0, 1], seed=3
        ),
    )
    pd.testing.assert_frame_equal(summary, again)


def test_start_layer_L_changes_nothing_in_any_condition(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    L = gpt2_patch.num_layers
    _, trials = patch_experiment(
        gpt2_patch,
        llama_patch,
        maps_llama_to_gpt2,
        options=PatchOptions(languages=("eng", "deu"), countries=COUNTRIES, layers=[L]),
        return_trials=True,
    )
    np.testing.assert_allclose(trials["logp_a"], trials["logp_a_clean"], atol=1e-6)
    np.testing.assert_allclose(trials["logp_b"], trials["logp_b_clean"], atol=1e-6)
    np.testing.assert_allclose(trials["logp_answer_a"], trials["logp_answer_a_clean"], atol=1e-6)


def test_within_same_language_at_layer_0_patches_something(gpt2_patch, llama_patch):
    _, trials = patch_experiment(
        gpt2_patch,
        llama_patch,
        None,
        options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[0], conditions=["within"]),
        return_trials=True,
    )
    assert (np.abs(trials["logp_a"] - trials["logp_a_clean"]) > 1e-6).any()


def test_unprojected_not_applicable_when_widths_differ(narrow_patch, gpt2_patch, parallel):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        maps = fit_patch_maps(narrow_patch, gpt2_patch, parallel["eng"], parallel["eng"])
    summary = patch_experiment(
        gpt2_patch, narrow_patch, maps, options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[1])
    )
    un = summary[summary["condition"] == "unprojected"]
    assert len(un) == 1 and not un["applicable"].iloc[0] and un["n"].iloc[0] == 0
    assert "widths differ" in un["reason"].iloc[0] and "16" in un["reason"].iloc[0]
    assert summary[summary["condition"] != "unprojected"]["applicable"].all()
    assert maps.maps[1][1].n_features_in_ == 16 and maps.maps[1][1].n_features_out_ == 32


def test_without_maps_the_map_conditions_are_not_applicable(gpt2_patch, llama_patch):
    summary = patch_experiment(
        gpt2_patch, llama_patch, None, options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[1])
    )
    na = summary[~summary["applicable"]]
    assert set(na["condition"]) == {"mapped", "shuffled", "noise"}
    assert (na["reason"] == "no maps given").all()


def test_missing_map_layers_are_reported(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    partial = {k: v for k, v in maps_llama_to_gpt2.maps.items() if k != 2}
    summary = patch_experiment(
        gpt2_patch, llama_patch, partial, options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[1])
    )
    na = summary[~summary["applicable"]]
    assert set(na["condition"]) == {"mapped", "shuffled", "noise"}
    assert na["reason"].str.contains(r"\[2\]").all()
    # maps for 1..L only: start 0 lacks one, start 1 runs
    late = {k: v for k, v in maps_llama_to_gpt2.maps.items() if k >= 1}
    summary = patch_experiment(
        gpt2_patch,
        llama_patch,
        late,
        options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[0, 1], conditions=["mapped"]),
    )
    assert summary.set_index("layer")["applicable"].to_dict() == {0: False, 1: True}
    assert summary["reason"].iloc[0] == "no map for target layer(s) [0]"


def test_maps_from_fit_layer_maps_records(tmp_path, gpt2_patch, llama_patch, parallel):
    """The saved maps of interlingua.maps.fit_layer_maps (A = donor, B = target) are accepted."""
    import warnings

    from interlingua.data.representations.extract import extract
    from interlingua.maps import fit_layer_maps
    from interlingua.patching.patch import _extraction_view

    reps_d = extract(_extraction_view(llama_patch), parallel["eng"], "mean", progress=False).pooled["mean"]
    reps_t = extract(_extraction_view(gpt2_patch), parallel["eng"], "mean", progress=False).pooled["mean"]
    pairs = [(donor_layer(k, gpt2_patch.n_states, llama_patch.n_states), k) for k in range(gpt2_patch.n_states)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = fit_layer_maps(reps_d, reps_t, tmp_path, layers=pairs)
    lm = as_layer_maps(records, gpt2_patch.n_states, llama_patch.n_states)
    assert sorted(lm.maps) == [0, 1, 2] and lm.donor_layer(1) == 2
    summary = patch_experiment(
        gpt2_patch,
        llama_patch,
        records,
        options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[1], conditions=["mapped"]),
    )
    assert summary["applicable"].all() and summary["estimator"].iloc[0] == "procrustes"


def test_last_token_rule_and_pairs(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    summary, trials = patch_experiment(
        gpt2_patch,
        llama_patch,
        maps_llama_to_gpt2,
        options=PatchOptions(
            languages=("rus", "rus"),
            countries=COUNTRIES,
            layers=[0],
            span_rule="last",
            pairs=20,
            conditions=["within", "mapped", "noise"],
        ),
        return_trials=True,
    )
    assert (summary["n"] == 20).all() and (summary["span_rule"] == "last").all()
    all_pairs = patch_experiment(
        gpt2_patch,
        llama_patch,
        None,
        options=PatchOptions(languages="eng", countries=COUNTRIES[:5], layers=[0], pairs="all", conditions=["none"]),
        return_trials=True,
    )[1]
    assert len(all_pairs) <= 5 * 4 and len(all_pairs) >= 10


def test_unprojected_from_the_same_model_equals_within(gpt2_patch):
    """Donor = target, same language: the donor's residual IS the target's own, so unprojected reproduces within."""
    _, trials = patch_experiment(
        gpt2_patch,
        gpt2_patch,
        None,
        options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[0, 1], conditions=["within", "unprojected"]),
        return_trials=True,
    )
    w = trials[trials["condition"] == "within"].reset_index(drop=True)
    u = trials[trials["condition"] == "unprojected"].reset_index(drop=True)
    np.testing.assert_array_equal(w["logp_a"], u["logp_a"])
    np.testing.assert_array_equal(w["norm_ratio"], u["norm_ratio"])
    assert (w["norm_ratio"] > 0).all()


def test_maps_from_representations_match_fit_patch_maps(llama_patch, gpt2_patch, parallel, maps_llama_to_gpt2):
    import warnings

    from interlingua.data.representations.extract import extract
    from interlingua.patching import maps_from_representations
    from interlingua.patching.patch import _extraction_view

    # the batches fit_patch_maps uses (16), so the representations are the same bytes
    reps_d = extract(_extraction_view(llama_patch), parallel["eng"], "mean", batch_size=16, progress=False).pooled[
        "mean"
    ]
    reps_t = extract(_extraction_view(gpt2_patch), parallel["deu"], "mean", batch_size=16, progress=False).pooled[
        "mean"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = maps_from_representations(reps_d, reps_t)
    assert sorted(lm.maps) == sorted(maps_llama_to_gpt2.maps)
    for k in lm.maps:
        assert lm.donor_layer(k) == maps_llama_to_gpt2.donor_layer(k)
        probe = reps_d[lm.donor_layer(k)][:5]
        np.testing.assert_allclose(lm.transform(k, probe), maps_llama_to_gpt2.transform(k, probe), rtol=1e-4, atol=1e-4)
    with pytest.raises(InterventionError):
        maps_from_representations(reps_d[:, :10], reps_t)


def test_patching_rows_carry_what_their_maps_were_fitted_on(gpt2_patch, llama_patch, maps_llama_to_gpt2):
    from interlingua.patching.patch import LayerMaps, maps_from_representations

    # the packaged fixture: 48 parallel sentences for widths 32; the rank is the smaller side's, as in maps.csv
    for k in maps_llama_to_gpt2.maps:
        facts = maps_llama_to_gpt2.fit_facts(k)
        assert facts["n_fit"] == 48 and 1 <= facts["rank"] <= 32
        assert facts["underdetermined"] == (facts["rank"] < 32)
    # 20 sentences for width 32: never fixed on every direction, whether measured on the rows or read off the maps
    from interlingua.maps import MapWarning

    rng = np.random.default_rng(0)
    with pytest.warns(MapWarning, match="not unique"):
        few = maps_from_representations(
            rng.standard_normal((llama_patch.n_states, 20, 32)).astype(np.float32),
            rng.standard_normal((gpt2_patch.n_states, 20, 32)).astype(np.float32),
        )
    facts = [few.fit_facts(k) for k in few.maps]
    assert all(
        {f: x[f] for f in ("n_fit", "rank", "underdetermined")} == {"n_fit": 20, "rank": 19, "underdetermined": True}
        for x in facts
    )
    # ||R - I||_F / sqrt(d) of an orthogonal R between unrelated sides: far from the identity's 0
    assert all(0.5 < x["dev"] <= 2.0 + 1e-9 for x in facts)
    given = LayerMaps(few.maps)  # fitted maps handed over without their rows
    assert all(given.fit_facts(k)["n_fit"] == 20 and given.fit_facts(k)["underdetermined"] for k in few.maps)
    summary = patch_experiment(
        gpt2_patch,
        llama_patch,
        few,
        options=PatchOptions(
            languages=("eng", "deu"),
            countries=COUNTRIES[:6],
            layers=[1],
            conditions=["none", "within", "mapped", "shuffled"],
            seed=0,
        ),
    )
    by = summary.set_index("condition")
    cols = ["map_n_fit", "map_rank", "map_underdetermined"]
    for cond in ("mapped", "shuffled"):
        assert tuple(by.loc[cond, cols]) == (20, 19, True)
    for cond in ("none", "within"):
        assert tuple(by.loc[cond, cols]) == (-1, -1, False)
    from interlingua.patching.patch import SUMMARY_COLUMNS

    assert list(summary.columns) == SUMMARY_COLUMNS
