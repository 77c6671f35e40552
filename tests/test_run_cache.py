"""The store through ``interlingua.pipeline.runs.run``: reuse, keys, damage, failures, truncation.

Tiny GPT-2 / Llama checkpoints and a small local TSV corpus. One baseline run
fills a cache; each test works on its own copy of it. "Old code" in the
comments is the pipeline before the plan / execute / store split (f1731ae^),
with ``representations/cache.py`` and its unverified JSON caches.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from fixtures.tiny_models import parallel_sentences
from interlingua.core.errors import CorpusError
from interlingua.data.corpora import ParallelCorpus
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.plan import build_plan
from interlingua.pipeline.preflight import load_run_corpus
from interlingua.pipeline.runs import RunResult, run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

N = 12
LANGS = ["eng_Latn", "deu_Latn"]
FAKE_FINGERPRINTS = {"gpt2": "1" * 64, "llama": "2" * 64}


def write_tsv(path: Path, eng: list[str] | None = None, deu: list[str] | None = None) -> Path:
    sents = parallel_sentences(N, seed=3)
    df = pd.DataFrame(
        {"id": [f"s{i}" for i in range(N)], "eng_Latn": eng or sents["eng"], "deu_Latn": deu or sents["deu"]}
    )
    df.to_csv(path, sep="\t", index=False)
    return path


def spec_for(root: Path, corpus: Path, gpt2: Path, llama: Path | None = None, **over) -> dict:
    models = [{"name": "gpt2", "path": str(gpt2)}]
    if llama is not None:
        models.append({"name": "llama", "path": str(llama)})
    spec = {
        "output": str(root / "out"),
        "cache_dir": str(root / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_latn", "deu_Latn"]},
        "models": models,
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 9, "jackknife_groups": 4},
        "special_tokens": "include",
    }
    spec.update(over)
    return spec


def quiet_run(spec: dict) -> RunResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run(spec)


def entries(cache: Path, namespace: str) -> list[Path]:
    return sorted(p for p in (cache / namespace).rglob("*") if p.is_file())


def no_temp_files(*folders: Path) -> bool:
    return not [p for f in folders if f.exists() for p in f.rglob("*") if ".tmp-" in p.name or ".partial-" in p.name]


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    return write_tsv(tmp_path_factory.mktemp("corpus") / "parallel.tsv")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, corpus_tsv, tiny_gpt2_path, tiny_llama_path) -> tuple[dict, RunResult]:
    """One complete run of both models on both languages, pooling mean."""
    root = tmp_path_factory.mktemp("baseline")
    spec = spec_for(root, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    return spec, quiet_run(spec)


@pytest.fixture
def warm(baseline, tmp_path) -> tuple[dict, RunResult]:
    """The baseline's spec, writing into this test's folder over a copy of the baseline's cache."""
    spec, res = baseline
    shutil.copytree(spec["cache_dir"], tmp_path / "cache")
    return {**spec, "output": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache")}, res


N_PAIRS = 4  # gpt2 eng|deu, llama eng|deu, gpt2|llama on eng and on deu


def test_the_baseline_computed_everything_once(baseline) -> None:
    spec, res = baseline
    cache = Path(spec["cache_dir"])
    assert res.models_loaded == ["gpt2", "llama"]
    assert res.info["computed"] == {"extract": 4, "compare": N_PAIRS}
    assert res.info["cache"]["representations"] == {"hits": 0, "misses": 4, "rebuilt": 0}
    assert res.info["cache"]["comparisons"] == {"hits": 0, "misses": N_PAIRS, "rebuilt": 0}
    assert len(entries(cache, "representations")) == 4 and len(entries(cache, "comparisons")) == N_PAIRS
    assert len(entries(cache, "facts")) == 2
    assert no_temp_files(cache, Path(spec["output"]).parent)


def test_a_rerun_loads_no_model_and_reads_everything_from_the_store(warm) -> None:
    spec, first = warm
    res = run(spec)
    assert res.models_loaded == [] and res.info["models_loaded"] == []
    assert res.info["computed"] == {}
    assert res.info["cache"]["representations"] == {"hits": 4, "misses": 0, "rebuilt": 0}
    assert res.info["cache"]["comparisons"] == {"hits": N_PAIRS, "misses": 0, "rebuilt": 0}
    assert res.info["cache"]["facts"] == {"hits": 2, "misses": 0, "rebuilt": 0}
    pd.testing.assert_frame_equal(res.table, first.table)
    assert res.info["models"] == first.info["models"]  # facts recorded at the first load


def test_adding_a_pooling_computes_only_the_new_pooling(warm) -> None:
    spec, first = warm
    cache = Path(spec["cache_dir"])
    before = {p: (p.stat().st_ino, p.read_bytes()) for p in entries(cache, "representations")}
    res = quiet_run({**spec, "pooling": ["mean", "sgpt"]})
    assert res.info["cache"]["representations"] == {"hits": 4, "misses": 4, "rebuilt": 0}
    assert res.info["cache"]["comparisons"] == {"hits": N_PAIRS, "misses": N_PAIRS, "rebuilt": 0}
    assert res.info["computed"] == {"extract": 4, "compare": N_PAIRS}  # 4 sides, each for sgpt only
    after = entries(cache, "representations")
    assert len(after) == 8 and len(entries(cache, "comparisons")) == 2 * N_PAIRS
    assert {p: (p.stat().st_ino, p.read_bytes()) for p in before} == before  # mean entries not rewritten
    assert {p.name.split(".")[1] for p in set(after) - set(before)} == {"sgpt"}
    mean = res.table[res.table["pooling"] == "mean"].reset_index(drop=True)
    pd.testing.assert_frame_equal(mean, first.table)


# ----------------------------------------------------------------------------- keys


def _key(
    spec: dict,
    corpus: ParallelCorpus | None = None,
    fingerprints: dict | None = None,
    model: str = "gpt2",
    language: str = "eng_Latn",
    pooling: str = "mean",
) -> str:
    run_spec = parse_spec(spec)
    corpus = corpus if corpus is not None else load_run_corpus(run_spec)
    plan = build_plan(run_spec, corpus, fingerprints or FAKE_FINGERPRINTS)
    return plan.extract_task(model, language).entry_key(pooling)


def _with_model(spec: dict, **over) -> dict:
    return {**spec, "models": [{**spec["models"][0], **over}, *spec["models"][1:]]}


def test_every_input_changes_the_extraction_key(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path) -> None:
    spec = spec_for(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path, pooling=["mean", "sgpt"])
    corpus = load_run_corpus(parse_spec(spec))
    base = _key(spec)
    assert base == _key(spec)  # the same inputs, the same key
    eng = corpus.sentences("eng_Latn")
    edited = ParallelCorpus(corpus.name, corpus.ids, {**corpus.texts, "eng_Latn": ["Edited.", *eng[1:]]})
    renamed_ids = ParallelCorpus(corpus.name, tuple(f"t{i}" for i in range(len(corpus))), corpus.texts)
    changed = {
        "pooling": _key(spec, pooling="sgpt"),
        # old code: special_tokens did not exist and batch_size was not part of the key
        "special_tokens": _key({**spec, "special_tokens": "exclude"}),
        "batch_size": _key({**spec, "batch_size": 4}),
        "max_length": _key({**spec, "max_length": 32}),
        "dtype": _key(_with_model(spec, dtype="bfloat16")),
        "corpus text": _key(spec, corpus=edited),
        "sentence ids": _key(spec, corpus=renamed_ids),
        "model fingerprint": _key(spec, fingerprints={**FAKE_FINGERPRINTS, "gpt2": "3" * 64}),
        "language": _key(spec, language="deu_Latn"),
    }
    assert [what for what, key in changed.items() if key == base] == []
    assert len(set(changed.values())) == len(changed)
    # neither the corpus's name nor the spelling of a language code is an input
    renamed = ParallelCorpus("another-name", corpus.ids, corpus.texts)
    assert _key(spec, corpus=renamed) == base
    assert _key({**spec, "corpus": {**spec["corpus"], "languages": ["eng_Latn", "deu_latn"]}}) == base
    assert _key({**spec, "corpus": {**spec["corpus"], "languages": ["ENG_LATN", "deu_Latn"]}}) == base


# ----------------------------------------------------------------------------- damage


def test_a_damaged_representation_is_warned_about_rebuilt_and_the_table_is_unchanged(warm) -> None:
    spec, first = warm
    cache = Path(spec["cache_dir"])
    from interlingua.data.models.fingerprint import spec_fingerprint
    from interlingua.data.models.spec import ModelSpec

    gpt2 = spec_fingerprint(ModelSpec(**spec["models"][0]), cache_dir=cache / "models")[:16]
    (path,) = [p for p in entries(cache, "representations") if p.parent.name == gpt2 and p.name.startswith("deu_Latn.")]
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # one byte of the tensor data
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=re.escape(f"cache entry {path}")):
        res = run(spec)
    assert res.info["cache"]["representations"] == {"hits": 3, "misses": 1, "rebuilt": 1}
    assert res.models_loaded == ["gpt2"] and res.info["computed"] == {"extract": 1}
    pd.testing.assert_frame_equal(res.table, first.table)
    again = run({**spec, "output": spec["output"] + "-again"})  # the rebuilt entry is whole
    assert again.info["cache"]["representations"] == {"hits": 4, "misses": 0, "rebuilt": 0}


def test_an_edited_comparison_row_is_detected_and_recomputed(warm) -> None:
    # old code: _read_rows served the edited value, so results.csv reported a number nothing computed
    spec, first = warm
    cache = Path(spec["cache_dir"])
    path = entries(cache, "comparisons")[0]
    text = path.read_text()
    edited, count = re.subn(r'"matched": -?[0-9][0-9.eE+-]*', '"matched": 0.123', text, count=1)
    assert count == 1
    path.write_text(edited)
    with pytest.warns(UserWarning, match=re.escape(f"cache entry {path}")):
        res = run(spec)
    assert res.info["cache"]["comparisons"] == {"hits": N_PAIRS - 1, "misses": 1, "rebuilt": 1}
    assert res.info["computed"] == {"compare": 1} and res.models_loaded == []
    assert (res.table["matched"] != 0.123).all()
    pd.testing.assert_frame_equal(res.table, first.table)
    table = pd.read_parquet(Path(spec["output"]) / "results.parquet")
    pd.testing.assert_frame_equal(table, first.table)


def test_edited_facts_are_rebuilt_and_the_run_stays_correct(warm) -> None:
    # old code: LazyModel.cached_facts served the edited facts, so run.json reported hidden_size 33
    spec, first = warm
    cache = Path(spec["cache_dir"])
    (path,) = [p for p in entries(cache, "facts") if json.loads(p.read_text())["payload"]["model_type"] == "gpt2"]
    text = path.read_text()
    assert text.count('"hidden_size": 32') == 1
    path.write_text(text.replace('"hidden_size": 32', '"hidden_size": 33'))
    with pytest.warns(UserWarning, match=re.escape(f"cache entry {path}")):
        res = run(spec)
    assert res.info["cache"]["facts"]["rebuilt"] == 1
    assert res.info["models"] == first.info["models"]
    assert res.info["models"]["gpt2"]["hidden_size"] == 32
    info = json.loads((Path(spec["output"]) / "run.json").read_text())
    assert info["models"]["gpt2"]["hidden_size"] == 32
    # the model was loaded to record its facts again, and the run says so
    assert res.models_loaded == ["gpt2"] and info["models_loaded"] == ["gpt2"]
    assert res.info["computed"] == {}
    pd.testing.assert_frame_equal(res.table, first.table)
    again = run({**spec, "output": spec["output"] + "-again"})  # the facts entry is whole again
    assert again.info["cache"]["facts"] == {"hits": 2, "misses": 0, "rebuilt": 0} and again.models_loaded == []


# ----------------------------------------------------------------------------- failures


def test_a_failing_second_side_leaves_the_first_sides_entries_valid(tmp_path, tiny_gpt2_path) -> None:
    sents = parallel_sentences(N, seed=3)
    deu = list(sents["deu"])
    deu[5] = "<|endoftext|>"  # only a special token: nothing to pool when special tokens are excluded
    tsv = write_tsv(tmp_path / "bad.tsv", deu=deu)
    spec = spec_for(tmp_path, tsv, tiny_gpt2_path, special_tokens="exclude")
    cache = Path(spec["cache_dir"])
    with pytest.raises(CorpusError, match="only of special"):
        quiet_run(spec)
    eng = entries(cache, "representations")
    assert [p.name.split(".")[0] for p in eng] == ["eng_Latn"]  # the first side is stored, the failed one not
    assert not Path(spec["output"]).exists()
    assert no_temp_files(cache, tmp_path)
    before = eng[0].read_bytes()
    write_tsv(tsv)  # the user fixes the sentence
    res = quiet_run(spec)
    assert res.info["cache"]["representations"] == {"hits": 1, "misses": 1, "rebuilt": 0}
    assert res.info["computed"] == {"extract": 1, "compare": 1}
    assert eng[0].read_bytes() == before
    assert set(res.table["pair"]) == {"gpt2:eng_Latn|gpt2:deu_Latn"}


# ----------------------------------------------------------------------------- truncation


def test_a_truncated_sentence_is_recorded_and_warned_about_again_on_a_cached_rerun(tmp_path, tiny_gpt2_path) -> None:
    # old code: truncation was neither in run.json nor repeated when the side came from the cache
    sents = parallel_sentences(N, seed=3)
    eng = list(sents["eng"])
    eng[3] = " ".join(eng[:6])  # ~180 tokens; the tiny GPT-2 has 64 positions, the others ~30 tokens
    tsv = write_tsv(tmp_path / "long.tsv", eng=eng)
    spec = spec_for(tmp_path, tsv, tiny_gpt2_path)
    expected = {"gpt2:eng_Latn": {"max_length": 64, "ids": ["s3"]}}
    with pytest.warns(UserWarning, match="truncated"):
        first = run(spec)
    assert first.info["truncated"] == expected
    assert json.loads((Path(spec["output"]) / "run.json").read_text())["truncated"] == expected
    # the tiny GPT-2's 64 positions cut max_length: the cached side's warning does not advise raising it
    with pytest.warns(UserWarning, match=r"gpt2 on eng_Latn: 1 sentences were truncated to 64 tokens.*'s3'.*limit"):
        again = run({**spec, "output": str(tmp_path / "out2")})
    assert again.models_loaded == [] and again.info["cache"]["representations"]["hits"] == 2
    assert json.loads((tmp_path / "out2" / "run.json").read_text())["truncated"] == expected
    pd.testing.assert_frame_equal(again.table, first.table)
