"""The subject span: exactly the country's tokens, on a byte-level BPE and a SentencePiece tokenizer."""

from __future__ import annotations

import pytest

from interlingua.patching import InterventionError, encode_prompt, find_span, load_probes

SPACED = ("eng", "deu", "spa", "rus")


@pytest.fixture(scope="module")
def sentencepiece_tokenizer(tiny_goldfish_path):
    """The Goldfish-layout fixture: a SentencePiece unigram model (200 pieces) as a fast Albert tokenizer."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_goldfish_path)
    assert tok.is_fast
    return tok


def _covered(tok, prompt: str, span: list[int]) -> str:
    offsets = tok(prompt, return_offsets_mapping=True)["offset_mapping"]
    return prompt[offsets[span[0]][0] : offsets[span[-1]][1]]


def _check_exact(tok, probes, languages):
    multi = 0
    for lang in languages:
        for p in probes.probes("capital", lang):
            enc = tok(p.prompt, return_offsets_mapping=True)
            span = find_span(tok, p.prompt, p.subject_start, p.subject_end)
            assert _covered(tok, p.prompt, span).strip() == p.subject, (lang, p.subject)
            offsets = enc["offset_mapping"]
            for i in range(len(offsets)):  # no token outside the span touches the subject's letters
                s, e = offsets[i]
                touches = any(not p.prompt[c].isspace() for c in range(max(s, p.subject_start), min(e, p.subject_end)))
                assert touches == (i in span) or (p.prompt[s:e].isspace() and i in span), (lang, p.subject, i)
            multi += len(span) > 1
    return multi


def test_bpe_span_is_exactly_the_name(small_bpe):
    """400-token byte-level BPE: most names split into several tokens, Cyrillic into byte pieces."""
    probes = load_probes()
    multi = _check_exact(small_bpe, probes, SPACED)
    assert multi > 100
    p = probes.probe("capital", "eng", "SA")
    span = find_span(small_bpe, p.prompt, p.subject_start, p.subject_end)
    ids = small_bpe(p.prompt)["input_ids"]
    assert small_bpe.decode([ids[i] for i in span]).strip() == "Saudi Arabia"
    assert small_bpe.decode(ids[: span[0]]) == "The capital of "
    assert small_bpe.decode(ids[span[-1] + 1 :]) == " is"


def test_bpe_trained_on_probes(gpt2_patch):
    probes = load_probes()
    _check_exact(gpt2_patch.tokenizer, probes, SPACED)


def test_sentencepiece_span_is_exactly_the_name(sentencepiece_tokenizer):
    tok = sentencepiece_tokenizer
    probes = load_probes()
    multi = _check_exact(tok, probes, SPACED)
    assert multi > 100
    p = probes.probe("capital", "rus", "SA")  # "Столица страны Саудовская Аравия —"
    span = find_span(tok, p.prompt, p.subject_start, p.subject_end)
    ids = tok(p.prompt)["input_ids"]
    # "А" is not among the 200 pieces: an <unk> token stands for it, and its offsets still place it in the span
    assert tok.unk_token_id in [ids[i] for i in span]
    assert _covered(tok, p.prompt, span).strip() == "Саудовская Аравия"
    assert ids[0] == tok.cls_token_id and 0 not in span  # the leading special token is kept, never in the span


def test_sentencepiece_drops_the_trailing_special_token(sentencepiece_tokenizer):
    tok = sentencepiece_tokenizer
    p = load_probes().probe("capital", "deu", "FR")
    ids = tok(p.prompt)["input_ids"]
    assert ids[-1] == tok.sep_token_id
    enc = encode_prompt(tok, p.prompt, p.subject_start, p.subject_end)
    assert list(enc.input_ids) == ids[:-1] and enc.last == len(ids) - 2


def test_unspaced_scripts_cover_the_name(gpt2_patch, small_bpe):
    """Chinese and Japanese: the span covers every character of the name; `exact` says whether a token spills over."""
    probes = load_probes()
    for tok in (small_bpe, gpt2_patch.tokenizer):
        for lang in ("zho", "jpn"):
            for p in probes.probes("capital", lang):
                enc = encode_prompt(tok, p.prompt, p.subject_start, p.subject_end)
                text = _covered(tok, p.prompt, list(enc.span))
                assert p.subject in text
                assert enc.exact == (text.strip() == p.subject)


def test_span_errors(small_bpe):
    with pytest.raises(InterventionError, match="last token"):
        find_span(small_bpe, "The capital of France", 15, 21)
    with pytest.raises(InterventionError, match="no token"):
        find_span(small_bpe, "The capital of   is", 14, 17)  # only spaces
    with pytest.raises(InterventionError):
        find_span(small_bpe, "abc", 2, 9)


def test_slow_tokenizer_is_refused():
    class Slow:
        is_fast = False

        def __call__(self, *args, **kwargs):
            if kwargs.get("return_offsets_mapping"):
                raise NotImplementedError("return_offset_mapping is not available when using Python tokenizers")
            return {"input_ids": [1, 2], "special_tokens_mask": [0, 0]}

    with pytest.raises(InterventionError, match="fast tokenizer"):
        find_span(Slow(), "The capital of France is", 15, 21)
