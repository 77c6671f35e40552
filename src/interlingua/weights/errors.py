"""The weights subpackage's error: bad input to a weight surgery (the message says what to fix)."""

from __future__ import annotations

from interlingua.errors import InterlinguaError

__all__ = ["WeightsError"]


class WeightsError(InterlinguaError, ValueError):
    """A weight rebuild cannot run on these inputs (bad alpha/top_k, missing files, widths that differ)."""
