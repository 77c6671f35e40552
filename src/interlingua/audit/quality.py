"""Quality: is a model (with the tokenizer it is given) a language model at all?

Its mean per-token negative log-likelihood, teacher forced, in nats (:func:`interlingua.data.causal_lm.mean_nll`:
what is scored and how) against chance ``ln V``, with ``V`` the size of the model's output layer (a uniform
guess over every row it can predict). Verdict ``not a language model`` when the
NLL is within ``margin`` nats of chance (or above it), ``ok`` otherwise, and
``unchecked`` when no token was scored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlingua.data.causal_lm import load_causal_lm, mean_nll
from interlingua.data.models.spec import ModelSpec

__all__ = ["CausalLMCache", "QualityAudit", "audit_quality", "DEFAULT_MARGIN"]

DEFAULT_MARGIN = 0.5


@dataclass
class QualityAudit:
    verdict: str  # ok | not a language model | unchecked
    nll: float
    chance: float  # ln V
    vocab: int  # V: rows of the output layer
    n_tokens: int  # scored tokens
    n_sentences: int
    truncated: int  # sentences cut at max_length
    margin: float = DEFAULT_MARGIN
    reason: str = ""


def audit_quality(
    lm: Any, tokenizer: Any, sentences: Sequence[str], *, margin: float = DEFAULT_MARGIN, **options: Any
) -> QualityAudit:
    """Mean NLL of ``lm`` on ``sentences`` against chance ``ln V``; ``options`` go to :func:`mean_nll`."""
    if not (margin >= 0 and math.isfinite(margin)):
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    nll, n, vocab, truncated = mean_nll(lm, tokenizer, sentences, **options)
    chance = math.log(vocab) if vocab > 0 else math.nan
    out = QualityAudit("unchecked", nll, chance, vocab, n, len(sentences), truncated, margin)
    if n == 0:
        out.reason = "no token was scored (no sentence has two tokens)"
    elif nll >= chance - margin:
        out.verdict = "not a language model"
        out.reason = (
            f"{nll:.3f} nats/token is within {margin:g} of chance ln {vocab} = {chance:.3f}: the model, with "
            "this tokenizer, predicts text no better than a uniform guess"
        )
    else:
        out.verdict = "ok"
        out.reason = f"{nll:.3f} nats/token vs chance ln {vocab} = {chance:.3f}"
    return out


class CausalLMCache:
    """Causal LMs for quality audits, each base loaded once: adapters go on and come off it.

    Auditing many adapters (or tokenizers) over one base loads the base once:
    an adapter is applied with ``PeftModel.from_pretrained`` (unmerged) for its
    NLL and removed with ``unload()``, which puts the base's own modules back
    (its weights were never changed). At most one base is held; ``loads``
    counts base loads.
    """

    def __init__(self, cache_dir: str | Path | None = None) -> None:
        self.cache_dir = cache_dir
        self.loads = 0
        self._key: tuple[Any, ...] | None = None
        self._lm: Any = None
        self._tokenizers: dict[str, Any] = {}

    def _base_key(self, spec: ModelSpec) -> tuple[Any, ...]:
        from interlingua.data.models.source import resolve_source

        source = resolve_source(spec, self.cache_dir, assemble=False)
        return (source.kind, source.location, source.gguf_file, spec.revision, spec.dtype, spec.trust_remote_code)

    def release(self) -> None:
        """Drop the held base and tokenizers; collect only when a base was held (a full ``gc.collect`` costs
        ~0.1-1 s in a large process, and the executors release before every task)."""
        import gc

        held = self._lm is not None
        self._key, self._lm = None, None
        self._tokenizers.clear()
        if held:
            gc.collect()

    def quality(self, spec: ModelSpec, sentences: Sequence[str], **options: Any) -> QualityAudit:
        """:func:`audit_quality` of ``spec`` (its adapter and tokenizer applied) on the cached base."""
        from transformers import AutoTokenizer

        from interlingua.core.errors import ModelError

        key = self._base_key(spec)
        base_spec = spec.model_copy(update={"adapter": None, "tokenizer": None})
        if key != self._key:
            self.release()
            self._lm, own = load_causal_lm(base_spec, self.cache_dir)
            self._key = key
            self._tokenizers[""] = own
            self.loads += 1
        tok_key = spec.tokenizer or ""
        if tok_key not in self._tokenizers:
            try:
                self._tokenizers[tok_key] = AutoTokenizer.from_pretrained(tok_key)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ModelError(f"model {spec.label!r}: the tokenizer {tok_key} cannot be loaded: {exc}") from exc
        lm = self._lm
        if spec.adapter is not None:
            from peft import PeftModel

            lm = PeftModel.from_pretrained(self._lm, spec.adapter, is_trainable=False).eval()
        try:
            return audit_quality(lm, self._tokenizers[tok_key], sentences, **options)
        finally:
            if spec.adapter is not None:
                self._lm = lm.unload()  # the base's own modules back, unchanged
