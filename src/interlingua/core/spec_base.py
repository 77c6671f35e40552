"""The pieces every config section is built of: a strict model, a side, a pair, a language key.

Capability packages build their sections from these (and :mod:`interlingua.pipeline.config` its core keys), so a
section's module imports nothing of the pipeline.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from interlingua.core.errors import InterlinguaError

__all__ = ["PairSpec", "SideSpec", "Strict", "canonical_language", "known_languages"]


class Strict(BaseModel):
    """A config section: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SideSpec(Strict):
    """One side of a comparison: a model reading one language."""

    model: str
    language: str


class PairSpec(Strict):
    a: SideSpec
    b: SideSpec


def canonical_language(code: str) -> str:
    """Canonical language code for duplicate checks (unknown codes compare as written)."""
    from interlingua.core.languages import normalize_language

    try:
        return normalize_language(code)
    except InterlinguaError:
        return code


def known_languages(codes: list[str]) -> list[str]:
    """The canonical form of each corpus language code (what a section's language is checked against)."""
    return [canonical_language(c) for c in codes]
