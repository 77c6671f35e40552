"""Tiny causal LMs for the patching mechanics, with tokenizers trained on the probe text.

The project's tiny checkpoints (tests/fixtures) have 400-token vocabularies in which every
answer starts with the same byte token, so no pair of countries could flip; these models share
their shapes (d 32, 2-3 layers) but their byte-level BPE tokenizers are trained on the rendered
probes too, so answers get tokens of their own. Random weights: the tests check mechanics, not
knowledge. Built in memory once per session (a few seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fixtures import tiny_models  # noqa: E402

LANGS = ("eng", "deu", "spa", "rus")


def probe_text(languages=LANGS) -> list[str]:
    from interlingua.patching import load_probes

    probes = load_probes()
    out = []
    for rel in probes.relations:
        for lang in languages:
            out += [p.prompt + p.continuation for p in probes.probes(rel, lang)]
    return out + tiny_models.training_text()


def bpe_tokenizer(vocab_size: int, texts: list[str]):
    """Byte-level BPE (GPT-2 style, no pad token) trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def _gpt2(tok, width: int, seed: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(tok), n_positions=64, n_embd=width, n_layer=2, n_head=4, bos_token_id=eos, eos_token_id=eos
    )
    return GPT2LMHeadModel(cfg).eval()


def _llama(tok, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(cfg).eval()


def _gemma3(tok, seed: int):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    cfg = Gemma3TextConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
        intermediate_size=64,
        max_position_embeddings=64,
        sliding_window=16,
    )
    return Gemma3ForCausalLM(cfg).eval()


@pytest.fixture(scope="session")
def probe_texts() -> list[str]:
    return probe_text()


@pytest.fixture(scope="session")
def gpt2_patch(probe_texts):
    """PatchModel: GPT-2, 2 layers, d 32, BPE 1500 trained on the probes."""
    from interlingua.patching import PatchModel

    tok = bpe_tokenizer(1500, probe_texts)
    return PatchModel.wrap(_gpt2(tok, 32, 0), tok, "gpt2-probe")


@pytest.fixture(scope="session")
def llama_patch(probe_texts):
    """PatchModel: Llama, 3 layers, d 32, its own BPE (1200): names split differently than in gpt2_patch."""
    from interlingua.patching import PatchModel

    tok = bpe_tokenizer(1200, probe_texts[::-1])
    return PatchModel.wrap(_llama(tok, 1), tok, "llama-probe")


@pytest.fixture(scope="session")
def narrow_patch(probe_texts):
    """PatchModel: GPT-2, 2 layers, d 16 (a width the others do not have)."""
    from interlingua.patching import PatchModel

    tok = bpe_tokenizer(1000, probe_texts)
    return PatchModel.wrap(_gpt2(tok, 16, 2), tok, "gpt2-narrow")


@pytest.fixture(scope="session")
def gemma3_patch(probe_texts):
    """PatchModel: Gemma 3 text, 2 layers, d 32 (scaled embeddings, sliding-window attention)."""
    from interlingua.patching import PatchModel

    tok = bpe_tokenizer(1500, probe_texts)
    return PatchModel.wrap(_gemma3(tok, 3), tok, "gemma3-probe")


@pytest.fixture(scope="session")
def fresh_gpt2(probe_texts):
    """A factory of new tiny GPT-2 PatchModels (for tests that must start from a model nobody has run)."""
    from interlingua.patching import PatchModel

    tok = bpe_tokenizer(600, probe_texts)

    def make(seed: int = 5):
        return PatchModel.wrap(_gpt2(tok, 32, seed), tok, f"gpt2-fresh-{seed}")

    return make


@pytest.fixture(scope="session")
def small_bpe():
    """The project's tiny GPT-2 BPE (400 tokens, not trained on the probes): names split into many tokens."""
    return tiny_models.train_bpe_tokenizer()


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread per test (restored after): tiny matrices on shared cores run ~10x faster."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
