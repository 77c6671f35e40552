"""GGUF conversion's progress bar (a plain tqdm inside transformers) is silent inside interlingua's model loads."""

from __future__ import annotations

import pytest
from transformers import modeling_gguf_pytorch_utils as gguf_utils

from interlingua.data.models.loading import _gguf_progress, hf_progress


def _convert_bar() -> None:
    """What transformers runs while dequantising a GGUF: its module's ``tqdm`` over the tensors."""
    for _ in gguf_utils.tqdm(range(5), desc="Converting and de-quantizing GGUF tensors..."):
        pass


def test_no_progress_prints_nothing_and_restores_the_bar(capfd: pytest.CaptureFixture[str]) -> None:
    original = gguf_utils.tqdm
    with hf_progress(), _gguf_progress():
        _convert_bar()
    assert capfd.readouterr().err == ""
    assert gguf_utils.tqdm is original


def test_beside_our_bars_the_conversion_bar_is_off_too(capfd: pytest.CaptureFixture[str]) -> None:
    """With our bars showing, transformers' would interleave with them (issue 36): ours say what loads instead."""
    original = gguf_utils.tqdm
    _convert_bar()  # the control: outside, transformers draws it
    assert "Converting and de-quantizing GGUF tensors" in capfd.readouterr().err
    with hf_progress(), _gguf_progress():
        _convert_bar()
    assert capfd.readouterr().err == ""
    assert gguf_utils.tqdm is original
