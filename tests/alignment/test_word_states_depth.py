"""``word_states`` at a middle layer stops the encoder there: the same bits as every layer's pass, fewer blocks."""

from __future__ import annotations

import numpy as np
import pytest

from interlingua.alignment import segment, word_states
from interlingua.data.models import ModelSpec, load_model

TEXTS = ["My sister finds seven apples, near the market.", "The baker sells bread.", "A boat."]


@pytest.mark.parametrize("fixture", ["tiny_bert_path", "tiny_gpt2_path", "tiny_llama_path"])
def test_middle_layer_word_states_equal_the_full_pass_and_skip_the_deeper_blocks(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    loaded = load_model(ModelSpec(path=str(request.getfixturevalue(fixture))))
    words = [segment(t, "eng_Latn") for t in TEXTS]
    full = word_states(loaded, TEXTS, words, batch_size=2)
    k = (loaded.n_hidden_states - 1) // 2
    entered: list[int] = []
    handles = [
        b.register_forward_pre_hook(lambda *_a, j=j: entered.append(j)) for j, b in enumerate(loaded.arch.blocks)
    ]
    try:
        part = word_states(loaded, TEXTS, words, layers=[k, 0], batch_size=2)
    finally:
        for h in handles:
            h.remove()
    assert part.layers == (k, 0)
    for s in range(len(TEXTS)):
        np.testing.assert_array_equal(part.vectors[s], full.vectors[s][[k, 0]])
    assert set(entered) == set(range(k + 1))  # block k is entered (its input is state k), none after it
