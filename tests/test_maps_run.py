"""`maps:` in a run config: held-out maps per pair, their table, folds, cache and report section."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fixtures.plugins import parallel_tsv
from interlingua.core.schema import column_names
from interlingua.maps.columns import MAP_COLUMNS
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    return parallel_tsv(tmp_path_factory.mktemp("corpus"), seed=11, n=60)


def spec_for(tmp_path: Path, corpus: Path, gpt2: Path, llama: Path, **maps) -> dict:
    return {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pairs": {"within_model": False, "cross_model": "same_language"},
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "maps": {"estimators": ["procrustes", "ridge"], "folds": 4, "bootstrap": 50, **maps},
    }


def test_maps_are_fitted_scored_stored_and_reported(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    spec = spec_for(
        tmp_path,
        corpus_tsv,
        tiny_gpt2_path,
        tiny_llama_path,
        pairs=[{"a": {"model": "gpt2", "language": "eng_Latn"}, "b": {"model": "llama", "language": "deu_Latn"}}],
        permutations=5,
    )
    res = run(spec)
    out = Path(spec["output"])
    maps = pd.read_parquet(out / "maps.parquet")
    assert list(maps.columns) == column_names(MAP_COLUMNS)
    assert set(maps["pair"]) == {"gpt2:eng_Latn|llama:deu_Latn"}  # the explicit map pair, not compared
    agg = maps[maps["fold"] == -1]
    # tiny GPT-2 has 3 hidden states, Llama 4: paired by relative depth, both estimators, both directions
    assert len(agg) == 3 * 2 * 2
    assert set(agg["n_test"]) == {60} and (agg["chance_p1"] == 1 / 15).all()  # 4 folds of 15 held out
    assert agg["p1"].between(0, 1).all() and agg["shuffled_p1"].between(0, 1).all()
    # maps.permutations: 5 draws of the p1 null (inference.permutations is 0 here), calibrated at inference.alpha
    assert (agg["n_permutations"] == 5).all() and agg["calibrated"].between(0, 1).all()
    assert agg["tau"].between(0, 1).all() and agg["p_value"].between(1 / 6, 1).all()
    # 45 training sentences per fold for width 32. The rank is at float32 precision (the stored representations'):
    # the tiny models' embedding layers and GPT-2's final LayerNorm (a mean-zero output) leave directions unspanned
    assert (agg["n_fit"] == 45).all() and agg["rank"].between(1, 32).all()
    assert (agg["underdetermined"] == (agg["rank"] < 32)).all()
    determined = agg[~agg["underdetermined"]]
    assert not determined.empty
    # where the rows fix the map, each estimator fitted from a side's tiny-model representations onto themselves
    # recovers the identity on held-out sentences
    assert (determined["identity_control"] == "passed").all() and (determined["identity_control_cos"] > 0.999).all()
    procrustes = determined[determined["estimator"] == "procrustes"]
    assert (procrustes["identity_control_dev"] < 1e-9).all() and (procrustes["identity_control_p1"] == 1.0).all()
    assert (determined["identity_control_dev"] < 0.05).all()  # ridge: its cross-validated shrinkage
    assert agg[agg["underdetermined"]]["note"].str.contains("under-determined").all()
    folds = json.loads((out / "folds.json").read_text())
    tests = [set(t) for t in folds["tests"]]
    assert sorted(i for t in tests for i in t) == list(range(60))  # every sentence held out exactly once
    assert folds["ids"] == [f"s{i}" for i in range(60)]
    report = (out / "report.md").read_text()
    assert "## Maps between sides" in report and "figures/map_clouds.png" in report
    assert "Positive control and under-determination" in report and "**Under-determined maps**" in report
    assert (out / "figures" / "map_clouds.png").is_file()
    assert res.info["computed"].get("maps") == 1

    again = run({**spec, "output": str(tmp_path / "again")})
    assert "maps" not in again.info["computed"]  # read from the store
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "again" / "maps.parquet"), maps)


def test_without_a_maps_section_no_map_files_are_written(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    del spec["maps"]
    run(spec)
    assert not (Path(spec["output"]) / "maps.csv").exists()


def test_unknown_estimator_is_a_config_error(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    from interlingua.core.errors import ConfigError

    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    spec["maps"]["estimators"] = ["procrustes", "magic"]
    with pytest.raises(ConfigError, match="magic"):
        run(spec)
