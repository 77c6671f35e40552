"""``audit(specs)``: one row per model spec (schema :data:`interlingua.schema.AUDIT_COLUMNS`).

For each spec: the adapter audit (when it has an adapter), the tokenizer audit
(its files, size against the embedding rows, id-by-id agreement with the
reference), the quality audit (when sentences are given: this loads the
model, one at a time) and the identity groups across all specs. Specs are
resolved first (``zoo:`` names to folders), so bad input fails before any work.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ..models.spec import ModelSpec
from .adapter import DEFAULT_TINY_THRESHOLD, audit_adapter
from .identity import identity_groups, spec_identity
from .quality import DEFAULT_MARGIN, audit_quality, load_causal_lm
from .tokenizer import DEFAULT_MIN_AGREEMENT, audit_tokenizer

__all__ = ["audit", "resolve_spec", "BAD_ADAPTER", "BAD_TOKENIZER", "BAD_QUALITY"]

BAD_ADAPTER = frozenset({"identity", "tiny", "missing", "unsupported"})
BAD_TOKENIZER = frozenset({"mismatched tokenizer", "missing"})
BAD_QUALITY = frozenset({"not a language model"})


def resolve_spec(spec: ModelSpec, zoo_root: str | Path | None = None) -> ModelSpec:
    """``spec`` with a ``zoo:`` name replaced by its folder (and adapter); other specs unchanged."""
    if spec.zoo is None:
        return spec
    from ..zoo import zoo_model_fields

    fields = zoo_model_fields(spec.zoo, zoo_root)
    fields["name"] = spec.name or fields["name"]
    return ModelSpec(**fields, dtype=spec.dtype, device=spec.device)


def _reference_for(spec: ModelSpec, reference: Any, adapter_base: str) -> Any:
    if isinstance(reference, Mapping):
        return reference.get(spec.label)
    if reference is not None:
        return reference
    # default: the base model's own tokenizer, when the adapter records a local base that is another folder
    if adapter_base and Path(adapter_base).expanduser().is_dir():
        return Path(adapter_base).expanduser()
    return None


def audit(
    specs: Sequence[ModelSpec],
    *,
    corpus_sentences: Sequence[str] | None = None,
    reference: Any = None,
    cache_dir: str | Path | None = None,
    zoo_root: str | Path | None = None,
    tiny_threshold: float = DEFAULT_TINY_THRESHOLD,
    min_agreement: float = DEFAULT_MIN_AGREEMENT,
    margin: float = DEFAULT_MARGIN,
    special_tokens: str = "exclude",
    max_length: int = 512,
    batch_size: int = 16,
) -> pd.DataFrame:
    """Audit ``specs``; returns a DataFrame with :data:`~interlingua.schema.AUDIT_COLUMNS`, one row per spec.

    ``reference``: the tokenizer every spec's tokenizer is compared with (a
    folder or loaded tokenizer), or a mapping label -> reference; default: the
    adapter's recorded base when it is a local folder, else the model's own
    (only the embedding-rows check applies then). ``corpus_sentences``: when
    given, the mean NLL of each model on them (models are loaded one at a
    time). Raises :class:`~interlingua.errors.InterlinguaError` for specs that
    cannot be resolved (missing folders, unknown zoo names, absent packages).
    """
    from ..models.source import resolve_source
    from ..schema import AUDIT_COLUMNS, result_table

    zoo_root = zoo_root if zoo_root is not None else cache_dir
    resolved = [resolve_spec(s, zoo_root) for s in specs]
    sources = [resolve_source(s, cache_dir, assemble=False) for s in resolved]
    rows: list[dict[str, Any]] = []
    identities = []
    for spec, source in zip(resolved, sources):
        notes: list[str] = []
        bad: list[str] = []
        row: dict[str, Any] = {
            "model": spec.label,
            "path": f"package:{spec.package}" if spec.package else source.location,
            "adapter": spec.adapter or "",
            "tiny_threshold": tiny_threshold,
        }
        adapter_verdict = None
        if spec.adapter is not None:
            a = audit_adapter(spec.adapter, spec, tiny_threshold=tiny_threshold, cache_dir=cache_dir)
            adapter_verdict = a.verdict
            row.update(
                adapter_verdict=a.verdict, adapter_reason=a.reason, peft_type=a.peft_type, lora_r=a.r,
                lora_alpha=a.alpha, target_modules=",".join(a.target_modules),
                modules_to_save=",".join(a.modules_to_save), adapter_modules=json.dumps(a.module_rows()),
                max_abs_lora_b=a.max_abs_b, max_abs_delta=a.max_abs_delta, delta_method=a.delta_method,
                adapter_base_recorded=a.base_recorded, adapter_base_check=a.base_check,
            )
            if a.verdict in BAD_ADAPTER:
                bad.append(f"adapter {a.verdict}")
            if a.base_check == "mismatched" or a.base_check.startswith("error"):
                bad.append(f"adapter base {a.base_check.split(':')[0]}")
            base_recorded = a.base_recorded
        else:
            base_recorded = ""
        if source.kind == "local" and source.gguf_file is None:
            folder = Path(source.location)
            ref = _reference_for(spec, reference, base_recorded)
            t = audit_tokenizer(folder, model_dir=folder, reference=ref if ref is not None else folder,
                                min_agreement=min_agreement)
            row.update(
                tokenizer_verdict=t.verdict, tokenizer_reason=t.reason, tokenizer_sha256=t.tokenizer_sha256,
                vocab_size=t.vocab_size, embedding_rows=t.embedding_rows, special_tokens=json.dumps(t.special_tokens),
                reference_tokenizer=t.reference, agree=t.agree, compared=t.compared, agree_share=t.agree_share,
            )
            if t.verdict in BAD_TOKENIZER:
                bad.append(t.verdict if t.verdict != "missing" else "tokenizer missing")
        else:
            row["tokenizer_verdict"] = "unchecked"
            notes.append(f"tokenizer not audited: the {source.kind} model's files are not a local safetensors folder")
        if corpus_sentences is not None:
            lm, tok = load_causal_lm(spec, cache_dir)
            try:
                q = audit_quality(lm, tok, corpus_sentences, margin=margin, special_tokens=special_tokens,
                                  max_length=max_length, batch_size=batch_size)
            finally:
                del lm, tok
                gc.collect()
            row.update(quality_verdict=q.verdict, quality_reason=q.reason, nll=q.nll, chance_nll=q.chance,
                       nll_margin=q.margin, n_tokens=q.n_tokens, n_sentences=q.n_sentences)
            if q.verdict in BAD_QUALITY:
                bad.append(q.verdict)
        identities.append(spec_identity(spec, adapter_verdict=adapter_verdict, cache_dir=cache_dir))
        row["_bad"] = bad
        row["note"] = "; ".join(notes)
        rows.append(row)
    for row, ident in zip(rows, identity_groups(identities)):
        bad = row.pop("_bad") + ident.confounds
        row.update(weights_group=ident.weights_group, tokenizer_group=ident.tokenizer_group,
                   effective_sha256=ident.effective_key, confounds="; ".join(ident.confounds),
                   bad=bool(bad), verdict="; ".join(bad) if bad else "ok")
    return result_table(rows, AUDIT_COLUMNS)
