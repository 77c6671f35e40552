"""Tiny, deterministic models for the representations tests (built in seconds).

Each fixture returns a duck-typed stand-in for ``interlingua.data.models.LoadedModel``
(``model``, ``tokenizer``, ``fingerprint``, ``n_hidden_states``, ``spec``), so
these tests exercise exactly the attributes extraction relies on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

SENTENCES = [
    "The river runs past the old mill and into the valley.",
    "A small boat waits at the pier.",
    "Birds sing.",
    "Under the bridge the water is dark, cold and very deep, and nobody swims there in winter.",
    "She reads a letter from her brother who lives far away in the mountains.",
    "Rain.",
    "The market opens early on Saturdays and closes before noon.",
    "Der Fluss fliesst am alten Muehlrad vorbei ins Tal.",
    "El barco pequeno espera en el muelle.",
    "Les oiseaux chantent dans le jardin.",
]


def assert_float32_close(actual: np.ndarray, desired: np.ndarray, rtol: float = 1e-5) -> None:
    """Agreement to float32 rounding, layer by layer (axis 0).

    Relative tolerance ``rtol`` plus an absolute floor of ``rtol`` times the
    layer's largest |value|: near-zero entries of a sum carry the rounding
    error of its large terms, and the tiny models' layers differ in scale by
    100x, so a fixed absolute tolerance would be loose on some layers and
    platform-dependent on others.
    """
    actual = np.asarray(actual, dtype=np.float64)
    desired = np.asarray(desired, dtype=np.float64)
    assert actual.shape == desired.shape, (actual.shape, desired.shape)
    for k in range(desired.shape[0]):
        scale = float(np.abs(desired[k]).max()) or 1.0
        np.testing.assert_allclose(actual[k], desired[k], rtol=rtol, atol=rtol * scale, err_msg=f"layer {k}")


@dataclass
class TinyLoaded:
    """What extraction needs from a loaded model."""

    model: torch.nn.Module
    tokenizer: Any
    fingerprint: str
    n_hidden_states: int
    spec: Any = None


@dataclass
class TinySpec:
    name: str


@dataclass
class TinyCorpus:
    """Duck-typed ``ParallelCorpus``: ids, aligned texts per language, fingerprints."""

    name: str
    ids: tuple[str, ...]
    texts: Mapping[str, Sequence[str]] = field(default_factory=dict)

    def sentences(self, lang: str) -> list[str]:
        return list(self.texts[lang])

    def fingerprint(self, lang: str) -> str:
        payload = json.dumps([list(self.ids), list(self.texts[lang])], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _bpe_tokenizer(add_bos: bool) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SENTENCES * 3, trainer)
    if add_bos:
        bos = tok.token_to_id("<bos>")
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos)]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
    )
    fast.padding_side = "right"
    return fast


def _gpt2(vocab_size: int, n_positions: int = 256, seed: int = 0) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
    )
    return GPT2Model(config).eval()


@pytest.fixture(scope="session")
def bpe_tokenizer() -> Any:
    return _bpe_tokenizer(add_bos=False)


@pytest.fixture(scope="session")
def gpt2_loaded(bpe_tokenizer: Any) -> TinyLoaded:
    model = _gpt2(len(bpe_tokenizer))
    return TinyLoaded(model, bpe_tokenizer, "tiny-gpt2-seed0", 3, TinySpec("tiny-gpt2"))


@pytest.fixture(scope="session")
def llama_loaded() -> TinyLoaded:
    from transformers import LlamaConfig, LlamaModel

    tokenizer = _bpe_tokenizer(add_bos=True)
    torch.manual_seed(1)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
    )
    model = LlamaModel(config).eval()
    return TinyLoaded(model, tokenizer, "tiny-llama-seed1", 4, TinySpec("tiny-llama"))


@pytest.fixture(scope="session")
def goldfish_loaded(tmp_path_factory: pytest.TempPathFactory) -> TinyLoaded:
    """GPT-2 + SentencePiece vocabulary wrapped as ``AlbertTokenizer`` (adds [CLS] ... [SEP])."""
    import sentencepiece as spm
    from transformers import AlbertTokenizer

    folder: Path = tmp_path_factory.mktemp("goldfish_spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 20),
        model_prefix=str(folder / "spiece"),
        vocab_size=100,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        pad_piece="<pad>",
        unk_piece="<unk>",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=str(folder / "spiece.model"))
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tokenizer = AlbertTokenizer(vocab=vocab, do_lower_case=False)
    tokenizer.padding_side = "right"
    model = _gpt2(len(tokenizer), n_positions=64, seed=2)
    return TinyLoaded(model, tokenizer, "tiny-goldfish-seed2", 3, TinySpec("tiny-goldfish"))


@pytest.fixture()
def tiny_corpus() -> TinyCorpus:
    ids = tuple(f"s{i:03d}" for i in range(len(SENTENCES)))
    return TinyCorpus(
        "tiny",
        ids,
        {"eng_Latn": list(SENTENCES), "deu_Latn": [s.upper() for s in SENTENCES]},
    )
