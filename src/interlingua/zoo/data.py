"""Training text of a zoo family: Bible verses, one fixed held-out set of verse ids.

The corpus is loaded once for all the family's languages, so every language
has the same verse ids (a verse empty in any of them is dropped from all).
The held-out ids are a seeded choice that depends only on the seed and the
ids themselves (the ``heldout`` ids with the smallest salted SHA-256), so
they are the same for every language of the family, and a verse id is
either held out for all of its models or for none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from interlingua.core.store import canonical_json, sha256_hex
from interlingua.data.corpora import ParallelCorpus, load_corpus
from interlingua.zoo.config import ZooConfig
from interlingua.zoo.errors import ZooError

__all__ = ["ZooData", "heldout_ids", "ids_sha256", "load_zoo_data"]


def heldout_ids(ids: tuple[str, ...] | list[str], n: int, seed: int) -> tuple[str, ...]:
    """``n`` verse ids chosen by a salted hash of ``seed`` and the id, in corpus order."""
    if n >= len(ids):
        raise ZooError(f"heldout={n} leaves no training verse out of {len(ids)}; use a smaller heldout or more books")

    def rank(verse_id: str) -> bytes:
        return hashlib.sha256(f"interlingua.zoo.heldout\x00{seed}\x00{verse_id}".encode()).digest()

    chosen = set(sorted(ids, key=rank)[:n])
    return tuple(i for i in ids if i in chosen)


def ids_sha256(ids: tuple[str, ...] | list[str]) -> str:
    """SHA-256 of a list of verse ids (order matters)."""
    return sha256_hex(canonical_json(list(ids)))


@dataclass(frozen=True)
class ZooData:
    """The family's verses split into training and held-out rows (same split for every language)."""

    corpus: ParallelCorpus
    heldout: tuple[str, ...]
    train_positions: tuple[int, ...]
    heldout_positions: tuple[int, ...]

    @property
    def train_ids(self) -> tuple[str, ...]:
        return tuple(self.corpus.ids[p] for p in self.train_positions)

    def train_texts(self, language: str) -> list[str]:
        """Training verses of ``language`` in corpus order (never a held-out verse)."""
        rows = self.corpus.texts[language]
        return [rows[p] for p in self.train_positions]

    def heldout_texts(self, language: str) -> list[str]:
        """Held-out verses of ``language`` in corpus order."""
        rows = self.corpus.texts[language]
        return [rows[p] for p in self.heldout_positions]

    def sha256(self) -> str:
        """Hash of the text every model sees: corpus ids and verses of each language, and the split."""
        return sha256_hex(
            canonical_json(
                {
                    "languages": {lang: self.corpus.fingerprint(lang) for lang in self.corpus.languages},
                    "heldout": ids_sha256(self.heldout),
                }
            )
        )

    def describe(self) -> dict:
        """Manifest entry: corpus, sizes, hashes, the held-out ids."""
        return {
            "corpus": self.corpus.name,
            "verses": len(self.corpus),
            "train_verses": len(self.train_positions),
            "heldout_verses": len(self.heldout_positions),
            "sha256": self.sha256(),
            "language_sha256": {lang: self.corpus.fingerprint(lang) for lang in self.corpus.languages},
            "train_ids_sha256": ids_sha256(self.train_ids),
            "heldout_ids": list(self.heldout),
        }


def load_zoo_data(config: ZooConfig) -> ZooData:
    """Load the Bible verses of every language of ``config`` and split off the held-out ids."""
    options: dict = {}
    if config.versions:
        options["versions"] = dict(config.versions)
    if config.books:
        options["books"] = list(config.books)
    corpus = load_corpus(config.corpus, list(config.languages), **options)
    held = heldout_ids(corpus.ids, config.heldout, config.seed)
    held_set = set(held)
    train = tuple(p for p, i in enumerate(corpus.ids) if i not in held_set)
    heldpos = tuple(p for p, i in enumerate(corpus.ids) if i in held_set)
    return ZooData(corpus, held, train, heldpos)
