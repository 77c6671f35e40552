"""``fit: probes``: maps fitted on the patch site's own states (probe prompts), K-fold over countries."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from interlingua.maps.planted import rotation_deviation
from interlingua.patching import PatchModel, PatchOptions, load_probes, patch_experiment
from interlingua.patching.errors import InterventionError
from interlingua.patching.patch import ProbeFitOptions, country_folds, fit_probe_maps, twin_control_verdict
from interlingua.patching.twin import make_twin

COUNTRIES = ["FR", "DE", "RU", "JP", "ES", "IT", "PT", "GR", "PL", "SE", "EG", "KE", "PE", "AT", "NO"]


def test_country_folds_deal_every_country_once() -> None:
    folds = country_folds(COUNTRIES, 4, seed=1)
    assert set(folds) == set(COUNTRIES) and set(folds.values()) == {0, 1, 2, 3}
    sizes = np.bincount(list(folds.values()))
    assert sizes.max() - sizes.min() <= 1
    assert folds == country_folds(COUNTRIES, 4, seed=1)
    assert folds != country_folds(COUNTRIES, 4, seed=2)
    with pytest.raises(InterventionError, match="probe folds"):
        country_folds(COUNTRIES, 1)


def test_probe_maps_never_see_the_country_they_patch(gpt2_patch, llama_patch) -> None:
    maps = fit_probe_maps(
        gpt2_patch,
        llama_patch,
        options=ProbeFitOptions(relations=["capital", "continent"], countries=COUNTRIES, folds=5),
        language_pairs=[("eng", "eng"), ("deu", "deu")],
        layers=[1, 2],
        estimator="ridge",
    )
    probes = load_probes()
    for c, f in maps.fold_of.items():
        assert c not in maps.trained_on[f]  # the map a country is patched through never saw it
        assert maps.trained_on[f] == {x for x, g in maps.fold_of.items() if g != f}
    # rows: one per (relation, language pair, country) of the training countries
    for f, lm in maps.folds.items():
        n = sum(
            len([c for c in probes.countries_for(r, COUNTRIES) if maps.fold_of[c] != f]) * 2
            for r in ("capital", "continent")
        )
        assert lm.fit_facts(1)["n_fit"] == n
    # a country's row goes through its own fold's map
    x = np.random.default_rng(0).standard_normal((3, gpt2_patch.width))
    codes = ["FR", "JP", "KE"]
    out = maps.transform_countries(1, x, codes)
    for i, c in enumerate(codes):
        np.testing.assert_allclose(out[i], maps.folds[maps.fold_of[c]].transform(1, x[i : i + 1])[0], rtol=1e-12)


def test_probe_maps_into_the_twin_recover_q_and_pass_the_twin_control(llama_patch) -> None:
    """Real states on both sides: the model's and its twin's subject states on the probe prompts."""
    lm = copy.deepcopy(llama_patch.lm)
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for name, p in lm.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g) * 1.5)
    model = PatchModel.wrap(lm, llama_patch.tokenizer, "m")
    twin_lm, q = make_twin(lm, seed=2)
    twin = PatchModel.wrap(twin_lm, llama_patch.tokenizer, "m~twin")
    maps = fit_probe_maps(
        model,
        twin,
        options=ProbeFitOptions(countries=COUNTRIES, folds=3),
        language_pairs=[("eng", "eng"), ("deu", "deu"), ("spa", "spa")],
        layers=[1, 2, 3],
    )
    L = model.num_layers
    devs = {k: max(rotation_deviation(f.maps[k][1].coef_, q) for f in maps.folds.values()) for k in (1, 2)}
    assert all(maps.fit_facts(k)["rank"] == 32 for k in (1, 2))
    assert max(devs.values()) < 1e-5  # float32 states of both models: Q to their rounding
    summary, trials = patch_experiment(
        twin,
        model,
        maps,
        options=PatchOptions(
            languages="eng", countries=COUNTRIES, layers=[1, 2], conditions=["none", "within", "mapped"]
        ),
        return_trials=True,
    )
    site = {k: p1 for per in trials.attrs["site"].values() for k, (_, p1) in per.items() if k < L}
    verdict = twin_control_verdict(summary, devs, site)
    assert verdict["twin_control"] == "passed", verdict["twin_control_note"]
