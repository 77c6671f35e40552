"""NaN / inf are caught where they arise: in the pooled token states and the pooled vectors."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch

from interlingua.core.errors import NonFiniteError
from interlingua.data.representations.extract import extract

from .conftest import SENTENCES, TinyLoaded

HINT = "float16 on CPU overflows in some models (e.g. Gemma 3): use dtype float32 or bfloat16"
IDS = [f"verse-{i}" for i in range(len(SENTENCES))]


class InputSpy:
    """Remembers the batch's input ids and attention mask (forward pre-hook on the model)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.ids: torch.Tensor | None = None
        self.mask: torch.Tensor | None = None
        self.handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):  # noqa: ANN001
        self.ids = kwargs["input_ids"]
        self.mask = kwargs["attention_mask"]

    def remove(self) -> None:
        self.handle.remove()


@pytest.fixture()
def nan_block_model(gpt2_loaded: TinyLoaded) -> TinyLoaded:
    """The tiny GPT-2 with every weight of its SECOND block set to NaN (a broken checkpoint)."""
    model = copy.deepcopy(gpt2_loaded.model)
    with torch.no_grad():
        for p in model.h[1].parameters():
            p.fill_(float("nan"))
    return replace(gpt2_loaded, model=model)


def test_nan_weights_raise_with_layers_ids_and_hint(nan_block_model: TinyLoaded) -> None:
    with pytest.raises(NonFiniteError) as info:
        extract(
            nan_block_model,
            SENTENCES,
            ["mean"],
            batch_size=4,
            progress=False,
            context="model 'tiny' (float16) on deu_Latn",
            sentence_ids=IDS,
        )
    message = str(info.value)
    assert "model 'tiny' (float16) on deu_Latn" in message
    # states 0 (embeddings) and 1 (block 1) are finite; block 2's output (state 2) is not
    assert "first bad layer 2 (0 = embeddings), bad layers [2]" in message
    assert HINT in message
    # the first batch holds the 4 longest sentences; all of them are named
    longest = sorted(range(len(SENTENCES)), key=lambda i: -len(SENTENCES[i]))[:4]
    assert "(4 of 4)" in message
    for i in longest:
        assert repr(IDS[i]) in message


def test_without_ids_indices_name_the_sentences(nan_block_model: TinyLoaded) -> None:
    with pytest.raises(NonFiniteError, match=r"\(1 of 1\): \[0\]"):
        extract(nan_block_model, ["Rain."], ["last"], progress=False)


def test_inf_injected_at_one_layer_for_one_sentence(gpt2_loaded: TinyLoaded) -> None:
    """A forward hook puts inf into block 0's output for one sentence only."""
    target = 6  # "The market opens early ..."
    target_ids = torch.tensor(gpt2_loaded.tokenizer(SENTENCES[target])["input_ids"])
    spy = InputSpy(gpt2_loaded.model)

    def poison(module, args, output):  # noqa: ANN001
        hidden = output[0] if isinstance(output, tuple) else output
        for row in range(hidden.shape[0]):
            ids = spy.ids[row, : len(target_ids)]
            if len(ids) == len(target_ids) and torch.equal(ids, target_ids):
                hidden[row, 2] = float("inf")
        return output

    handle = gpt2_loaded.model.h[0].register_forward_hook(poison)
    try:
        with pytest.raises(NonFiniteError) as info:
            extract(gpt2_loaded, SENTENCES, ["sgpt", "last"], batch_size=16, progress=False, sentence_ids=IDS)
    finally:
        handle.remove()
        spy.remove()
    message = str(info.value)
    assert "first bad layer 1 (0 = embeddings)" in message
    assert "bad layers [1, 2]" in message  # attention spreads it to the next state
    assert f"(1 of {len(SENTENCES)}): ['{IDS[target]}']" in message
    assert "the model (float32)" in message  # no context given: the model's dtype


def test_non_finite_values_that_are_not_pooled_are_ignored(llama_loaded: TinyLoaded) -> None:
    """NaN at pad positions and at an excluded <bos> (last state) changes nothing."""
    clean = extract(llama_loaded, SENTENCES, ["mean", "sgpt", "last"], batch_size=5, progress=False, threads=1)
    spy = InputSpy(llama_loaded.model)

    def poison(module, args, output):  # noqa: ANN001
        output = output.clone()
        output[spy.mask == 0] = float("nan")  # padding
        output[:, 0] = float("inf")  # <bos>, seen but not pooled with "exclude"
        return output

    handle = llama_loaded.model.norm.register_forward_hook(poison)  # the last hidden state
    try:
        dirty = extract(llama_loaded, SENTENCES, ["mean", "sgpt", "last"], batch_size=5, progress=False, threads=1)
        with pytest.raises(NonFiniteError, match=r"first bad layer 3 .*bad layers \[3\]"):
            extract(llama_loaded, SENTENCES, ["mean"], special_tokens="include", batch_size=5, progress=False)
    finally:
        handle.remove()
        spy.remove()
    assert spy.mask is not None and bool((spy.mask == 0).any())  # there was padding to poison
    for name in clean.pooled:
        np.testing.assert_array_equal(dirty.pooled[name], clean.pooled[name])


def test_overflow_in_the_pooled_sum_is_caught(gpt2_loaded: TinyLoaded) -> None:
    """Finite states whose weighted sum overflows float32 still raise."""

    def huge(module, args, output):  # noqa: ANN001
        return torch.full_like(output, 3e38)

    handle = gpt2_loaded.model.ln_f.register_forward_hook(huge)
    try:
        with pytest.raises(NonFiniteError, match=r"bad layers \[2\]"):
            extract(gpt2_loaded, SENTENCES[:3], ["mean"], progress=False)
    finally:
        handle.remove()
