"""``audit(specs)``: one row per model spec (schema :data:`interlingua.audit.columns.AUDIT_COLUMNS`).

For each spec: the adapter audit (when it has an adapter), the tokenizer audit
(its files, size against the embedding rows, id-by-id agreement with the
reference), the quality audit (when sentences are given: this loads the
model, one at a time) and the identity groups across all specs. Specs are
resolved first (``zoo:`` names to folders, tokenwise merges built), so bad
input fails before any work. A run's ``audit:`` section runs :func:`audit_one`
per model as a task and :func:`finish_rows` at assembly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from interlingua.audit.adapter import DEFAULT_TINY_THRESHOLD, audit_adapter
from interlingua.audit.identity import SpecIdentity, identity_groups, spec_identity
from interlingua.audit.quality import DEFAULT_MARGIN, CausalLMCache
from interlingua.audit.tokenizer import DEFAULT_MIN_AGREEMENT, audit_tokenizer
from interlingua.data.models.spec import ModelSpec

__all__ = ["audit", "audit_one", "finish_rows", "BAD_ADAPTER", "BAD_TOKENIZER", "BAD_QUALITY"]

BAD_ADAPTER = frozenset({"identity", "tiny", "missing", "unsupported"})
BAD_TOKENIZER = frozenset({"mismatched tokenizer", "missing"})
BAD_QUALITY = frozenset({"not a language model"})


def _reference_for(spec: ModelSpec, reference: Any, adapter_base: str, folder: Path | None = None) -> Any:
    if isinstance(reference, Mapping):
        return reference.get(spec.label)
    if reference is not None:
        return reference
    # a tokenwise merge's embedding was rebuilt for the tokenizer in its own folder, not its backbone's
    if folder is not None and (folder / "tokenwise_merge.json").is_file():
        return folder
    # default: the base model's own tokenizer, when the adapter records a local base that is another folder
    if adapter_base and Path(adapter_base).expanduser().is_dir():
        return Path(adapter_base).expanduser()
    return None


def audit_one(
    spec: ModelSpec,
    *,
    corpus_sentences: Sequence[str] | None = None,
    reference: Any = None,
    cache_dir: str | Path | None = None,
    tiny_threshold: float = DEFAULT_TINY_THRESHOLD,
    min_agreement: float = DEFAULT_MIN_AGREEMENT,
    margin: float = DEFAULT_MARGIN,
    special_tokens: str = "exclude",
    max_length: int = 512,
    batch_size: int = 16,
    lm_cache: CausalLMCache | None = None,
) -> tuple[dict[str, Any], SpecIdentity]:
    """The audit row of one resolved spec (no identity groups yet: they need every spec) and its identity.

    ``lm_cache``: keeps the last base loaded across calls (many adapters over
    one base load it once); without it the model is loaded and released here.

    The row's ``_bad`` entry lists the bad findings; :func:`finish_rows` turns
    it into ``bad`` and ``verdict`` once identity groups are known.
    """
    from interlingua.data.models.source import resolve_source

    source = resolve_source(spec, cache_dir, assemble=False)
    notes: list[str] = []
    bad: list[str] = []
    row: dict[str, Any] = {
        "model": spec.label,
        "path": f"package:{spec.package}" if spec.package else source.location,
        "adapter": spec.adapter or "",
        "tiny_threshold": tiny_threshold,
    }
    adapter_verdict = None
    base_recorded = ""
    if spec.adapter is not None:
        a = audit_adapter(spec.adapter, spec, tiny_threshold=tiny_threshold, cache_dir=cache_dir)
        adapter_verdict = a.verdict
        row.update(
            adapter_verdict=a.verdict,
            adapter_reason=a.reason,
            peft_type=a.peft_type,
            lora_r=a.r,
            lora_alpha=a.alpha,
            target_modules=",".join(a.target_modules),
            modules_to_save=",".join(a.modules_to_save),
            adapter_modules=json.dumps(a.module_rows()),
            max_abs_lora_b=a.max_abs_b,
            max_abs_delta=a.max_abs_delta,
            delta_method=a.delta_method,
            adapter_base_recorded=a.base_recorded,
            adapter_base_check=a.base_check,
        )
        if a.verdict in BAD_ADAPTER:
            bad.append(f"adapter {a.verdict}")
        if a.base_check == "mismatched" or a.base_check.startswith("error"):
            bad.append(f"adapter base {a.base_check.split(':')[0]}")
        base_recorded = a.base_recorded
    if source.kind == "local" and source.gguf_file is None:
        folder = Path(source.location)
        ref = _reference_for(spec, reference, base_recorded, folder)
        # a tokenizer given to the model (`tokenizer:`) is checked against the model's own
        read_with = Path(spec.tokenizer).expanduser() if spec.tokenizer else folder
        t = audit_tokenizer(
            read_with, model_dir=folder, reference=ref if ref is not None else folder, min_agreement=min_agreement
        )
        row.update(
            tokenizer_verdict=t.verdict,
            tokenizer_reason=t.reason,
            tokenizer_sha256=t.tokenizer_sha256,
            vocab_size=t.vocab_size,
            embedding_rows=t.embedding_rows,
            special_tokens=json.dumps(t.special_tokens),
            reference_tokenizer=t.reference,
            agree=t.agree,
            compared=t.compared,
            agree_share=t.agree_share,
        )
        if t.verdict in BAD_TOKENIZER:
            bad.append(t.verdict if t.verdict != "missing" else "tokenizer missing")
    else:
        row["tokenizer_verdict"] = "unchecked"
        notes.append(f"tokenizer not audited: the {source.kind} model's files are not a local safetensors folder")
    if corpus_sentences is not None:
        models = lm_cache if lm_cache is not None else CausalLMCache(cache_dir)
        try:
            q = models.quality(
                spec,
                corpus_sentences,
                margin=margin,
                special_tokens=special_tokens,
                max_length=max_length,
                batch_size=batch_size,
            )
        finally:
            if lm_cache is None:
                models.release()
        row.update(
            quality_verdict=q.verdict,
            quality_reason=q.reason,
            nll=q.nll,
            chance_nll=q.chance,
            nll_margin=q.margin,
            n_tokens=q.n_tokens,
            n_sentences=q.n_sentences,
        )
        if q.verdict in BAD_QUALITY:
            bad.append(q.verdict)
    identity = spec_identity(spec, adapter_verdict=adapter_verdict, cache_dir=cache_dir)
    row["_bad"] = bad
    row["note"] = "; ".join(notes)
    return row, identity


#: The audit columns a reader sees first (the CLI's table, the report's audit section), in this order.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "verdict",
    "adapter_verdict",
    "max_abs_delta",
    "tokenizer_verdict",
    "agree",
    "compared",
    "nll",
    "chance_nll",
    "weights_group",
    "tokenizer_group",
)


def finish_rows(rows: Sequence[dict[str, Any]], identities: Sequence[SpecIdentity]) -> pd.DataFrame:
    """Identity groups across all rows, each row's confounds, ``bad`` and ``verdict``: the audit table.

    ``verdict`` lists the row's own bad findings and the confounds that are faults
    (:mod:`interlingua.audit.identity`: not those the config asked for, which the note names).
    """
    from interlingua.audit.columns import AUDIT_COLUMNS
    from interlingua.core.schema import result_table

    out = []
    for row, ident in zip(rows, identity_groups(list(identities))):
        row = dict(row)
        bad = list(row.pop("_bad", [])) + ident.faults
        if ident.intended:  # listed in confounds, but what the config asked for: not a fault of this model
            said = f"as the config asks, not counted in the verdict: {', '.join(ident.intended)}"
            row["note"] = "; ".join(s for s in (row.get("note", ""), said) if s)
        row.update(
            weights_group=ident.weights_group,
            tokenizer_group=ident.tokenizer_group,
            effective_sha256=ident.effective_key,
            confounds="; ".join(ident.confounds),
            bad=bool(bad),
            verdict="; ".join(bad) if bad else "ok",
        )
        out.append(row)
    return result_table(out, AUDIT_COLUMNS)


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
    """Audit ``specs``; returns a DataFrame with :data:`~interlingua.audit.columns.AUDIT_COLUMNS`, one row per spec.

    ``reference``: the tokenizer every spec's tokenizer is compared with (a
    folder or loaded tokenizer), or a mapping label -> reference; default: the
    adapter's recorded base when it is a local folder, else the model's own
    (only the embedding-rows check applies then). ``corpus_sentences``: when
    given, the mean NLL of each model on them (models are loaded one at a
    time). Specs naming zoo pieces or tokenwise merges are resolved first
    (merges are built into the store). Raises
    :class:`~interlingua.core.errors.InterlinguaError` for specs that cannot be
    resolved (missing folders, unknown zoo names, absent packages).
    """
    from interlingua.core.store import Store
    from interlingua.data.models.source import resolve_source
    from interlingua.pipeline.resolve import resolve_models

    store = Store(zoo_root if zoo_root is not None else cache_dir)
    resolved = resolve_models(list(specs), store)
    for s in resolved:  # every spec's files must be found before any work
        resolve_source(s, cache_dir, assemble=False)
    rows, identities = [], []
    lm_cache = CausalLMCache(cache_dir)
    # specs over the same base one after another: each base is loaded once
    order = sorted(range(len(resolved)), key=lambda i: (str(resolved[i].path or resolved[i].package), i))
    by_index: dict[int, tuple[dict[str, Any], SpecIdentity]] = {}
    try:
        for i in order:
            by_index[i] = audit_one(
                resolved[i],
                corpus_sentences=corpus_sentences,
                reference=reference,
                cache_dir=cache_dir,
                tiny_threshold=tiny_threshold,
                min_agreement=min_agreement,
                margin=margin,
                special_tokens=special_tokens,
                max_length=max_length,
                batch_size=batch_size,
                lm_cache=lm_cache,
            )
    finally:
        lm_cache.release()
    for i in range(len(resolved)):
        rows.append(by_index[i][0])
        identities.append(by_index[i][1])
    return finish_rows(rows, identities)
