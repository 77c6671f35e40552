"""Mistakes each stage would hit late are caught by `validate` and before any model runs, in one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fixtures.runs import run_cli, spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.alignment import AlignmentError
from interlingua.pipeline.runs import run

JAVANESE = "".join(chr(c) for c in (0xA98F, 0xA9A4, 0xA9B8, 0xA9A0, 0xA9C0, 0xA9B1, 0xA9AB))


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(24, seed=5)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame(
        {
            "id": [f"s{i}" for i in range(24)],
            "eng_Latn": sents["eng"],
            "deu_Latn": sents["deu"],
            "jav_Java": [JAVANESE[i % 7 :] + JAVANESE[: i % 7] for i in range(24)],
        }
    ).to_csv(path, sep="\t", index=False)
    return path


def _no_model_ran(spec: dict) -> bool:
    reps = Path(spec["cache_dir"]) / "representations"
    return not reps.exists() or not [p for p in reps.rglob("*") if p.is_file()]


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("interlingua: error: ") and "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    "lang, where",
    [("jav_Java", "no word segmenter for Javanese"), ("jav_Latn", "100% of the word characters are Javanese script")],
)
def test_word_aligned_pooling_refuses_an_unspaced_script_before_any_model_runs(
    tmp_path, corpus_tsv, tiny_gpt2_path, capsys, lang, where
):
    """Before: Javanese script became one word per sentence ("20 of 20 links"), exit 0."""
    corpus = corpus_tsv
    if lang != "jav_Java":  # the same text under a code that claims a spaced script
        corpus = tmp_path / "relabelled.tsv"
        pd.read_csv(corpus_tsv, sep="\t").rename(columns={"jav_Java": lang}).to_csv(corpus, sep="\t", index=False)
    spec = spec_for(
        tmp_path,
        corpus,
        tiny_gpt2_path,
        pooling=["mean", "word_aligned"],
        alignment={"encoder": "gpt2", "layer": 1, "n": 8},
    )
    spec["corpus"]["languages"] = ["eng_Latn", lang]
    assert run_cli(tmp_path, spec, "validate") == 2
    line = _one_error_line(capsys)
    assert where in line and "word-aligned pooling" in line
    with pytest.raises(AlignmentError, match=where):
        run(spec)
    assert _no_model_ran(spec) and not Path(spec["output"]).exists()
    # a language outside every word-aligned pair is not refused: only eng|deu is word-aligned
    spec["corpus"]["languages"] = ["eng_Latn", "deu_Latn", lang]
    spec["alignment"]["pairs"] = [
        {"a": {"model": "gpt2", "language": "eng_Latn"}, "b": {"model": "gpt2", "language": "deu_Latn"}}
    ]
    assert run_cli(tmp_path, spec, "validate") == 0


def _unknown_language_corpus(tmp_path: Path, corpus_tsv: Path) -> Path:
    """The corpus with a third column under a code URIEL does not know (qqq_Latn: the German text again)."""
    path = tmp_path / "qqq.tsv"
    df = pd.read_csv(corpus_tsv, sep="\t")
    df["qqq_Latn"] = df["deu_Latn"]
    df.to_csv(path, sep="\t", index=False)
    return path


# (change to the spec, the field the one-line error must name, a phrase of the message)
LATE_MISTAKES = [
    (lambda s, t, c: s["seeds"].update(sample=-1), "seeds.sample", "greater than or equal to 0"),
    (lambda s, t, c: s["seeds"].update(test=-3), "seeds.test", "greater than or equal to 0"),
    (lambda s, t, c: s.update(threads=0), "threads", "0 threads cannot run anything"),
    (lambda s, t, c: s.update(maps={"folds": 9}), "maps.folds", "9 folds need at least 18 sentences"),
    (
        lambda s, t, c: s["inference"].update(jackknife_groups=17),
        "inference.jackknife_groups",
        "17 groups exceed the run's n=16",
    ),
    (
        lambda s, t, c: s.update(
            patching={"target": "gpt2", "donor": "gpt2", "donor_language": "qqq_Latn", "relations": ["capital"]},
            corpus={**s["corpus"], "path": str(_unknown_language_corpus(t, c)), "languages": ["eng_Latn", "qqq_Latn"]},
        ),
        "patching.donor_language",
        "the factual probes have no qqq_Latn prompts",
    ),
    (
        lambda s, t, c: s.update(
            predictors={"predictors": ["syntactic"], "columns": ["matched"]},  # the base config draws no null
            corpus={**s["corpus"], "path": str(_unknown_language_corpus(t, c)), "languages": ["eng_Latn", "qqq_Latn"]},
        ),
        "predictors.predictors",
        "URIEL has no language 'qqq_Latn'",
    ),
]


@pytest.mark.parametrize("change, field, phrase", LATE_MISTAKES, ids=[m[1] for m in LATE_MISTAKES])
def test_validate_and_run_refuse_what_used_to_fail_late(
    tmp_path, corpus_tsv, tiny_gpt2_path, capsys, change, field, phrase
):
    """Before: a numpy traceback (seeds), exit 0 with NaN columns (jackknife), or a failure after the models
    ran (folds, patching language, URIEL), or only at run time (threads)."""
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    spec["seeds"] = {}
    change(spec, tmp_path, corpus_tsv)
    assert run_cli(tmp_path, spec, "validate") == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"interlingua: error: {field}: ") and phrase in line and " ; " in line
    assert run_cli(tmp_path, spec, "run") == 2
    assert _one_error_line(capsys) == line
    assert _no_model_ran(spec) and not Path(spec["output"]).exists()


def test_cuda_without_a_cuda_device_is_refused_before_any_model_runs(tmp_path, corpus_tsv, tiny_gpt2_path, capsys):
    from interlingua.pipeline.preflight import cuda_available

    if cuda_available():
        pytest.skip("this machine has a CUDA device")
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    spec["models"].append({"name": "second", "path": str(tiny_gpt2_path), "device": "cuda"})
    assert run_cli(tmp_path, spec, "validate") == 2
    line = _one_error_line(capsys)
    assert line.startswith("interlingua: error: models.2.device: model 'second' asks for cuda")
    assert "device: cpu" in line
    assert run_cli(tmp_path, spec, "run") == 2 and _no_model_ran(spec)


# config mistakes: each is one line on stderr, `<field>: <what> ; <what to do>`, 1-based list positions, exit 2
BAD_CONFIGS = [
    ({"threads": "many"}, "threads: ", "give one of those"),
    ({"pooling": ["mean", "max"]}, "pooling.2: ", "use one of these values"),
    ({"measures": ["cka_foo"]}, "measures: unknown measure id 'cka_foo'", ""),
    ({"poolng": ["mean"]}, "poolng: unknown key 'poolng' ; did you mean 'pooling'?", ""),
    (
        {"models": [{"name": "gpt2", "path": "P"}, {"name": "b", "package": "nope"}]},
        "models.2.package: ",
        "use one of these values",
    ),
    (
        {"models": [{"name": "gpt2", "path": "P"}, {"name": "b", "pth": "x"}]},
        "models.2.pth: unknown key 'pth'",
        "did you mean 'path'?",
    ),
    ({"models": [{"name": "gpt2", "path": "P", "device": "tpu"}]}, "models.1.device: ", "use one of these values"),
    ({"models": []}, "models: ", "give more entries"),
    (
        {"corpus": {"source": "local", "path": "C", "languages": ["eng_Latn"]}},
        "corpus.languages: ",
        "give more entries",
    ),
    (
        {"corpus": {"source": "local", "path": "C", "langauges": ["eng_Latn", "deu_Latn"]}},
        "corpus.langauges: unknown key 'langauges' ; did you mean 'languages'?",
        "",
    ),
    ({"inference": {"permutations": -1}}, "inference.permutations: ", "use a larger value"),
    (
        {"inference": {"permutations": 10**9}},
        "inference.permutations: 1,000,000,000 draws is above the limit of 1,000,000",
        "use at most 1,000,000",
    ),
    ({"inference": {"grid_permutations": 1_000_001}}, "inference.grid_permutations: 1,000,001 draws", "8 GB"),
    ({"maps": {"folds": 1}}, "maps.folds: ", "use a larger value"),
    ({"output": None}, "output: ", ""),
    ({"seed": 3}, "seed: unknown key 'seed' ; seeds live in one group now", ""),
]


@pytest.mark.parametrize("over, start, hint", BAD_CONFIGS, ids=[str(i) for i in range(len(BAD_CONFIGS))])
def test_every_config_error_is_one_line(tmp_path, corpus_tsv, tiny_gpt2_path, capsys, over, start, hint):
    """Before: 25 of 38 config errors printed several lines (a header, one line per union branch, pydantic's
    "Value error," prefix, 0-based positions)."""
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    spec["models"][0]["path"] = str(tiny_gpt2_path)
    for key, value in over.items():
        if key == "models":
            value = [{**m, "path": str(tiny_gpt2_path)} if m.get("path") == "P" else m for m in value]
        if key == "corpus":
            value = {**value, "path": str(corpus_tsv)}
        if value is None:
            spec.pop(key)
        else:
            spec[key] = value
    assert run_cli(tmp_path, spec, "validate") == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"interlingua: error: {start}"), line
    assert hint in line and "Value error" not in line and "valid interlingua config" not in line
    assert line.endswith("cfg.yaml)")
