"""The weights subpackage's error: bad input to a weight surgery (the message says what to fix)."""

from __future__ import annotations

from pathlib import Path

from interlingua.core.errors import InterlinguaError

__all__ = ["WeightsError", "unwritable"]


class WeightsError(InterlinguaError, ValueError):
    """A weight rebuild cannot run on these inputs (bad alpha/top_k, missing files, widths that differ)."""


def unwritable(parent: Path, exc: OSError) -> WeightsError:
    """The error of a build folder that cannot be created under ``parent`` (for :func:`builds.build_folder`)."""
    return WeightsError(f"cannot write under {parent} ({exc.strerror or exc}); choose a writable output folder")
