"""The offline demo's command. The real run needs the packaged models (minutes on
2 cores), so it runs only with INTERLINGUA_DEMO_TESTS=1; the config path always runs."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from interlingua.alignment.capability import options as alignment_options
from interlingua.cli import main


def test_demo_print_config_applies_overrides(capsys, tmp_path):
    assert (
        main(
            [
                "demo",
                "--print-config",
                "-n",
                "50",
                "--languages",
                "eng_Latn",
                "arb_Arab",
                "--permutations",
                "10",
                "-o",
                str(tmp_path / "d"),
            ]
        )
        == 0
    )
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["corpus"]["n"] == 50 and cfg["corpus"]["languages"] == ["eng_Latn", "arb_Arab"]
    assert cfg["inference"]["permutations"] == 10 and cfg["output"] == str(tmp_path / "d")
    assert cfg["corpus"]["source"] == "bible"
    assert not (tmp_path / "d").exists()


@pytest.mark.demo
@pytest.mark.skipif(os.environ.get("INTERLINGUA_DEMO_TESTS") != "1", reason="set INTERLINGUA_DEMO_TESTS=1 (minutes)")
def test_small_demo_runs_on_packaged_models(tmp_path):
    out = tmp_path / "demo"
    assert (
        main(
            [
                "demo",
                "-n",
                "24",
                "--languages",
                "eng_Latn",
                "rus_Cyrl",
                "--permutations",
                "20",
                "-o",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    info = json.loads((out / "run.json").read_text())
    assert info["models"]["gemma3-270m"]["num_layers"] == 18
    assert info["models"]["smollm2-135m"]["num_layers"] == 30
    assert (out / "report.md").read_text().count("![") >= 3


def test_demo_all_zoo_config_is_valid_and_names_every_kind_of_zoo_piece():
    from interlingua.cli import demo_spec
    from interlingua.pipeline.config import parse_spec

    spec = parse_spec(demo_spec("demo_zoo"), source="zoo demo config")
    zoo = [m.zoo for m in spec.models if m.merge is None]  # a merge: of zoo checkpoints (mergeability)
    assert all(zoo) and any("@step" in z for z in zoo)
    merges = [m.merge for m in spec.models if m.merge is not None]
    assert merges and all(x.startswith("zoo:") for mg in merges for x in mg.models)
    assert spec.mergeability is not None and spec.mergeability.checkpoints is not None
    assert any(z.endswith("-lora") for z in zoo) and any(z.endswith("-lora-identity") for z in zoo)
    assert spec.maps is not None and spec.pairs.explicit


def test_demo_help_offers_all(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--all" in capsys.readouterr().out


def test_demo_all_patching_config_reuses_the_main_demos_sides():
    from importlib import resources

    from interlingua.cli import demo_spec
    from interlingua.pipeline.config import parse_spec

    assert resources.files("interlingua").joinpath("configs/demo_patching.yaml").is_file()
    spec = parse_spec(demo_spec("demo_patching"), source="patching demo config")
    main_spec = parse_spec(demo_spec("demo"), source="demo config")
    # the stored mean-pooled sides are keyed by corpus, sample seed, model files and these options
    assert spec.corpus == main_spec.corpus and spec.seeds.sample == main_spec.seeds.sample
    assert (spec.max_length, spec.batch_size, spec.special_tokens) == (
        main_spec.max_length,
        main_spec.batch_size,
        main_spec.special_tokens,
    )
    assert [m.package for m in spec.models] == [m.package for m in main_spec.models]
    assert spec.patching is not None and spec.patching.pooling in main_spec.pooling
    experiments = [(e.donor, e.target) for e in spec.patching.resolved()]
    assert experiments == [("smollm2-135m", "gemma3-270m"), ("gemma3-270m", "gemma3-270m")]
    assert spec.patching.pairs == 60 and len(spec.patching.countries or []) == 30
    assert set(spec.patching.conditions) == {"none", "within", "mapped", "unprojected", "shuffled", "noise"}
    # the paper's test properly: the identity control first, maps on aligned words of every verse, 7 relations
    assert spec.patching.identity_control and spec.patching.fit == "words" and alignment_options(spec).n is None
    assert len(spec.patching.relations) == 7


def test_demo_all_transport_configs():
    """The fusion demos: the packaged pair both ways (reusing the main demo's stored sides) and
    miniature-family pairs across languages, each with probe and evaluation verses disjoint."""
    from importlib import resources

    from interlingua.cli import demo_spec
    from interlingua.pipeline.config import parse_spec

    assert resources.files("interlingua").joinpath("configs/demo_transport.yaml").is_file()
    spec = parse_spec(demo_spec("demo_transport"), source="transport demo config")
    main_spec = parse_spec(demo_spec("demo"), source="demo config")
    assert spec.corpus == main_spec.corpus and spec.seeds.sample == main_spec.seeds.sample
    assert (spec.max_length, spec.batch_size) == (main_spec.max_length, main_spec.batch_size)
    assert spec.transport is not None
    directed = {(p.target, p.donor) for p in spec.transport.pairs}
    assert directed == {("gemma3-270m", "smollm2-135m"), ("smollm2-135m", "gemma3-270m")}
    assert 0.0 in spec.transport.alphas and spec.transport.probe_n + spec.transport.eval_n <= spec.corpus.n
    zoo = parse_spec(demo_spec("demo_zoo"), source="zoo demo config")
    assert zoo.transport is not None
    languages = {(p.target_language, p.donor_language) for p in zoo.transport.pairs}
    assert all(t != d for t, d in languages)  # each model reads its own language


def test_the_demo_extra_installs_what_demo_all_needs():
    """`make demo` installs `.[demo]`; `demo --all` runs every packaged demo config in that environment, so
    each optional dependency a demo section needs must be in the demo extra (before: POT was only in the test
    extra, and `demo --all` in the demo environment failed at its first transport plan)."""
    import re
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")
    from interlingua.cli import demo_spec
    from interlingua.pipeline.config import parse_spec

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    demo = {re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0].lower() for req in extras["demo"]}
    needs: set[str] = set()
    for name in ("demo", "demo_audit", "demo_zoo", "demo_patching", "demo_transport"):
        spec = parse_spec(demo_spec(name), source=name)
        if spec.transport is not None:
            needs.add("pot")
    assert needs == {"pot"} and needs <= demo, needs - demo
