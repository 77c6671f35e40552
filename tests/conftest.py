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


# The most expensive tests of the fast set, moved to `slow` (they stay in `make test`) so that `make test-fast`
# keeps its 2-minute promise: the top of `pytest -m "not (slow or pipeline or zoo or ray or demo)"
# --durations=60` on 2026-12-06 (1,844 tests, 167 CPU-s, 442 s of wall time at load 8-13; each entry took
# 2-26 s there). A node-id prefix: a whole module, a test, or all parameters of one.
_SLOW_BY_MEASUREMENT = (
    "tests/test_report_layout.py::",
    "tests/maps/test_controls.py::test_underdetermined_procrustes_fails_the_identity_control",
    "tests/maps/test_controls.py::test_under_determination_is_flagged_at_the_demo_shape",
    "tests/representations/test_extract_api.py::test_special_share_equals_its_definition",
    "tests/representations/test_extract_api.py::test_include_agrees_with_previous_stack_then_pool_path",
    "tests/representations/test_extract_nnsight.py::test_layer_k_plus_one_is_the_output_of_decoder_layer_k",
    "tests/test_gpu_script.py::",
    "tests/transport/test_transport_controls.py::test_the_controls_of_a_permuted_copy_of_a_model",
    "tests/transport/test_transport_controls.py::test_the_chance_level_is_the_mean_over_row_permutations",
    "tests/transport/test_fuse.py::test_plans_between_different_widths_and_depths",
    "tests/transport/test_fuse.py::test_a_permuted_copy_is_recovered",
    "tests/mergeability/test_diagnostics.py::test_bracketed_selection_equals_a_stable_sort",
    "tests/corpora/test_corpora_bible.py::test_demo_languages_align_on_the_same_verses",
    "tests/maps/test_estimators.py::test_mlp_is_deterministic_for_a_seed_and_learns_a_smooth_map",
    "tests/patching/test_identity_control.py::test_report_says_a_failed_control_before_any_result",
    "tests/patching/test_probes.py::test_build_reproduces_the_committed_file",
    "tests/patching/test_probes.py::test_every_answer_tokenizes",
    "tests/alignment/test_pooling.py::test_shuffled_permutation_seeded_and_reproducible",
    "tests/alignment/test_simalign.py::test_align_on_tiny_model_and_bad_inputs",
    "tests/inference/test_inference_permutation.py::test_pvalues_uniform_under_null_gram_path",
    "tests/inference/test_inference_grid.py::test_grid_pvalues_uniform_under_global_null",
    "tests/test_studies.py::test_study_configs_validate_offline[goldfish_convergence]",
    "tests/test_studies.py::test_the_stand_in_keeps_the_studys_structure[goldfish_convergence]",
    "tests/test_studies.py::test_plan_offline_prints_the_cost_of_the_real_study[goldfish_convergence]",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            mark = _MARKS_BY_FIXTURE.get(fixture)
            if mark is not None:
                item.add_marker(getattr(pytest.mark, mark))
        if item.nodeid.startswith(_SLOW_BY_MEASUREMENT):
            item.add_marker(pytest.mark.slow)
