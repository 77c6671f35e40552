"""A run's `patching:` section: maps from the run's stored sides, the probe experiment, patching.csv and a section."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


def _spec(tmp_path, gpt2, llama, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 40},
        "models": [{"name": "donor", "path": str(gpt2)}, {"name": "target", "path": str(llama)}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": False, "cross_model": "same_language"},
        "patching": {"donor": "donor", "target": "target", "layers": [0, 1], "countries": None},
    }
    spec.update(over)
    return spec


def test_patching_section_runs_from_stored_sides(tmp_path, tiny_gpt2_path, tiny_llama_path):
    res = run(_spec(tmp_path, tiny_gpt2_path, tiny_llama_path))
    full = pd.read_csv(res.output / "patching.csv", keep_default_na=False)
    # the identity control comes first: the target patched with itself through its self-map (40 rows, width 32)
    control = full[full["control"] == "identity"]
    assert len(control) and control.index.max() < full[full["control"] != "identity"].index.min()
    assert (control["experiment"] == "identity control: target:eng_Latn->target:eng_Latn").all()
    assert set(control["condition"]) == {"none", "within", "mapped"}
    assert (
        full[full["control"] != "twin"]["identity_control"] == "passed"
    ).all()  # stamped on the experiment's rows too
    assert (control["identity_control_dev"].astype(float) < 1e-6).all()
    # the twin control next (the target is a Llama: on by default): target patched into its rotated twin
    twin = full[full["control"] == "twin"]
    assert len(twin) and twin.index.max() < full[full["control"] == ""].index.min()
    assert set(twin["condition"]) == {"none", "within", "mapped"} and (twin["twin_model"] == "target").all()
    assert (full[full["control"] != "identity"]["twin_control"] == "passed").all(), twin["twin_control_note"].iloc[0]
    assert (twin["twin_control_dev"].astype(float) < 1e-6).all()
    assert (twin["twin_control_p1"].astype(float) == 1.0).all()
    assert (full[full["control"] == ""]["chain"] == "intact").all()
    table = full[full["control"] == ""].reset_index(drop=True)
    assert set(table["condition"]) == {"none", "within", "mapped", "unprojected", "shuffled", "noise"}
    assert set(table["layer"]) == {0, 1}
    assert (table["target"] == "target").all() and (table["donor"] == "donor").all()
    applicable = table[table["applicable"].astype(str) == "True"]
    assert (
        (applicable["flip_low"] <= applicable["flip_rate"]) & (applicable["flip_rate"] <= applicable["flip_high"])
    ).all()
    report = (res.output / "report.md").read_text()
    assert "## Cross-model patching" in report
    section = report[report.index("## Cross-model patching") :]
    assert section.index("### Identity control") < section.index("### Twin control") < section.index("| relation |")
    assert "Twin control **passed** for target" in section
    # the maps behind the map conditions: fitted on the run's 40 sentences, flagged as in maps.csv
    through_maps = table[table["condition"].isin(["mapped", "shuffled", "noise"])]
    assert (through_maps["map_n_fit"].astype(int) == 40).all()
    assert through_maps["map_rank"].astype(int).between(1, 32).all()
    flagged = through_maps["map_underdetermined"].astype(str) == "True"
    assert (flagged == (through_maps["map_rank"].astype(int) < 32)).all()
    assert ("**Under-determined maps**" in report) == bool(flagged.any())
    others = table[table["condition"].isin(["none", "within"])]
    assert (others["map_n_fit"].astype(int) == -1).all()
    info = json.loads((res.output / "run.json").read_text())
    spec = info["spec"]
    spec["overwrite"] = True
    again = run(spec)
    assert "patching" not in again.info["computed"]  # stored: not rerun
    pd.testing.assert_frame_equal(pd.read_csv(again.output / "patching.csv", keep_default_na=False), full)


def test_patching_names_run_models_and_poolings():
    base = {
        "output": "x",
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}],
    }
    with pytest.raises(ConfigError, match="patching.donor 'c' is not among models"):
        parse_spec({**base, "patching": {"donor": "c", "target": "a"}})
    with pytest.raises(ConfigError, match="patching.pooling"):
        parse_spec({**base, "patching": {"donor": "b", "target": "a", "pooling": "last"}})


def test_two_experiments_are_two_tasks_with_their_own_rows(tmp_path, tiny_gpt2_path, tiny_llama_path):
    from interlingua.pipeline.plan import build_plan
    from interlingua.pipeline.preflight import preflight

    experiments = [
        {"donor": "donor", "target": "target", "donor_language": "eng_Latn", "target_language": "deu_Latn"},
        {
            "donor": "target",
            "target": "target",
            "donor_language": "eng_Latn",
            "target_language": "deu_Latn",
            "layers": [1],
        },
    ]
    spec = _spec(
        tmp_path,
        tiny_gpt2_path,
        tiny_llama_path,
        patching={
            "experiments": experiments,
            "twin_control": False,
            "layers": [0, 1],
            "countries": ["FR", "DE", "IT", "ES", "JP"],
        },
    )
    checked = preflight(parse_spec(spec))
    plan = build_plan(checked.spec, checked.corpus, checked.fingerprints)
    controls = [t for t in plan.of_kind("patching") if t.control]
    tasks = [t for t in plan.of_kind("patching") if not t.control]
    assert len(tasks) == 2 and len({t.key for t in tasks}) == 2
    # one identity control for the one target side, at every start layer its experiments use, before them
    (control,) = controls
    assert (control.donor, control.target, control.languages, control.layers) == (
        "target",
        "target",
        ("deu_Latn", "deu_Latn"),
        (0, 1),
    )
    assert plan.tasks.index(control) < min(plan.tasks.index(t) for t in tasks)
    assert all(control.key in t.depends for t in tasks)
    assert [(t.donor, t.target, t.languages) for t in tasks] == [
        ("donor", "target", ("eng_Latn", "deu_Latn")),
        ("target", "target", ("eng_Latn", "deu_Latn")),
    ]
    res = run(spec)
    table = pd.read_csv(res.output / "patching.csv", keep_default_na=False)
    cross = table[table["experiment"] == "donor:eng_Latn->target:deu_Latn"]
    within = table[table["experiment"] == "target:eng_Latn->target:deu_Latn"]
    assert len(cross) + len(within) == len(table[table["control"] != "identity"])
    assert set(cross["layer"]) == {0, 1} and set(within["layer"]) == {1}  # the experiment's own layers
    assert (within["donor"] == "target").all() and (cross["donor"] == "donor").all()
    # equal widths within one model: the unprojected residual applies there, and not across these two widths
    unproj = within[within["condition"] == "unprojected"]
    assert unproj["applicable"].astype(str).eq("True").all() and (unproj["n"] > 0).all()
    experiments = table[table["control"] != "identity"]
    assert (experiments["target_language"] == "deu").all() and (experiments["donor_language"] == "eng").all()
    report = (res.output / "report.md").read_text()
    assert "### donor (eng) -> target (deu)" in report and "### target (eng) -> target (deu)" in report


def test_pairs_all_gives_every_ordered_pair_with_different_first_tokens(tmp_path, tiny_gpt2_path, tiny_llama_path):
    from transformers import AutoTokenizer

    from interlingua.patching import answer_token, load_probes

    countries = ["FR", "DE", "IT", "ES", "JP", "PE", "EG"]
    spec = _spec(
        tmp_path,
        tiny_gpt2_path,
        tiny_llama_path,
        patching={
            "twin_control": False,  # the twin control is tested in test_patching_section_runs_from_stored_sides
            "donor": "donor",
            "target": "target",
            "layers": [1],
            "countries": countries,
            "pairs": "all",
            "conditions": ["none", "within"],
        },
    )
    table = pd.read_csv(run(spec).output / "patching.csv", keep_default_na=False)
    tok = AutoTokenizer.from_pretrained(str(tiny_llama_path))
    probes = load_probes().probes("capital", "eng", countries)
    first = [answer_token(tok, p.prompt, p.continuation) for p in probes]
    valid = sum(1 for a in range(len(first)) for b in range(len(first)) if a != b and first[a] != first[b])
    assert valid > 0
    assert set(table["n"]) == {valid}
    assert set(table["pairs"].astype(str)) == {"all"}


@pytest.mark.parametrize(
    "patching, message",
    [
        ({"donor": "b", "target": "a", "experiments": [{"donor": "b", "target": "a"}]}, "not both"),
        ({"experiments": []}, "experiments"),
        ({"layers": [1]}, "needs target and donor"),
        (
            {"experiments": [{"donor": "b", "target": "a"}, {"donor": "b", "target": "a"}]},
            "repeats an earlier experiment",
        ),
        (
            {"experiments": [{"donor": "b", "target": "a"}, {"donor": "c", "target": "a"}]},
            r"patching.experiments\[1\].donor 'c' is not among models",
        ),
        ({"experiments": [{"donor": "b", "target": "a", "target_language": "fra_Latn"}]}, "not among corpus languages"),
        ({"donor": "b", "target": "a", "pairs": 0}, "positive integer"),
        ({"donor": "b", "target": "a", "pairs": "every"}, "pairs"),
        ({"donor": "b", "target": "a", "pairs": True}, "positive integer"),
        ({"donor": "b", "target": "a", "layers": [-1]}, "start layers >= 0"),
    ],
)
def test_bad_patching_sections_are_config_errors(patching, message):
    base = {
        "output": "x",
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}],
    }
    with pytest.raises(ConfigError, match=message):
        parse_spec({**base, "patching": patching})


def test_single_pair_form_is_one_experiment():
    from interlingua.patching.config import PatchingSpec

    pt = PatchingSpec(donor="b", target="a", layers=[0, 3], target_language="deu_Latn")
    (exp,) = pt.resolved()
    assert (exp.donor, exp.target, exp.donor_language, exp.target_language, exp.layers) == (
        "b",
        "a",
        None,
        "deu_Latn",
        [0, 3],
    )


def test_unknown_countries_and_relations_are_config_errors():
    base = {
        "output": "x",
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}],
    }
    with pytest.raises(ConfigError, match=r"patching.countries \['XX'\] are not in the probe data"):
        parse_spec({**base, "patching": {"donor": "b", "target": "a", "countries": ["FR", "XX"]}})
    with pytest.raises(ConfigError, match=r"patching.relations \['mayor'\] are unknown"):
        parse_spec({**base, "patching": {"donor": "b", "target": "a", "countries": ["FR"], "relations": ["mayor"]}})


def test_maps_fitted_on_aligned_words(tmp_path, tiny_gpt2_path, tiny_llama_path):
    """fit: words: one row per aligned word pair (thousands from a few hundred sentences), said in every row."""
    spec = _spec(
        tmp_path,
        tiny_gpt2_path,
        tiny_llama_path,
        patching={
            "twin_control": False,  # the twin control is tested in test_patching_section_runs_from_stored_sides
            "donor": "donor",
            "target": "target",
            "donor_language": "eng_Latn",
            "target_language": "deu_Latn",
            "layers": [1],
            "fit": "words",
            "countries": ["FR", "DE", "IT", "ES", "JP", "PE"],
            "conditions": ["none", "within", "mapped"],
        },
        alignment={"encoder": "target", "layer": 1, "n": 40},
    )
    res = run(spec)
    table = pd.read_csv(res.output / "patching.csv", keep_default_na=False)
    assert set(table["fit_rows"]) == {"aligned words (mean of each word's sub-word states)"}
    links = (
        int(pd.read_csv(res.output / "alignments.csv")["links"].iloc[0])
        if (res.output / "alignments.csv").is_file()
        else None
    )
    mapped = table[(table["condition"] == "mapped") & (table["control"] != "identity")]
    control = table[(table["condition"] == "mapped") & (table["control"] == "identity")]
    n_words = int(mapped["map_n_fit"].iloc[0])
    assert n_words > 40  # more rows than the 40 sentences they come from
    if links is not None:
        assert n_words <= links  # one row per link whose two words are covered
    # the control fits the target side's covered words onto themselves (each once; a word in several links is
    # several of the experiment's rows)
    assert 40 < int(control["map_n_fit"].iloc[0]) <= n_words
    assert (table["identity_control"] == "passed").all()


def test_underdetermined_fit_is_flagged_and_fails_the_identity_control(tmp_path, tiny_gpt2_path, tiny_llama_path):
    """12 sentence rows for width 32: every map is flagged under-determined and the identity control fails.

    Plain Procrustes on 12 rows is free on the 20 directions they do not span, so the self-map is not the
    identity; the run must say so (PatchWarning, every row's verdict) rather than report a null as a finding.
    """
    from interlingua.maps.errors import MapWarning
    from interlingua.patching.patch import PatchWarning

    spec = _spec(
        tmp_path,
        tiny_gpt2_path,
        tiny_llama_path,
        corpus={"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 12},
        patching={
            "twin_control": False,  # the twin control is tested in test_patching_section_runs_from_stored_sides
            "donor": "donor",
            "target": "target",
            "layers": [1],
            "countries": ["FR", "DE", "IT", "ES", "JP", "PE"],
            "conditions": ["none", "within", "mapped"],
        },
    )
    with pytest.warns(PatchWarning, match="identity control FAILED"), pytest.warns(MapWarning):
        res = run(spec)
    table = pd.read_csv(res.output / "patching.csv", keep_default_na=False)
    mapped = table[table["condition"] == "mapped"]
    assert len(mapped) and (mapped["map_n_fit"].astype(int) == 12).all()
    assert (mapped["map_rank"].astype(int) <= 12).all()
    assert (mapped["map_underdetermined"].astype(str) == "True").all()
    assert (table["identity_control"] == "failed").all()
    control = table[(table["control"] == "identity") & (table["condition"] == "mapped")]
    assert (control["identity_control_dev"].astype(float) > 0.1).all()
    report = (res.output / "report.md").read_text()
    section = report[report.index("## Cross-model patching") :]
    assert section.index("**IDENTITY CONTROL FAILED**") < section.index("| relation |")
    assert "**Under-determined maps**" in section


def test_identity_control_mapped_equals_within_inside_the_intervals(tmp_path, tiny_gpt2_path, tiny_llama_path):
    """With n_fit >= 4 x width the self-map is the identity, so mapped's rates sit inside within's intervals."""
    spec = _spec(
        tmp_path,
        tiny_gpt2_path,
        tiny_llama_path,
        corpus={"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 128},
        patching={
            "twin_control": False,  # the twin control is tested in test_patching_section_runs_from_stored_sides
            "donor": "donor",
            "target": "target",
            "layers": [1],
            "countries": ["FR", "DE", "IT", "ES", "JP", "PE"],
            "conditions": ["none", "within", "mapped"],
        },
    )
    table = pd.read_csv(run(spec).output / "patching.csv", keep_default_na=False)
    control = table[table["control"] == "identity"]
    mapped = control[control["condition"] == "mapped"].set_index(["relation", "layer"])
    within = control[control["condition"] == "within"].set_index(["relation", "layer"])
    assert (mapped["map_n_fit"].astype(int) >= 4 * 32).all()
    assert (mapped["map_underdetermined"].astype(str) == "False").all()
    assert (mapped["identity_control_dev"].astype(float) < 1e-6).all()
    for rate in ("flip", "success"):
        inside = (within[f"{rate}_low"] <= mapped[f"{rate}_rate"]) & (mapped[f"{rate}_rate"] <= within[f"{rate}_high"])
        assert inside.all()
    assert (table["identity_control"] == "passed").all()


def test_fit_probes_runs_with_both_controls(tmp_path, tiny_gpt2_path, tiny_llama_path):
    """``fit: probes``: maps from the probe prompts' subject states, 3-fold over 6 countries; both controls run."""
    spec = _spec(
        tmp_path,
        tiny_gpt2_path,
        tiny_llama_path,
        patching={
            "donor": "donor",
            "target": "target",
            "layers": [1],
            "fit": "probes",
            "probe_folds": 3,
            "countries": ["FR", "DE", "IT", "ES", "JP", "PE"],
            "relations": ["capital"],
            "conditions": ["none", "within", "mapped", "shuffled"],
        },
    )
    table = pd.read_csv(run(spec).output / "patching.csv", keep_default_na=False)
    assert table["fit_rows"].str.startswith("probe prompts' subject states").all()
    assert "3-fold over 6 countries" in table["fit_rows"].iloc[0]
    mapped = table[table["condition"] == "mapped"]
    # 7 relations x 7 language pairs (the experiment's eng->eng and every probe language with itself, deduplicated
    # to 6) x the 4 training countries of a fold, fewer where a relation lacks a country
    assert (mapped["map_n_fit"].astype(int) > 32).all()
    assert set(table["control"]) == {"identity", "twin", ""}
    twin = table[table["control"] == "twin"]
    assert (twin["twin_control"] == "passed").all(), twin["twin_control_note"].iloc[0]
    assert (table[table["control"] == ""]["chain"] == "intact").all()
