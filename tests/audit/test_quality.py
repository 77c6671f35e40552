"""Quality: batched mean NLL equals a sentence-by-sentence loop; chance-level models are flagged."""

from __future__ import annotations

import math

import pytest
import torch

from interlingua.audit.quality import audit_quality
from interlingua.data.causal_lm import load_causal_lm, mean_nll
from interlingua.data.models import ModelSpec


def _sentences(zoo, lang="eng_Latn", n=40):
    texts = next(t for folder, t in zoo.recorded["tokenizer_texts"] if folder == lang)
    return list(texts[:n])


def _loop_nll(lm, tok, sentences, exclude_special=True):
    """From scratch: one sentence at a time, no padding, sum of -log p(token t+1 | tokens <= t)."""
    specials = set(tok.all_special_ids) if exclude_special else set()
    total, count = 0.0, 0
    with torch.no_grad():
        for s in sentences:
            ids = tok(s, add_special_tokens=True)["input_ids"]
            logits = lm(input_ids=torch.tensor([ids])).logits[0].double()
            logp = logits.log_softmax(-1)
            for t in range(len(ids) - 1):
                if ids[t + 1] not in specials:
                    total -= float(logp[t, ids[t + 1]])
                    count += 1
    return total / count, count


@pytest.mark.parametrize("special", ["exclude", "include"])
def test_batched_nll_equals_sentence_loop(tiny_zoo, special):
    lm, tok = load_causal_lm(ModelSpec(path=str(tiny_zoo.folder / "eng_Latn" / "final")))
    sents = _sentences(tiny_zoo)
    nll, n, vocab, truncated = mean_nll(lm, tok, sents, special_tokens=special, batch_size=7, max_tokens=300)
    want, want_n = _loop_nll(lm, tok, sents, exclude_special=special == "exclude")
    assert n == want_n and vocab == 400 and truncated == 0
    # the batched path pads (right) and takes log_softmax in float32; the loop in float64 after float32 logits:
    # per-token differences are a few float32 ulps of logits of size ~10 (~1e-6), so 1e-5 relative is ample
    assert nll == pytest.approx(want, rel=1e-5)
    # the first token is never predicted: one fewer target than tokens per sentence at most
    lengths = [len(tok(s)["input_ids"]) for s in sents]
    assert n <= sum(L - 1 for L in lengths)
    if special == "include":
        assert n == sum(L - 1 for L in lengths)


def test_trained_model_ok_untrained_not_a_language_model(tiny_zoo):
    sents = _sentences(tiny_zoo)
    lm, tok = load_causal_lm(ModelSpec(path=str(tiny_zoo.folder / "eng_Latn" / "final")))
    good = audit_quality(lm, tok, sents)
    assert good.verdict == "ok" and good.chance == pytest.approx(math.log(400))
    lm0, tok0 = load_causal_lm(ModelSpec(path=str(tiny_zoo.folder / "eng_Latn" / "step0")))
    bad = audit_quality(lm0, tok0, sents)
    assert bad.verdict == "not a language model" and abs(bad.nll - bad.chance) < 0.5
    # the margin is configurable: a margin of 0 still flags a model at chance, a huge one flags everything
    assert audit_quality(lm, tok, sents, margin=10.0).verdict == "not a language model"


def test_adapter_spec_and_edge_cases(tiny_zoo):
    base = tiny_zoo.folder / "eng_Latn" / "final"
    lm, tok = load_causal_lm(
        ModelSpec(path=str(base), adapter=str(tiny_zoo.folder / "eng_Latn-deu_Latn" / "lora-identity"))
    )
    plain, _ = load_causal_lm(ModelSpec(path=str(base)))
    sents = _sentences(tiny_zoo, n=10)
    assert mean_nll(lm, tok, sents)[0] == mean_nll(plain, tok, sents)[0]  # B == 0: the same numbers exactly
    empty = audit_quality(plain, tok, [""])
    assert (empty.n_tokens, empty.verdict) == (0, "unchecked")  # "" is [CLS] [SEP]: the one target is special
    _, n, _, truncated = mean_nll(plain, tok, sents, max_length=3)
    assert truncated > 0 and n <= 2 * len(sents)
    with pytest.raises(ValueError):
        mean_nll(plain, tok, sents, special_tokens="keep")


def test_sentences_longer_than_the_positions_are_truncated(tiny_zoo):
    lm, tok = load_causal_lm(ModelSpec(path=str(tiny_zoo.folder / "eng_Latn" / "final")))
    long = " ".join(_sentences(tiny_zoo, n=20))  # far more than the tiny model's 96 positions
    nll, n, _, truncated = mean_nll(lm, tok, [long], max_length=10_000)
    assert truncated == 1 and n <= lm.config.n_positions - 1 and math.isfinite(nll)


def test_a_converted_gguf_copy_serves_the_causal_lm_when_the_head_is_tied(tiny_gpt2_path, tmp_path):
    """Quality audits read the float32 copy runs already converted (no second dequantisation): same logits."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    from interlingua.core.hashing import file_sha256
    from interlingua.data.causal_lm import _converted_gguf
    from interlingua.data.models import ModelSpec
    from interlingua.data.models.gguf_cache import save_converted
    from interlingua.data.models.source import Source

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "x.gguf").write_bytes(b"GGUF-stand-in")
    sha = file_sha256(folder / "x.gguf")
    base = AutoModel.from_pretrained(tiny_gpt2_path)
    tok = AutoTokenizer.from_pretrained(tiny_gpt2_path)
    save_converted(base, tok, sha, "x.gguf", tmp_path / "cache")
    spec = ModelSpec(path=str(folder), gguf_file="x.gguf")
    source = _converted_gguf(Source(str(folder), "local", "x.gguf"), spec, tmp_path / "cache")
    assert source is not None and source.gguf_file is None
    ids = tok("hello world, again", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(tiny_gpt2_path)(ids).logits
        got = AutoModelForCausalLM.from_pretrained(source.location)(ids).logits
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)  # the tied head is the copy's embedding
    assert _converted_gguf(Source(str(folder), "local", "x.gguf"), spec, tmp_path / "elsewhere") is None
