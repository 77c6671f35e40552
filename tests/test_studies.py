"""The shipped study configs (configs/studies/): they validate and price offline, their stand-ins keep the
study's structure, and (pipeline) every stand-in runs and its report has every section of the study's report."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from interlingua.cli import main
from interlingua.config import load_spec, parse_spec
from interlingua.errors import ConfigError
from interlingua.studies.standin import STAND_INS, stand_in_spec

STUDIES = Path(__file__).resolve().parents[1] / "configs" / "studies"
NAMES = sorted(STAND_INS)

#: Each study's report, section by section (the source study's tables), and the heading of the interlingua
#: report that holds it. The stand-in's report must have every one.
SECTIONS: dict[str, dict[str, str]] = {
    "crossarch_1b": {
        "roster and config checks": "## Models",
        "coverage with blockers": "## Mergeability: what the weights share",
        "CKA triangle (matched / shuffled)": "## Last-layer triangle: `cka_linear_biased`",
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
    from interlingua.corpora.bible import bible_languages

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


@pytest.fixture(scope="session")
def study_store(tmp_path_factory) -> Path:
    """One store for every stand-in run (the zoo families are built once)."""
    return tmp_path_factory.mktemp("study-store")


@pytest.mark.pipeline
@pytest.mark.slow
@pytest.mark.zoo
@pytest.mark.skipif(
    os.environ.get("INTERLINGUA_STUDY_RUNS") != "1",
    reason="the stand-in runs build six zoo families and are not yet sized for CI; INTERLINGUA_STUDY_RUNS=1 runs them",
)
@pytest.mark.parametrize("name", NAMES)
def test_the_stand_in_runs_and_its_report_has_every_section_of_the_study(name, study_store, tmp_path):
    out = tmp_path / "out"
    code = main(
        [
            "run",
            str(STUDIES / f"{name}.yaml"),
            "--stand-in",
            "--cache-dir",
            str(study_store),
            "-o",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    headings = _headings(out / "report.md")
    missing = {
        what: head
        for what, head in SECTIONS[name].items()
        if not any(h == head or h.startswith(head) for h in headings)
    }
    assert not missing, f"the stand-in's report lacks {missing}; it has {headings}"
