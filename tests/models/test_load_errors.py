"""Checkpoints a user can break fail in load_model with a ModelError, never a raw traceback."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from fixtures import tiny_models
from interlingua.core.errors import InterlinguaError, ModelError
from interlingua.data.models import ModelSpec, load_model
from interlingua.data.models import loading as loading_module


def _without_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the file checks, so the load itself meets the damage (a Hub download can be damaged too)."""
    real = loading_module._preflight

    def shallow(spec, cache_dir, *, probe_hub):
        try:
            return real(spec, cache_dir, probe_hub=probe_hub)
        except ModelError:
            return {"adapter": None}

    monkeypatch.setattr(loading_module, "_preflight", shallow)


def test_model_errors_reach_the_cli_as_user_errors() -> None:
    assert issubclass(ModelError, InterlinguaError)  # the CLI prints these and exits with 2


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickle_weights_that_torch_refuses(tiny_gpt2_path: Path, tmp_path: Path) -> None:
    folder = tiny_models.write_pickle_weights(tiny_gpt2_path, tmp_path / "pickled")
    with pytest.raises(pickle.UnpicklingError):  # what torch itself does with this file
        torch.load(folder / "pytorch_model.bin")
    with pytest.raises(ModelError) as info:
        load_model(ModelSpec(name="pickled", path=str(folder)))
    text = str(info.value)
    assert text.startswith("model 'pickled': could not load the model from ")
    assert "pickle file (pytorch_model.bin)" in text and "weights_only" in text
    assert "could run arbitrary code" in text and "safetensors" in text
    assert isinstance(info.value.__cause__, pickle.UnpicklingError)


def test_torch_save_of_foreign_objects_is_refused_the_same_way(tiny_gpt2_path: Path, tmp_path: Path) -> None:
    import argparse

    from safetensors.torch import load_file

    folder = tiny_models.copy_checkpoint(tiny_gpt2_path, tmp_path / "foreign")
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    torch.save({**tensors, "args": argparse.Namespace(lr=1.0)}, folder / "pytorch_model.bin")
    with pytest.raises(ModelError, match=r"could not load the model from .*pickle file \(pytorch_model.bin\)"):
        load_model(ModelSpec(path=str(folder)))


@pytest.mark.parametrize("damage", ["truncated", "header"])
def test_damaged_safetensors_met_by_the_load(damage: str, gpt2_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = gpt2_copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"\xff" * 8 + data[8:])
    _without_preflight(monkeypatch)
    with pytest.raises(
        ModelError,
        match=r"could not load the model from .*: .*\. a safetensors weight file is damaged or truncated; re-download",
    ):
        load_model(ModelSpec(path=str(gpt2_copy)))


def test_truncated_config_met_by_the_load(gpt2_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (gpt2_copy / "config.json").read_text()
    (gpt2_copy / "config.json").write_text(text[: len(text) // 2])
    _without_preflight(monkeypatch)
    with pytest.raises(ModelError, match=r"model 'gpt2-copy': could not load the config from .*not a valid JSON file"):
        load_model(ModelSpec(path=str(gpt2_copy)))


def test_errors_of_the_load_name_the_model(gpt2_copy: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(gpt2_copy / "model.safetensors"))
    tensors.pop("transformer.h.1.mlp.c_fc.weight")
    save_file(tensors, str(gpt2_copy / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelError, match=r"^model 'gpt2-copy': the checkpoint at .* 1 weights missing"):
        load_model(ModelSpec(path=str(gpt2_copy)))
