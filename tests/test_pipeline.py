"""`interlingua run` end to end on tiny models and a local corpus: outputs, cache, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fixtures.tiny_models import parallel_sentences
from interlingua.analysis.measures import MeasureWarning, linear_cka
from interlingua.cli import main
from interlingua.core.errors import ConfigError, CorpusError, LanguageError, ModelError, OutputError
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

CODES = {"eng": "eng_Latn", "deu": "deu_Latn", "rus": "rus_Cyrl"}


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(40, seed=3)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    df = pd.DataFrame({"id": [f"s{i}" for i in range(40)], **{CODES[k]: sents[k] for k in CODES}})
    df.to_csv(path, sep="\t", index=False)
    return path


def spec_for(tmp_path: Path, corpus: Path, gpt2: Path, llama: Path, **over) -> dict:
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_latn", "deu_Latn", "rus_Cyrl"], "n": 32},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pooling": ["sgpt", "mean"],
        "measures": ["cka_linear_biased", "cka_linear_debiased"],
        "inference": {"permutations": 49, "jackknife_groups": 8},
        "layer_grid": True,
        "special_tokens": "include",
    }
    spec.update(over)
    return spec


def test_run_writes_every_output_and_a_rerun_recomputes_nothing(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    res = run(spec)
    out = Path(spec["output"])
    for name in ("results.csv", "results.parquet", "run.json", "controls.json", "report.md", "manifest.json"):
        assert (out / name).is_file(), name
    assert list((out / "figures").glob("*.png"))
    table = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(
        table,
        pd.read_csv(
            out / "results.csv",
            keep_default_na=False,
            na_values={c: ["", "NaN", "nan"] for c in table.columns if table[c].dtype.kind == "f"},
        ),
        check_dtype=False,
    )
    # 2 models x 3 language pairs within + 3 same-language cross-model pairs
    assert table["pair"].nunique() == 2 * 3 + 3
    # tiny GPT-2 has 2 blocks (3 states), tiny Llama 3 blocks (4 states)
    within = table[(table["kind"] == "within_model") & ~table["grid"]]
    assert set(within.groupby("model_a")["layer_a"].nunique()) == {3, 4}
    cross = table[(table["kind"] == "cross_model") & ~table["grid"]]
    assert set(zip(cross["layer_a"], cross["layer_b"])) == {(2, 3)}  # different depth: last layer only
    grid = table[table["grid"]]
    assert len(grid) == 3 * 2 * 2 * (3 * 4)  # pairs x poolings x measures x layer grid
    assert set(table["n"]) == {32}
    tested = ~table["grid"]  # every non-grid row carries a permutation p (inference.layers: all)
    assert table.loc[tested, "p_value"].between(1 / 50, 1).all()
    assert table.loc[table["grid"], "p_value"].isna().all()
    info = json.loads((out / "run.json").read_text())
    assert info["models"]["gpt2"]["num_layers"] == 2 and info["models"]["llama"]["hidden_size"] == 32
    assert info["corpus"]["languages"] == ["eng_Latn", "deu_Latn", "rus_Cyrl"]
    assert info["cache"]["representations"]["misses"] == 2 * 3 * 2
    assert info["cache"]["representations"]["hits"] == 0
    # the stored permutation is the one every layer's shuffled value used
    perms = json.loads((out / "controls.json").read_text())
    assert set(perms) == set(table["pair"])
    report = (out / "report.md").read_text()
    assert "Last-layer triangle" in report and "matched" in report

    res2 = run(spec)
    assert res2.cache_misses == 0 and res2.cache_hits == 2 * 3 * 2
    assert res2.models_loaded == []  # everything came from the cache: no model was loaded
    cols = ["pair", "pooling", "measure", "layer_a", "layer_b", "matched", "shuffled"]
    pd.testing.assert_frame_equal(res.table[cols], res2.table[cols])


def test_shuffled_value_is_cka_under_the_stored_permutation(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    spec = spec_for(
        tmp_path,
        corpus_tsv,
        tiny_gpt2_path,
        tiny_llama_path,
        layer_grid=False,
        measures=["cka_linear_biased"],
        pooling=["mean"],
        inference={"permutations": 0},
    )
    res = run(spec)
    from interlingua.data.corpora import load_corpus
    from interlingua.data.models import ModelSpec, load_model
    from interlingua.data.representations import extract

    corpus = load_corpus("local", ["eng_Latn", "deu_Latn"], path=str(corpus_tsv)).sample(32, 42)
    m = load_model(ModelSpec(name="gpt2", path=str(tiny_gpt2_path)))
    a = extract(m, corpus.sentences("eng_Latn"), ["mean"], progress=False, special_tokens="include").pooled["mean"]
    b = extract(m, corpus.sentences("deu_Latn"), ["mean"], progress=False, special_tokens="include").pooled["mean"]
    pair = "gpt2:eng_Latn|gpt2:deu_Latn"
    perm = np.array(json.loads((Path(spec["output"]) / "controls.json").read_text())[pair]["permutation"])
    rows = res.table[res.table["pair"] == pair].sort_values("layer_a")
    for r in rows.itertuples():
        x, y = a[r.layer_a].astype(np.float64), b[r.layer_b].astype(np.float64)
        assert r.matched == pytest.approx(linear_cka(x, y), abs=1e-6)
        assert r.shuffled == pytest.approx(linear_cka(x, y[perm]), abs=1e-6)


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda s: s["corpus"].update(languages=["eng_Latn", "xxx_Zzzz"]), LanguageError, "xxx_Zzzz"),
        (lambda s: s["corpus"].update(n=1000), CorpusError, "40"),
        (
            lambda s: s["models"].__setitem__(0, {"name": "gpt2", "path": "/no/such/model"}),
            ModelError,
            "/no/such/model",
        ),
        (lambda s: s.update(measures=["cka_nonsense"]), ConfigError, "cka_nonsense"),
        (lambda s: s.update(poolng=["mean"]), ConfigError, "did you mean 'pooling'"),
    ],
)
def test_bad_input_fails_clearly_and_writes_nothing(
    tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, change, error, message
):
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, inference={"permutations": 0})
    change(spec)
    with pytest.raises(error, match=message):
        run(spec)
    assert not Path(spec["output"]).exists()
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_misaligned_local_corpus_is_refused(tmp_path, tiny_gpt2_path, tiny_llama_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("eng_Latn\tdeu_Latn\nOne\tEins\nTwo\n", encoding="utf-8")
    spec = spec_for(tmp_path, bad, tiny_gpt2_path, tiny_llama_path, inference={"permutations": 0})
    spec["corpus"].update(languages=["eng_Latn", "deu_Latn"], n=None)
    with pytest.raises(CorpusError):
        run(spec)
    assert not Path(spec["output"]).exists()


def test_unsupported_architecture_is_a_clear_error(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_t5_path):
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_t5_path, inference={"permutations": 0})
    with pytest.raises(ModelError, match="t5"):
        run(spec)
    assert not Path(spec["output"]).exists()


def test_output_folder_of_someone_else_is_never_overwritten(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    Path(spec["output"]).mkdir()
    (Path(spec["output"]) / "thesis.tex").write_text("precious")
    with pytest.raises(OutputError, match="not empty"):
        run(spec)
    assert (Path(spec["output"]) / "thesis.tex").read_text() == "precious"


def test_cli_run_and_validate(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, capsys):
    spec = spec_for(
        tmp_path,
        corpus_tsv,
        tiny_gpt2_path,
        tiny_llama_path,
        layer_grid=False,
        inference={"permutations": 0},
        pooling=["last"],
        measures=["cka_linear_biased"],
    )
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    assert main(["validate", str(cfg)]) == 0
    assert main(["run", str(cfg), "--output", str(tmp_path / "cli-out")]) == 0
    assert (tmp_path / "cli-out" / "report.md").is_file()
    spec["pooling"] = ["maximum"]
    cfg.write_text(yaml.safe_dump(spec))
    assert main(["run", str(cfg)]) == 2
    assert "pooling" in capsys.readouterr().err


def test_cli_help_documents_every_option(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = capsys.readouterr().out
    for opt in ("--output", "--cache-dir", "--no-progress", "-n", "--languages", "--permutations", "--print-config"):
        assert opt in text


def test_every_family_of_measures_runs_through_the_config(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    measures = [
        "cka_linear_debiased",
        "svcca_var0.99",
        "pwcca_narrower",
        "procrustes_resid2_centered_unitnorm",
        "anc_abs",
        "mknn_k5",
        "rsa_spearman_corr",
        "cka_rbf_median1.0",
    ]
    spec = spec_for(
        tmp_path,
        corpus_tsv,
        tiny_gpt2_path,
        tiny_llama_path,
        measures=measures,
        pooling=["mean"],
        layer_grid=False,
        inference={"permutations": 19, "layers": "last", "jackknife_groups": 4},
    )
    with pytest.warns(MeasureWarning, match="principal components"):  # CCA inputs wider than n are reduced
        res = run(spec)
    t = res.table
    within = t[t["kind"] == "within_model"]
    cross = t[t["kind"] == "cross_model"]
    assert set(within["measure"]) == set(measures)
    assert "anc_abs" not in set(cross["measure"])  # no shared neuron basis across models
    assert any("anc_abs" in s for s in res.info["skipped"])
    # the corpus repeats one sentence (parallel_sentences(40, seed=3)): where a row's 5th and 6th neighbours
    # are the two copies, the neighbour sets are tied and mutual kNN is nan with that reason
    knn = t[t["measure"] == "mknn_k5"]
    tied = knn["matched"].isna()
    assert tied.any() and knn.loc[tied, "note"].str.contains("equally similar").all()
    assert knn.loc[~tied, "matched"].between(0, 1).all()
    last = t[t["p_value"].notna()]
    # anc is skipped on the 3 cross-model pairs
    assert len(last[last["measure"] != "mknn_k5"]) == t["pair"].nunique() * (len(measures) - 1) - 3
    assert last["p_value"].between(1 / 20, 1).all()
    assert (last["jackknife_low"] <= last["matched"] + 1e-12).all()
    assert t["estimator"].str.len().gt(0).all()
