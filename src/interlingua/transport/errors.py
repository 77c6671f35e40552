"""The transport subpackage's error: bad input to a cross-architecture fusion (the message says what to fix)."""

from __future__ import annotations

from interlingua.errors import InterlinguaError

__all__ = ["TransportError"]


class TransportError(InterlinguaError, ValueError):
    """A transport fusion cannot run on these inputs (no shared interface, alpha outside [0, 1], too few probes...)."""
