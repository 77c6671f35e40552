"""Tokenwise merges in a run config: lists of alpha / top_k expand into models built into the store."""

from __future__ import annotations

import pandas as pd
import pytest

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

MERGE = {"english": "zoo:tiny:eng", "l2": "zoo:tiny:deu", "tokenizer": "zoo:tiny:eng-deu/tokenizer"}


def _spec(tiny_zoo, tmp_path, models, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tiny_zoo.root),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 16},
        "models": models,
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0, "score": "raw"},  # no null: the sweeps and contrasts read matched
        "pairs": {"within_model": True, "cross_model": "none"},
        "audit": {"language": "eng_Latn"},
    }
    spec.update(over)
    return spec


def test_sweep_expands_builds_once_and_keeps_the_backbones_adapter(tiny_zoo, tmp_path, capfd):
    models = [
        {"name": "merged", "tokenwise_merge": {**MERGE, "alpha": [0.5, 1.0], "top_k": 1.0}},
        {
            "name": "trained",
            "adapter": "zoo:tiny:eng+deu-lora",
            "tokenwise_merge": {**MERGE, "alpha": [0.5, 1.0], "top_k": 1.0},
        },
    ]
    res = run(_spec(tiny_zoo, tmp_path, models, contrasts=[{"a": "trained", "b": "merged"}]))
    err = capfd.readouterr().err  # building the merges draws no bar of transformers' own (our log line says it)
    assert "Writing model shards" not in err and "Loading weights" not in err
    names = [
        "merged/alpha=0.5,top_k=1",
        "merged/alpha=1,top_k=1",
        "trained/alpha=0.5,top_k=1",
        "trained/alpha=1,top_k=1",
    ]
    assert sorted(set(res.table["model_a"])) == names
    built = sorted((tiny_zoo.root / "models" / "tokenwise").iterdir())
    assert len(built) >= 2 and all((b / "tokenwise_merge.json").is_file() for b in built)
    stamps = {b: (b / "model.safetensors").stat().st_mtime_ns for b in built}
    audit = pd.read_csv(res.output / "audit.csv", keep_default_na=False).set_index("model")
    # the merge's embedding was rebuilt for the bilingual tokenizer: its own tokenizer agrees with itself
    assert (audit["tokenizer_verdict"] == "ok").all()
    assert (audit.loc[names[2:], "adapter_base_check"] == "matched").all()
    # the same recipe under two names is one folder: merged at alpha 1 and trained at alpha 1 share a base
    assert audit.loc["merged/alpha=1,top_k=1", "path"] == audit.loc["trained/alpha=1,top_k=1", "path"]
    sweeps = pd.read_csv(res.output / "sweeps.csv", keep_default_na=False)
    assert set(sweeps["sweep"]) == {"merged", "trained"}
    assert (sweeps["n_models"] == 2).all()
    contrasts = pd.read_csv(res.output / "contrasts.csv", keep_default_na=False)
    assert contrasts.loc[0, "n"] == 2
    # a second run builds nothing: the store's folders are found by recipe key
    spec = _spec(tiny_zoo, tmp_path, models, contrasts=[{"a": "trained", "b": "merged"}], overwrite=True)
    run(spec)
    assert {b: (b / "model.safetensors").stat().st_mtime_ns for b in built} == stamps


def test_alpha_outside_the_unit_interval_is_a_config_error():
    with pytest.raises(ConfigError, match="alpha must lie in"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"tokenwise_merge": {**MERGE, "alpha": [0.5, 1.5]}}],
            }
        )


def test_a_merge_takes_no_other_source():
    with pytest.raises(ConfigError, match="tokenwise_merge"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"path": "/x", "tokenwise_merge": MERGE}],
            }
        )


def test_missing_merge_input_fails_before_any_work(tiny_zoo, tmp_path):
    models = [{"name": "m", "tokenwise_merge": {**MERGE, "l2": str(tmp_path / "nowhere")}}]
    with pytest.raises(ConfigError, match="tokenwise_merge.l2"):
        run(_spec(tiny_zoo, tmp_path, models))
    assert not (tmp_path / "out").exists()
