"""Audits of model artefacts before they are compared: what an adapter really changes.

``audit_adapter(folder, spec)`` (:mod:`interlingua.audit.adapter`) reads a PEFT
LoRA adapter's config and tensors, never the base model's weights, and gives a
verdict: ``identity`` (every ``lora_B`` is zero), ``tiny``, ``active``,
``missing`` or ``unsupported``. ``audit_tokenizer(folder, model_dir=, reference=)``
(:mod:`interlingua.audit.tokenizer`) hashes a tokenizer's files, compares its size
with the embedding rows in the safetensors header and its id -> token strings with
a reference tokenizer: ``mismatched tokenizer`` when its ids do not index the rows
the embedding was trained with. ``audit_quality`` (:mod:`interlingua.audit.quality`):
mean NLL against chance ``ln V``. ``identity_groups`` (:mod:`interlingua.audit.identity`):
specs bit-identical in effective weights or sharing tokenizer files. ``audit(specs)``
(:mod:`interlingua.audit.core`): all of them, one row per spec (``schema.AUDIT_COLUMNS``);
``interlingua audit SPEC...`` (:mod:`interlingua.audit.cli`) writes audit.csv/.parquet.
:mod:`interlingua.audit.contamination`: the share of a training corpus's lines in
another language (``contamination(lines, expected=...)``, ``contamination_table``).
"""

from __future__ import annotations

from interlingua.audit.adapter import (
    DEFAULT_EXACT_LIMIT,
    DEFAULT_TINY_THRESHOLD,
    AdapterAudit,
    ModuleDelta,
    audit_adapter,
)
from interlingua.audit.contamination import ContaminationError, ContaminationResult, contamination_table
from interlingua.audit.core import audit, audit_one, finish_rows
from interlingua.audit.identity import SpecIdentity, identity_groups, spec_identity
from interlingua.audit.quality import (
    DEFAULT_MARGIN,
    CausalLMCache,
    QualityAudit,
    audit_quality,
    load_causal_lm,
    mean_nll,
)
from interlingua.audit.tokenizer import (
    DEFAULT_MIN_AGREEMENT,
    TokenizerAudit,
    audit_tokenizer,
    embedding_rows,
    vocab_agreement,
)

__all__ = [
    "ContaminationError",
    "ContaminationResult",
    "contamination_table",
    "AdapterAudit",
    "ModuleDelta",
    "audit_adapter",
    "DEFAULT_TINY_THRESHOLD",
    "DEFAULT_EXACT_LIMIT",
    "audit",
    "audit_one",
    "finish_rows",
    "SpecIdentity",
    "identity_groups",
    "spec_identity",
    "CausalLMCache",
    "QualityAudit",
    "audit_quality",
    "load_causal_lm",
    "mean_nll",
    "DEFAULT_MARGIN",
    "TokenizerAudit",
    "audit_tokenizer",
    "embedding_rows",
    "vocab_agreement",
    "DEFAULT_MIN_AGREEMENT",
]
