"""Mistakes each stage would hit late are caught by `validate` and before any model runs, in one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from fixtures.tiny_models import parallel_sentences
from interlingua.alignment import AlignmentError
from interlingua.cli import main
from interlingua.pipeline import run

JAVANESE = "".join(chr(c) for c in (0xA98F, 0xA9A4, 0xA9B8, 0xA9A0, 0xA9C0, 0xA9B1, 0xA9AB))


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(24, seed=5)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(24)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"],
                  "jav_Java": [JAVANESE[i % 7:] + JAVANESE[: i % 7] for i in range(24)]}).to_csv(
        path, sep="\t", index=False)
    return path


def spec_for(tmp_path: Path, corpus: Path, model: Path, **over) -> dict:
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"], "n": 16},
        "models": [{"name": "gpt2", "path": str(model)}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
    }
    spec.update(over)
    return spec


def _cli(tmp_path: Path, spec: dict, *args: str) -> int:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    return main([*args[:1], str(cfg), *args[1:]])


def _no_model_ran(spec: dict) -> bool:
    reps = Path(spec["cache_dir"]) / "representations"
    return not reps.exists() or not [p for p in reps.rglob("*") if p.is_file()]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("interlingua: error: ") and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("lang, where", [("jav_Java", "no word segmenter for Javanese"),
                                         ("jav_Latn", "100% of the word characters are Javanese script")])
def test_word_aligned_pooling_refuses_an_unspaced_script_before_any_model_runs(
    tmp_path, corpus_tsv, tiny_gpt2_path, capsys, lang, where
):
    """Before: Javanese script became one word per sentence ("20 of 20 links"), exit 0."""
    corpus = corpus_tsv
    if lang != "jav_Java":  # the same text under a code that claims a spaced script
        corpus = tmp_path / "relabelled.tsv"
        pd.read_csv(corpus_tsv, sep="\t").rename(columns={"jav_Java": lang}).to_csv(corpus, sep="\t", index=False)
    spec = spec_for(tmp_path, corpus, tiny_gpt2_path, pooling=["mean", "word_aligned"],
                    alignment={"encoder": "gpt2", "layer": 1, "n": 8})
    spec["corpus"]["languages"] = ["eng_Latn", lang]
    assert _cli(tmp_path, spec, "validate") == 2
    line = _one_error_line(capsys)
    assert where in line and "word-aligned pooling" in line
    with pytest.raises(AlignmentError, match=where):
        run(spec)
    assert _no_model_ran(spec) and not Path(spec["output"]).exists()
    # a language outside every word-aligned pair is not refused: only eng|deu is word-aligned
    spec["corpus"]["languages"] = ["eng_Latn", "deu_Latn", lang]
    spec["alignment"]["pairs"] = [{"a": {"model": "gpt2", "language": "eng_Latn"},
                                   "b": {"model": "gpt2", "language": "deu_Latn"}}]
    assert _cli(tmp_path, spec, "validate") == 0
