"""The patching identity control: a side's map onto itself must be the identity and must patch like ``within``.

Donor = target model and language, the map fitted from the target's own rows onto themselves: with enough rows
it is the identity, so ``mapped`` writes the very vectors ``within`` writes; with too few rows plain Procrustes is
free on the unseen directions, which the patch-site states occupy, and the control fails, while
``procrustes_span`` (identity off the span) passes.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from interlingua.maps import MapWarning
from interlingua.patching import PatchOptions, maps_from_representations, patch_experiment
from interlingua.patching.patch import identity_control_verdict, identity_deviation

COUNTRIES = ["FR", "DE", "RU", "JP", "ES", "IT", "PT", "GR", "PL", "SE", "EG", "KE"]


def _rows_outnumbering(model, n: int, seed: int = 0) -> np.ndarray:
    """``n`` rows per hidden state with the scale of the model's states (anisotropic, offset): full rank for n > d."""
    rng = np.random.default_rng(seed)
    d = model.width
    return np.stack([rng.standard_normal((n, d)) * np.geomspace(3.0, 0.1, d) + 0.5 for _ in range(model.n_states)])


def test_identity_control_recovers_the_identity_and_mapped_equals_within(gpt2_patch):
    reps = _rows_outnumbering(gpt2_patch, 4 * gpt2_patch.width)  # n_fit = 4 x width
    maps = maps_from_representations(reps, reps)
    for k in maps.maps:
        assert maps.fit_facts(k)["underdetermined"] is False
        assert identity_deviation(maps.maps[k][1]) < 1e-10
    summary, trials = patch_experiment(
        gpt2_patch,
        gpt2_patch,
        maps,
        options=PatchOptions(
            languages="eng", countries=COUNTRIES, layers=[0, 1], conditions=["none", "within", "mapped", "unprojected"]
        ),
        return_trials=True,
    )
    verdict = identity_control_verdict(summary)
    assert verdict["identity_control"] == "passed", verdict["identity_control_note"]
    assert verdict["identity_control_dev"] < 1e-10
    assert verdict["identity_control_cos"] == pytest.approx(1.0, abs=1e-12) and verdict["identity_control_p1"] == 1.0
    w = trials[trials["condition"] == "within"].reset_index(drop=True)
    m = trials[trials["condition"] == "mapped"].reset_index(drop=True)
    u = trials[trials["condition"] == "unprojected"].reset_index(drop=True)
    # the mapped vector is the target's own to rounding, so every outcome agrees with within (and unprojected)
    np.testing.assert_allclose(m["logp_a"], w["logp_a"], atol=1e-4)
    np.testing.assert_allclose(m["logp_answer_a"], w["logp_answer_a"], atol=1e-4)
    np.testing.assert_allclose(m["norm_ratio"], w["norm_ratio"], rtol=1e-9)
    assert (m["flip"] == w["flip"]).all() and (m["top1"] == w["top1"]).all()
    np.testing.assert_array_equal(u["logp_a"], w["logp_a"])
    # same model and language: the gap to unprojected is exactly mapped's rate minus unprojected's
    rows = summary.set_index(["layer", "condition"])
    for j in (0, 1):
        assert rows.loc[(j, "mapped"), "unprojected_gap_flip"] == pytest.approx(
            rows.loc[(j, "mapped"), "flip_rate"] - rows.loc[(j, "unprojected"), "flip_rate"], abs=0
        )
    assert summary[summary["condition"] != "mapped"]["unprojected_gap_flip"].isna().all()


def test_underdetermined_self_map_fails_the_control_and_procrustes_span_passes(gpt2_patch):
    reps = _rows_outnumbering(gpt2_patch, 12, seed=1)  # 11 centred rows for width 32
    with pytest.warns(MapWarning, match="not unique"):
        plain = maps_from_representations(reps, reps)
    span = maps_from_representations(reps, reps, estimator="procrustes_span")
    assert all(plain.fit_facts(k)["underdetermined"] and plain.fit_facts(k)["rank"] == 11 for k in plain.maps)
    kw = {"languages": "eng", "countries": COUNTRIES, "layers": [1], "conditions": ["none", "within", "mapped"]}
    bad = identity_control_verdict(patch_experiment(gpt2_patch, gpt2_patch, plain, options=PatchOptions(**kw)))
    good = identity_control_verdict(patch_experiment(gpt2_patch, gpt2_patch, span, options=PatchOptions(**kw)))
    assert bad["identity_control"] == "failed" and bad["identity_control_dev"] > 0.5
    # the identity on the 11 directions its rows determine, but the patch-site states are off that span
    assert bad["identity_control_span_dev"] < 1e-9
    assert "patch-site worst direction error" in bad["identity_control_note"]
    assert bad["identity_control_cos"] < 0.99
    assert good["identity_control"] == "passed" and good["identity_control_dev"] < 1e-10


def test_report_says_a_failed_control_before_any_result(gpt2_patch, tmp_path):
    from interlingua.patching.report import patching_section

    reps = _rows_outnumbering(gpt2_patch, 12, seed=1)
    with pytest.warns(MapWarning, match="not unique"):
        plain = maps_from_representations(reps, reps)
    summary = patch_experiment(
        gpt2_patch,
        gpt2_patch,
        plain,
        options=PatchOptions(languages="eng", countries=COUNTRIES, layers=[1], conditions=["none", "within", "mapped"]),
    )
    verdict = identity_control_verdict(summary)
    control = summary.assign(experiment="identity control: m:eng->m:eng", control="identity", **verdict)
    experiment = summary.assign(experiment="d:eng->m:eng", control="", **verdict)
    text = "\n".join(patching_section(pd.concat([control, experiment], ignore_index=True), tmp_path))
    failed = text.index("**IDENTITY CONTROL FAILED**")
    assert failed < text.index("| relation |") and "**not findings**" in text[failed : text.index("\n", failed)]
    assert "||R - I||_F / sqrt(d) = " in text
    # the unpatched accuracy per relation and target side, from the experiment's none rows
    assert "Unpatched accuracy" in text


def _cell(condition: str, rate: float, n: int = 40) -> dict:
    from interlingua.analysis.stats import wilson_interval

    lo, hi = wilson_interval(round(rate * n), n)
    return {
        "relation": "capital",
        "donor_language": "deu",
        "target_language": "deu",
        "layer": 2,
        "condition": condition,
        "applicable": True,
        "n": n,
        "flip_rate": rate,
        "flip_low": lo,
        "flip_high": hi,
        "success_rate": rate,
        "success_low": lo,
        "success_high": hi,
        "success_answer_rate": rate,
        "success_answer_low": lo,
        "success_answer_high": hi,
        "map_dev": 0.0 if condition == "mapped" else math.nan,
        "map_site_cos": 1.0 if condition == "mapped" else math.nan,
        "map_site_p1": 1.0 if condition == "mapped" else math.nan,
    }


def test_verdict_tells_a_clear_difference_from_a_close_one():
    from interlingua.analysis.stats import wilson_interval

    lo, hi = wilson_interval(36, 40)  # within 0.9: interval about [0.77, 0.96]
    assert lo > 0.7 and hi < 0.97
    near = identity_control_verdict(pd.DataFrame([_cell("within", 0.9), _cell("mapped", 0.85)]))
    far = identity_control_verdict(pd.DataFrame([_cell("within", 0.9), _cell("mapped", 0.5)]))
    assert near["identity_control"] == "passed"
    assert (
        far["identity_control"] == "failed"
        and "capital j=2: mapped flip 0.500 vs within 0.900" in far["identity_control_note"]
    )
    moved = pd.DataFrame([_cell("within", 0.9), {**_cell("mapped", 0.9), "map_dev": 0.3}])
    assert identity_control_verdict(moved)["identity_control"] == "failed"  # the patch agrees but R is not I
