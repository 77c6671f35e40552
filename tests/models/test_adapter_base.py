"""An adapter is applied only to the base it records (adapter_config.json), unless told otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest
import torch

from fixtures import tiny_models
from interlingua.core.errors import ModelError
from interlingua.data.models import ModelSpec, load_model, preflight_model
from interlingua.data.models.preflight import adapter_base_matches, check_adapter_base
from interlingua.data.models.source import Source


def _adapter_recording(adapter: Path, folder: Path, base: str | None, revision: str | None = None) -> Path:
    """A copy of ``adapter`` whose adapter_config.json records ``base`` (and ``revision``)."""
    tiny_models.copy_checkpoint(adapter, folder)
    cfg = json.loads((folder / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = base
    cfg["revision"] = revision
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    return folder


def test_the_fixture_adapter_records_its_base(tiny_gpt2_path: Path, tiny_lora_adapter_path: Path) -> None:
    cfg = json.loads((tiny_lora_adapter_path / "adapter_config.json").read_text())
    assert Path(cfg["base_model_name_or_path"]).resolve() == tiny_gpt2_path.resolve()
    lm = load_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_adapter_path)))
    assert lm.facts.adapter_base == cfg["base_model_name_or_path"]
    assert lm.facts.adapter_base_check == "matched"
    assert load_model(ModelSpec(path=str(tiny_gpt2_path))).facts.adapter_base_check is None


def test_same_shape_other_base_is_refused(
    tiny_gpt2_path: Path, tiny_gpt2_sibling_path: Path, tiny_lora_adapter_path: Path
) -> None:
    spec = ModelSpec(name="sib", path=str(tiny_gpt2_sibling_path), adapter=str(tiny_lora_adapter_path))
    with pytest.raises(ModelError) as info:
        load_model(spec)
    text = str(info.value)
    assert text.startswith("model 'sib': the adapter ")
    assert f"was trained on {str(tiny_gpt2_path)!r}" in text
    assert f"applied to {str(tiny_gpt2_sibling_path.resolve())!r}" in text
    assert f"`path: {tiny_gpt2_path}`" in text and "`adapter_base: ignore`" in text
    with pytest.raises(ModelError, match="was trained on"):
        preflight_model(spec)


def test_opting_out_applies_it_and_says_so(
    tiny_gpt2_path: Path, tiny_gpt2_sibling_path: Path, tiny_lora_adapter_path: Path
) -> None:
    spec = ModelSpec(path=str(tiny_gpt2_sibling_path), adapter=str(tiny_lora_adapter_path), adapter_base="ignore")
    assert preflight_model(spec)["adapter"]["base_check"] == "ignored"
    lm = load_model(spec)
    assert lm.facts.adapter_base_check == "ignored"
    assert lm.facts.adapter_base == str(tiny_gpt2_path)
    assert lm.facts.to_dict()["adapter_base_check"] == "ignored"
    assert any("lora_" in n for n, _ in lm.model.named_parameters())


def test_a_copy_under_the_same_folder_name_matches(
    tiny_gpt2_path: Path, tiny_lora_adapter_path: Path, tmp_path: Path
) -> None:
    """Both folders exist here: the same weight files match whatever the folder is called; other
    weights in a folder of the same name (a sibling checkpoint, another language's `final`) do not."""
    from safetensors.numpy import load_file, save_file

    same_name = tiny_models.copy_checkpoint(tiny_gpt2_path, tmp_path / "a" / tiny_gpt2_path.name)
    assert (
        preflight_model(ModelSpec(path=str(same_name), adapter=str(tiny_lora_adapter_path)))["adapter"]["base_check"]
        == "matched"
    )
    renamed = tiny_models.copy_checkpoint(tiny_gpt2_path, tmp_path / "renamed")
    assert (
        preflight_model(ModelSpec(path=str(renamed), adapter=str(tiny_lora_adapter_path)))["adapter"]["base_check"]
        == "matched"
    )
    other = tiny_models.copy_checkpoint(tiny_gpt2_path, tmp_path / "b" / tiny_gpt2_path.name)
    weights = other / "model.safetensors"
    tensors = load_file(weights)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1.0
    save_file(tensors, weights, metadata={"format": "pt"})
    with pytest.raises(ModelError, match="was trained on"):
        preflight_model(ModelSpec(path=str(other), adapter=str(tiny_lora_adapter_path)))


def test_hub_recorded_base_and_a_local_copy(tiny_gpt2_path: Path, tiny_lora_adapter_path: Path, tmp_path: Path) -> None:
    adapter = _adapter_recording(tiny_lora_adapter_path, tmp_path / "hub-adapter", "openai-community/gpt2")
    # the tiny base's folder is named "gpt2": the Hub model's name
    report = preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(adapter)))
    assert report["adapter"]["base"] == "openai-community/gpt2" and report["adapter"]["base_check"] == "matched"
    other = _adapter_recording(tiny_lora_adapter_path, tmp_path / "pythia-adapter", "EleutherAI/pythia-160m")
    with pytest.raises(ModelError, match=r"was trained on 'EleutherAI/pythia-160m'"):
        preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(other)))


def test_an_adapter_without_a_recorded_base(tiny_gpt2_path: Path, tiny_lora_adapter_path: Path, tmp_path: Path) -> None:
    adapter = _adapter_recording(tiny_lora_adapter_path, tmp_path / "anonymous", None)
    lm = load_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(adapter)))
    assert lm.facts.adapter_base is None and lm.facts.adapter_base_check == "unrecorded"


@pytest.mark.parametrize(
    ("recorded", "source", "expected"),
    [
        ("EleutherAI/pythia-160m", Source("EleutherAI/pythia-160m", "hub", None), True),
        ("eleutherai/Pythia-160M", Source("EleutherAI/pythia-160m", "hub", None), True),
        ("gpt2", Source("openai-community/gpt2", "hub", None), True),
        ("EleutherAI/pythia-160m", Source("EleutherAI/pythia-410m", "hub", None), False),
        ("someone/pythia-160m", Source("EleutherAI/pythia-160m", "hub", None), False),
        ("EleutherAI/pythia-160m", Source("/models/pythia-160m", "local", None), True),
        ("/data/pythia-160m", Source("EleutherAI/pythia-160m", "hub", None), True),
        ("/data/pythia-160m", Source("/models/pythia-410m", "local", None), False),
        (
            "/root/.cache/huggingface/hub/models--EleutherAI--pythia-160m/snapshots/abc",
            Source("EleutherAI/pythia-160m", "hub", None),
            True,
        ),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", Source("/gguf", "local", "SmolLM2-135M-Instruct.Q4_1.gguf"), True),
        ("HuggingFaceTB/SmolLM2-360M", Source("/gguf", "local", "SmolLM2-135M-Instruct.Q4_1.gguf"), False),
    ],
)
def test_base_matching_rules(recorded: str, source: Source, expected: bool) -> None:
    path = source.location if source.kind != "package" else None
    spec = ModelSpec(path=path)
    assert adapter_base_matches(recorded, spec, source) is expected


def test_packaged_models_match_their_hub_ids() -> None:
    spec = ModelSpec(package="gemma3-270m")
    source = Source("/cache/gemma3-270m", "package", "gemma-3-270m-q4_k_m.gguf")
    assert adapter_base_matches("google/gemma-3-270m", spec, source)
    assert not adapter_base_matches("google/gemma-3-1b-pt", spec, source)


def test_a_recorded_revision_must_match() -> None:
    source = Source("EleutherAI/pythia-160m", "hub", None)
    cfg = {"base_model_name_or_path": "EleutherAI/pythia-160m", "revision": "step1000"}
    assert (
        check_adapter_base(ModelSpec(path=source.location, revision="step1000", adapter="a"), source, cfg) == "matched"
    )
    with pytest.raises(ModelError, match=r"at revision 'step1000' .* applied to revision 'step2000'"):
        check_adapter_base(ModelSpec(path=source.location, revision="step2000", adapter="a"), source, cfg)
    ignore = ModelSpec(path=source.location, revision="step2000", adapter="a", adapter_base="ignore")
    assert check_adapter_base(ignore, source, cfg) == "ignored"


def test_spec_accepts_only_check_or_ignore() -> None:
    assert ModelSpec(path="gpt2").adapter_base == "check"
    with pytest.raises(pydantic.ValidationError):
        ModelSpec(path="gpt2", adapter_base="skip")


def test_the_sibling_really_is_a_same_shape_other_model(tiny_gpt2_path: Path, tiny_gpt2_sibling_path: Path) -> None:
    """Why the check matters: PEFT applies the adapter to the sibling without complaint."""
    from safetensors.torch import load_file

    a, b = (
        load_file(str(tiny_gpt2_path / "model.safetensors")),
        load_file(str(tiny_gpt2_sibling_path / "model.safetensors")),
    )
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}
    assert not torch.equal(a["transformer.wte.weight"], b["transformer.wte.weight"])
