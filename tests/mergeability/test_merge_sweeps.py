"""`merge:` parameter lists expand into sweeps (like tokenwise_merge lists): one model per setting, named
NAME/param=value, carrying sweep / sweep_values, each built once into the store; a rerun builds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlingua.core.errors import ConfigError
from interlingua.core.store import Store
from interlingua.data.models.spec import ModelSpec
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.resolve import resolve_models

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

BASE = {"output": "x", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]}}


def _models(*models: dict) -> list[ModelSpec]:
    return parse_spec({**BASE, "models": list(models)}).models


def test_scalar_lists_expand_in_nested_order():
    models = _models(
        {"path": "/x"},
        {
            "name": "mix",
            "merge": {
                "method": "ties",
                "models": ["/a", "/b"],
                "base": "/c",
                "density": [[0.2], [0.5]],
                "lambda": [1.0, 0.5],
            },
        },
    )
    assert [m.name for m in models] == [
        "x",
        "mix/density=0.2,lambda=1",
        "mix/density=0.2,lambda=0.5",
        "mix/density=0.5,lambda=1",
        "mix/density=0.5,lambda=0.5",
    ]
    sweep = models[1:]
    assert {m.sweep for m in sweep} == {"mix"} and models[0].sweep is None
    assert [m.sweep_values for m in sweep] == [{"density": d, "lambda": lam} for d in (0.2, 0.5) for lam in (1.0, 0.5)]
    assert [(m.merge.density, m.merge.lambda_) for m in sweep] == [(0.2, 1.0), (0.2, 0.5), (0.5, 1.0), (0.5, 0.5)]
    assert all(not m.merge.is_sweep for m in sweep)


def test_per_model_lists_stay_one_merge_and_lists_of_lists_sweep():
    (one,) = _models({"merge": {"method": "linear", "models": ["/a", "/b"], "weights": [0.25, 0.75]}})
    assert one.name == "merge-linear" and one.sweep is None and one.merge.weights == [0.25, 0.75]
    lerps = _models(
        {"name": "w", "merge": {"method": "linear", "models": ["/a", "/b"], "weights": [[0.75, 0.25], [0.25, 0.75]]}}
    )
    assert [m.name for m in lerps] == ["w/weights=0.75;0.25", "w/weights=0.25;0.75"]
    assert lerps[1].sweep_values == {"weights[0]": 0.25, "weights[1]": 0.75}
    assert lerps[1].merge.weights == [0.25, 0.75]
    seeds = _models(
        {
            "name": "d",
            "merge": {"method": "dare_ties", "models": ["/a"], "base": "/c", "density": 0.5, "seed": [1, 2, 3]},
        }
    )
    assert [m.name for m in seeds] == ["d/seed=1", "d/seed=2", "d/seed=3"] and seeds[2].merge.seed == 3


@pytest.mark.parametrize(
    "merge, message",
    [
        ({"method": "slerp", "models": ["/a", "/b"], "t": [0.5, 0.5]}, "twice"),
        ({"method": "slerp", "models": ["/a", "/b"], "t": []}, "empty"),
        ({"method": "ties", "models": ["/a", "/b"], "base": "/c", "density": [[0.2], []]}, "empty setting"),
    ],
)
def test_bad_sweeps_are_refused(merge, message):
    with pytest.raises(ConfigError, match=message):
        _models({"merge": merge})


def test_each_setting_is_built_once_and_a_rerun_builds_nothing(tiny_zoo, tmp_path):
    from interlingua.zoo import resolve_zoo

    a, b = (str(resolve_zoo(n, tiny_zoo.root)) for n in ("tiny:eng@step16", "tiny:eng"))
    models = _models({"name": "mix", "merge": {"method": "slerp", "models": [a, b], "t": [0.25, 0.5, 0.75]}})
    assert [m.name for m in models] == ["mix/t=0.25", "mix/t=0.5", "mix/t=0.75"]
    store = Store(tmp_path / "store")
    built: list[str] = []
    resolved = resolve_models(models, store, log=built.append)
    assert len(built) == 3
    folders = sorted((tmp_path / "store" / "models" / "merges").iterdir())
    assert len(folders) == 3 and sorted(m.path for m in resolved) == [str(f) for f in folders]
    for m in resolved:  # each folder is the merge of its own setting, and the labels survive resolution
        assert m.merge is None and m.sweep == "mix"
        record = json.loads((Path(m.path) / "merge.json").read_text())
        assert record["recipe"]["t"] == m.sweep_values["t"]
    stamps = {f: (f / "model.safetensors").stat().st_mtime_ns for f in folders}
    again: list[str] = []
    assert [m.path for m in resolve_models(models, store, log=again.append)] == [m.path for m in resolved]
    assert again == [] and {f: (f / "model.safetensors").stat().st_mtime_ns for f in folders} == stamps


def test_an_unexpanded_sweep_is_refused_by_resolution(tmp_path):
    spec = ModelSpec(name="s", merge={"method": "slerp", "models": [str(tmp_path), str(tmp_path)], "t": [0.1, 0.2]})
    with pytest.raises(ConfigError, match="sweep"):
        resolve_models([spec], Store(tmp_path / "store"))


def test_a_merge_sweep_runs_through_the_pipeline(tiny_zoo, tmp_path):
    """Each setting is a model of the run; the sweep table lists the sweep with its variables."""
    import pandas as pd

    from interlingua.pipeline.runs import run
    from interlingua.zoo import resolve_zoo

    a, b = (str(resolve_zoo(n, tiny_zoo.root)) for n in ("tiny:eng@step16", "tiny:eng"))
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "store"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 12},
        "models": [
            {"name": "eng", "path": b},
            {"name": "mix", "merge": {"method": "linear", "models": [a, b], "weights": [[0.75, 0.25], [0.25, 0.75]]}},
        ],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0, "score": "raw"},  # no null: trends read matched
        "pairs": {"within_model": True, "cross_model": "none"},  # a sweep is read through within-model pairs
    }
    res = run(spec)
    names = set(res.table["model_a"]) | set(res.table["model_b"])
    assert {"mix/weights=0.75;0.25", "mix/weights=0.25;0.75"} <= names
    assert len(list((tmp_path / "store" / "models" / "merges").iterdir())) == 2
    sweeps = pd.read_csv(res.output / "sweeps.csv")
    assert set(sweeps["sweep"]) == {"mix"} and set(sweeps["variables"]) == {"weights[0],weights[1]"}
