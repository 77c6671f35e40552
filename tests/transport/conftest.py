"""Fixtures of the transport tests: tiny GPT-2s of different widths and depths, built once per session.

``gpt2_a``: width 32, 3 blocks, MLP 64, 4 heads. ``gpt2_b``: width 48, 2 blocks, MLP 96, 4 heads (rectangular
against A on every interface). ``gpt2_a_permuted``: A with the MLP units of every block permuted (the same
function; its correspondence to A is that permutation). Weights are drawn with a wider init (0.2) than GPT-2's
0.02 so that sentence-mean activations of different units are far from collinear. ``probe``: 40 invented
parallel sentences per language (English for A, German for B); ``evals``: 12 other ones per language.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("ot") is None:  # pragma: no cover - the transport extra installs POT
    pytest.skip("transport needs POT (pip install pot)", allow_module_level=True)

from fixtures import tiny_models  # noqa: E402

N_PROBE, N_EVAL = 40, 12
MLP_PERMUTATION_SEED = 5


def _gpt2(folder: Path, *, width: int, layers: int, inner: int, seed: int) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tiny_models.train_bpe_tokenizer()
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=64,
        n_embd=width,
        n_layer=layers,
        n_head=4,
        n_inner=inner,
        initializer_range=0.2,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    folder.mkdir(parents=True, exist_ok=True)
    GPT2LMHeadModel(cfg).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _permutations(n_layers: int, width: int) -> list[np.ndarray]:
    rng = np.random.default_rng(MLP_PERMUTATION_SEED)
    return [rng.permutation(width) for _ in range(n_layers)]


@pytest.fixture(scope="session")
def a_mlp_permutations() -> list[np.ndarray]:
    """``perm[l][a]``: the unit of ``gpt2_a_permuted``'s block ``l`` that holds ``gpt2_a``'s MLP unit ``a``."""
    return _permutations(3, 64)


@pytest.fixture(scope="session")
def gpt2_a(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _gpt2(tmp_path_factory.mktemp("transport") / "a", width=32, layers=3, inner=64, seed=21)


@pytest.fixture(scope="session")
def gpt2_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _gpt2(tmp_path_factory.mktemp("transport") / "b", width=48, layers=2, inner=96, seed=22)


@pytest.fixture(scope="session")
def gpt2_a_permuted(tmp_path_factory: pytest.TempPathFactory, gpt2_a: Path, a_mlp_permutations) -> Path:
    """A with donor MLP unit ``perm[l][a]`` holding A's unit ``a`` in block ``l`` (c_fc columns, bias, c_proj rows)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    lm = AutoModelForCausalLM.from_pretrained(gpt2_a)
    perms = a_mlp_permutations
    assert len(perms) == len(lm.transformer.h) and len(perms[0]) == lm.transformer.h[0].mlp.c_fc.weight.shape[1]
    with torch.no_grad():
        for block, perm in zip(lm.transformer.h, perms):
            inv = torch.as_tensor(np.argsort(perm))  # new unit b holds old unit inv[b]
            block.mlp.c_fc.weight.copy_(block.mlp.c_fc.weight[:, inv])
            block.mlp.c_fc.bias.copy_(block.mlp.c_fc.bias[inv])
            block.mlp.c_proj.weight.copy_(block.mlp.c_proj.weight[inv, :])
    folder = tmp_path_factory.mktemp("transport") / "a_permuted"
    lm.save_pretrained(folder)
    AutoTokenizer.from_pretrained(gpt2_a).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def sentences() -> dict[str, list[str]]:
    return tiny_models.parallel_sentences(N_PROBE + N_EVAL, seed=3)


@pytest.fixture(scope="session")
def probe(sentences: dict[str, list[str]]) -> dict[str, list[str]]:
    return {lang: s[:N_PROBE] for lang, s in sentences.items()}


@pytest.fixture(scope="session")
def evals(sentences: dict[str, list[str]]) -> dict[str, list[str]]:
    return {lang: s[N_PROBE:] for lang, s in sentences.items() if lang in ("eng", "deu")}


# the zoo tests' session fixture (the tiny family, built once), reused as tests/audit does
import importlib.util as _ilu  # noqa: E402
import sys as _sys  # noqa: E402

_zspec = _ilu.spec_from_file_location(
    "_interlingua_zoo_conftest", Path(__file__).resolve().parents[1] / "zoo" / "conftest.py"
)
_zoo_conftest = _ilu.module_from_spec(_zspec)
_sys.modules[_zspec.name] = _zoo_conftest
_zspec.loader.exec_module(_zoo_conftest)
tiny_zoo = _zoo_conftest.tiny_zoo
