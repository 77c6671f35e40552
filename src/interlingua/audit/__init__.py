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
(:mod:`interlingua.audit.core`): all of them, one row per spec (``audit.columns.AUDIT_COLUMNS``);
``interlingua audit SPEC...`` (:mod:`interlingua.commands.audit`) writes audit.csv/.parquet.
:mod:`interlingua.audit.contamination`: the share of a training corpus's lines in
another language (``contamination(lines, expected=...)``, ``contamination_table``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.core.lazy import lazy_loader

if TYPE_CHECKING:  # the names below are imported on first use (``interlingua --help`` builds the audit parser)
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
    from interlingua.audit.quality import DEFAULT_MARGIN, CausalLMCache, QualityAudit, audit_quality
    from interlingua.audit.tokenizer import (
        DEFAULT_MIN_AGREEMENT,
        TokenizerAudit,
        audit_tokenizer,
        embedding_rows,
        vocab_agreement,
    )
    from interlingua.data.causal_lm import load_causal_lm, mean_nll

# name -> submodule: importing the package (as the command line's parser does) loads none of them
_LAZY = {
    "DEFAULT_EXACT_LIMIT": "adapter",
    "DEFAULT_TINY_THRESHOLD": "adapter",
    "AdapterAudit": "adapter",
    "ModuleDelta": "adapter",
    "audit_adapter": "adapter",
    "ContaminationError": "contamination",
    "ContaminationResult": "contamination",
    "contamination_table": "contamination",
    "audit": "core",
    "audit_one": "core",
    "finish_rows": "core",
    "SpecIdentity": "identity",
    "identity_groups": "identity",
    "spec_identity": "identity",
    "DEFAULT_MARGIN": "quality",
    "CausalLMCache": "quality",
    "QualityAudit": "quality",
    "audit_quality": "quality",
    "load_causal_lm": "quality",
    "mean_nll": "quality",
    "DEFAULT_MIN_AGREEMENT": "tokenizer",
    "TokenizerAudit": "tokenizer",
    "audit_tokenizer": "tokenizer",
    "embedding_rows": "tokenizer",
    "vocab_agreement": "tokenizer",
}


_load = lazy_loader(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    return _load(name)


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
