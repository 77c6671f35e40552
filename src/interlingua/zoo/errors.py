"""The zoo's error: a model-family problem the user can fix (the message says how)."""

from __future__ import annotations

from interlingua.core.errors import ModelError

__all__ = ["ZooError"]


class ZooError(ModelError):
    """A zoo family cannot be built, found or resolved; the message says what to do."""
