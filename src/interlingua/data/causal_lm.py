"""A causal language model with its head, and its mean negative log-likelihood on sentences.

What the quality audit, the loss barrier, activation patching and fusion score a model with:
:func:`load_causal_lm` (a spec's causal LM, its PEFT adapter applied unmerged, a GGUF read once through its
converted copy) and :func:`mean_nll`. Mean per-token negative log-likelihood, teacher forced, in nats:

* Each sentence is tokenized on its own with the tokenizer's own special tokens
  (``add_special_tokens=True``: a BOS / ``[CLS]`` the tokenizer prepends is kept as
  context) and truncated to ``max_length`` tokens.
* The first token of every sentence is never predicted (nothing precedes it);
  position ``t`` predicts token ``t + 1``. With ``special_tokens="exclude"``
  (default) targets that are special tokens (a closing EOS / ``[SEP]``, padding)
  are not scored, so the value measures text; ``"include"`` scores them too.
* The value is micro-averaged: summed NLL of every scored token / number of
  scored tokens (float64 sums of float32 log-probabilities).
* Sentences are batched with the representation path's length-sorted batches
  (:func:`interlingua.data.representations.extract.length_sorted_batches`), right
  padded, with an attention mask; padded positions are never scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from interlingua.data.models.spec import ModelSpec

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["load_causal_lm", "mean_nll"]


def mean_nll(
    lm: Any,
    tokenizer: Any,
    sentences: Sequence[str],
    *,
    special_tokens: str = "exclude",
    max_length: int = 512,
    batch_size: int = 16,
    max_tokens: int = 8192,
) -> tuple[float, int, int, int]:
    """(mean NLL in nats per scored token, scored tokens, output size V, truncated sentences) of ``lm``.

    ``lm``: a causal LM returning ``.logits`` (``AutoModelForCausalLM``, or a PEFT
    wrapper of one). See the module docstring for what is scored.
    """
    import torch

    from interlingua.data.representations.extract import length_sorted_batches

    if special_tokens not in ("exclude", "include"):
        raise ValueError(f"special_tokens must be 'exclude' or 'include', got {special_tokens!r}")
    if max_length < 2:
        raise ValueError(f"max_length must be >= 2 (one context and one predicted token), got {max_length}")
    config = getattr(lm, "config", None)
    for attr in ("n_positions", "max_position_embeddings"):  # never index past the position embedding
        limit = getattr(config, attr, None)
        if isinstance(limit, int) and limit >= 2:
            max_length = min(max_length, limit)
            break
    # verbose=False: sentences longer than the model's limit are cut below, not warned about per sentence
    encoded = [list(tokenizer(s, add_special_tokens=True, verbose=False)["input_ids"]) for s in sentences]
    truncated = sum(len(e) > max_length for e in encoded)
    encoded = [e[:max_length] for e in encoded]
    specials = {int(i) for i in tokenizer.all_special_ids} if special_tokens == "exclude" else set()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(lm.parameters()).device
    was_training = lm.training
    lm.eval()
    total, count, vocab = 0.0, 0, -1
    try:
        with torch.no_grad():
            lengths = [max(len(e), 1) for e in encoded]
            for idx in length_sorted_batches(lengths, batch_size, max_tokens):
                idx = [i for i in idx if len(encoded[i]) >= 2]
                if not idx:
                    continue
                width = max(len(encoded[i]) for i in idx)
                ids = torch.full((len(idx), width), int(pad), dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for row, i in enumerate(idx):
                    ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
                    mask[row, : len(encoded[i])] = 1
                ids, mask = ids.to(device), mask.to(device)
                logits = lm(input_ids=ids, attention_mask=mask, use_cache=False).logits
                vocab = int(logits.shape[-1])
                logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
                target = ids[:, 1:]
                scored = mask[:, 1:].bool()
                if specials:
                    scored &= ~torch.isin(target, torch.tensor(sorted(specials), device=device))
                nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
                total += float(nll[scored].double().sum())
                count += int(scored.sum())
    finally:
        lm.train(was_training)
    if vocab < 0:  # nothing to score: the output size from the config
        vocab = int(getattr(getattr(lm, "config", None), "vocab_size", -1) or -1)
    return (total / count if count else math.nan), count, vocab, truncated


def load_causal_lm(
    spec: ModelSpec, cache_dir: str | Path | None = None, tokenizer: str | None = None
) -> tuple[Any, Any]:
    """(causal LM with its head, tokenizer) of ``spec``: the base, its PEFT adapter applied (unmerged).

    ``tokenizer``: a tokenizer folder to use instead of the model's own (to
    measure a model with the tokenizer it is shipped with); default
    ``spec.tokenizer``, else the model's own. ``spec.zoo`` must
    have been resolved to ``path`` / ``adapter`` first. Raises ``ModelError``.
    """
    from interlingua.core.errors import ModelError
    from interlingua.data.models.gguf_cache import parse_gguf_once

    if spec.zoo is not None:
        raise ModelError(f"model {spec.label!r}: resolve `zoo: {spec.zoo}` to its folder first")
    with parse_gguf_once():  # a GGUF's metadata is parsed once, not once per config/weights/tokenizer
        return _load_causal_lm(spec, cache_dir, tokenizer or spec.tokenizer)


def _load_causal_lm(spec: ModelSpec, cache_dir: str | Path | None, tokenizer: str | None) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    from interlingua.data.models.loading import _from_pretrained, _hub_kwargs
    from interlingua.data.models.source import resolve_source

    source = resolve_source(spec, cache_dir)
    converted = _converted_gguf(source, spec, cache_dir)
    convert_to = None if converted is not None else _conversion_key(source, spec, cache_dir)
    source = converted or source
    kwargs = _hub_kwargs(spec, source)
    lm = _from_pretrained(AutoModelForCausalLM, source, getattr(torch, spec.dtype), kwargs)
    tok = _load_tokenizer(spec, tokenizer or source.location, {} if tokenizer else kwargs)
    if convert_to is not None:  # the first load of this GGUF anywhere: later loads (any runner) read the copy
        from interlingua.data.models.gguf_cache import save_converted

        own = tok if not tokenizer else _load_tokenizer(spec, source.location, kwargs)
        save_converted(cast("PreTrainedModel", lm.base_model), own, convert_to, str(source.gguf_file), cache_dir)
    if spec.adapter is not None:
        from peft import PeftModel

        return PeftModel.from_pretrained(lm, spec.adapter, is_trainable=False).eval(), tok
    return lm.eval(), tok


def _load_tokenizer(spec: ModelSpec, location: str, kwargs: dict[str, Any]) -> Any:
    from transformers import AutoTokenizer

    from interlingua.core.errors import ModelError

    try:
        return AutoTokenizer.from_pretrained(location, **kwargs)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"model {spec.label!r}: the tokenizer of {location} cannot be loaded: {exc}") from exc


def _conversion_key(source: Any, spec: ModelSpec, cache_dir: str | Path | None) -> str | None:
    """The GGUF's sha256 when this load should write its converted copy (a local float32 GGUF
    without one, no adapter), else None; an unwritable cache folder fails now, before dequantising.

    Whichever runner loads a GGUF first (quality audit or representations) writes the copy, so the
    file is parsed and dequantised once per run, not once per loader (each parse of Gemma 3's
    262k-token vocabulary takes tens of seconds).
    """
    from interlingua.data.models.cachefiles import writable_dir
    from interlingua.data.models.gguf_cache import converted_folder
    from interlingua.data.models.loading import _weights_sha256

    if source.gguf_file is None or source.kind == "hub" or spec.dtype != "float32" or spec.adapter is not None:
        return None
    sha = _weights_sha256(source)
    if not sha:
        return None
    writable_dir(converted_folder(sha, cache_dir).parent, "converted copy of the GGUF")
    return sha


def _converted_gguf(source: Any, spec: ModelSpec, cache_dir: str | Path | None) -> Any:
    """The float32 copy representation runs converted from this GGUF (no second dequantisation), or None.

    The copy holds the base model; it serves a causal LM only when the output
    layer is tied to the input embedding (``tie_word_embeddings``), else the
    head would be missing and the GGUF is read again.
    """
    import json

    from interlingua.data.models.gguf_cache import find_converted
    from interlingua.data.models.loading import _weights_sha256
    from interlingua.data.models.source import Source

    if source.gguf_file is None or source.kind == "hub" or spec.dtype != "float32":
        return None
    sha = _weights_sha256(source)
    folder = find_converted(sha, cache_dir) if sha else None
    if folder is None:
        return None
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
    return Source(str(folder), "local", None) if tied else None
