"""Model zoo: small models trained from scratch on Bible verses, for tests and experiments.

A *family* holds, for each language, a SentencePiece tokenizer trained on that
language only (saved as an ALBERT tokenizer, as Goldfish models ship theirs)
and a small GPT-2 trained from scratch on that language's verses, saved at
log-spaced steps; and for each English-L2 pair a bilingual tokenizer and two
LoRA adapters over the English model (one trained on both languages, one saved
before any step: an exact identity). Held-out verses are never trained on.

``build_zoo("tiny")`` trains the tiny preset in seconds; ``build_zoo()`` the
default family (four languages) in about a quarter of an hour on 2 cores.
Families are content-addressed under ``<store root>/zoo/<key>/`` and a second
build is a no-op. ``resolve_zoo("eng@step64", root)`` gives the folder of a
piece; see :mod:`interlingua.zoo.naming` for the names.

Reproducibility: a build fixes the CPU thread count (``threads``, default 1:
on shared, oversubscribed cores two threads ran 3-6x slower than one) and
enables ``torch.use_deterministic_algorithms``;
two builds on the same machine with the same thread count are bit-identical.
Another machine, BLAS or thread count may change the last bits of the
weights (float32 reduction order), not the family's key.
"""

from __future__ import annotations

from typing import Any

from interlingua.core.lazy import lazy_loader
from interlingua.zoo.config import PRESETS, ZooConfig, preset
from interlingua.zoo.errors import ZooError

_LAZY = {
    "build_zoo": "build",
    "family_key": "build",
    "load_manifest": "build",
    "verify_family": "build",
    "zoo_root": "build",
    "ZOO_FORMAT": "build",
    "resolve_zoo": "naming",
    "resolve_family": "naming",
    "zoo_model_fields": "naming",
    "parse_zoo_name": "naming",
    "ZooName": "naming",
    "list_families": "naming",
}

__all__ = sorted(["PRESETS", "ZooConfig", "ZooError", "preset", *_LAZY])


_load = lazy_loader(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    return _load(name)
