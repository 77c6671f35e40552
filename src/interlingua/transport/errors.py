"""The transport subpackage's error and warning: bad input to a cross-architecture fusion, a failed control."""

from __future__ import annotations

from interlingua.core.errors import InterlinguaError

__all__ = ["TransportError", "TransportWarning"]


class TransportError(InterlinguaError, ValueError):
    """A transport fusion cannot run on these inputs (no shared interface, alpha outside [0, 1], too few probes...)."""


class TransportWarning(UserWarning):
    """A fusion ran but a control says its result cannot be read as a finding (the self-plan control failed)."""
