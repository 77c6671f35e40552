"""The run config: valid specs parse, typos and inconsistencies are clear errors."""

from __future__ import annotations

import pytest
import yaml

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import load_spec, parse_spec


def base() -> dict:
    return {
        "output": "out",
        "corpus": {"source": "local", "path": "p.tsv", "languages": ["eng_Latn", "deu_Latn"], "n": 10},
        "models": [{"name": "m", "path": "some/model"}],
    }


def test_minimal_spec_gets_documented_defaults():
    spec = parse_spec(base())
    assert spec.pooling == ["sgpt"]
    assert spec.measures == ["cka_linear_biased"]
    assert spec.pairs.within_model and spec.pairs.cross_model == "same_language"
    assert spec.inference.permutations == 1000
    assert spec.corpus.load_options() == {"path": "p.tsv"}


def test_typo_is_an_error_that_suggests_the_right_key():
    data = base()
    data["poolng"] = ["mean"]
    with pytest.raises(ConfigError, match=r"unknown key 'poolng' ; did you mean 'pooling'"):
        parse_spec(data)


def test_nested_typo_names_the_path():
    data = base()
    data["corpus"]["langauges"] = data["corpus"].pop("languages")
    with pytest.raises(ConfigError, match=r"corpus\.langauges: unknown key 'langauges' ; did you mean 'languages'"):
        parse_spec(data)


def test_model_typo_is_caught():
    data = base()
    data["models"][0]["revison"] = "main"
    with pytest.raises(ConfigError, match="revison"):
        parse_spec(data)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["corpus"].pop("path"), "needs 'path'"),
        (lambda d: d.update(pooling=["max"]), "pooling"),
        (lambda d: d["corpus"].update(languages=["eng_Latn"]), "at least 2"),
        (lambda d: d["corpus"].update(n=2), "greater than or equal to 4"),
        (lambda d: d.update(models=[{"name": "m", "path": "a"}, {"name": "m", "path": "b"}]), "unique"),
        (
            lambda d: d.update(
                pairs={
                    "explicit": [
                        {"a": {"model": "x", "language": "eng_Latn"}, "b": {"model": "m", "language": "deu_Latn"}}
                    ]
                }
            ),
            "'x'",
        ),
        (lambda d: d["corpus"].update(split="dev"), "split"),
    ],
)
def test_inconsistent_specs_are_refused(mutate, message):
    data = base()
    mutate(data)
    with pytest.raises(ConfigError, match=message):
        parse_spec(data)


def test_load_spec_reads_yaml_and_reports_missing_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(base()))
    assert load_spec(p).models[0].name == "m"
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")
    p.write_text("corpus: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_spec(p)


def test_example_and_demo_configs_are_valid():
    from pathlib import Path

    from interlingua.cli import demo_spec

    root = Path(__file__).resolve().parents[1]
    spec = load_spec(root / "configs" / "example.yaml")
    assert spec.inference.jackknife_groups == 50
    demo = parse_spec(demo_spec())
    assert {m.package for m in demo.models} == {"gemma3-270m", "smollm2-135m"}
    assert len(demo.corpus.languages) >= 4 and demo.corpus.n >= 300


def test_model_names_may_not_hold_the_separators_of_result_labels():
    from interlingua.core.errors import ConfigError
    from interlingua.pipeline.config import parse_spec

    base = {"output": "x", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]}}
    for bad in ("a:b", "a|b"):
        with pytest.raises(ConfigError, match="may not contain"):
            parse_spec({**base, "models": [{"name": bad, "path": "/m"}]})
