"""Alignment methods on matrices, and sub-word to word aggregation on tiny models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from interlingua.alignment import (
    AlignmentError,
    AlignOptions,
    align,
    align_matrix,
    segment,
    similarity_matrix,
    word_states,
)
from interlingua.core.errors import InterlinguaError
from interlingua.data.models import ModelSpec, load_model


def _random_sims(seed: int, n: int = 30):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        m, k = rng.integers(1, 9, size=2)
        yield rng.random((m, k))


def test_inter_is_forward_and_backward_intersection():
    for sim in _random_sims(0):
        fwd, rev = align_matrix(sim, "fwd"), align_matrix(sim, "rev")
        inter = align_matrix(sim, "inter")
        assert inter <= fwd & rev
        assert inter == fwd & rev
        assert align_matrix(sim, "argmax") == inter
        # at most one link per word
        assert len({i for i, _ in inter}) == len(inter) == len({j for _, j in inter})


def test_swapping_languages_transposes():
    for sim in _random_sims(1):
        for method in ("inter", "itermax", "match"):
            a = align_matrix(sim, method)
            b = align_matrix(sim.T, method)
            assert b == {(j, i) for i, j in a}, method
        assert align_matrix(sim.T, "fwd") == {(j, i) for i, j in align_matrix(sim, "rev")}


def test_itermax_contains_inter_and_follows_the_rule():
    for sim in _random_sims(2):
        inter = align_matrix(sim, "inter")
        it = align_matrix(sim, "itermax")
        assert inter <= it
        assert align_matrix(sim, "itermax", max_iter=1) == inter
        # every added link touches a word that inter left unaligned
        rows = {i for i, _ in inter}
        cols = {j for _, j in inter}
        for i, j in it - inter:
            assert i not in rows or j not in cols


def test_itermax_worked_example():
    # Round 1 (mutual argmax) links (0, 0) only. Round 2 weights: (0, 0) -> 0 (both
    # aligned), (0, 1) and (1, 0) -> x0.9 (one aligned), (1, 1) -> x1 (neither).
    sim = np.array([[0.9, 0.1], [0.75, 0.7]])  # 0.75*0.9 = 0.675 < 0.7: row 1 takes column 1
    assert align_matrix(sim, "inter") == {(0, 0)}
    assert align_matrix(sim, "itermax") == {(0, 0), (1, 1)}
    sim2 = np.array([[0.9, 0.1], [0.8, 0.7]])  # 0.8*0.9 = 0.72 > 0.7: row 1 joins column 0
    assert align_matrix(sim2, "itermax") == {(0, 0), (1, 0)}
    assert align_matrix(sim2, "itermax", alpha=0.5) == {(0, 0), (1, 1)}


def test_short_sentence_inter_is_simalign_package_rule():
    # The simalign package's iter_max returns plain inter when either sentence has <= 2 words.
    # With the option on, itermax does the same; off (the default), round 2 still runs.
    sim = np.array([[0.9, 0.1, 0.2], [0.75, 0.7, 0.3]])  # 2 x 3: round 2 links row 1
    assert align_matrix(sim, "itermax") == {(0, 0), (1, 1)}
    assert align_matrix(sim, "itermax", short_sentence_inter=True) == {(0, 0)} == align_matrix(sim, "inter")
    assert align_matrix(sim.T, "itermax", short_sentence_inter=True) == {(0, 0)}
    for sim in _random_sims(5, n=60):
        on = align_matrix(sim, "itermax", short_sentence_inter=True)
        off = align_matrix(sim, "itermax")
        if min(sim.shape) >= 3 or min(sim.shape) == 1:  # 1 word: round 1 already aligns it
            assert on == off
        else:
            assert on == align_matrix(sim, "inter") <= off
        for method in ("inter", "match"):  # only itermax has the rule
            assert align_matrix(sim, method, short_sentence_inter=True) == align_matrix(sim, method)


def test_match_is_one_to_one_and_bad_inputs():
    sim = np.random.default_rng(3).random((4, 6))
    m = align_matrix(sim, "match")
    assert len(m) == 4 and len({j for _, j in m}) == 4
    assert align_matrix(np.zeros((0, 3)), "itermax") == set()
    with pytest.raises(AlignmentError, match="unknown alignment method"):
        align_matrix(sim, "nope")
    with pytest.raises(AlignmentError):
        align_matrix(np.array([[np.nan]]))


def test_similarity_range_and_distortion():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(3, 5)), rng.normal(size=(4, 5))
    s = similarity_matrix(x, y)
    assert ((s >= 0) & (s <= 1)).all()
    d = similarity_matrix(x, y, distortion=1.0)
    assert np.allclose(d[0, 0], s[0, 0]) and np.allclose(d[2, 3], s[2, 3])
    assert d[0, 3] == pytest.approx(0.0)
    with pytest.raises(AlignmentError):
        similarity_matrix(x, y[:, :2])


@pytest.fixture(scope="module")
def tiny_bert(tiny_bert_path):
    return load_model(ModelSpec(path=str(tiny_bert_path)))


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_gpt2_path):
    return load_model(ModelSpec(path=str(tiny_gpt2_path)))


@pytest.mark.parametrize("which", ["tiny_bert", "tiny_gpt2"])
def test_word_vectors_equal_manual_average(which, request):
    loaded = request.getfixturevalue(which)
    text = "My sister finds seven apples, near the market."
    words = segment(text, "eng_Latn")
    ws = word_states(loaded, [text, "The baker sells."], [words, segment("The baker sells.")])
    assert ws.layers == tuple(range(loaded.n_hidden_states))
    tok = loaded.tokenizer
    enc = tok(text, return_offsets_mapping=True, add_special_tokens=True)
    specials = set(tok.all_special_ids)
    with torch.inference_mode():
        out = loaded.model(input_ids=torch.tensor([enc["input_ids"]]), output_hidden_states=True)
    for w_index, w in enumerate(words):
        toks = [
            t
            for t, ((s, e), i) in enumerate(zip(enc["offset_mapping"], enc["input_ids"]))
            if i not in specials and e > s and len(text[s:e].strip()) and s < w.end and e > w.start
        ]
        assert toks, w
        # the tokens' non-space characters lie inside the word (punctuation/spaces are split off)
        for layer in range(loaded.n_hidden_states):
            manual = out.hidden_states[layer][0, toks].mean(0).numpy()
            np.testing.assert_allclose(ws.vectors[0][layer, w_index], manual, rtol=1e-4, atol=1e-5)
    assert ws.covered[0].all()
    assert (ws.n_tokens[0] >= 1).all()


def test_special_tokens_never_averaged(tiny_bert):
    text = "the baker"
    ws = word_states(tiny_bert, [text], [segment(text)])
    tok = tiny_bert.tokenizer
    enc = tok(text)
    n_content = sum(i not in set(tok.all_special_ids) for i in enc["input_ids"])
    assert int(ws.n_tokens[0].sum()) == n_content  # [CLS]/[SEP] never counted


def test_align_on_tiny_model_and_bad_inputs(tiny_gpt2):
    a = ["The old fisher carries a blue boat.", "My sister paints."]
    b = ["Der alte Fischer trägt ein blaues Boot.", "Meine Schwester malt."]
    out = align(
        tiny_gpt2, a, b, language_a="eng_Latn", language_b="deu_Latn", options=AlignOptions(method="itermax", layer=1)
    )
    assert len(out) == 2
    inter = align(tiny_gpt2, a, b, options=AlignOptions(method="inter", layer=1))
    for x, y in zip(out, inter):
        assert set(y.links) <= set(x.links)
        assert all(0 <= i < len(x.words_a) and 0 <= j < len(x.words_b) for i, j in x.links)
    swapped = align(tiny_gpt2, b, a, options=AlignOptions(method="inter", layer=1))
    for x, y in zip(inter, swapped):
        assert set(y.links) == {(j, i) for i, j in x.links}
    with pytest.raises(AlignmentError):
        align(tiny_gpt2, [], [])
    with pytest.raises(AlignmentError, match="parallel"):
        align(tiny_gpt2, a, b[:1])
    with pytest.raises(InterlinguaError):
        align(tiny_gpt2, a, b, options=AlignOptions(layer=99))
    with pytest.raises(AlignmentError):
        align(tiny_gpt2, "one string", "other")


def test_align_options_reject_a_bad_link_rule_and_come_from_the_section():
    """The link rule is checked when the options are made, with the aligner's own errors."""
    from interlingua.alignment.config import AlignmentSpec

    with pytest.raises(AlignmentError, match="unknown alignment method"):
        AlignOptions(method="nope")
    with pytest.raises(AlignmentError, match="max_iter"):
        AlignOptions(max_iter=0)
    got = AlignOptions.from_spec(AlignmentSpec(method="match", first_position="exclude"), layer=3, batch_size=8)
    assert got == AlignOptions(layer=3, method="match", batch_size=8, first_position=False)
    assert AlignOptions.from_spec(AlignmentSpec(first_position="include"), layer=None, batch_size=16).first_position
