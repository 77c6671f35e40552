"""Every mistake a user can make is an InterlinguaError, exit code 2, found before any model runs."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fixtures.runs import run_cli, spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import (
    ConfigError,
    CorpusError,
    LanguageError,
    ModelError,
    NonFiniteError,
    OutputError,
    StoreError,
)
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    sents = parallel_sentences(24, seed=5)
    path = tmp_path_factory.mktemp("corpus") / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(24)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        path, sep="\t", index=False
    )
    return path


@pytest.fixture(scope="module")
def nan_gpt2_path(tmp_path_factory, tiny_gpt2_path) -> Path:
    """The tiny GPT-2 with NaN in block 1's MLP weights: activations turn NaN from layer 2 on."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = tmp_path_factory.mktemp("nan_gpt2")
    model = AutoModel.from_pretrained(tiny_gpt2_path)
    with torch.no_grad():
        model.h[1].mlp.c_fc.weight.fill_(float("nan"))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_gpt2_path).save_pretrained(folder)
    return folder


def test_non_finite_activations_are_caught_at_the_source_with_model_and_layer(
    tmp_path, corpus_tsv, nan_gpt2_path, capsys
):
    """Before: a NaN model ran to the end, wrote NaN rows and said nothing."""
    spec = spec_for(tmp_path, corpus_tsv, nan_gpt2_path)
    with pytest.raises(NonFiniteError) as err:
        run(spec)
    msg = str(err.value)
    assert "gpt2" in msg and "eng_Latn" in msg and "float32" in msg and "layer" in msg
    assert not Path(spec["output"]).exists()
    reps = Path(spec["cache_dir"]) / "representations"
    assert not reps.exists() or not [p for p in reps.rglob("*") if p.is_file()]  # nothing cached for that side
    assert run_cli(tmp_path, spec, "run") == 2
    assert "NaN" in capsys.readouterr().err or "non-finite" in capsys.readouterr().err


@pytest.mark.parametrize(
    "make_bad, error, message",
    [
        ("cache_is_file", StoreError, "is a file"),
        ("cache_under_file", StoreError, "not writable"),
        ("output_is_file", OutputError, "is a file"),
    ],
)
def test_environment_failures_are_clear_errors_before_any_work(
    tmp_path, corpus_tsv, tiny_gpt2_path, make_bad, error, message, capsys
):
    """Before: NotADirectoryError / OSError tracebacks, some only after all extraction."""
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    if make_bad == "cache_is_file":
        spec["cache_dir"] = str(blocker)
    elif make_bad == "cache_under_file":
        spec["cache_dir"] = str(blocker / "cache")
    else:
        spec["output"] = str(blocker)
    with pytest.raises(error, match=message):
        run(spec)
    assert not (tmp_path / "cache").exists()  # failed before any model ran
    assert run_cli(tmp_path, spec, "run") == 2
    err = capsys.readouterr().err
    assert err.startswith("interlingua: error:") and "Traceback" not in err


def test_run_of_nothing_is_a_config_error():
    with pytest.raises(ConfigError, match="RunSpec, a mapping or the path"):
        run(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda s, t: s["corpus"].update(path=str(t / "missing.tsv")), CorpusError, "missing.tsv"),
        (
            lambda s, t: s["models"].__setitem__(0, {"name": "gpt2", "path": str(t / "no-model")}),
            ModelError,
            "no-model",
        ),
        (lambda s, t: s["corpus"].update(languages=["eng_Latn", "fra_Latn"]), LanguageError, "fra_Latn"),
        (lambda s, t: s["corpus"].update(n=1000), CorpusError, "1000"),
        (lambda s, t: s["corpus"].update(languages=["eng_Latn", "eng_latn"]), ConfigError, "duplicates"),
    ],
)
def test_validate_catches_what_used_to_surface_only_at_run_time(
    tmp_path, corpus_tsv, tiny_gpt2_path, change, error, message, capsys
):
    """Before: `validate` said valid for each of these."""
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    change(spec, tmp_path)
    assert run_cli(tmp_path, spec, "validate") == 2
    assert message in capsys.readouterr().err
    with pytest.raises(error, match=message):
        run(spec)


def test_a_bad_second_model_is_found_before_the_first_is_extracted(tmp_path, corpus_tsv, tiny_gpt2_path):
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    spec["models"].append({"name": "broken", "path": str(tmp_path / "nowhere")})
    with pytest.raises(ModelError, match="nowhere"):
        run(spec)
    assert not (Path(spec["cache_dir"]) / "representations").exists()


def test_relative_path_that_does_not_exist_is_not_taken_for_a_hub_id(tmp_path, corpus_tsv, tiny_gpt2_path, monkeypatch):
    """Before: `models/does-not-exist` was sent to the Hub and failed with a connection error."""
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    spec["models"][0] = {"name": "m", "path": "models/does-not-exist"}
    with pytest.raises(ModelError, match="does not exist"):
        run(spec)


def test_explicit_pair_may_spell_codes_as_the_corpus_does_or_not(tmp_path, corpus_tsv, tiny_gpt2_path):
    """Before: a pair side spelt eng_latn was rejected although the corpus accepts that spelling."""
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    spec["pairs"] = {
        "within_model": False,
        "cross_model": "none",
        "explicit": [{"a": {"model": "gpt2", "language": "eng_latn"}, "b": {"model": "gpt2", "language": "deu_Latn"}}],
    }
    res = run(spec)
    assert set(res.table["pair"]) == {"gpt2:eng_Latn|gpt2:deu_Latn"}


def test_constant_representations_give_nan_with_a_reason_and_a_report(tmp_path, tiny_llama_path):
    """Before: `idxmax ... all NA values` crashed the report. Every sentence ends in the same
    " ." token and Llama has no absolute position embedding, so the last token's layer-0 state
    is the same vector for every sentence."""
    sents = parallel_sentences(24, seed=5)
    tsv = tmp_path / "same_end.tsv"
    pd.DataFrame(
        {"id": [f"s{i}" for i in range(24)], **{CODES[k]: [x.rstrip(".") + " ." for x in sents[k]] for k in CODES}}
    ).to_csv(tsv, sep="\t", index=False)
    spec = spec_for(tmp_path, tsv, tiny_llama_path, pooling=["last"], measures=["cka_linear_biased", "svcca_var0.99"])
    res = run(spec)
    t = res.table
    layer0 = t[t["layer_a"] == 0]
    assert len(layer0) == 2 and layer0["matched"].isna().all()
    assert layer0["note"].str.contains("constant|no variance").all()
    assert t[t["layer_a"] > 0]["matched"].notna().all()
    report = (Path(spec["output"]) / "report.md").read_text()
    notes = report.split("## Warnings and notes", 1)
    assert len(notes) == 2 and re.search("constant|no variance", notes[1])  # the report names why they are NaN


def test_keyboard_interrupt_message_and_code(tmp_path, corpus_tsv, tiny_gpt2_path, monkeypatch, capsys):
    import interlingua.pipeline.runs as pipeline

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "coerce_spec", interrupted)
    assert run_cli(tmp_path, spec_for(tmp_path, corpus_tsv, tiny_gpt2_path), "run") == 130
    assert "rerun resumes" in capsys.readouterr().err


def test_validate_does_not_import_torch(tmp_path, corpus_tsv, tiny_gpt2_path):
    import subprocess

    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec))
    code = (
        "import sys; from interlingua.cli import main; rc = main(['validate', sys.argv[1]]); "
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH'); sys.exit(rc)"
    )
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("NO-TORCH")


def test_nothing_of_the_users_is_touched_by_a_failed_run(tmp_path, corpus_tsv, nan_gpt2_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine")
    spec = spec_for(tmp_path, corpus_tsv, nan_gpt2_path)
    with pytest.raises(OutputError, match="not empty"):
        run(spec)
    assert (out / "notes.md").read_text() == "mine" and sorted(p.name for p in out.iterdir()) == ["notes.md"]


@pytest.mark.parametrize(
    "missing, over, error_name, message",
    [
        (
            "ot",
            {
                "models": [{"name": "a", "path": "A"}, {"name": "b", "path": "B"}],
                "transport": {"pairs": [{"target": "a", "donor": "b"}], "probe_n": 10, "eval_n": 4},
            },
            "TransportError",
            "pip install 'interlingua\\[transport\\]'",
        ),
        (
            "jieba",
            {
                "corpus": {"source": "local", "path": "C", "languages": ["eng_Latn", "cmn_Hans"], "n": 16},
                "pooling": ["mean", "word_aligned"],
                "alignment": {"encoder": "gpt2", "layer": 1, "n": 8},
            },
            "AlignmentError",
            "pip install jieba",
        ),
    ],
)
def test_a_section_whose_optional_dependency_is_missing_stops_before_any_model_runs(
    tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, monkeypatch, capsys, missing, over, error_name, message
):
    """Before: a transport: section without POT ran every extraction (and demo --all the family's build),
    then failed with ModuleNotFoundError when the first plan was solved."""
    import importlib.util

    sents = parallel_sentences(24, seed=5)
    corpus = tmp_path / "zh.tsv"
    pd.DataFrame(
        {
            "id": [f"s{i}" for i in range(24)],
            "eng_Latn": sents["eng"],
            "cmn_Hans": ["我们" + s[:3] + "的书" for s in sents["deu"]],
        }
    ).to_csv(corpus, sep="\t", index=False)
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, **{k: v for k, v in over.items() if k != "corpus"})
    spec["corpus"] = over.get("corpus", spec["corpus"])
    if "transport" in over:
        spec["models"] = [{"name": "a", "path": str(tiny_gpt2_path)}, {"name": "b", "path": str(tiny_llama_path)}]
    else:
        spec["corpus"]["path"] = str(corpus)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a))
    with pytest.raises(Exception, match=message) as err:
        run(spec)
    assert type(err.value).__name__ == error_name
    reps = Path(spec["cache_dir"]) / "representations"
    assert not reps.exists() or not [p for p in reps.rglob("*") if p.is_file()]  # no model ran
    assert not Path(spec["output"]).exists()
    assert run_cli(tmp_path, spec, "run") == 2
    err_text = capsys.readouterr().err
    assert err_text.startswith("interlingua: error:") and "Traceback" not in err_text
