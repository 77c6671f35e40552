"""extract(): the Extraction record, special-token exclusion, the special-token share,
and agreement of the streaming path with the previous stack-then-pool implementation."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from interlingua.core.errors import CorpusError
from interlingua.data.representations import PoolingError, pool, tokenize_for_extraction
from interlingua.data.representations.extract import (
    Extraction,
    extract,
    length_sorted_batches,
    special_token_ids,
)

from .conftest import SENTENCES, TinyLoaded
from .conftest import assert_float32_close as _close

POOLINGS = ["mean", "sgpt", "last"]
FIXTURES = ["gpt2_loaded", "llama_loaded", "goldfish_loaded"]


def _states(loaded: TinyLoaded, ids: list[int]) -> torch.Tensor:
    """All hidden states of one unpadded sentence from a plain model call: (L+1, 1, T, d)."""
    with torch.inference_mode():
        out = loaded.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return torch.stack(out.hidden_states).float()


def _previous_implementation(
    loaded: TinyLoaded, sentences: list[str], poolings: list[str], batch_size: int, max_length: int = 512
) -> dict[str, np.ndarray]:
    """The extraction loop before the streaming rewrite: stack all states, float(), pool."""
    model, tokenizer = loaded.model, loaded.tokenizer
    limit = model.config.max_position_embeddings if hasattr(model.config, "max_position_embeddings") else None
    limit = limit or getattr(model.config, "n_positions", None)
    tok = tokenize_for_extraction(tokenizer, sentences, min(max_length, limit) if limit else max_length)
    lengths = [len(x) for x in tok.input_ids]
    out: dict[str, np.ndarray] = {}
    with torch.inference_mode():
        for batch in length_sorted_batches(lengths, batch_size, 8192):
            width = max(lengths[i] for i in batch)
            ids = torch.full((len(batch), width), int(tokenizer.pad_token_id), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : lengths[i]] = torch.tensor(tok.input_ids[i])
                mask[row, : lengths[i]] = 1
            hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
            stacked = torch.stack(tuple(hidden)).float()
            m = mask.to(stacked.dtype)
            for name in poolings:
                if name == "mean":
                    v = torch.einsum("...btd,bt->...bd", stacked, m) / m.sum(1).unsqueeze(-1)
                elif name == "sgpt":
                    w = m * torch.arange(1, width + 1, dtype=m.dtype)
                    v = torch.einsum("...btd,bt->...bd", stacked, w) / w.sum(1).unsqueeze(-1)
                else:
                    v = stacked[:, torch.arange(len(batch)), mask.sum(1) - 1]
                out.setdefault(name, np.empty((stacked.shape[0], len(sentences), stacked.shape[-1]), np.float32))
                out[name][:, np.asarray(batch)] = v.numpy()
    return out


@pytest.mark.parametrize("fixture", FIXTURES)
def test_include_agrees_with_previous_stack_then_pool_path(fixture: str, request: pytest.FixtureRequest) -> None:
    loaded: TinyLoaded = request.getfixturevalue(fixture)
    sentences = list(SENTENCES)
    old = _previous_implementation(loaded, sentences, POOLINGS, batch_size=4)
    new = extract(loaded, sentences, POOLINGS, special_tokens="include", batch_size=4, progress=False)
    for name in POOLINGS:
        assert new.pooled[name].dtype == np.float32
        _close(new.pooled[name], old[name])


@pytest.mark.parametrize("fixture", FIXTURES)
def test_extraction_record(fixture: str, request: pytest.FixtureRequest) -> None:
    loaded: TinyLoaded = request.getfixturevalue(fixture)
    sentences = list(SENTENCES[:6])
    got = extract(loaded, sentences, ["sgpt", "mean"], progress=False)
    assert isinstance(got, Extraction)
    assert list(got.pooled) == ["sgpt", "mean"] and list(got.special_share) == ["sgpt", "mean"]
    assert got.special_tokens == "exclude"
    ids = [loaded.tokenizer(s)["input_ids"] for s in sentences]
    specials = special_token_ids(loaded.tokenizer)
    assert got.n_tokens.dtype == np.int64 and got.n_pooled.dtype == np.int64
    assert got.n_tokens.tolist() == [len(x) for x in ids]
    assert got.n_pooled.tolist() == [sum(t not in specials for t in x) for x in ids]
    assert got.truncated == () and got.max_length == min(
        512,
        loaded.model.config.n_positions
        if hasattr(loaded.model.config, "n_positions")
        else loaded.model.config.max_position_embeddings,
    )
    for name, share in got.special_share.items():
        assert share.shape == (loaded.n_hidden_states,)
        assert np.all(share == 0.0)  # nothing special is pooled with "exclude"
        assert got.pooled[name].shape[:2] == (loaded.n_hidden_states, len(sentences))


def test_truncation_is_recorded(goldfish_loaded: TinyLoaded) -> None:
    with pytest.warns(UserWarning, match=r"longer than 6 tokens.*raise max_length \(this model accepts up to 64"):
        got = extract(goldfish_loaded, [SENTENCES[0], "Rain.", SENTENCES[3]], ["mean"], max_length=6, progress=False)
    assert got.truncated == (0, 2) and got.max_length == 6
    assert got.n_tokens.tolist() == [6, len(goldfish_loaded.tokenizer("Rain.")["input_ids"]), 6]
    assert got.n_pooled.tolist() == (got.n_tokens - 2).tolist()  # [CLS] and [SEP] kept, not pooled
    # at the model's position limit raising max_length cannot help, and the warning does not advise it
    with pytest.warns(UserWarning, match=r"longer than 64 tokens.*64 tokens is this model's position limit"):
        capped = extract(goldfish_loaded, [" ".join(SENTENCES * 3)], ["mean"], max_length=512, progress=False)
    assert capped.max_length == 64 and capped.n_tokens.tolist() == [64]


def test_exclude_pools_content_of_the_same_forward_pass(llama_loaded: TinyLoaded) -> None:
    """<bos> is seen by the model but left out of the pooled positions (llama fixture prepends it)."""
    sentence = SENTENCES[4]
    ids = llama_loaded.tokenizer(sentence)["input_ids"]
    assert ids[0] == llama_loaded.tokenizer.bos_token_id
    hidden = _states(llama_loaded, ids)
    content = hidden[:, :, 1:]  # states of the same pass, <bos> position dropped
    ones = torch.ones(1, len(ids) - 1, dtype=torch.long)
    got = extract(llama_loaded, [sentence, *SENTENCES[:3]], POOLINGS, progress=False)
    for name in POOLINGS:
        _close(got.pooled[name][:, 0], pool(content, ones, name)[:, 0].numpy())
    # SGPT weights count ranks among pooled tokens: 1..T-1 on the content, as for a
    # tokenizer without <bos>
    w = torch.arange(1, len(ids), dtype=torch.float32)
    expected = (content[:, 0] * w[:, None]).sum(1) / w.sum()
    _close(got.pooled["sgpt"][:, 0], expected.numpy())
    # not the same as running the model without <bos> (the model still sees it)
    without = pool(_states(llama_loaded, ids[1:]), ones, "mean")[:, 0].numpy()
    assert not np.allclose(got.pooled["mean"][1:, 0], without[1:], rtol=1e-3, atol=0)
    included = extract(llama_loaded, [sentence], ["mean"], special_tokens="include", progress=False)
    _close(included.pooled["mean"][:, 0], pool(hidden, torch.ones(1, len(ids)), "mean")[:, 0].numpy())


def test_exclude_drops_prefix_and_suffix_for_last(goldfish_loaded: TinyLoaded) -> None:
    """[CLS] ... [SEP]: 'last' reads the last content token, not [SEP]."""
    sentence = SENTENCES[1]
    ids = goldfish_loaded.tokenizer(sentence)["input_ids"]
    hidden = _states(goldfish_loaded, ids)
    got = extract(goldfish_loaded, [sentence], ["last", "mean"], progress=False)
    _close(got.pooled["last"][:, 0], hidden[:, 0, len(ids) - 2].numpy())
    _close(got.pooled["mean"][:, 0], hidden[:, 0, 1:-1].mean(1).numpy())
    assert got.n_pooled.tolist() == [len(ids) - 2]


def test_without_special_tokens_both_modes_agree(gpt2_loaded: TinyLoaded) -> None:
    a = extract(gpt2_loaded, SENTENCES, POOLINGS, special_tokens="exclude", progress=False, threads=1)
    b = extract(gpt2_loaded, SENTENCES, POOLINGS, special_tokens="include", progress=False, threads=1)
    for name in POOLINGS:
        np.testing.assert_array_equal(a.pooled[name], b.pooled[name])
        assert np.all(b.special_share[name] == 0.0)
    np.testing.assert_array_equal(a.n_pooled, a.n_tokens)


def test_special_share_equals_its_definition(llama_loaded: TinyLoaded) -> None:
    """share = ||centre(special part)||^2 / ||centre(pooled)||^2 with the <bos> term computed by hand."""
    sentences = list(SENTENCES)
    got = extract(llama_loaded, sentences, POOLINGS, special_tokens="include", batch_size=3, progress=False)
    parts = {name: [] for name in POOLINGS}
    for s in sentences:
        ids = llama_loaded.tokenizer(s)["input_ids"]
        h = _states(llama_loaded, ids)[:, 0]  # (L+1, T, d)
        t = len(ids)
        parts["mean"].append(h[:, 0] / t)
        parts["sgpt"].append(h[:, 0] * 1.0 / (t * (t + 1) / 2))
        parts["last"].append(torch.zeros_like(h[:, 0]))  # the last token is never special here
    for name in POOLINGS:
        special = torch.stack(parts[name], dim=1).double().numpy()  # (L+1, n, d)
        pooled = got.pooled[name].astype(np.float64)
        num = ((special - special.mean(1, keepdims=True)) ** 2).sum(axis=(1, 2))
        den = ((pooled - pooled.mean(1, keepdims=True)) ** 2).sum(axis=(1, 2))
        # layer 0 of "last" is the embedding of the final '.', the same in every sentence: 0/0 -> 0
        expected = np.divide(num, den, out=np.zeros_like(num), where=den > 1e-12 * np.abs(pooled).max() ** 2)
        np.testing.assert_allclose(got.special_share[name], expected, rtol=1e-4, atol=1e-9)
        assert np.isfinite(got.special_share[name]).all()
    assert (got.special_share["mean"] > 0).all() and np.all(got.special_share["last"] == 0.0)


def test_special_share_of_a_special_last_token_is_one(goldfish_loaded: TinyLoaded) -> None:
    got = extract(goldfish_loaded, SENTENCES[:5], ["last"], special_tokens="include", progress=False)
    np.testing.assert_allclose(got.special_share["last"], 1.0, rtol=1e-9)


def test_special_share_is_zero_not_nan_without_variance(llama_loaded: TinyLoaded) -> None:
    one = extract(llama_loaded, [SENTENCES[0]], POOLINGS, special_tokens="include", progress=False)
    same = extract(llama_loaded, [SENTENCES[0]] * 3, POOLINGS, special_tokens="include", progress=False)
    for got in (one, same):
        for share in got.special_share.values():
            assert np.all(share == 0.0)


def test_sentence_of_only_special_tokens(llama_loaded: TinyLoaded) -> None:
    assert llama_loaded.tokenizer("<bos>")["input_ids"] == [2, 2]
    with pytest.raises(CorpusError, match=r"\['b'\] consist only of special tokens"):
        extract(llama_loaded, ["Rain.", "<bos>"], ["mean"], sentence_ids=["a", "b"], progress=False)
    with pytest.raises(CorpusError, match=r"\[1\] consist only of special tokens.*special_tokens='include'"):
        extract(llama_loaded, ["Rain.", "<bos>"], ["mean"], progress=False)
    got = extract(llama_loaded, ["Rain.", "<bos>"], ["mean"], special_tokens="include", progress=False)
    assert got.n_pooled.tolist() == got.n_tokens.tolist()


def test_unknown_token_counts_as_content(goldfish_loaded: TinyLoaded) -> None:
    tok = goldfish_loaded.tokenizer
    assert tok.unk_token_id not in special_token_ids(tok)
    assert {tok.cls_token_id, tok.sep_token_id} <= special_token_ids(tok)


def test_bad_arguments(gpt2_loaded: TinyLoaded) -> None:
    with pytest.raises(PoolingError, match="special_tokens must be one of exclude, include"):
        extract(gpt2_loaded, ["Rain."], ["mean"], special_tokens="drop", progress=False)
    with pytest.raises(CorpusError, match="sentence_ids has 1 entries for 2 sentences"):
        extract(gpt2_loaded, ["Rain.", "Birds sing."], ["mean"], sentence_ids=["a"], progress=False)
    with pytest.raises(CorpusError, match="no sentences"):
        extract(gpt2_loaded, [], ["mean"], progress=False)


def test_a_pooling_does_not_depend_on_the_others_requested(llama_loaded: TinyLoaded) -> None:
    """Cache entries computed in one pass or separately hold the same bits."""
    together = extract(llama_loaded, SENTENCES, POOLINGS, special_tokens="include", progress=False, threads=1)
    for name in POOLINGS:
        alone = extract(llama_loaded, SENTENCES, [name], special_tokens="include", progress=False, threads=1)
        np.testing.assert_array_equal(alone.pooled[name], together.pooled[name])


class FakeClocks:
    """Wall and process-CPU clocks that the test advances by hand."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def batch(self, wall: float, cores_used: float) -> None:
        self.wall += wall
        self.cpu += wall * cores_used


def _tuner(module, default: int, clocks: FakeClocks):  # noqa: ANN001, ANN202
    return module._ThreadTuner(default, clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)


def _state(module, monkeypatch, threads: float = 0.0, warm: float = 0.0) -> None:  # noqa: ANN001
    monkeypatch.setattr(
        module._ThreadTuner, "state", {"threads": threads, "last_probe_at": -np.inf, "probe_s": 0.0, "warm": warm}
    )


def test_thread_tuner_starts_at_one_thread_and_probes_only_cheap_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first (longest) batches run at one thread; a doubling probe waits for a batch at most the median."""
    module = importlib.import_module("interlingua.data.representations.extract")  # not the function
    _state(module, monkeypatch)
    clocks = FakeClocks()
    before = torch.get_num_threads()
    try:
        tuner = _tuner(module, 2, clocks)
        tuner.probe_limit = 50
        seen = []
        for cost in (400, 300, 200, 100, 50, 40):  # longest first, as extract() runs them
            n = tuner.before_batch(cost)
            seen.append(n)
            clocks.batch(cost / 100 if n == 1 else cost / 40, 0.9)  # 2 threads are slower: busy cores
            tuner.after_batch(cost)
        # warm-up at 1; a probe is due after the second batch but waits for a batch <= 50; 2 threads lose: back to 1
        assert seen == [1, 1, 1, 1, 2, 1]
        assert module._ThreadTuner.state["threads"] == 0.0  # nothing better than the start was found
    finally:
        torch.set_num_threads(before)


def test_thread_tuner_halves_under_contention_and_climbs_on_an_idle_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("interlingua.data.representations.extract")
    clocks = FakeClocks()
    before = torch.get_num_threads()
    try:
        # a later call that starts from 4 threads (an earlier choice): busy cores -> halving pays twice
        _state(module, monkeypatch, threads=4.0, warm=1.0)
        speed = {4: (4.0, 1.2), 2: (2.0, 1.2), 1: (1.5, 0.9)}
        tuner = _tuner(module, 4, clocks)
        seen = []
        for _ in range(5):
            n = tuner.before_batch()
            assert torch.get_num_threads() == n
            seen.append(n)
            clocks.batch(*speed[n])
            tuner.after_batch(100)
        assert seen == [4, 2, 2, 1, 1]  # a kept step is followed by one batch that sets the new baseline
        assert module._ThreadTuner.state["threads"] == 1.0
        # idle cores: each doubling halves the time, so it climbs from one thread to torch's 16
        _state(module, monkeypatch)
        tuner = _tuner(module, 16, clocks)
        seen = []
        for _ in range(11):
            n = tuner.before_batch()
            seen.append(n)
            clocks.batch(16.0 / n, float(n))
            tuner.after_batch(100)
        assert seen == [1, 1, 2, 2, 4, 4, 8, 8, 16, 16, 16]
    finally:
        torch.set_num_threads(before)


def test_slow_doubling_probes_are_rare(monkeypatch: pytest.MonkeyPatch) -> None:
    """A doubling that runs 5x slower is retried only after 20x its duration."""
    module = importlib.import_module("interlingua.data.representations.extract")
    monkeypatch.setattr(
        module._ThreadTuner, "state", {"threads": 1.0, "last_probe_at": -np.inf, "probe_s": 0.0, "warm": 1.0}
    )
    clocks = FakeClocks()
    before = torch.get_num_threads()
    try:
        tuner = _tuner(module, 2, clocks)
        runs = []
        for _ in range(200):
            n = tuner.before_batch()
            runs.append(n)
            clocks.batch(10.0 if n == 1 else 50.0, 0.5)
            tuner.after_batch(100)
        probes = runs.count(2)
        assert 1 <= probes <= 3
        probe_time = 50.0 * probes
        assert probe_time / clocks.wall < 0.06
    finally:
        torch.set_num_threads(before)


def test_thread_count_is_restored_and_changes_only_rounding(llama_loaded: TinyLoaded) -> None:
    before = torch.get_num_threads()
    auto = extract(llama_loaded, SENTENCES, POOLINGS, progress=False, threads="auto")
    assert torch.get_num_threads() == before
    one = extract(llama_loaded, SENTENCES, POOLINGS, progress=False, threads=1)
    assert torch.get_num_threads() == before
    for name in POOLINGS:
        _close(one.pooled[name], auto.pooled[name])
    for bad in (0, "fast", 1.5):
        with pytest.raises(PoolingError, match="threads must be >= 1"):
            extract(llama_loaded, SENTENCES, POOLINGS, progress=False, threads=bad)


def test_the_default_is_the_runs_fixed_count_not_the_tuner(
    llama_loaded: TinyLoaded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``threads=None`` runs every batch at numerics.default_threads() (OMP_NUM_THREADS, else 1): the same bits
    as naming that count, and torch's own setting never used."""
    module = importlib.import_module("interlingua.data.representations.extract")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    counts = []
    real = module._run_batch

    def spy(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        counts.append(torch.get_num_threads())
        return real(*args, **kw)

    monkeypatch.setattr(module, "_run_batch", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        default = extract(llama_loaded, SENTENCES, POOLINGS, progress=False, batch_size=2)
        assert set(counts) == {1}
        one = extract(llama_loaded, SENTENCES, POOLINGS, progress=False, batch_size=2, threads=1)
        for name in POOLINGS:
            np.testing.assert_array_equal(default.pooled[name], one.pooled[name])
        assert torch.get_num_threads() == 2
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        counts.clear()
        extract(llama_loaded, SENTENCES, POOLINGS, progress=False, batch_size=2)
        assert set(counts) == {2}
    finally:
        torch.set_num_threads(before)
