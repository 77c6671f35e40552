"""Errors and warnings of the mapping package.

Every bad input raises a :class:`MapInputError` (an
:class:`~interlingua.core.errors.InterlinguaError` and a ``ValueError``) whose
message says what is wrong and what to do. Non-finite values raise
:class:`MapNonFiniteError`, which is also an
:class:`~interlingua.core.errors.NonFiniteError`, so code that catches either family
catches it. A map file that cannot be read back raises :class:`MapFileError`.
"""

from __future__ import annotations

from interlingua.core.errors import InterlinguaError, NonFiniteError

__all__ = ["MapInputError", "MapNonFiniteError", "MapFileError", "MapWarning"]


class MapInputError(InterlinguaError, ValueError):
    """Inputs to a map estimator or to the held-out evaluation are unusable (shapes, widths, too few rows)."""


class MapNonFiniteError(MapInputError, NonFiniteError):
    """NaN or inf in the inputs or outputs of a map; the message names the side, the layer and the rows."""


class MapFileError(InterlinguaError, OSError):
    """A saved map is missing, damaged, edited, or not an interlingua map file."""


class MapWarning(UserWarning):
    """A map changed what it computes (minimum-norm solution, non-unique rotation, reduced k); the message says why."""
