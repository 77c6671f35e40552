"""run(spec, output=None): the tables in memory, no output folder written, the cache used; RunResult.maps and
.tables are the tables a run writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import ConfigError
from interlingua.core.schema import column_names
from interlingua.maps.columns import MAP_COLUMNS
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(24, seed=4)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(24)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        path, sep="\t", index=False
    )
    return path


def test_in_memory_run_writes_nothing_and_carries_every_table(
    tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path
) -> None:
    spec = {
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus_tsv), "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}, {"name": "llama", "path": str(tiny_llama_path)}],
        "pairs": {"within_model": True, "cross_model": "same_language"},
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 19},
        "maps": {"estimators": ["procrustes"], "folds": 3, "bootstrap": 0},
        "quality": {"n": 8},
    }
    memory = run(spec, output=None)  # no `output` key: in memory it is not needed
    assert memory.output is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no folder but the cache
    assert memory.cache_misses == 4 and memory.models_loaded == ["gpt2", "llama"]
    assert len(memory.table) > 0 and list(memory.maps.columns) == column_names(MAP_COLUMNS)
    assert set(memory.maps["pair"]) == {"gpt2:eng_Latn|llama:eng_Latn", "gpt2:deu_Latn|llama:deu_Latn"}
    assert set(memory.tables) == {"quality"} and len(memory.tables["quality"]) == 4  # 2 models x 2 languages
    assert set(memory.controls) == set(memory.table["pair"]) and memory.info["models"]["llama"]["num_layers"] == 3

    out = tmp_path / "written"
    disk = run({**spec, "output": "ignored"}, output=out)  # a path overrides the spec's folder
    assert disk.output == out.resolve() and not (tmp_path / "ignored").exists()
    assert disk.cache_misses == 0 and disk.models_loaded == []  # the in-memory run filled the cache
    pd.testing.assert_frame_equal(memory.table, pd.read_parquet(out / "results.parquet"))
    pd.testing.assert_frame_equal(memory.maps, pd.read_parquet(out / "maps.parquet"))
    written = {p.stem for p in out.glob("*.parquet")} - {"results", "maps"}
    assert written == set(disk.tables) == set(memory.tables)
    for name in written:
        pd.testing.assert_frame_equal(memory.tables[name], pd.read_parquet(out / f"{name}.parquet"))


def test_without_maps_the_maps_table_is_empty_and_a_bad_output_is_refused(tmp_path, corpus_tsv, tiny_gpt2_path) -> None:
    spec = {
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus_tsv), "languages": ["eng_Latn", "deu_Latn"], "n": 8},
        "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}],
        "pooling": ["last"],
        "inference": {"permutations": 0},
    }
    res = run(spec, output=None)
    assert res.maps.empty and list(res.maps.columns) == column_names(MAP_COLUMNS)
    assert res.tables == {} and set(res.table["pair"]) == {"gpt2:eng_Latn|gpt2:deu_Latn"}
    with pytest.raises(ConfigError, match=r"output must be a folder path or None"):
        run(spec, output=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"output"):
        run(spec)  # writing needs a folder: the spec has none
