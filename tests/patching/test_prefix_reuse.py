"""run_patched reuses the key/value cache of the prompts' shared prefix: the same function as a full forward."""

from __future__ import annotations

import pytest
import torch

from interlingua.patching import encode_prompt, load_probes
from interlingua.patching.hooks import _shared_prefix, capture_residuals, run_patched

MODELS = ["gpt2_patch", "llama_patch", "gemma3_patch"]


def _encoded(model, language: str = "eng", n: int = 12):
    probes = load_probes().probes("capital", language)[:n]
    return [encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end) for p in probes]


def _mean_patches(model, enc, start: int):
    """Prompt i gets prompt i+1's mean subject state at every layer from ``start`` (the experiment's patch)."""
    states, _ = capture_residuals(model, [e.input_ids for e in enc], list(range(start, model.num_layers + 1)))
    means = [{k: s[k][list(e.span)].mean(0) for k in s} for s, e in zip(states, enc)]
    return [{k: (list(e.span), means[(i + 1) % len(enc)][k]) for k in means[0]} for i, e in enumerate(enc)]


def test_the_shared_prefix_is_the_template_head(gpt2_patch):
    enc = _encoded(gpt2_patch)
    ids = [e.input_ids for e in enc]
    first_span = min(e.span[0] for e in enc)
    n = _shared_prefix(ids, list(range(len(ids))), [{} for _ in ids])
    assert n == first_span  # "The capital of" is tokenized the same before every name
    assert all(list(i[:n]) == list(ids[0][:n]) for i in ids)
    # a patch before the subject bounds the prefix
    pos = torch.tensor([1])
    assert _shared_prefix(ids, list(range(len(ids))), [{0: (pos, None)}] + [{} for _ in ids[1:]]) == 1


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("start", [0, 1])
def test_prefix_reuse_equals_the_full_forward(name, start, request):
    model = request.getfixturevalue(name)
    enc = _encoded(model, "deu")
    ids = [e.input_ids for e in enc]
    for patches in ([{} for _ in enc], _mean_patches(model, enc, start)):
        reused = run_patched(model, ids, patches, batch_size=5, full=True, reuse_prefix=True)
        plain = run_patched(model, ids, patches, batch_size=5, full=True, reuse_prefix=False)
        torch.testing.assert_close(reused.full, plain.full, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_writing_back_the_runs_own_states_is_bit_identical(name, request):
    model = request.getfixturevalue(name)
    enc = _encoded(model)
    ids = [e.input_ids for e in enc]
    layers = list(range(1, model.num_layers + 1))
    clean = run_patched(model, ids, [{} for _ in enc], batch_size=4, full=True, capture=layers)
    assert clean.states is not None and [len(s[1]) for s in clean.states] == [len(i) for i in ids]
    own = [{k: (list(e.span), clean.states[i][k][list(e.span)]) for k in layers} for i, e in enumerate(enc)]
    patched = run_patched(model, ids, own, batch_size=4, full=True)
    assert torch.equal(patched.full, clean.full)
    assert torch.equal(patched.top1, clean.top1)


@pytest.mark.parametrize("name", MODELS)
def test_captured_states_match_the_full_forward(name, request):
    model = request.getfixturevalue(name)
    enc = _encoded(model, "rus")
    ids = [e.input_ids for e in enc]
    layers = [0, model.num_layers]
    reused = run_patched(model, ids, [{} for _ in enc], batch_size=6, capture=layers).states
    full, _ = capture_residuals(model, ids, layers, batch_size=6)
    for a, b in zip(reused, full):
        for k in layers:
            torch.testing.assert_close(a[k], b[k], atol=1e-4, rtol=1e-4)


def test_compute_from_bounds_the_reused_prefix(gpt2_patch):
    model = gpt2_patch
    enc = _encoded(model)
    same = [enc[0].input_ids] * 4  # copies of one prompt share everything but the last token
    rows = list(range(4))
    assert _shared_prefix(same, rows, [{} for _ in same]) == len(same[0]) - 1
    assert _shared_prefix(same, rows, [{} for _ in same], [enc[0].span[0]] * 4) == enc[0].span[0]
    a = run_patched(model, same, [{} for _ in same], full=True)
    b = run_patched(model, same, [{} for _ in same], full=True, compute_from=[enc[0].span[0]] * 4)
    torch.testing.assert_close(a.full, b.full, atol=1e-4, rtol=1e-4)


def test_non_finite_values_name_the_prompt_and_layer(gpt2_patch):
    from interlingua.patching import InterventionError

    model = gpt2_patch
    enc = _encoded(model, n=3)
    ids = [e.input_ids for e in enc]
    patches = [{1: (list(e.span), torch.zeros(model.width))} for e in enc]
    patches[1] = {
        1: (list(enc[1].span), torch.zeros(model.width)),
        2: (list(enc[1].span), torch.full((model.width,), float("inf"))),
    }
    with pytest.raises(InterventionError, match="prompt 1 at layer 2 contain NaN or inf"):
        run_patched(model, ids, patches)


@pytest.mark.parametrize("name", MODELS)
def test_whole_answer_equals_a_teacher_forced_forward(name, request):
    """Readout.answer is the sum of log p of each answer token after the prompt and the tokens before it,
    as a plain forward of prompt + answer through the model gives it; appending the answer does not change
    the read-out at the prompt's last token."""
    from interlingua.patching import answer_tokens

    model = request.getfixturevalue(name)
    probes = load_probes().probes("capital", "deu")[:9]
    enc = [encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end) for p in probes]
    ids = [e.input_ids for e in enc]
    answers = [answer_tokens(model.tokenizer, p.prompt, p.continuation) for p in probes]
    conts = [answers[(i + 1) % len(ids)] for i in range(len(ids))]  # another country's answer
    assert max(len(c) for c in conts) > 1
    with_answer = run_patched(model, ids, [{} for _ in ids], batch_size=4, full=True, continuations=conts)
    alone = run_patched(model, ids, [{} for _ in ids], batch_size=4, full=True)
    assert alone.answer is None and with_answer.answer is not None
    torch.testing.assert_close(with_answer.full, alone.full, atol=1e-5, rtol=1e-5)
    for i, (prompt, cont) in enumerate(zip(ids, conts)):
        seq = torch.tensor([list(prompt) + list(cont)])
        with torch.inference_mode():
            lp = torch.log_softmax(model.lm(input_ids=seq).logits[0].double(), dim=-1)
        expected = sum(float(lp[len(prompt) - 1 + t, c]) for t, c in enumerate(cont))
        assert float(with_answer.answer[i]) == pytest.approx(expected, abs=1e-4)
    # patched: the same with the whole prompt computed (no prefix reuse)
    patches = _mean_patches(model, enc, 1)
    reused = run_patched(model, ids, patches, batch_size=4, continuations=conts)
    plain = run_patched(model, ids, patches, batch_size=4, continuations=conts, reuse_prefix=False)
    torch.testing.assert_close(reused.answer, plain.answer, atol=1e-4, rtol=1e-5)
    # the run's own states written back: the whole-answer log p too is bit-identical
    layers = list(range(1, model.num_layers + 1))
    # (compute_from: both passes start at the subject, as the experiment's do; without it two names that
    # share a first token could let the unpatched batch reuse a longer prefix: the same function, other rounding)
    subject = [e.span[0] for e in enc]
    clean = run_patched(
        model, ids, [{} for _ in ids], batch_size=4, capture=layers, continuations=conts, compute_from=subject
    )
    assert [len(s[1]) for s in clean.states] == [len(i) for i in ids]  # states of the prompt, not the answer
    own = [{k: (list(e.span), clean.states[i][k][list(e.span)]) for k in layers} for i, e in enumerate(enc)]
    again = run_patched(model, ids, own, batch_size=4, continuations=conts, compute_from=subject)
    assert torch.equal(again.answer, clean.answer)


def test_continuation_errors(gpt2_patch):
    from interlingua.patching import InterventionError

    enc = _encoded(gpt2_patch, n=3)
    ids = [e.input_ids for e in enc]
    with pytest.raises(InterventionError, match="3 prompts but 2 continuations"):
        run_patched(gpt2_patch, ids, [{} for _ in ids], continuations=[[1], [2]])
    with pytest.raises(InterventionError, match="continuation to score is empty"):
        run_patched(gpt2_patch, ids, [{} for _ in ids], continuations=[[1], [], [2]])
