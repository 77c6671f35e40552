"""RepresentationCache: hits recompute nothing, keys separate inputs, damage is rebuilt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import interlingua.representations.cache as cache_module
from interlingua.errors import CorpusError
from interlingua.representations import RepresentationCache, extract_representations

from .conftest import TinyCorpus, TinyLoaded


class Spy:
    """Wraps extract_representations to record which poolings each call computed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[list[str]] = []
        monkeypatch.setattr(cache_module, "extract_representations", self)

    def __call__(self, loaded, sentences, poolings, **kwargs):  # noqa: ANN001, ANN003
        self.calls.append(list(poolings))
        return extract_representations(loaded, sentences, poolings, **kwargs)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_second_call_is_a_hit_and_runs_no_model(
    tmp_path: Path, gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus
) -> None:
    cache = RepresentationCache(tmp_path)
    first = cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", ["sgpt", "mean"], progress=False)
    assert cache.stats == {"hits": 0, "misses": 2, "rebuilt": 0}
    assert first["sgpt"].shape == (3, len(tiny_corpus.ids), 32)
    calls: list[int] = []
    handle = gpt2_loaded.model.register_forward_pre_hook(lambda *a: calls.append(1))
    try:
        again = RepresentationCache(tmp_path)
        second = again.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", ["mean", "sgpt"], progress=False)
    finally:
        handle.remove()
    assert calls == []
    assert again.stats == {"hits": 2, "misses": 0, "rebuilt": 0}
    assert list(second) == ["mean", "sgpt"]
    for name in ("mean", "sgpt"):
        np.testing.assert_array_equal(second[name], first[name])
    direct = extract_representations(gpt2_loaded, tiny_corpus.sentences("eng_Latn"), ["sgpt"], progress=False)
    np.testing.assert_array_equal(second["sgpt"], direct["sgpt"])


def test_key_changes_with_every_input(gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus, tmp_path: Path) -> None:
    cache = RepresentationCache(tmp_path)
    base = cache.key(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", max_length=512)
    assert base == cache.key(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", max_length=512)
    edited = TinyCorpus(tiny_corpus.name, tiny_corpus.ids, {"eng_Latn": ["x", *tiny_corpus.sentences("eng_Latn")[1:]]})
    renamed = TinyCorpus(tiny_corpus.name, tuple(f"b{i}" for i in range(len(tiny_corpus.ids))), tiny_corpus.texts)
    others = [
        cache.key(gpt2_loaded, tiny_corpus, "eng_Latn", "mean", max_length=512),
        cache.key(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", max_length=128),
        cache.key(gpt2_loaded, tiny_corpus, "deu_Latn", "sgpt", max_length=512),
        cache.key(gpt2_loaded, edited, "eng_Latn", "sgpt", max_length=512),
        cache.key(gpt2_loaded, renamed, "eng_Latn", "sgpt", max_length=512),
        cache.key(replace(gpt2_loaded, fingerprint="other-weights"), tiny_corpus, "eng_Latn", "sgpt", max_length=512),
    ]
    assert len({base, *others}) == len(others) + 1
    path = cache.path(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", max_length=512)
    assert path.parent == tmp_path / "tiny-gpt2"
    assert path.name.startswith("eng_Latn.sgpt.") and base[:32] in path.name


def test_only_missing_poolings_are_computed_in_one_pass(
    tmp_path: Path, gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(monkeypatch)
    cache = RepresentationCache(tmp_path)
    cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", ["mean"], progress=False)
    out = cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", ["mean", "sgpt", "last"], progress=False)
    assert spy.calls == [["mean"], ["sgpt", "last"]]
    assert cache.stats == {"hits": 1, "misses": 3, "rebuilt": 0}
    assert set(out) == {"mean", "sgpt", "last"}
    assert len(_files(tmp_path)) == 3


def _corrupt_truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_flip_tensor_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # inside the tensor data, header intact
    path.write_bytes(bytes(data))


def _corrupt_garbage(path: Path) -> None:
    path.write_bytes(b"not a safetensors file at all" * 10)


def _corrupt_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[10] = ord("#")  # inside the JSON header
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage", [_corrupt_truncate, _corrupt_flip_tensor_byte, _corrupt_garbage, _corrupt_header]
)
def test_damaged_file_is_reported_and_rebuilt(
    damage, tmp_path: Path, gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus  # noqa: ANN001
) -> None:
    cache = RepresentationCache(tmp_path)
    good = cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", progress=False)["sgpt"]
    path = cache.path(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt")
    damage(path)
    fresh = RepresentationCache(tmp_path)
    with pytest.warns(UserWarning, match=f"cache file {path}"):
        rebuilt = fresh.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", progress=False)["sgpt"]
    assert fresh.stats == {"hits": 0, "misses": 1, "rebuilt": 1}
    np.testing.assert_array_equal(rebuilt, good)
    third = RepresentationCache(tmp_path)
    np.testing.assert_array_equal(third.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt")["sgpt"], good)
    assert third.stats["hits"] == 1


def test_file_of_other_inputs_or_shape_is_rebuilt(
    tmp_path: Path, gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus
) -> None:
    cache = RepresentationCache(tmp_path)
    good = cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "mean", progress=False)["mean"]
    path = cache.path(gpt2_loaded, tiny_corpus, "eng_Latn", "mean")
    # a valid file written for another language, moved under this entry's name
    inputs = cache.key_inputs(gpt2_loaded, tiny_corpus, "deu_Latn", "mean")
    cache.write(path, good, inputs)
    with pytest.warns(UserWarning, match="corpus_fingerprint=.*belongs to other inputs"):
        cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "mean", progress=False)
    # right metadata but the wrong number of rows
    cache.write(path, good[:, :4], cache.key_inputs(gpt2_loaded, tiny_corpus, "eng_Latn", "mean"))
    with pytest.warns(UserWarning, match=r"has shape \(3, 4, 32\)"):
        again = cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "mean", progress=False)
    np.testing.assert_array_equal(again["mean"], good)
    assert cache.rebuilt == 2


def test_failed_compute_leaves_no_file_and_finished_entries_stay_valid(
    tmp_path: Path, gpt2_loaded: TinyLoaded
) -> None:
    texts = {"eng_Latn": ["One.", "Two words."], "deu_Latn": ["Eins.", ""]}
    corpus = TinyCorpus("two", ("a", "b"), texts)
    cache = RepresentationCache(tmp_path)
    eng = cache.get_or_compute(gpt2_loaded, corpus, "eng_Latn", "sgpt", progress=False)
    with pytest.raises(CorpusError, match="no tokens"):
        cache.get_or_compute(gpt2_loaded, corpus, "deu_Latn", "sgpt", progress=False)
    assert _files(tmp_path) == [cache.path(gpt2_loaded, corpus, "eng_Latn", "sgpt")]
    resumed = RepresentationCache(tmp_path)
    np.testing.assert_array_equal(resumed.get_or_compute(gpt2_loaded, corpus, "eng_Latn", "sgpt")["sgpt"], eng["sgpt"])
    assert resumed.stats == {"hits": 1, "misses": 0, "rebuilt": 0}


def test_interrupted_write_leaves_no_temp_and_no_entry(
    tmp_path: Path, gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half_write(tensors, filename, metadata=None):  # noqa: ANN001
        Path(filename).write_bytes(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(cache_module, "st_save_file", half_write)
    cache = RepresentationCache(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        cache.get_or_compute(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt", progress=False)
    assert _files(tmp_path) == []


def test_successful_writes_leave_no_temp_files(
    tmp_path: Path, llama_loaded: TinyLoaded, tiny_corpus: TinyCorpus
) -> None:
    cache = RepresentationCache(tmp_path)
    for lang in ("eng_Latn", "deu_Latn"):
        cache.get_or_compute(llama_loaded, tiny_corpus, lang, ["sgpt", "last"], progress=False)
    files = _files(tmp_path)
    assert len(files) == 4
    assert all(f.suffix == ".safetensors" and not f.name.startswith(".tmp-") for f in files)


def test_model_dtype_is_part_of_the_key(tmp_path: Path, gpt2_loaded: TinyLoaded, tiny_corpus: TinyCorpus) -> None:
    cache = RepresentationCache(tmp_path)
    half = replace(gpt2_loaded, model=torch.nn.Linear(2, 2).to(torch.bfloat16))
    assert cache.key_inputs(half, tiny_corpus, "eng_Latn", "sgpt")["dtype"] == "bfloat16"
    assert cache.key(half, tiny_corpus, "eng_Latn", "sgpt") != cache.key(gpt2_loaded, tiny_corpus, "eng_Latn", "sgpt")


def test_misaligned_corpus_is_refused(tmp_path: Path, gpt2_loaded: TinyLoaded) -> None:
    corpus = TinyCorpus("bad", ("a", "b", "c"), {"eng_Latn": ["One.", "Two."]})
    with pytest.raises(CorpusError, match="3 ids but 2 eng_Latn sentences"):
        RepresentationCache(tmp_path).get_or_compute(gpt2_loaded, corpus, "eng_Latn", "sgpt", progress=False)


def test_real_parallel_corpus_keys_ignore_name_and_code_spelling(
    tmp_path: Path, gpt2_loaded: TinyLoaded
) -> None:
    from interlingua.corpora import ParallelCorpus

    corpus = ParallelCorpus("demo", ("a", "b", "c"), {"eng_Latn": ("One.", "Two words.", "Three more words.")})
    renamed = ParallelCorpus("demo-renamed", corpus.ids, corpus.texts)
    cache = RepresentationCache(tmp_path)
    key = cache.key(gpt2_loaded, corpus, "eng_Latn", "sgpt")
    assert key == cache.key(gpt2_loaded, corpus, "eng_latn", "sgpt")
    assert key == cache.key(gpt2_loaded, renamed, "eng_Latn", "sgpt")
    cache.get_or_compute(gpt2_loaded, corpus, "eng_latn", "sgpt", progress=False)
    cache.get_or_compute(gpt2_loaded, renamed, "eng_Latn", "sgpt", progress=False)
    assert cache.stats == {"hits": 1, "misses": 1, "rebuilt": 0}
