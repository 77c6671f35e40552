"""Dependencies' own progress bars stay out of the tool's output, and truncation advice fits the model."""

from __future__ import annotations

import pytest
from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
from transformers.utils import logging as hf_logging

from interlingua.core.store import Store
from interlingua.data.models.loading import hf_progress
from interlingua.data.models.spec import ModelSpec
from interlingua.data.representations.extract import truncation_advice
from interlingua.pipeline.execute import ModelHandle, stored_position_limit


@pytest.fixture
def bars_on():
    """Both libraries' switches on (their default), restored to on afterwards."""
    hf_logging.enable_progress_bar()
    enable_progress_bars()
    yield
    hf_logging.enable_progress_bar()
    enable_progress_bars()


def test_dependency_bars_are_off_inside_and_restored_after(bars_on):
    with hf_progress():
        assert not hf_logging.is_progress_bar_enabled() and are_progress_bars_disabled()
        assert hf_logging.tqdm(range(3)).disable  # what transformers draws its bars with
    assert hf_logging.is_progress_bar_enabled() and not are_progress_bars_disabled()


def test_a_switch_that_was_off_stays_off(bars_on):
    disable_progress_bars()  # e.g. HF_HUB_DISABLE_PROGRESS_BARS=1
    with hf_progress():
        pass
    assert are_progress_bars_disabled() and hf_logging.is_progress_bar_enabled()


def test_loading_a_model_beside_our_bars_draws_no_transformers_bar(bars_on, tiny_gpt2_path, tmp_path, capfd):
    from transformers import AutoModel

    AutoModel.from_pretrained(tiny_gpt2_path)  # the control: transformers draws its loading bar here
    assert "Loading weights" in capfd.readouterr().err
    said: list[str] = []
    spec = ModelSpec(name="g", path=str(tiny_gpt2_path))
    handle = ModelHandle(spec, "f" * 64, Store(tmp_path), progress=True, status=said.append)
    assert handle.loaded is not None
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s" not in err
    assert said == ["loading g"]  # our bar's postfix says what loads instead


def test_truncation_advice_is_possible_for_the_model():
    at_limit = truncation_advice(64, 64)
    assert "raise max_length" not in at_limit and "position limit" in at_limit and "64" in at_limit
    below = truncation_advice(32, 64)
    assert below.startswith("raise max_length") and "up to 64" in below
    assert truncation_advice(512, None).startswith("raise max_length")


def test_the_stored_position_limit():
    assert stored_position_limit({"position_limit": "64", "effective_max_length": "64"}, 512) == 64
    assert stored_position_limit({"position_limit": "", "effective_max_length": "512"}, 512) is None
    # entries stored before the limit was recorded: known when it cut max_length
    assert stored_position_limit({"effective_max_length": "64"}, 512) == 64
    assert stored_position_limit({"effective_max_length": "512"}, 512) is None
