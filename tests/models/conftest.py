"""Fixtures of the models tests: look-alike and damaged checkpoints (see fixtures/tiny_models.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures import tiny_models


@pytest.fixture(scope="session")
def tiny_gpt2_sibling_path(tiny_models_root: Path) -> Path:
    """A GPT-2 of the tiny GPT-2's exact shape with other weights (folder name 'gpt2-sibling')."""
    folder = tiny_models_root / "gpt2-sibling"
    if (folder / "config.json").is_file():
        return folder
    return tiny_models.build_tiny_gpt2_sibling(folder)


@pytest.fixture()
def gpt2_copy(tiny_gpt2_path: Path, tmp_path: Path) -> Path:
    """A writable copy of the tiny GPT-2 (folder name 'gpt2-copy'), for tests that damage it."""
    return tiny_models.copy_checkpoint(tiny_gpt2_path, tmp_path / "gpt2-copy")
