"""OPUS-100, Tatoeba and BouQUET through ``datasets`` (Hub unreachable here: faked or offline)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.data.corpora import SOURCES, load_corpus
from interlingua.data.corpora.hub_parallel import (
    load_bouquet,
    load_opus100,
    load_tatoeba,
    sentence_id,
)

datasets = pytest.importorskip("datasets")
SRC = Path(__file__).resolve().parents[2] / "src"

# Sentences of at least 50 characters (the paper's filter) and a few shorter ones.
EN = [
    "The committee will meet again next week to discuss the budget.",
    "Most of the villagers had never seen the sea before that summer.",
    "She kept every letter he wrote to her during the long war years.",
    "The new bridge across the river was opened to traffic on Monday.",
    "Scientists are still arguing about what caused the ancient flood.",
]
DE = [
    "Der Ausschuss wird sich nächste Woche erneut treffen, um das Budget zu besprechen.",
    "Die meisten Dorfbewohner hatten das Meer vor jenem Sommer noch nie gesehen.",
    "Sie bewahrte jeden Brief auf, den er ihr in den langen Kriegsjahren schrieb.",
    "Die neue Brücke über den Fluss wurde am Montag für den Verkehr freigegeben.",
    "Wissenschaftler streiten noch immer darüber, was die uralte Flut verursacht hat.",
]
RU = [
    "Комитет снова соберётся на следующей неделе, чтобы обсудить бюджет страны.",
    "Большинство жителей деревни никогда не видели моря до того самого лета.",
    "Она хранила каждое письмо, которое он писал ей в долгие годы войны.",
    "Новый мост через реку был открыт для движения транспорта в понедельник.",
    "Учёные до сих пор спорят о том, что вызвало древнее наводнение.",
]
SHORT_EN, SHORT_DE = "Hello there.", "Hallo."


def fake_hub(tables: dict[str, object], calls: list[tuple[object, ...]]):  # type: ignore[no-untyped-def]
    """A stand-in for ``datasets.load_dataset`` serving invented rows per config."""

    def load_dataset(path: str, name: str | None = None, split: str | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
        calls.append((path, name, split, tuple(sorted(kwargs))))
        if name not in tables:
            raise ValueError(f"BuilderConfig '{name}' not found. Available: {sorted(map(str, tables))}")
        table = tables[name]
        return datasets.Dataset.from_dict(table) if isinstance(table, dict) else table

    return load_dataset


def opus(first: str, second: str, a: list[str], b: list[str]) -> dict[str, list[object]]:
    return {"translation": [{first: x, second: y} for x, y in zip(a, b)]}


def tatoeba(src: str, tgt: str, a: list[str], b: list[str]) -> dict[str, list[object]]:
    return {
        "sourceLang": [src] * len(a),
        "targetlang": [tgt] * len(a),
        "sourceString": a,
        "targetString": b,
    }


@pytest.fixture
def opus_hub(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    calls: list[tuple[object, ...]] = []
    tables = {
        # English second in de-en, first in en-ru: alphabetical config names.
        "de-en": opus("de", "en", DE + [SHORT_DE, DE[0] + " Wieder."], EN + [SHORT_EN, EN[0]]),
        # Russian misses EN[4]; rows shuffled.
        "en-ru": opus("en", "ru", [EN[3], EN[1], EN[0], EN[2]], [RU[3], RU[1], RU[0], RU[2]]),
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, calls))
    return calls


def test_opus_pair_filter_dedup_and_ids(opus_hub: list[tuple[object, ...]]) -> None:
    corpus = load_corpus("opus100", ["deu_Latn", "eng_Latn"], revision="abc")
    assert corpus.name == "opus100:test"
    assert corpus.languages == ("deu_Latn", "eng_Latn")
    # 5 long rows kept; the short one dropped by min_chars=50; the duplicate English
    # sentence keeps its first German translation.
    assert len(corpus) == 5
    assert SHORT_EN not in corpus.sentences("eng_Latn")
    assert corpus.ids == tuple(sorted(sentence_id(e) for e in EN))
    for de, en in zip(corpus.sentences("deu_Latn"), corpus.sentences("eng_Latn")):
        assert DE[EN.index(en)] == de
    assert opus_hub == [("Helsinki-NLP/opus-100", "de-en", "test", ("revision",))]
    # min_chars=0 keeps the short pair too.
    assert len(load_opus100(["deu_Latn", "eng_Latn"], min_chars=0)) == 6


def test_opus_multiway_join_on_english(opus_hub: list[tuple[object, ...]]) -> None:
    corpus = load_opus100(["eng_Latn", "deu_Latn", "rus_Cyrl"], split="test")
    assert corpus.languages == ("eng_Latn", "deu_Latn", "rus_Cyrl")
    assert sorted(corpus.sentences("eng_Latn")) == sorted(EN[:4])  # EN[4] has no Russian
    for en, de, ru in zip(*(corpus.sentences(c) for c in corpus.languages)):
        i = EN.index(en)
        assert (de, ru) == (DE[i], RU[i])
    assert [c[1] for c in opus_hub] == ["de-en", "en-ru"]
    # English as pivot without being part of the corpus.
    two = load_opus100(["deu_Latn", "rus_Cyrl"])  # direct pair de-ru is absent ...
    assert two.languages == ("deu_Latn", "rus_Cyrl") and len(two) == 4


def test_ids_stable_and_independent_of_row_order(monkeypatch: pytest.MonkeyPatch) -> None:
    def corpus_for(order: list[int]):  # type: ignore[no-untyped-def]
        tables = {
            "de-en": opus("de", "en", [DE[i] for i in order], [EN[i] for i in order]),
            "en-ru": opus("en", "ru", [EN[i] for i in order], [RU[i] for i in order]),
        }
        monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, []))
        return load_corpus("opus100", ["eng_Latn", "deu_Latn", "rus_Cyrl"])

    first = corpus_for([0, 1, 2, 3, 4])
    again = corpus_for([0, 1, 2, 3, 4])
    shuffled = corpus_for([3, 0, 4, 2, 1])
    assert first == again == shuffled
    assert first.fingerprint("deu_Latn") == shuffled.fingerprint("deu_Latn")
    assert len(set(first.ids)) == 5 and all(len(i) == 16 for i in first.ids)
    # Sampling behaves like FLORES+: seeded, aligned, order kept, row-order independent.
    a, b = first.sample(3, seed=7), shuffled.sample(3, seed=7)
    assert a == b and a.name == "opus100:test[n=3,seed=7]"
    assert list(a.ids) == sorted(a.ids)
    for en, de in zip(a.sentences("eng_Latn"), a.sentences("deu_Latn")):
        assert DE[EN.index(en)] == de
    assert first.sample(3, seed=8) != a or len(first) == 3
    with pytest.raises(CorpusError, match="only 5 are available"):
        first.sample(6, seed=0)


def test_opus_language_mapping_and_missing_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []
    tables = {
        "en-zh": opus("en", "zh", EN[:2], ["委员会" * 20, "村民" * 30]),
        "en-nb": opus("en", "nb", EN[:2], DE[:2]),
        "de-en": opus("de", "en", DE, EN),
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, calls))
    chinese = load_opus100(["eng", "zho_Hans"], min_chars=10)  # zho_Hans -> cmn_Hans -> zh
    assert chinese.languages == ("eng_Latn", "cmn_Hans") and len(chinese) == 2
    assert load_opus100(["nob_Latn", "eng_Latn"]).languages == ("nob_Latn", "eng_Latn")
    assert calls[-1][1] == "en-nb"
    with pytest.raises(
        LanguageError, match=r"no pair eng_Latn-fra_Latn .*tried config\(s\) en-fr.*available with en: de, nb, zh"
    ):
        load_opus100(["eng_Latn", "fra_Latn"])
    with pytest.raises(LanguageError, match="OPUS-100 has no language jav_Java.*af, am, an"):
        load_opus100(["eng_Latn", "jav_Java"])
    # `codes` overrides the mapping.
    tables["en-xx"] = opus("en", "xx", EN, DE)
    corpus = load_corpus("opus100", ["eng_Latn", "jav_Java"], codes={"jav_java": "xx"})
    assert corpus.sentences("jav_Java")[0] in DE


def test_pairwise_argument_errors(opus_hub: list[tuple[object, ...]]) -> None:
    with pytest.raises(LanguageError, match="at least two languages"):
        load_opus100(["deu_Latn"])
    with pytest.raises(CorpusError, match="listed twice"):
        load_opus100(["deu_Latn", "deu_latn"])
    with pytest.raises(CorpusError, match="min_chars must be a non-negative integer"):
        load_opus100(["deu_Latn", "eng_Latn"], min_chars=-1)
    with pytest.raises(CorpusError, match=r"no rows with at least 500 characters per side .*eng_Latn-deu_Latn: 0 of 7"):
        load_opus100(["eng_Latn", "deu_Latn"], min_chars=500)


def test_opus_bad_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = {"de-en": {"de": DE, "en": EN}}
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, []))
    with pytest.raises(CorpusError, match="no 'translation' column"):
        load_opus100(["deu_Latn", "eng_Latn"])


def test_tatoeba_join_mapping_and_macrolanguage(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []
    tables = {
        # deu-eng: German is the source (first in the config name).
        "deu-eng": tatoeba("deu", "eng", DE + [SHORT_DE], EN + [SHORT_EN]),
        "eng-rus": tatoeba("eng", "rus", [EN[1], EN[0], EN[4]], [RU[1], RU[0], RU[4]]),
        # Chinese is published under the macrolanguage code.
        "eng-zho": tatoeba("eng", "cmn_Hans", EN[:2], ["委员会" * 20, "村民" * 30]),
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, calls))
    corpus = load_corpus("tatoeba", ["rus_Cyrl", "eng_Latn", "deu_Latn"], split="validation")
    assert corpus.name == "tatoeba:validation"
    assert sorted(corpus.sentences("eng_Latn")) == sorted([EN[0], EN[1], EN[4]])
    for ru, en, de in zip(*(corpus.sentences(c) for c in corpus.languages)):
        i = EN.index(en)
        assert (ru, de) == (RU[i], DE[i])
    assert corpus.ids == tuple(sorted(sentence_id(e) for e in [EN[0], EN[1], EN[4]]))
    assert [c[:3] for c in calls] == [
        ("Helsinki-NLP/tatoeba_mt", "eng-rus", "validation"),
        ("Helsinki-NLP/tatoeba_mt", "deu-eng", "validation"),
    ]
    chinese = load_tatoeba(["cmn_Hans", "eng_Latn"])
    assert chinese.languages == ("cmn_Hans", "eng_Latn") and len(chinese) == 2
    assert calls[-1][1] == "eng-zho"
    with pytest.raises(LanguageError, match="no pair eng_Latn-fra_Latn.*available with eng: deu, rus, zho"):
        load_tatoeba(["eng_Latn", "fra_Latn"])
    # Pairs without English are read directly; the key side is the config's first.
    tables["deu-rus"] = tatoeba("deu", "rus", DE[:3], RU[:3])
    direct = load_tatoeba(["rus_Cyrl", "deu_Latn"], dataset="me/tatoeba-mirror")
    assert direct.ids == tuple(sorted(sentence_id(d) for d in DE[:3]))
    assert calls[-1][:2] == ("me/tatoeba-mirror", "deu-rus")


def test_tatoeba_translation_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = {"deu-eng": opus("deu", "eng", DE, EN)}
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, []))
    corpus = load_tatoeba(["eng_Latn", "deu_Latn"], dataset="Helsinki-NLP/tatoeba")
    assert len(corpus) == 5


def test_connection_error_names_offline_alternatives(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*args: object, **kwargs: object) -> None:
        raise ConnectionError("Couldn't reach 'Helsinki-NLP/opus-100' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    for source in ("opus100", "tatoeba"):
        with pytest.raises(
            CorpusError,
            match="cannot load Helsinki-NLP/.*ConnectionError.*offline alternatives: `source: bible`.*`source: local`",
        ):
            load_corpus(source, ["eng_Latn", "deu_Latn"])
    with pytest.raises(
        CorpusError,
        match=(
            r"cannot load BouQUET .*facebook/bouquet is a gated dataset: to use it, accept its terms at "
            r"https://huggingface.co/datasets/facebook/bouquet.*huggingface-cli login.*offline alternatives"
        ),
    ):
        load_corpus("bouquet", ["eng_Latn", "deu_Latn"])


def test_gated_error_names_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    class GatedRepoError(OSError):
        pass

    def gated(*args: object, **kwargs: object) -> None:
        raise GatedRepoError("401 Client Error. Access to dataset facebook/bouquet is restricted.")

    monkeypatch.setattr(datasets, "load_dataset", gated)
    with pytest.raises(
        CorpusError,
        match=(
            r"facebook/bouquet is a gated dataset and this machine has no access.*GatedRepoError.*accept its terms at "
            r"https://huggingface.co/datasets/facebook/bouquet.*huggingface-cli login.*offline alternatives"
        ),
    ):
        load_bouquet(["eng_Latn", "deu_Latn"], token="hf_x")
    with pytest.raises(CorpusError, match="Helsinki-NLP/opus-100 is a gated dataset"):
        load_opus100(["eng_Latn", "deu_Latn"])


def test_bouquet_long_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []
    rows = {
        "uniq_id": ["10", "2", "2", "10", "2", "10", "7"],
        "lang": ["eng_Latn", "eng_Latn", "deu_Latn", "deu_Latn", "fra_Latn", "fra_Latn", "eng_Latn"],
        "text": ["ten", "two", "zwei", "zehn", "deux", "dix", "seven"],
        "domain": ["x"] * 7,
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub({None: rows}, calls))
    corpus = load_corpus("bouquet", ["deu_latn", "eng_Latn"], split="dev")
    assert corpus.name == "bouquet:dev"
    assert corpus.ids == ("2", "10")  # ids present in every language, numeric order
    assert corpus.sentences("deu_Latn") == ["zwei", "zehn"]
    assert corpus.sentences("eng_Latn") == ["two", "ten"]
    assert calls == [("facebook/bouquet", None, "dev", ())]
    assert len(load_bouquet(["eng_Latn", "deu_Latn"], min_chars=3)) == 2
    with pytest.raises(
        CorpusError,
        match=(
            r"BouQUET \(facebook/bouquet, split test\) has no sentence id shared by eng_Latn, deu_Latn .*at least 4 "
            r"characters"
        ),
    ):
        load_bouquet(["eng_Latn", "deu_Latn"], min_chars=4)  # "two"/"ten" are shorter
    with pytest.raises(LanguageError, match="has no spa_Latn; available: deu_Latn, eng_Latn, fra_Latn"):
        load_bouquet(["eng_Latn", "spa_Latn"])


def test_bouquet_pair_layout_and_column_options(monkeypatch: pytest.MonkeyPatch) -> None:
    pair_rows = {
        "id": ["a", "b"],
        "src_lang": ["eng_Latn", "eng_Latn"],
        "src_text": ["one", "two"],
        "tgt_lang": ["deu_Latn", "deu_Latn"],
        "tgt_text": ["eins", "zwei"],
    }
    custom = {
        "sid": [1, 1, 2, 2],
        "code": ["eng_Latn", "rus_Cyrl", "eng_Latn", "rus_Cyrl"],
        "sentence_text": ["one", "один", "two", "два"],
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub({"pairs": pair_rows, "custom": custom}, []))
    corpus = load_bouquet(["eng_Latn", "deu_Latn"], config="pairs")
    assert corpus.ids == ("a", "b") and corpus.sentences("deu_Latn") == ["eins", "zwei"]
    with pytest.raises(
        CorpusError,
        match=(
            "no id column: expected one of uniq_id, id, sentence_id, found sid, code, sentence_text; name it with the "
            "`id_column` option"
        ),
    ):
        load_bouquet(["eng_Latn", "rus_Cyrl"], config="custom")
    corpus = load_corpus(
        "bouquet",
        ["rus_Cyrl", "eng_Latn"],
        config="custom",
        id_column="sid",
        language_column="code",
        text_column="sentence_text",
    )
    assert corpus.ids == ("1", "2") and corpus.sentences("rus_Cyrl") == ["один", "два"]
    with pytest.raises(CorpusError, match="no config 'other'"):
        load_bouquet(["eng_Latn"], config="other")


def test_registry_and_option_validation() -> None:
    for name in ("opus100", "tatoeba", "bouquet"):
        assert name in SOURCES
    with pytest.raises(
        CorpusError,
        match="'opus100' does not take option.*books.*its options are: split, min_chars, dataset, codes, revision",
    ):
        load_corpus("opus100", ["eng_Latn", "deu_Latn"], books="NT")
    with pytest.raises(
        CorpusError, match="'bouquet' does not take option.*codes.*id_column, language_column, text_column"
    ):
        load_corpus("bouquet", ["eng_Latn", "deu_Latn"], codes={})


@pytest.mark.slow
def test_real_offline_mode_fails_fast_with_alternatives(tmp_path: Path) -> None:
    """The real ``datasets`` code path with HF_HUB_OFFLINE=1 and an empty cache."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": str(SRC),
    }
    script = (
        "from interlingua.data.corpora import load_corpus\n"
        "from interlingua.core.errors import CorpusError\n"
        "for source in ('opus100', 'bouquet'):\n"
        "    try:\n"
        "        load_corpus(source, ['eng_Latn', 'deu_Latn'])\n"
        "    except CorpusError as exc:\n"
        "        print('CorpusError:', exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    opus_line, bouquet_line = result.stdout.strip().splitlines()
    assert opus_line.startswith("CorpusError: cannot load Helsinki-NLP/opus-100 (de-en, split test)")
    assert "`source: bible`" in opus_line and "`source: local`" in opus_line
    assert "facebook/bouquet is a gated dataset" in bouquet_line
    assert "huggingface-cli login" in bouquet_line and "`source: local`" in bouquet_line


def test_the_run_config_accepts_the_new_sources_and_their_options():
    from interlingua.core.errors import ConfigError
    from interlingua.pipeline.config import parse_spec

    spec = parse_spec(
        {
            "output": "x",
            "corpus": {"source": "opus100", "languages": ["eng_Latn", "deu_Latn"], "split": "test", "min_chars": 60},
            "models": [{"zoo": "eng"}],
        }
    )
    assert spec.corpus.load_options() == {"split": "test", "min_chars": 60}
    with pytest.raises(ConfigError, match="min_chars"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "min_chars": 60},
                "models": [{"zoo": "eng"}],
            }
        )
