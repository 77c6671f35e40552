"""Shared test fixtures: tiny checkpoints built once per session (see fixtures/tiny_models.py).

Path fixtures return folders written by ``save_pretrained`` (load them with
``load_model(ModelSpec(path=str(path)))``); ``tiny_gpt2_loaded`` is a
session-wide :class:`interlingua.data.models.LoadedModel` of the tiny GPT-2.
Treat all of them as read-only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# Tests never reach the Hugging Face Hub: fail fast instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).parent))

from fixtures import tiny_models  # noqa: E402


@pytest.fixture(scope="session")
def tiny_models_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Session folder holding every tiny checkpoint."""
    return tmp_path_factory.mktemp("tiny_models")


def _build(root: Path, name: str, builder: Callable[[Path], Path]) -> Path:
    folder = root / name
    if (folder / "config.json").is_file() or (folder / "adapter_config.json").is_file():
        return folder
    return builder(folder)


@pytest.fixture(scope="session")
def tiny_gpt2_path(tiny_models_root: Path) -> Path:
    """GPT-2, 2 layers, d 32, BPE vocab 400, eos only (no pad token)."""
    return _build(tiny_models_root, "gpt2", tiny_models.build_tiny_gpt2)


@pytest.fixture(scope="session")
def tiny_gpt_neox_path(tiny_models_root: Path) -> Path:
    """GPT-NeoX (Pythia layout), 2 layers, d 32, untied head, no pad token."""
    return _build(tiny_models_root, "gpt_neox", tiny_models.build_tiny_gpt_neox)


@pytest.fixture(scope="session")
def tiny_llama_path(tiny_models_root: Path) -> Path:
    """Llama, 3 layers, d 32, 4 heads / 2 KV heads, bos/eos/unk, no pad token."""
    return _build(tiny_models_root, "llama", tiny_models.build_tiny_llama)


@pytest.fixture(scope="session")
def tiny_mistral_path(tiny_models_root: Path) -> Path:
    """Mistral, 2 layers, d 32, 2 KV heads, no pad token."""
    return _build(tiny_models_root, "mistral", tiny_models.build_tiny_mistral)


@pytest.fixture(scope="session")
def tiny_gemma3_text_path(tiny_models_root: Path) -> Path:
    """Gemma 3 text-only causal LM (model_type gemma3_text), 2 layers, with a pad token."""
    return _build(tiny_models_root, "gemma3_text", tiny_models.build_tiny_gemma3_text)


@pytest.fixture(scope="session")
def tiny_gemma3_path(tiny_models_root: Path) -> Path:
    """Gemma 3 multimodal (model_type gemma3) with a 1-layer vision tower."""
    return _build(tiny_models_root, "gemma3", tiny_models.build_tiny_gemma3)


@pytest.fixture(scope="session")
def tiny_bert_path(tiny_models_root: Path) -> Path:
    """BERT encoder, 2 layers, d 32, WordPiece with [CLS]/[SEP]/[PAD]."""
    return _build(tiny_models_root, "bert", tiny_models.build_tiny_bert)


@pytest.fixture(scope="session")
def tiny_goldfish_path(tiny_models_root: Path) -> Path:
    """Goldfish layout: GPT-2 + SentencePiece AlbertTokenizer (200 pieces, 256 embedding rows)."""
    return _build(tiny_models_root, "goldfish", tiny_models.build_tiny_goldfish)


@pytest.fixture(scope="session")
def tiny_t5_path(tiny_models_root: Path) -> Path:
    """T5 encoder-decoder: an architecture interlingua does not support."""
    return _build(tiny_models_root, "t5", tiny_models.build_tiny_t5)


@pytest.fixture(scope="session")
def tiny_lora_adapter_path(tiny_models_root: Path, tiny_gpt2_path: Path) -> Path:
    """LoRA adapter (r 4 on c_attn) over the tiny GPT-2 with non-zero lora_B."""
    return _build(
        tiny_models_root,
        "lora_nonzero",
        lambda folder: tiny_models.build_lora_adapter(tiny_gpt2_path, folder, identity=False),
    )


@pytest.fixture(scope="session")
def tiny_lora_identity_adapter_path(tiny_models_root: Path, tiny_gpt2_path: Path) -> Path:
    """LoRA adapter over the tiny GPT-2 with lora_B == 0 (an exact identity)."""
    return _build(
        tiny_models_root,
        "lora_identity",
        lambda folder: tiny_models.build_lora_adapter(tiny_gpt2_path, folder, identity=True),
    )


@pytest.fixture(scope="session")
def tiny_model_paths(
    tiny_gpt2_path: Path,
    tiny_gpt_neox_path: Path,
    tiny_llama_path: Path,
    tiny_mistral_path: Path,
    tiny_gemma3_text_path: Path,
    tiny_gemma3_path: Path,
    tiny_bert_path: Path,
    tiny_goldfish_path: Path,
) -> dict[str, Path]:
    """All supported tiny checkpoints by family (keys of tiny_models.TINY_BUILDERS)."""
    return {
        "gpt2": tiny_gpt2_path,
        "gpt_neox": tiny_gpt_neox_path,
        "llama": tiny_llama_path,
        "mistral": tiny_mistral_path,
        "gemma3_text": tiny_gemma3_text_path,
        "gemma3": tiny_gemma3_path,
        "bert": tiny_bert_path,
        "goldfish": tiny_goldfish_path,
    }


@pytest.fixture(scope="session")
def tiny_gpt2_loaded(tiny_gpt2_path: Path):
    """The tiny GPT-2 through ``load_model`` (shared; do not mutate)."""
    from interlingua.data.models import ModelSpec, load_model

    return load_model(ModelSpec(name="tiny-gpt2", path=str(tiny_gpt2_path)))


# Tiers: `make test` runs everything; `make test-fast` leaves out what trains, starts Ray or runs whole
# pipelines. Whole-run modules say so themselves (`pytestmark = pytest.mark.pipeline`); a test that needs
# a trained family or a Ray instance is marked here, from the fixtures it asks for.
_MARKS_BY_FIXTURE = {"tiny_zoo": "zoo", "trained_zoo": "zoo", "ray_instance": "ray"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            mark = _MARKS_BY_FIXTURE.get(fixture)
            if mark is not None:
                item.add_marker(getattr(pytest.mark, mark))
