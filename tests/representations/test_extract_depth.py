"""``extract(max_layer=k)``: states 0..k bit-identical to a full extraction's, and the blocks after k never run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from interlingua.core.errors import ModelError
from interlingua.data.models import load_model
from interlingua.data.models.spec import ModelSpec
from interlingua.data.representations import extract
from interlingua.data.representations.depth import states_through
from interlingua.data.representations.pooling import PoolingError

SENTENCES = [
    "The cat sat on the mat.",
    "A much longer sentence, with several clauses, that pads the shorter ones in its batch.",
    "Short one.",
    "Colourless green ideas sleep furiously.",
    "Two more words here.",
]
POOLINGS = ["mean", "last", "sgpt"]
ARCHS = ["tiny_gpt2_path", "tiny_gpt_neox_path", "tiny_llama_path", "tiny_mistral_path", "tiny_gemma3_text_path",
         "tiny_gemma3_path", "tiny_bert_path"]  # fmt: skip


def _calls_per_block(loaded) -> tuple[list[int], list]:  # noqa: ANN001
    calls = [0] * loaded.num_layers

    def counter(j: int):  # noqa: ANN202
        def hook(*_args) -> None:  # noqa: ANN002
            calls[j] += 1

        return hook

    handles = [b.register_forward_pre_hook(counter(j)) for j, b in enumerate(loaded.arch.blocks)]
    return calls, handles


@pytest.mark.parametrize("fixture", ARCHS)
def test_the_first_layers_are_the_full_extractions_bits_and_deeper_blocks_never_run(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    path: Path = request.getfixturevalue(fixture)
    loaded = load_model(ModelSpec(name="m", path=str(path)))
    poolings = POOLINGS
    full = extract(loaded, SENTENCES, poolings, progress=False, batch_size=2, threads=1)
    last = loaded.n_hidden_states - 1
    for k in sorted({0, 1, last - 1, last}):
        calls, handles = _calls_per_block(loaded)
        try:
            part = extract(loaded, SENTENCES, poolings, progress=False, batch_size=2, threads=1, max_layer=k)
        finally:
            for h in handles:
                h.remove()
        for name in poolings:
            assert part.pooled[name].shape == (k + 1, *full.pooled[name].shape[1:])
            np.testing.assert_array_equal(part.pooled[name], full.pooled[name][: k + 1])
            np.testing.assert_array_equal(part.special_share[name], full.special_share[name][: k + 1])
        # block j computes state j + 1: blocks 0..k-1 run once per batch; block k is entered (its input is
        # state k) and stopped before it computes anything; the last state (the final norm's) needs every block
        n_batches = 3
        ran = [c > 0 for c in calls]
        if k == last:
            assert all(ran)
        else:
            assert calls[: k + 1] == [n_batches] * (k + 1)
            assert not any(ran[k + 1 :])


def test_a_hugging_face_model_stops_early_too(tiny_llama_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(tiny_llama_path), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(tiny_llama_path))
    full = extract(model, SENTENCES, "mean", tokenizer=tok, progress=False, threads=1)
    seen: list[int] = []
    handle = model.model.layers[-1].register_forward_pre_hook(lambda *_: seen.append(1))
    try:
        part = extract(model, SENTENCES, "mean", tokenizer=tok, progress=False, threads=1, max_layer=1)
    finally:
        handle.remove()
    np.testing.assert_array_equal(part.pooled["mean"], full.pooled["mean"][:2])
    assert not seen and len(model.model.layers) > 2


@pytest.mark.parametrize("bad", [-1, 99, 1.5, True, "2"])
def test_a_max_layer_outside_the_model_is_refused(tiny_gpt2_loaded, bad: object) -> None:  # noqa: ANN001
    with pytest.raises(PoolingError, match="max_layer"):
        extract(tiny_gpt2_loaded, SENTENCES, "mean", progress=False, max_layer=bad)  # type: ignore[arg-type]


def test_a_forward_that_never_calls_the_blocks_is_named() -> None:
    blocks = torch.nn.ModuleList([torch.nn.Identity(), torch.nn.Identity(), torch.nn.Identity()])
    with pytest.raises(ModelError, match="called 0 of the first 2 blocks"):
        states_through(lambda _flag: None, blocks, 4, 1)


def test_the_hooks_are_removed_after_a_stopped_forward() -> None:
    blocks = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])

    def forward(_flag: bool) -> None:
        h = torch.ones(1, 3)
        for b in blocks:
            h = b(h)

    states = states_through(forward, blocks, 4, 1)
    assert len(states) == 2
    assert all(not b._forward_pre_hooks for b in blocks)
    np.testing.assert_array_equal(states[1].detach().numpy(), blocks[0](torch.ones(1, 3)).detach().numpy())


def test_another_threads_forward_through_the_same_blocks_is_left_alone() -> None:
    """The hooks act on the caller's own forward only: a second thread running the blocks meanwhile is not
    stopped and its states are not taken."""
    import threading

    blocks = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])
    inside, release = threading.Event(), threading.Event()
    other: list[torch.Tensor] = []

    def forward(_flag: bool) -> None:
        h = torch.ones(1, 3)
        for j, b in enumerate(blocks):
            if j == 1:  # the hooks are in place: let the other thread run every block now
                inside.set()
                release.wait(5)
            h = b(h)

    def other_thread() -> None:
        inside.wait(5)
        h = torch.full((1, 3), 2.0)
        for b in blocks:
            h = b(h)
        other.append(h)
        release.set()

    t = threading.Thread(target=other_thread)
    t.start()
    states = states_through(forward, blocks, 4, 1)
    t.join()
    assert len(states) == 2 and len(other) == 1
    np.testing.assert_array_equal(states[0].detach().numpy(), np.ones((1, 3), np.float32))
