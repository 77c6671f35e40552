"""The shipped study configs (configs/studies/): they validate and price offline, their stand-ins keep the
study's structure, and (pipeline) every stand-in runs and its report has every section of the study's report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from interlingua.cli import main
from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import load_spec, parse_spec
from interlingua.studies.standin import STAND_INS, stand_in_spec

STUDIES = Path(__file__).resolve().parents[1] / "configs" / "studies"
NAMES = sorted(STAND_INS)

#: Each study's report, section by section (the source study's tables), and the heading of the interlingua
#: report that holds it. The stand-in's report must have every one.
SECTIONS: dict[str, dict[str, str]] = {
    "crossarch_1b": {
        "roster and config checks": "## Models",
        "coverage with blockers": "## Mergeability: what the weights share",
        "CKA triangle (matched / shuffled)": "## Last-layer triangles",
        "CKA matched vs shuffled, every pair": "## Last layer, every pair",
        "diagnostic matrix (retrieval P@1)": "## Maps between sides (held-out sentences)",
        "per-model quality": "## Model quality",
        "checkpoint summary and trajectory bins": "### Checkpoint arm: which diagnostics say the same thing?",
        "native pair: the barrier": "### Loss barriers",
        "transport summary with the shuffled-plan control": "## Fusion by optimal transport",
        "correlation tables with their n caveat": "## What predicts alignment",
        "URIEL distances": "## Typology",
    },
    "goldfish_convergence": {
        "models": "## Models",
        "matched vs shuffled CKA, every pair": "## Last layer, every pair",
        "layerwise matched vs shuffled": "## Layerwise matched vs shuffled",
        "three poolings": "## Poolings compared",
        "Procrustes / affine / MLP maps, P@1 and MSE, residual analysis": "## Maps between sides (held-out sentences)",
        "cross-model patching": "## Cross-model patching",
        "model quality (NLL)": "## Model quality",
        "predictors of alignment": "## What predicts alignment",
        "URIEL distances": "## Typology",
    },
    "goldfish_bilingual_audit": {
        "the audit: adapters, tokenizers, NLL vs chance": "## Audit: is each model what it claims to be?",
        "last-layer summary by language pair": "## Last layer, every pair",
        "layerwise matched vs shuffled": "## Layerwise matched vs shuffled",
        "model quality vs alignment": "## Model quality",
        "language pair vs URIEL distance, the n caveat": "## What predicts alignment",
    },
}


def _dumped(name: str) -> dict:
    return load_spec(STUDIES / f"{name}.yaml").model_dump(exclude_unset=True)


def test_every_study_config_has_a_stand_in_and_a_section_list():
    assert sorted(p.stem for p in STUDIES.glob("*.yaml")) == NAMES == sorted(SECTIONS)


@pytest.mark.parametrize("name", NAMES)
def test_the_stand_in_keeps_the_studys_structure(name):
    real = load_spec(STUDIES / f"{name}.yaml")
    stand = parse_spec(stand_in_spec(_dumped(name), STUDIES / f"{name}.yaml"))
    set_names = {m.name for m in stand.models} - {m.name for m in real.models}
    assert [m.name for m in stand.models][: len(real.models)] == [m.name for m in real.models]
    assert all(n.split("/")[0] in {s.name for s in real.model_sets} for n in set_names)
    assert bool(set_names) == bool(real.model_sets)
    assert stand.corpus.source == "bible" and len(stand.corpus.languages) == len(real.corpus.languages)
    assert all(m.zoo and not m.path for m in stand.models)
    for section in ("maps", "audit", "quality", "predictors", "mergeability", "patching", "transport", "alignment"):
        assert (getattr(stand, section) is None) == (getattr(real, section) is None), section
    assert len(stand.pairs.explicit) == len(real.pairs.explicit)
    assert stand.pooling == real.pooling and stand.measures == real.measures
    if real.mergeability and real.mergeability.checkpoints:
        assert len(stand.mergeability.checkpoints.models) == len(real.mergeability.checkpoints.models)
    if real.transport:
        assert len(stand.transport.pairs) == len(real.transport.pairs)
    if real.patching:
        assert len(stand.patching.resolved()) == len(real.patching.resolved())
    if real.maps and isinstance(real.maps.pairs, list):
        assert len(stand.maps.pairs) == len(real.maps.pairs)
    assert stand.output == real.output + "-stand-in"


def test_the_stand_in_swaps_only_languages_the_bible_lacks():
    from interlingua.data.corpora.bible import bible_languages

    for name in NAMES:
        stand = parse_spec(stand_in_spec(_dumped(name), f"{name}.yaml"))
        assert set(stand.corpus.languages) <= set(bible_languages())
    audit = parse_spec(stand_in_spec(_dumped("goldfish_bilingual_audit"), "goldfish_bilingual_audit.yaml"))
    assert audit.corpus.languages == ["eng_Latn", "rus_Cyrl", "spa_Latn", "deu_Latn", "pol_Latn"]
    cross = parse_spec(stand_in_spec(_dumped("crossarch_1b"), "crossarch_1b.yaml"))
    assert cross.corpus.languages == load_spec(STUDIES / "crossarch_1b.yaml").corpus.languages


def test_stand_in_of_another_config_and_of_a_model_without_stand_in_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="--stand-in knows the studies"):
        stand_in_spec(_dumped("crossarch_1b"), tmp_path / "mine.yaml")
    data = _dumped("crossarch_1b")
    data["models"].append({"name": "extra", "path": "someone/model"})
    with pytest.raises(ConfigError, match="model 'extra' has no stand-in"):
        stand_in_spec(data, "crossarch_1b.yaml")


@pytest.mark.parametrize("name", NAMES)
def test_study_configs_validate_offline(name, capsys):
    assert main(["validate", str(STUDIES / f"{name}.yaml"), "--offline"]) == 0
    out = capsys.readouterr().out
    assert "valid offline" in out and "not checked offline (they need the Hub)" in out


def test_offline_validation_still_refuses_a_malformed_hub_id(tmp_path, capsys):
    data = yaml.safe_load((STUDIES / "crossarch_1b.yaml").read_text(encoding="utf-8"))
    data["models"][0]["path"] = "EleutherAI/pythia 1.4b"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["validate", str(bad), "--offline"]) == 2
    assert "models.1.path: 'EleutherAI/pythia 1.4b' is not a Hub id" in capsys.readouterr().err


@pytest.mark.parametrize("name", NAMES)
def test_plan_offline_prints_the_cost_of_the_real_study(name, capsys):
    assert main(["plan", str(STUDIES / f"{name}.yaml"), "--offline", "--gpus", "4"]) == 0
    out = capsys.readouterr().out
    assert "published-shapes table" in out
    download = re.search(r"download: ([0-9.]+) GB of weights \((\d+) repo revisions", out)
    assert download is not None and float(download.group(1)) > 0
    assert re.search(r"GiB \([0-9.]+ B parameters x 4 bytes", out)  # the configs load float32
    assert re.search(r"one GPU: about [0-9.]+ (s|min|h)", out) and re.search(r"Ray, 4 GPUs .*: about ", out)


def test_published_shapes_give_the_parameter_counts_the_studies_report():
    from interlingua.studies.shapes import published_shape

    pythia = published_shape("EleutherAI/pythia-1.4b")
    # the cross-architecture study: 1,208,602,624 shared block parameters (with biases and norms, which the
    # table leaves out: under 0.1%)
    assert abs(pythia.block_params - 1_208_602_624) / 1_208_602_624 < 1e-3
    assert published_shape("goldfish-models/eng_latn_1000mb").layers == 12
    assert published_shape("goldfish-models/eng_latn_5mb").hidden == 512
    assert published_shape("nobody/unknown") is None


def _headings(report: Path) -> list[str]:
    return [line.strip() for line in report.read_text(encoding="utf-8").splitlines() if line.startswith("#")]


@pytest.fixture(scope="module")
def stand_in_run(tmp_path_factory):
    """``stand_in_run(name)``: the output folder of the study's stand-in, run once per module (CLI, one store
    for every study: families two studies share, such as the cross-architecture ones, are built once)."""
    store = tmp_path_factory.mktemp("study-store")
    runs: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in runs:
            out = tmp_path_factory.mktemp(f"stand-in-{name}") / "out"
            args = ["run", str(STUDIES / f"{name}.yaml"), "--stand-in", "--cache-dir", str(store)]
            assert main([*args, "-o", str(out), "--no-progress"]) == 0
            runs[name] = out
        return runs[name]

    return get


@pytest.mark.pipeline
@pytest.mark.slow
@pytest.mark.zoo
@pytest.mark.parametrize("name", NAMES)
def test_the_stand_in_runs_and_its_report_has_every_section_of_the_study(name, stand_in_run):
    headings = _headings(stand_in_run(name) / "report.md")
    missing = {
        what: head
        for what, head in SECTIONS[name].items()
        if not any(h == head or h.startswith(head) for h in headings)
    }
    assert not missing, f"the stand-in's report lacks {missing}; it has {headings}"


@pytest.mark.pipeline
@pytest.mark.slow
@pytest.mark.zoo
@pytest.mark.parametrize("name", NAMES)
def test_the_stand_in_compares_every_pair_and_model_of_the_study(name, stand_in_run):
    out = stand_in_run(name)
    info = json.loads((out / "run.json").read_text(encoding="utf-8"))
    stand = parse_spec(stand_in_spec(_dumped(name), STUDIES / f"{name}.yaml"))
    assert sorted(info["models"]) == sorted(m.name for m in stand.models)
    results = pd.read_csv(out / "results.csv")
    assert set(results["pooling"]) == set(stand.pooling)
    assert set(results["measure"]) == set(stand.measures)
    real = load_spec(STUDIES / f"{name}.yaml")
    if real.pairs.explicit:  # every pair the study names, each compared (within-model runs: below)
        assert results["pair"].nunique() == len(real.pairs.explicit) == len(info["pairs"])
    quality = pd.read_csv(out / "quality.csv")  # every model that reads text (checkpoints: weights only)
    assert set(quality["model"]) == set(results["model_a"]) | set(results["model_b"])


@pytest.mark.pipeline
@pytest.mark.slow
@pytest.mark.zoo
def test_the_crossarch_stand_in_fuses_every_directed_pair_and_tables_the_checkpoints(stand_in_run):
    out = stand_in_run("crossarch_1b")
    real = load_spec(STUDIES / "crossarch_1b.yaml")
    fusion = pd.read_csv(out / "transport.csv")
    assert len(fusion[["target", "donor"]].drop_duplicates()) == len(real.transport.pairs) == 20
    # the within-run checkpoint pairs: 13 checkpoints, 13 * 12 / 2 = 78, every diagnostic over all of them
    checkpoints = pd.read_csv(out / "checkpoint_correlations.csv")
    assert (checkpoints["n"] == 78).all()
    weights = pd.read_csv(out / "mergeability.csv")
    assert len(weights) == len(real.mergeability.pairs) + 78 and weights["checkpoint_arm"].sum() == 78


@pytest.mark.pipeline
@pytest.mark.slow
@pytest.mark.zoo
def test_the_convergence_stand_in_patches_every_experiment(stand_in_run):
    out = stand_in_run("goldfish_convergence")
    real = load_spec(STUDIES / "goldfish_convergence.yaml")
    patching = pd.read_csv(out / "patching.csv")
    experiments = patching[~patching["experiment"].str.startswith("identity control")]
    # the study's five target languages, Chinese among them (probes key it `zho`, the corpus `cmn_Hans`)
    assert sorted(set(experiments["target"])) == sorted(e.target for e in real.patching.resolved())
    assert len(real.patching.resolved()) == 5 and "gf-zho-1000mb" in set(experiments["target"])
    assert set(experiments["condition"]) == set(real.patching.conditions)
    assert set(patching["target_language"]) == {"deu", "spa", "rus", "zho", "jpn"}
    assert len(real.patching.relations) == 7  # the study's seven; the stand-in scores those its tokenizers can
    assert set(experiments["relation"]) == set(real.patching.relations) - {"calling_code", "domain"}


@pytest.mark.pipeline
@pytest.mark.slow
@pytest.mark.zoo
def test_the_audit_stand_in_audits_the_base_and_every_adapter(stand_in_run):
    out = stand_in_run("goldfish_bilingual_audit")
    audit = pd.read_csv(out / "audit.csv").set_index("model")
    assert len(audit) == 1 + 8  # the base and the model set's 4 pairs x (merged, trained)
    merged = audit[audit.index.str.endswith("-merged")]
    trained = audit[audit.index.str.endswith("-trained")]
    assert (merged["adapter_verdict"] == "identity").all() and len(merged) == 4
    assert (trained["adapter_verdict"] == "active").all() and len(trained) == 4
