"""Tokenizer provenance: agreement counts on constructed vocabularies, embedding rows from headers, the zoo."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from interlingua.audit.tokenizer import audit_tokenizer, embedding_rows, tokenizer_tokens, vocab_agreement

SPECIALS = ["<pad>", "<unk>"]


def _word_tokenizer(folder: Path, vocab: list[str]) -> Path:
    """A saved WordLevel tokenizer whose id i is ``vocab[i]``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>")
    fast.save_pretrained(str(folder))
    return folder


def _fake_checkpoint(folder: Path, rows: int, width: int = 4) -> Path:
    """A safetensors file whose header declares a GPT-2 token embedding of ``rows`` rows (data left zero)."""
    folder.mkdir(parents=True)
    header = {
        "transformer.wpe.weight": {"dtype": "F32", "shape": [7, width], "data_offsets": [0, 7 * width * 4]},
        "transformer.wte.weight": {
            "dtype": "F32",
            "shape": [rows, width],
            "data_offsets": [7 * width * 4, (7 + rows) * width * 4],
        },
    }
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + bytes((7 + rows) * width * 4))
    return folder


def test_vocab_agreement_counts():
    assert vocab_agreement(["a", "b", "c"], ["a", "b", "c"]) == (3, 3)
    assert vocab_agreement(["a", "b", "c", "d"], ["a", "x", "c"]) == (2, 3)
    assert vocab_agreement(["b", "a"], ["a", "b"]) == (0, 2)  # a permutation: same strings, other ids
    assert vocab_agreement([], ["a"]) == (0, 0)
    assert vocab_agreement([None, "a"], [None, "a"]) == (1, 2)


def test_constructed_vocabularies(tmp_path):
    words = [f"w{i}" for i in range(38)]
    ref = _word_tokenizer(tmp_path / "ref", SPECIALS + words)  # 40 ids
    same = _word_tokenizer(tmp_path / "same", SPECIALS + words)
    # 10 words rotated among themselves: 30 of 40 ids keep their string
    rotated = words[:28] + words[29:38] + [words[28]]
    half = _word_tokenizer(tmp_path / "rot", SPECIALS + rotated)
    bigger = _word_tokenizer(tmp_path / "big", SPECIALS + words + ["extra1", "extra2"])
    model = _fake_checkpoint(tmp_path / "model", rows=40)
    assert embedding_rows(model) == 40

    a = audit_tokenizer(same, model_dir=model, reference=ref)
    assert (a.verdict, a.agree, a.compared, a.vocab_size, a.embedding_rows) == ("ok", 40, 40, 40, 40)
    assert a.special_tokens == {"<pad>": 0, "<unk>": 1}
    assert a.tokenizer_sha256 == audit_tokenizer(ref).tokenizer_sha256 != ""

    a = audit_tokenizer(half, model_dir=model, reference=ref)
    assert (a.agree, a.compared) == (30, 40) and a.verdict == "mismatched tokenizer"
    assert audit_tokenizer(half, reference=ref, min_agreement=0.7).verdict == "ok"

    a = audit_tokenizer(bigger, model_dir=model, reference=ref)  # every shared id agrees, but 42 ids > 40 rows
    assert (a.agree, a.compared) == (40, 40)
    assert a.verdict == "mismatched tokenizer" and "42 ids" in a.reason
    assert audit_tokenizer(bigger, model_dir=_fake_checkpoint(tmp_path / "m42", rows=48)).verdict == "ok"
    assert audit_tokenizer(bigger).verdict == "unchecked"


def test_unreadable_inputs_are_verdicts(tmp_path):
    assert audit_tokenizer(tmp_path / "nowhere").verdict == "missing"
    tok = _word_tokenizer(tmp_path / "tok", SPECIALS + ["a"])
    a = audit_tokenizer(tok, model_dir=tmp_path / "no_model")
    assert a.verdict == "missing" and "embedding" in a.reason
    with pytest.raises(ValueError):
        audit_tokenizer(tok, min_agreement=2)


def test_zoo_bilingual_tokenizer_against_english_model(tiny_zoo):
    eng = tiny_zoo.folder / "eng_Latn" / "final"
    own = audit_tokenizer(eng, model_dir=eng, reference=eng)
    assert own.verdict == "ok" and own.agree == own.vocab_size == own.embedding_rows
    assert own.special_tokens["<pad>"] == 0

    bilingual = tiny_zoo.folder / "eng_Latn-deu_Latn" / "tokenizer"
    a = audit_tokenizer(bilingual, model_dir=eng, reference=eng)
    # same size as the embedding, so only the id-by-id comparison sees it
    assert a.vocab_size == a.embedding_rows
    assert a.verdict == "mismatched tokenizer"
    from transformers import AutoTokenizer

    want, n = vocab_agreement(
        tokenizer_tokens(AutoTokenizer.from_pretrained(str(bilingual))),
        tokenizer_tokens(AutoTokenizer.from_pretrained(str(eng))),
    )
    assert (a.agree, a.compared) == (want, n) and a.agree < n // 2
    assert a.tokenizer_sha256 != own.tokenizer_sha256
