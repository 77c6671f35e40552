"""The twin control: a model patched into its rotated twin through the map fitted between them (answer: Q).

The identity control cannot tell a map from its transpose (I = I^T); the twin control can: fitted right, the
map is Q, the model's states land on the twin's own (patch-site P@1 1) and ``mapped`` patches like ``within``;
applied transposed (Q^T) it is ~sqrt(2) from Q and the model's states land elsewhere.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from interlingua.maps.planted import rotation_deviation
from interlingua.patching import PatchModel, PatchOptions, maps_from_representations, patch_experiment
from interlingua.patching.patch import TWIN_CONTROL_MAX_DEV, LayerMaps, identity_control_verdict, twin_control_verdict
from interlingua.patching.twin import final_gain, make_twin, twin_rows

COUNTRIES = ["FR", "DE", "RU", "JP", "ES", "IT", "PT", "GR", "PL", "SE", "EG", "KE"]


@pytest.fixture(scope="module")
def pair(llama_patch):
    """(model, its twin, Q): the tiny Llama with random RMSNorm gains (so the fold matters), and its twin."""
    lm = copy.deepcopy(llama_patch.lm)
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for name, p in lm.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g) * 1.5)
    model = PatchModel.wrap(lm, llama_patch.tokenizer, "llama-gains")
    twin, q = make_twin(lm, seed=11)
    return model, PatchModel.wrap(twin, llama_patch.tokenizer, "llama-gains~twin"), q


def _rows(model, n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    d = model.width
    return np.stack([rng.standard_normal((n, d)) * np.geomspace(3.0, 0.1, d) + 0.5 for _ in range(model.n_states)])


def _site_p1(trials, last: int) -> dict[int, float]:
    worst: dict[int, float] = {}
    for per_layer in trials.attrs["site"].values():
        for k, (_, p1) in per_layer.items():
            if k < last:
                worst[k] = min(worst.get(k, 1.0), p1)
    return worst


def _run(model, twin, maps):
    return patch_experiment(
        twin,
        model,
        maps,
        options=PatchOptions(
            languages="eng", countries=COUNTRIES, layers=[1, 2], conditions=["none", "within", "mapped"]
        ),
        return_trials=True,
    )


def test_map_to_twin_recovers_q_and_mapped_equals_within(pair):
    model, twin, q = pair
    reps = _rows(model, 4 * model.width)
    maps = maps_from_representations(reps, twin_rows(reps, q, final_gain(model.lm)))
    L = model.num_layers
    devs = {k: rotation_deviation(m.coef_, q) for k, (_, m) in maps.maps.items() if k < L}
    assert max(devs.values()) < 1e-10
    summary, trials = _run(model, twin, maps)
    verdict = twin_control_verdict(summary, devs, _site_p1(trials, L))
    assert verdict["twin_control"] == "passed", verdict["twin_control_note"]
    w = trials[trials["condition"] == "within"].reset_index(drop=True)
    m = trials[trials["condition"] == "mapped"].reset_index(drop=True)
    # the model's state through Q is the twin's own state to float32 rounding: every outcome agrees
    np.testing.assert_allclose(m["logp_a"], w["logp_a"], atol=1e-4)
    assert (m["top1"] == w["top1"]).all()


def test_map_applied_transposed_fails_the_twin_control(pair):
    model, twin, q = pair
    reps = _rows(model, 4 * model.width)
    right = maps_from_representations(reps, twin_rows(reps, q, final_gain(model.lm)))
    # the same fitted maps applied transposed (R^T = Q^T): what a map used in the wrong orientation does
    flipped = LayerMaps({k: (d, m.reverse()) for k, (d, m) in right.maps.items()}, right.facts)
    L = model.num_layers
    devs = {k: rotation_deviation(m.coef_, q) for k, (_, m) in flipped.maps.items() if k < L}
    assert min(devs.values()) > 1.0  # a random rotation's transpose is ~sqrt(2) from it
    summary, trials = _run(model, twin, flipped)
    verdict = twin_control_verdict(summary, devs, _site_p1(trials, L))
    assert verdict["twin_control"] == "failed"
    assert f"> {TWIN_CONTROL_MAX_DEV}" in verdict["twin_control_note"] and verdict["twin_control_p1"] < 1.0


def test_identity_control_cannot_see_a_transpose(llama_patch):
    """The identity's transpose is the identity: the same mistake passes the identity control."""
    reps = _rows(llama_patch, 4 * llama_patch.width)
    maps = maps_from_representations(reps, reps)
    flipped = LayerMaps({k: (d, m.reverse()) for k, (d, m) in maps.maps.items()}, maps.facts)
    summary = patch_experiment(
        llama_patch,
        llama_patch,
        flipped,
        options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[1], conditions=["none", "within", "mapped"]),
    )
    assert identity_control_verdict(summary)["identity_control"] == "passed"
