"""``pooling: [..., word_aligned]`` in a run: align tasks, word entries, rows, the control, the cache."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from interlingua.alignment import word_aligned_pool
from interlingua.alignment.links import from_json, identity_alignments, linked_words, to_json, word_rows
from interlingua.analysis.inference import pair_seed
from interlingua.analysis.inference.permutation import shuffle_permutation
from interlingua.analysis.measures import get_measure
from interlingua.core.errors import ConfigError
from interlingua.core.store import Store
from interlingua.data.corpora import load_corpus
from interlingua.data.models import ModelSpec, load_model
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

N_ALIGN = 12


def _spec(tmp_path, gpt2, llama, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 24},
        "models": [{"name": "g", "path": str(gpt2)}, {"name": "l", "path": str(llama)}],
        "pooling": ["mean", "word_aligned"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": True, "cross_model": "same_language"},
        "alignment": {"encoder": "g", "layer": 1, "n": N_ALIGN},
    }
    spec.update(over)
    return spec


@pytest.fixture(scope="module")
def word_run(tmp_path_factory, tiny_gpt2_path, tiny_llama_path):
    tmp = tmp_path_factory.mktemp("words")
    return run(_spec(tmp, tiny_gpt2_path, tiny_llama_path))


def test_every_pair_gets_word_aligned_rows(word_run):
    table = pd.read_csv(word_run.output / "results.csv", keep_default_na=False)
    words = table[table["pooling"] == "word_aligned"]
    sentences = table[table["pooling"] == "mean"]
    assert set(words["pair"]) == set(sentences["pair"]) and len(set(words["pair"])) == 4
    assert (sentences["n"] == 24).all()
    assert (words["n"] > N_ALIGN).all()  # rows are words: more than the aligned sentences
    assert words["note"].str.contains("rows are aligned words").all()
    # one alignment per language pair: eng-deu by the encoder, each language against itself
    assert word_run.info["computed"]["alignment"] == 3


def test_rows_agree_with_an_independent_pooling(word_run, tiny_gpt2_path):
    """The run's matched and shuffled values equal word_aligned_pool + the measure on the stored alignment."""
    table = pd.read_csv(word_run.output / "results.csv", keep_default_na=False)
    row = table[(table["pooling"] == "word_aligned") & (table["pair"] == "g:eng_Latn|g:deu_Latn")]
    last = row[row["layer_a"] == row["layer_a"].max()].iloc[0]
    store = Store(word_run.output.parent / "cache")
    payloads = [store.get_json("alignments", p.stem) for p in sorted(store.folder("alignments").glob("*.json"))]
    (payload,) = [p for p in payloads if not p["identity"]]
    assert payload["languages"] == ["deu_Latn", "eng_Latn"] and payload["layer"] == 1
    alignments = from_json(payload["sentences"])
    corpus = load_corpus("bible", ["eng_Latn", "deu_Latn"], books=["PRO"])
    ids = list(json.loads((word_run.output / "run.json").read_text())["corpus"]["ids"])[:N_ALIGN]
    deu = [corpus.sentences("deu_Latn")[corpus.ids.index(i)] for i in ids]
    eng = [corpus.sentences("eng_Latn")[corpus.ids.index(i)] for i in ids]
    loaded = load_model(ModelSpec(path=str(tiny_gpt2_path)))
    pooled = word_aligned_pool(
        loaded,
        deu,
        eng,
        alignments,
        max_length=64,  # the tiny model's limit
        first_position=False,
    )  # side a of the alignment is German
    assert pooled.reps_a.shape[1] == last["n"]
    k = int(last["layer_a"])
    cka = get_measure("cka_linear_biased")
    # the pair is eng | deu: its rows run by sentence, then English word, then German word
    order = sorted(
        range(len(pooled.rows)), key=lambda r: (pooled.rows[r].sentence, pooled.rows[r].index_b, pooled.rows[r].index_a)
    )
    x, y = pooled.reps_b[k][order].astype(np.float64), pooled.reps_a[k][order].astype(np.float64)
    assert last["matched"] == pytest.approx(float(cka(x, y)), abs=1e-6)
    perm = shuffle_permutation(
        int(last["n"]),
        pair_seed(
            int(json.loads((word_run.output / "run.json").read_text())["spec"]["seeds"]["control"]),
            "g:eng_Latn",
            "g:deu_Latn",
        ),
    )
    assert last["shuffled"] == pytest.approx(float(cka(x, y[perm])), abs=1e-6)


def test_rerun_computes_nothing(word_run):
    spec = json.loads((word_run.output / "run.json").read_text())["spec"]
    spec["overwrite"] = True
    again = run(spec)
    assert not {"alignment", "extract", "compare"} & set(again.info["computed"])
    before = pd.read_csv(word_run.output / "results.csv", keep_default_na=False)
    pd.testing.assert_frame_equal(pd.read_csv(again.output / "results.csv", keep_default_na=False), before)


def test_listed_pairs_only(tmp_path, tiny_gpt2_path, tiny_llama_path):
    pair = {"a": {"model": "l", "language": "eng_Latn"}, "b": {"model": "l", "language": "deu_Latn"}}
    res = run(
        _spec(
            tmp_path, tiny_gpt2_path, tiny_llama_path, alignment={"encoder": "g", "layer": 1, "n": 6, "pairs": [pair]}
        )
    )
    table = pd.read_csv(res.output / "results.csv", keep_default_na=False)
    assert set(table.loc[table["pooling"] == "word_aligned", "pair"]) == {"l:eng_Latn|l:deu_Latn"}
    assert res.info["computed"]["alignment"] == 1


def test_identity_alignment_and_rows():
    sents = ["The old fisher, carries a boat.", "Wisdom is good."]
    al = identity_alignments(sents, "eng_Latn")
    assert [len(a.links) for a in al] == [6, 3] and all(i == j for a in al for i, j in a.links)
    assert from_json(to_json(al)) == al
    covered = np.ones(9, dtype=bool)
    covered[2] = False  # "fisher" uncovered on side a: its link is dropped and counted
    rows = word_rows(al, covered, np.ones(9, dtype=bool))
    assert rows.n_links == 9 and rows.n_dropped == 1 and rows.dropped_a == 1 and rows.dropped_b == 0
    assert rows.index_a.tolist() == [0, 1, 3, 4, 5, 6, 7, 8]
    assert linked_words(al, "b") == [[0, 1, 2, 3, 4, 5], [0, 1, 2]]


def test_word_aligned_config_errors():
    base = {
        "output": "x",
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}],
    }
    with pytest.raises(ConfigError, match="word_aligned\\] alone"):
        parse_spec({**base, "pooling": ["word_aligned"]})
    with pytest.raises(ConfigError, match="pooling has no word_aligned"):
        parse_spec({**base, "pooling": ["mean"], "alignment": {"layer": 3}})
    with pytest.raises(ConfigError, match="alignment.encoder 'c'"):
        parse_spec({**base, "pooling": ["mean", "word_aligned"], "alignment": {"encoder": "c"}})


def test_alignment_pairs_must_be_compared(tmp_path, tiny_gpt2_path, tiny_llama_path):
    pair = {"a": {"model": "g", "language": "eng_Latn"}, "b": {"model": "l", "language": "deu_Latn"}}
    with pytest.raises(ConfigError, match="does not compare"):
        run(_spec(tmp_path, tiny_gpt2_path, tiny_llama_path, alignment={"encoder": "g", "pairs": [pair]}))


def test_first_position_is_never_pooled_by_default(tiny_gpt2_path):
    """GPT-2 has no BOS: position 0 is the first word's token (the attention sink), excluded unless asked."""
    from interlingua.alignment import segment, word_states

    loaded = load_model(ModelSpec(path=str(tiny_gpt2_path)))
    sents = ["Wisdom is good.", "A wise son makes a glad father."]
    words = [segment(s, "eng_Latn") for s in sents]
    kept = word_states(loaded, sents, words)
    cut = word_states(loaded, sents, words, first_position=False)
    for s in range(2):
        first_tokens = kept.n_tokens[s][0]
        assert cut.n_tokens[s][0] == first_tokens - 1  # only position 0 left out of the first word
        assert (cut.n_tokens[s][1:] == kept.n_tokens[s][1:]).all()
        np.testing.assert_array_equal(cut.vectors[s][:, 1:], kept.vectors[s][:, 1:])
        assert cut.covered[s][0] == (first_tokens > 1)
