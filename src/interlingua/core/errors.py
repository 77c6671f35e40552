"""Errors that say what is wrong and what to do.

Every error interlingua raises on bad input is an :class:`InterlinguaError`,
so the CLI can print it as one clear line instead of a traceback.
"""

from __future__ import annotations


class InterlinguaError(Exception):
    """Base class: a problem with the user's input or environment."""


class ConfigError(InterlinguaError, ValueError):
    """The run specification is invalid (typo, missing field, bad value)."""


class CorpusError(InterlinguaError, ValueError):
    """Parallel text is missing, misaligned, too small or unreadable."""


class LanguageError(CorpusError, KeyError):
    """A language code is unknown or not available in the chosen corpus."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ModelError(InterlinguaError, OSError):
    """A model or tokenizer cannot be found or loaded."""


class UnsupportedArchitectureError(ModelError):
    """interlingua does not know where this architecture keeps its blocks."""


class MeasureInputError(InterlinguaError, ValueError):
    """Inputs to a similarity measure are unusable (shapes, NaNs, too few rows)."""


class NonFiniteError(InterlinguaError, ValueError):
    """NaN or inf appeared in activations or results; the message says where."""


class OutputError(InterlinguaError, OSError):
    """The output folder cannot be written, or writing would replace files the user owns."""


class StoreError(InterlinguaError, OSError):
    """The content-addressed store (cache folder) cannot be created, read or written."""


class AuditError(InterlinguaError):
    """``audit.strict``: an audited model is not what it claims to be (the message lists the verdicts)."""
