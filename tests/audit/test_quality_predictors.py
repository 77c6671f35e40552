"""The `quality:` and `predictors:` sections on the tiny zoo: NLL per model x side, correlation tables."""

from __future__ import annotations

import pandas as pd
import pytest

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


def _spec(tiny_zoo, tmp_path, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tiny_zoo.root),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 24},
        "models": [
            {"name": "eng", "zoo": "tiny:eng"},
            {"name": "deu", "zoo": "tiny:deu"},
            {"name": "eng-early", "zoo": "tiny:eng@step8"},
            {"name": "lora", "zoo": "tiny:eng+deu-lora"},
        ],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": True, "cross_model": "same_language"},
        "quality": {},
        "predictors": {
            # no permutation null (permutations: 0), so the raw columns, named (the default reads calibrated)
            "columns": ["matched", "matched_length_removed"],
            "predictors": ["nll", "nll_gap", "length_control", "syntactic"],
            "permutations": 2000,
            "bootstrap": 200,
        },
    }
    spec.update(over)
    return spec


@pytest.fixture(scope="module")
def result(tiny_zoo, tmp_path_factory):
    return run(_spec(tiny_zoo, tmp_path_factory.mktemp("quality")))


def test_quality_equals_a_from_scratch_nll(result, tiny_zoo):
    from interlingua.audit import load_causal_lm, mean_nll
    from interlingua.data.corpora import load_corpus
    from interlingua.data.models import ModelSpec
    from interlingua.zoo import resolve_zoo

    quality = pd.read_csv(result.output / "quality.csv", keep_default_na=False)
    assert len(quality) == 8  # 4 models x 2 sides
    corpus = load_corpus("bible", ["eng_Latn", "deu_Latn"], books=["JHN"]).sample(24, 42)
    lm, tok = load_causal_lm(ModelSpec(path=str(resolve_zoo("tiny:deu", tiny_zoo.root))))
    nll, n, vocab, _ = mean_nll(lm, tok, corpus.sentences("deu_Latn"), max_length=256, batch_size=16)
    row = quality[(quality["model"] == "deu") & (quality["language"] == "deu_Latn")].iloc[0]
    assert row["nll"] == pytest.approx(nll, rel=1e-12) and row["n_tokens"] == n and row["vocab"] == vocab
    assert "## Model quality" in (result.output / "report.md").read_text()


def test_predictor_table_equals_the_stats_api_on_its_pairs(result):
    from interlingua.analysis.stats import correlation, smallest_attainable_p

    table = pd.read_csv(result.output / "predictors.csv", keep_default_na=False)
    pairs = pd.read_csv(result.output / "predictor_pairs.csv")
    assert set(table["predictor"]) == {"nll", "nll_gap", "length_control", "syntactic"}
    from interlingua.analysis.typology import uriel_distance

    within = pairs[pairs["kind"] == "within_model"]
    assert (within["syntactic"] == uriel_distance("eng_Latn", "deu_Latn")).all()
    assert (pairs.loc[pairs["kind"] == "cross_model", "syntactic"] == 0).all()  # same language
    assert len(pairs) == pairs["pair"].nunique() == 16  # 4 within-model + 6 model pairs x 2 languages
    row = table[(table["column"] == "matched") & (table["predictor"] == "nll")].iloc[0]
    ref = correlation(pairs["nll"], pairs["matched"], permutations=2000, bootstrap=200, seed=0)
    assert row["rho"] == pytest.approx(ref.rho, abs=1e-12)
    assert row["n"] == 16 and row["min_attainable_p"] == pytest.approx(smallest_attainable_p(16))
    # nll of a pair = mean of its sides' NLL in quality.csv
    quality = pd.read_csv(result.output / "quality.csv").set_index(["model", "language"])["nll"]
    first = pairs.iloc[0]
    expected = (quality[(first["model_a"], first["lang_a"])] + quality[(first["model_b"], first["lang_b"])]) / 2
    assert first["nll"] == pytest.approx(expected, rel=1e-12)
    report = (result.output / "report.md").read_text()
    assert "## What predicts alignment" in report and "## Typology" in report
    typology = pd.read_csv(result.output / "typology.csv")
    assert typology.loc[0, "syntactic"] == pytest.approx(uriel_distance("eng_Latn", "deu_Latn"), abs=1e-12)
    assert (result.output / "figures" / "predictors_cka_linear_biased_mean.png").is_file()


def test_rerun_recomputes_no_quality(result):
    import json

    spec = json.loads((result.output / "run.json").read_text())["spec"]
    spec["overwrite"] = True
    again = run(spec)
    assert "quality" not in again.info["computed"]


def test_nll_predictor_needs_the_quality_section():
    with pytest.raises(ConfigError, match="needs the NLL"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"zoo": "eng"}],
                "predictors": {"predictors": ["nll"]},
            }
        )
    with pytest.raises(ConfigError, match="unknown predictor"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"zoo": "eng"}],
                "predictors": {"predictors": ["shoe_size"]},
            }
        )


def test_a_pooling_with_too_few_pairs_is_noted_beside_a_full_one():
    """Word-aligned rows for 2 pairs next to sentence rows for 4: the small group is a note, not a crash."""
    from interlingua.core.schema import result_table
    from interlingua.predictors import predictor_table

    rows = []
    for pooling, n_pairs in (("mean", 4), ("word_aligned", 2)):
        for i in range(n_pairs):
            rows.append(
                {
                    "pair": f"m{i}:eng_Latn|m{i}:deu_Latn",
                    "kind": "within_model",
                    "model_a": f"m{i}",
                    "model_b": f"m{i}",
                    "lang_a": "eng_Latn",
                    "lang_b": "deu_Latn",
                    "pooling": pooling,
                    "measure": "cka_linear_biased",
                    "layer_a": 2,
                    "layer_b": 2,
                    "matched": 0.1 * (i + 1),
                    "length_control": 0.05 * (3 - i),
                    "grid": False,
                }
            )
    table, _ = predictor_table(
        result_table(rows), columns=["matched"], predictors=["length_control"], permutations=100, bootstrap=0
    )
    small = table[table["pooling"] == "word_aligned"].iloc[0]
    assert small["n"] == 2 and "at least 3" in small["note"] and small["n_dropped"] == -1
    full = table[table["pooling"] == "mean"].iloc[0]
    assert full["n"] == 4 and full["rho"] == pytest.approx(-1.0)
