"""The error of the interventions package."""

from __future__ import annotations

from interlingua.core.errors import InterlinguaError

__all__ = ["InterventionError"]


class InterventionError(InterlinguaError, ValueError):
    """Bad input to a probe or a patch: unknown language, relation or condition, a layer out of
    range, a map missing for a patched layer, a subject the tokenizer cannot locate, ..."""
