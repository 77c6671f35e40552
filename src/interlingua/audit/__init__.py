"""Audits of model artefacts before they are compared: what an adapter really changes.

``audit_adapter(folder, spec)`` (:mod:`interlingua.audit.adapter`) reads a PEFT
LoRA adapter's config and tensors, never the base model's weights, and gives a
verdict: ``identity`` (every ``lora_B`` is zero), ``tiny``, ``active``,
``missing`` or ``unsupported``.
"""

from __future__ import annotations

from .adapter import DEFAULT_EXACT_LIMIT, DEFAULT_TINY_THRESHOLD, AdapterAudit, ModuleDelta, audit_adapter

__all__ = ["AdapterAudit", "ModuleDelta", "audit_adapter", "DEFAULT_TINY_THRESHOLD", "DEFAULT_EXACT_LIMIT"]
