"""extract (special tokens included, the earlier behaviour).

Every layer, input order, batch independence, special tokens.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
import torch

from interlingua.core.errors import CorpusError, ModelError
from interlingua.data.representations import (
    PoolingError,
    extract,
    length_sorted_batches,
    pool,
    tokenize_for_extraction,
)

from .conftest import SENTENCES, TinyLoaded, assert_float32_close

POOLINGS = ["mean", "sgpt", "last"]


def _direct(loaded: TinyLoaded, ids: list[int]) -> torch.Tensor:
    """All hidden states of one unpadded sentence from a plain model call: (L+1, 1, T, d)."""
    with torch.no_grad():
        out = loaded.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.stack(out.hidden_states)


class ForwardCounter:
    """Counts forward calls and records the (B, T) shape of each batch."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.shapes: list[tuple[int, int]] = []
        self.handle = module.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):  # noqa: ANN001
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.shapes.append(tuple(ids.shape))

    def __enter__(self) -> ForwardCounter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()


@pytest.mark.parametrize("fixture", ["gpt2_loaded", "llama_loaded", "goldfish_loaded"])
def test_every_hidden_state_in_order(fixture: str, request: pytest.FixtureRequest) -> None:
    loaded: TinyLoaded = request.getfixturevalue(fixture)
    sentence = SENTENCES[3]
    got = extract(loaded, [sentence], POOLINGS, progress=False, special_tokens="include").pooled
    ids = loaded.tokenizer(sentence)["input_ids"]
    hidden = _direct(loaded, ids)
    assert hidden.shape[0] == loaded.n_hidden_states
    mask = torch.ones(1, len(ids), dtype=torch.long)
    for name in POOLINGS:
        assert got[name].dtype == np.float32
        assert got[name].shape == (loaded.n_hidden_states, 1, hidden.shape[-1])
        expected = pool(hidden, mask, name)[:, 0].numpy()
        assert_float32_close(got[name][:, 0], expected)
    # the layers differ from each other (so a shifted or repeated layer would be caught)
    means = got["mean"][:, 0]
    for k in range(1, loaded.n_hidden_states):
        assert not np.allclose(means[k], means[k - 1], rtol=1e-3, atol=0)


@pytest.mark.parametrize("fixture", ["gpt2_loaded", "llama_loaded"])
def test_vector_independent_of_batch_mates_and_padding(fixture: str, request: pytest.FixtureRequest) -> None:
    loaded: TinyLoaded = request.getfixturevalue(fixture)
    short = "Birds sing."
    long_mates = [" ".join(SENTENCES) for _ in range(3)]
    alone = extract(loaded, [short], POOLINGS, progress=False, special_tokens="include").pooled
    mixed = extract(
        loaded, [*long_mates, short], POOLINGS, batch_size=8, progress=False, special_tokens="include"
    ).pooled
    for name in POOLINGS:
        assert_float32_close(mixed[name][:, 3], alone[name][:, 0])


def test_output_follows_input_order_despite_length_sorting(gpt2_loaded: TinyLoaded) -> None:
    sentences = list(SENTENCES)
    with ForwardCounter(gpt2_loaded.model) as counter:
        got = extract(gpt2_loaded, sentences, ["sgpt"], batch_size=3, progress=False, special_tokens="include").pooled
    # batches ran longest first, so the widths never grow
    widths = [t for _, t in counter.shapes]
    assert widths == sorted(widths, reverse=True)
    assert len(counter.shapes) == 4  # ceil(10 / 3)
    for i, sentence in enumerate(sentences):
        alone = extract(gpt2_loaded, [sentence], ["sgpt"], progress=False, special_tokens="include").pooled
        assert_float32_close(got["sgpt"][:, i], alone["sgpt"][:, 0])
    reversed_run = extract(gpt2_loaded, sentences[::-1], ["sgpt"], progress=False, special_tokens="include").pooled
    assert_float32_close(reversed_run["sgpt"][:, ::-1], got["sgpt"])


def test_goldfish_tokenizer_keeps_its_cls_prefix(goldfish_loaded: TinyLoaded) -> None:
    tok = goldfish_loaded.tokenizer
    ids = tokenize_for_extraction(tok, [SENTENCES[0]], 64).input_ids[0]
    assert ids[0] == tok.cls_token_id
    assert ids[-1] == tok.sep_token_id
    got = extract(goldfish_loaded, [SENTENCES[0]], ["mean"], progress=False, special_tokens="include").pooled
    with_cls = pool(_direct(goldfish_loaded, ids), torch.ones(1, len(ids)), "mean")[:, 0]
    without = pool(_direct(goldfish_loaded, ids[1:]), torch.ones(1, len(ids) - 1), "mean")[:, 0]
    assert_float32_close(got["mean"][:, 0], with_cls.numpy())
    assert not np.allclose(got["mean"][1:, 0], without[1:].numpy(), rtol=1e-3, atol=0)


def test_truncation_is_counted_and_keeps_special_tokens(goldfish_loaded: TinyLoaded) -> None:
    tok = goldfish_loaded.tokenizer
    with pytest.warns(UserWarning, match=r"2 of 3 sentences are longer than 6 tokens"):
        got = extract(
            goldfish_loaded,
            [SENTENCES[0], "Rain.", SENTENCES[3]],
            ["last"],
            max_length=6,
            progress=False,
            special_tokens="include",
        ).pooled
    ids = tokenize_for_extraction(tok, [SENTENCES[0]], 6).input_ids[0]
    assert len(ids) == 6 and ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    expected = pool(_direct(goldfish_loaded, ids), torch.ones(1, 6), "last")[:, 0]
    assert_float32_close(got["last"][:, 0], expected.numpy())


def test_max_length_is_capped_by_model_positions(goldfish_loaded: TinyLoaded) -> None:
    # the goldfish fixture has 64 positions; a longer text must be truncated, not crash
    text = " ".join(SENTENCES * 3)
    with pytest.warns(UserWarning, match="longer than 64 tokens"):
        got = extract(
            goldfish_loaded, [text], ["mean"], max_length=512, progress=False, special_tokens="include"
        ).pooled
    ids = tokenize_for_extraction(goldfish_loaded.tokenizer, [text], 64).input_ids[0]
    assert len(ids) == 64 and ids[-1] == goldfish_loaded.tokenizer.sep_token_id
    expected = pool(_direct(goldfish_loaded, ids), torch.ones(1, 64), "mean")[:, 0]
    assert_float32_close(got["mean"][:, 0], expected.numpy())


def test_no_truncation_warning_for_short_sentences(gpt2_loaded: TinyLoaded) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extract(gpt2_loaded, SENTENCES[:3], ["mean"], progress=False, special_tokens="include").pooled


def test_lm_head_is_never_run(gpt2_loaded: TinyLoaded) -> None:
    from transformers import GPT2LMHeadModel

    lm = GPT2LMHeadModel(gpt2_loaded.model.config).eval()
    lm.transformer.load_state_dict(gpt2_loaded.model.state_dict())
    calls: list[int] = []
    lm.lm_head.register_forward_hook(lambda *a: calls.append(1))
    with_head = extract(
        replace(gpt2_loaded, model=lm), SENTENCES[:4], ["sgpt"], progress=False, special_tokens="include"
    ).pooled
    base = extract(gpt2_loaded, SENTENCES[:4], ["sgpt"], progress=False, special_tokens="include").pooled
    assert calls == []
    assert_float32_close(with_head["sgpt"], base["sgpt"])


def test_token_budget_batches() -> None:
    lengths = [5, 50, 3, 50, 20, 1, 49]
    batches = length_sorted_batches(lengths, batch_size=3, max_tokens=100)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths, reverse=True)
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 100
    # a sentence longer than the budget still runs, alone
    assert length_sorted_batches([500, 2], batch_size=4, max_tokens=100) == [[0], [1]]


def test_bad_inputs_are_refused(gpt2_loaded: TinyLoaded) -> None:
    with pytest.raises(CorpusError, match=r"sentences \[1\] have no tokens"):
        extract(gpt2_loaded, ["Rain.", ""], ["mean"], progress=False, special_tokens="include").pooled
    with pytest.raises(CorpusError, match="no sentences"):
        extract(gpt2_loaded, [], ["mean"], progress=False, special_tokens="include").pooled
    with pytest.raises(CorpusError, match="not strings"):
        extract(gpt2_loaded, ["Rain.", None], ["mean"], progress=False, special_tokens="include").pooled  # type: ignore[list-item]
    with pytest.raises(PoolingError, match="unknown pooling"):
        extract(gpt2_loaded, ["Rain."], ["cls"], progress=False, special_tokens="include").pooled
    with pytest.raises(ModelError, match="returned 3 hidden states, expected 7"):
        extract(
            replace(gpt2_loaded, n_hidden_states=7), ["Rain."], ["mean"], progress=False, special_tokens="include"
        ).pooled
