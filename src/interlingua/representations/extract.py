"""Sentence representations at every layer, in one forward pass per batch.

``extract_representations`` tokenizes once, sorts sentences by length so that
batches carry little padding, caps each batch by a token budget, runs the BASE
transformer (never the LM head: Gemma 3's 262k-row head would dominate the
cost) with ``output_hidden_states=True`` and pools every layer on the fly into
preallocated ``(n_hidden_states, n, d)`` float32 arrays, scattered back to the
input order. Token states of a batch are freed before the next batch runs.

Hidden-state convention (docs/protocol.md, "Poolings"): index 0 is the embedding
output, index k the output of block k; Hugging Face applies the final layer
norm to the LAST entry (GPT-2 ``ln_f``, Llama/Gemma ``norm``), so layer L is
post-norm while layers 1..L-1 are raw residual-stream states.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from interlingua.errors import CorpusError, ModelError
from interlingua.representations.pooling import pool, validate_poolings

__all__ = [
    "TokenizedSentences",
    "extract_representations",
    "forward_module",
    "length_sorted_batches",
    "tokenize_for_extraction",
]

DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_TOKENS = 8192


@dataclass(frozen=True)
class TokenizedSentences:
    """Token ids per sentence (special tokens included) and which were truncated."""

    input_ids: list[list[int]]
    truncated: tuple[int, ...]
    max_length: int

    @property
    def n_tokens(self) -> int:
        """Number of real (non-pad) tokens the model will see."""
        return sum(len(ids) for ids in self.input_ids)


def forward_module(model: torch.nn.Module) -> torch.nn.Module:
    """Return the base transformer of a Hugging Face model with a head, else ``model``.

    ``load_model`` already hands over the base module; this guard keeps a
    ``*ForCausalLM`` passed by a user from computing logits nobody reads.
    """
    from transformers import PreTrainedModel

    if isinstance(model, PreTrainedModel):
        base = model.base_model
        if isinstance(base, torch.nn.Module) and base is not model:
            return base
    return model


def _model_position_limit(model: torch.nn.Module) -> int | None:
    """Largest sequence the model's position embeddings accept, if it declares one."""
    config = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def tokenize_for_extraction(
    tokenizer: Any, sentences: Sequence[str], max_length: int
) -> TokenizedSentences:
    """Tokenize with the tokenizer's own special tokens, truncating to ``max_length``.

    The tokenizer decides its prefix/suffix tokens (Goldfish's ``[CLS]``,
    Gemma's ``<bos>``); long sentences are re-tokenized with
    ``truncation=True`` so that those special tokens survive truncation.
    """
    if max_length < 1:
        raise CorpusError(f"max_length must be >= 1, got {max_length}; use e.g. 512")
    bad = [i for i, s in enumerate(sentences) if not isinstance(s, str)]
    if bad:
        raise CorpusError(
            f"sentences {bad[:10]} are not strings; pass a list of str (one per sentence)"
        )
    if not sentences:
        return TokenizedSentences([], (), max_length)
    full = tokenizer(
        list(sentences), add_special_tokens=True, truncation=False, verbose=False
    )["input_ids"]
    ids = [list(x) for x in full]
    long = tuple(i for i, x in enumerate(ids) if len(x) > max_length)
    if long:
        cut = tokenizer(
            [sentences[i] for i in long],
            add_special_tokens=True,
            truncation=True,
            max_length=max_length,
            verbose=False,
        )["input_ids"]
        for i, x in zip(long, cut):
            ids[i] = list(x)
    empty = [i for i, x in enumerate(ids) if len(x) == 0]
    if empty:
        raise CorpusError(
            f"sentences {empty[:10]} have no tokens (empty text?); a pooled vector of "
            "nothing is undefined, so drop or fill them before extracting"
        )
    return TokenizedSentences(ids, long, max_length)


def length_sorted_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int
) -> list[list[int]]:
    """Group sentence indices, longest first, into batches of at most ``batch_size``
    sentences and ``max_tokens`` padded tokens (a single sentence always fits)."""
    if batch_size < 1 or max_tokens < 1:
        raise CorpusError(
            f"batch_size ({batch_size}) and max_tokens ({max_tokens}) must be >= 1"
        )
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and (len(current) >= batch_size or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _forward_kwargs(model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments that turn off the KV cache when the forward accepts it."""
    params = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"output_hidden_states": True, "return_dict": True}
    if "use_cache" in params:
        extra["use_cache"] = False
    return extra


def extract_representations(
    loaded: Any,
    sentences: Sequence[str],
    poolings: str | Sequence[str],
    *,
    max_length: int = 512,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Pool every hidden state of ``loaded.model`` for each sentence.

    ``loaded`` is any object with ``.model`` (a transformer returning
    ``hidden_states``), ``.tokenizer`` (right padding) and ``.n_hidden_states``.
    Returns ``{pooling: array (n_hidden_states, n, hidden)}`` float32 in the
    order of ``sentences``. ``max_tokens`` caps ``batch_size * longest`` per
    batch so that long sentences run in smaller batches; sentences longer than
    ``max_length`` tokens (or the model's position limit) are truncated with a
    warning giving their count.
    """
    names = validate_poolings(poolings)
    model = forward_module(loaded.model)
    tokenizer = loaded.tokenizer
    n_states = int(loaded.n_hidden_states)
    limit = _model_position_limit(model)
    effective = min(max_length, limit) if limit else max_length

    tok = tokenize_for_extraction(tokenizer, sentences, effective)
    n = len(tok.input_ids)
    if tok.truncated:
        warnings.warn(
            f"{len(tok.truncated)} of {n} sentences are longer than {effective} tokens "
            f"and were truncated (first: {list(tok.truncated[:5])}); raise max_length "
            "(up to the model's position limit) to keep them whole",
            UserWarning,
            stacklevel=2,
        )
    if n == 0:
        raise CorpusError("no sentences to extract; pass at least one sentence")

    pad_id = getattr(tokenizer, "pad_token_id", None)
    pad_id = int(pad_id) if pad_id is not None else 0
    device = _model_device(model)
    kwargs = _forward_kwargs(model)
    lengths = [len(x) for x in tok.input_ids]
    batches = length_sorted_batches(lengths, batch_size, max_tokens)

    out: dict[str, np.ndarray] = {}
    bar = tqdm(total=n, unit="sent", desc="hidden states", disable=not progress, leave=False)
    try:
        with torch.inference_mode():
            for batch in batches:
                width = max(lengths[i] for i in batch)
                input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    ids = tok.input_ids[i]
                    input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                    mask[row, : len(ids)] = 1
                input_ids = input_ids.to(device)
                mask = mask.to(device)
                result = model(input_ids=input_ids, attention_mask=mask, **kwargs)
                hidden = getattr(result, "hidden_states", None)
                if hidden is None or len(hidden) != n_states:
                    got = "none" if hidden is None else len(hidden)
                    raise ModelError(
                        f"model returned {got} hidden states, expected {n_states} "
                        "(num_layers + 1); pass the base transformer that accepts "
                        "output_hidden_states=True"
                    )
                stacked = torch.stack(tuple(hidden)).float()  # (L+1, B, T, d)
                del result, hidden
                index = np.asarray(batch)
                for name in names:
                    vectors = pool(stacked, mask, name).cpu().numpy()
                    if name not in out:
                        out[name] = np.empty((n_states, n, vectors.shape[-1]), dtype=np.float32)
                    out[name][:, index, :] = vectors
                del stacked
                bar.update(len(batch))
    finally:
        bar.close()
    return out
