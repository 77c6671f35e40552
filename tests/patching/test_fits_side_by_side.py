"""``patching.fit`` as a list: every experiment and control once per fit, side by side in one table.

A single fit keeps the keys it always had (so a run with one fit, or the same fit listed beside others, reuses
what a single-fit run stored), and every row names its fit.
"""

from __future__ import annotations

import pandas as pd
import pytest

from interlingua.alignment.capability import ALIGNMENT_ENCODER
from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.plan import build_plan
from interlingua.pipeline.preflight import preflight
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

COUNTRIES = ["FR", "DE", "IT", "ES", "JP", "PE"]


def _spec(tmp_path, gpt2, llama, fit, **patching):
    return {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 40},
        "models": [{"name": "donor", "path": str(gpt2)}, {"name": "target", "path": str(llama)}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": False, "cross_model": "same_language"},
        "patching": {
            "donor": "donor",
            "target": "target",
            "layers": [1],
            "fit": fit,
            "probe_folds": 3,
            "countries": COUNTRIES,
            "relations": ["capital"],
            "conditions": ["none", "within", "mapped", "shuffled"],
            **patching,
        },
    }


def _patch_tasks(spec):
    checked = preflight(parse_spec(spec))
    return build_plan(checked.spec, checked.corpus, checked.fingerprints).of_kind("patching")


def test_each_fit_keeps_its_single_fit_keys(tmp_path, tiny_gpt2_path, tiny_llama_path):
    args = (tmp_path, tiny_gpt2_path, tiny_llama_path)
    single = {f: _patch_tasks(_spec(*args, f)) for f in ("sentences", "probes")}
    both = _patch_tasks(_spec(*args, ["sentences", "probes"]))
    # identity control, twin control and the experiment, once per fit
    assert len(both) == 6 and len({t.key for t in both}) == 6
    for f, tasks in single.items():
        assert len(tasks) == 3
        mine = {(t.control, t.key) for t in both if t.fit == f}
        assert mine == {(t.control, t.key) for t in tasks}  # the same keys: stored entries are reused
    # a one-element list is the single fit
    assert [t.key for t in _patch_tasks(_spec(*args, ["probes"]))] == [t.key for t in single["probes"]]
    # an experiment depends on its own fit's controls only
    for t in both:
        controls = {d for d in t.depends if d in {c.key for c in both if c.control}}
        assert all(c.fit == t.fit for c in both if c.key in controls)
        if not t.control:
            assert len(controls) == 2
    # controls first, in the fits' order
    order = [(t.control, t.fit) for t in both]
    assert order == [
        ("identity", "sentences"),
        ("identity", "probes"),
        ("twin", "sentences"),
        ("twin", "probes"),
        ("", "sentences"),
        ("", "probes"),
    ]


def test_two_fits_side_by_side_in_one_table(tmp_path, tiny_gpt2_path, tiny_llama_path):
    args = (tmp_path, tiny_gpt2_path, tiny_llama_path)
    first = run(_spec(*args, "sentences"))
    alone = pd.read_csv(first.output / "patching.csv", keep_default_na=False)
    assert (alone["fit"] == "sentences").all()
    assert not alone["experiment"].str.contains(r"\[fit:").any()  # one fit: the labels as before
    spec = _spec(*args, ["sentences", "probes"])
    spec["overwrite"] = True
    res = run(spec)
    # the sentences fit's three tasks were stored by the first run: only the probes fit's are computed
    assert res.info["computed"].get("patching") == 3
    table = pd.read_csv(res.output / "patching.csv", keep_default_na=False)
    assert set(table["fit"]) == {"sentences", "probes"}
    for fit, g in table.groupby("fit"):
        assert set(g["control"]) == {"identity", "twin", ""}
        assert g["experiment"].str.endswith(f"[fit: {fit}]").all()
        assert (g[g["control"] == ""]["chain"] == "intact").all()
    probes = table[(table["fit"] == "probes") & (table["condition"] == "mapped")]
    assert probes["fit_rows"].str.startswith("probe prompts' subject states").all()
    # the sentences fit's rows are the single-fit run's, relabelled only
    sent = table[table["fit"] == "sentences"].reset_index(drop=True)
    sent["experiment"] = sent["experiment"].str.replace(" [fit: sentences]", "", regex=False)
    pd.testing.assert_frame_equal(sent, alone)
    report = (res.output / "report.md").read_text()
    assert "[fit: probes]" in report and "[fit: sentences]" in report


@pytest.mark.parametrize(
    ("fit", "message"),
    [([], "empty list"), (["words", "words"], "repeats a fit"), ("rows", "fit"), (["sentences", "pixels"], "fit")],
)
def test_bad_fit_lists_are_config_errors(fit, message):
    base = {
        "output": "x",
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}],
    }
    with pytest.raises(ConfigError, match=message):
        parse_spec({**base, "patching": {"donor": "b", "target": "a", "fit": fit}})


def test_patching_figure_takes_a_wilson_bound_a_hair_below_its_rate(tmp_path):
    """Within at 30 of 30: Wilson's upper bound computes to 1 - 1e-16, below the rate 1.0 (a run crashed on it)."""
    from interlingua.analysis.stats.proportions import wilson_interval
    from interlingua.patching.figures import patching_figure

    low, high = wilson_interval(30, 30)
    row = {
        "relation": "capital",
        "donor_language": "eng",
        "target_language": "deu",
        "applicable": True,
        "condition": "within",
        "layer": 8,
        "flip_rate": 1.0,
        "flip_low": low,
        "flip_high": high,
    }
    path = patching_figure(pd.DataFrame([row]), "t", tmp_path / "f.png")
    assert path.exists() and path.stat().st_size > 0


def test_fit_words_with_an_encoder_given_as_a_model_spec_is_planned(tmp_path, tiny_gpt2_path, tiny_llama_path):
    """The word rows' encoder named by a path (not a run model), with no ``word_aligned`` pooling: pre-flight
    fingerprints it as an extra model and the plan has its align task (a planning KeyError before)."""
    spec = _spec(tmp_path, tiny_gpt2_path, tiny_llama_path, "words")
    spec["alignment"] = {"encoder": {"path": str(tiny_gpt2_path)}, "layer": 1, "n": 6}
    checked = preflight(parse_spec(spec))
    assert ALIGNMENT_ENCODER in checked.fingerprints  # checked and keyed like a run model
    plan = build_plan(checked.spec, checked.corpus, checked.fingerprints)
    assert plan.of_kind("alignment") and plan.of_kind("patching")
