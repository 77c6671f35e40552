"""``ParallelCorpus``: sentences aligned across languages under stable ids.

Every downstream step (representation extraction, the cache, the paired
similarity measures) relies on row ``i`` meaning the same sentence in every
language, so alignment is checked once, here, at construction time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from interlingua.core.errors import CorpusError, LanguageError
from interlingua.core.languages import normalize_language

__all__ = ["ParallelCorpus"]

_FINGERPRINT_TAG = b"interlingua.ParallelCorpus.v1\x00"


@dataclass(frozen=True, eq=True, repr=False)
class ParallelCorpus:
    """Aligned sentences: ``texts[lang][i]`` translates ``texts[other][i]``.

    Attributes:
        name: a label for reports (e.g. ``"flores:devtest"``).
        ids: stable, unique sentence ids (``"GEN.1.1"``, ``"0"``, ...).
        texts: canonical language code -> sentences aligned with ``ids``.

    Construction normalises language codes, converts the sequences to
    tuples and validates alignment (same length, unique ids, strings only).
    """

    name: str
    ids: tuple[str, ...]
    texts: Mapping[str, tuple[str, ...]] = field(compare=True)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise CorpusError(f"corpus name must be a non-empty string, got {self.name!r}")
        ids = tuple(self.ids)
        for position, sentence_id in enumerate(ids if set(map(type, ids)) - {str} else ()):
            if not isinstance(sentence_id, str):
                raise CorpusError(
                    f"corpus {self.name!r}: sentence id at position {position} is "
                    f"{sentence_id!r} ({type(sentence_id).__name__}); ids must be strings"
                )
        if len(ids) == 0:
            raise CorpusError(
                f"corpus {self.name!r} has no sentences; check the source, the language "
                "selection and any book/row filter"
            )
        if len(set(ids)) != len(ids):
            seen: dict[str, int] = {}
            for position, sentence_id in enumerate(ids):
                if sentence_id in seen:
                    raise CorpusError(
                        f"corpus {self.name!r}: sentence id {sentence_id!r} appears at "
                        f"positions {seen[sentence_id]} and {position}; ids must be unique"
                    )
                seen[sentence_id] = position
        if not isinstance(self.texts, Mapping) or len(self.texts) == 0:
            raise CorpusError(f"corpus {self.name!r} has no languages; pass a mapping language code -> sentences")
        texts: dict[str, tuple[str, ...]] = {}
        for raw_code, sentences in self.texts.items():
            code = normalize_language(raw_code)
            if code in texts:
                raise CorpusError(
                    f"corpus {self.name!r}: language {code} is given twice "
                    f"(once as {raw_code!r}); keep one column per language"
                )
            if isinstance(sentences, str):
                raise CorpusError(
                    f"corpus {self.name!r}: texts[{raw_code!r}] is one string; pass a sequence of sentences"
                )
            row = tuple(sentences)
            if len(row) != len(ids):
                raise CorpusError(
                    f"corpus {self.name!r} is misaligned: {code} has {len(row)} sentences "
                    f"but there are {len(ids)} ids; every language needs one sentence per id"
                )
            for position, sentence in enumerate(row if set(map(type, row)) - {str} else ()):
                if not isinstance(sentence, str):
                    raise CorpusError(
                        f"corpus {self.name!r}: {code} sentence {ids[position]!r} is {type(sentence).__name__}, not str"
                    )
            texts[code] = row
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "texts", MappingProxyType(texts))

    # ------------------------------------------------------------------ views
    @property
    def languages(self) -> tuple[str, ...]:
        """Canonical language codes, in the order the corpus was built with."""
        return tuple(self.texts)

    def __len__(self) -> int:
        return len(self.ids)

    def __hash__(self) -> int:
        return hash((self.name, self.ids, tuple(self.texts.items())))

    def __repr__(self) -> str:
        return f"ParallelCorpus(name={self.name!r}, sentences={len(self)}, languages={list(self.languages)})"

    def _resolve(self, language: str) -> str:
        """Canonical code of ``language`` if this corpus has it, else LanguageError."""
        code = normalize_language(language)
        if code not in self.texts:
            raise LanguageError(
                f"corpus {self.name!r} has no language {language!r} ({code}); available: {', '.join(self.languages)}"
            )
        return code

    def sentences(self, language: str) -> list[str]:
        """The sentences of ``language``, in corpus order (a fresh list)."""
        return list(self.texts[self._resolve(language)])

    # ------------------------------------------------------------ subsetting
    def select(self, languages: Iterable[str] | str) -> ParallelCorpus:
        """A corpus with only ``languages`` (in that order), same ids."""
        if isinstance(languages, str):
            languages = [languages]
        codes = [self._resolve(language) for language in languages]
        if not codes:
            raise LanguageError(f"select() needs at least one language; available: {', '.join(self.languages)}")
        duplicates = sorted({code for code in codes if codes.count(code) > 1})
        if duplicates:
            raise CorpusError(
                f"select(): language(s) {', '.join(duplicates)} listed more than once; list each language once"
            )
        return ParallelCorpus(self.name, self.ids, {code: self.texts[code] for code in codes})

    def take(self, positions: Sequence[int], name: str | None = None) -> ParallelCorpus:
        """A corpus with the rows at ``positions`` (in the given order)."""
        index = [int(p) for p in positions]
        for p in index:
            if not 0 <= p < len(self):
                raise CorpusError(f"take(): position {p} is outside the corpus (0..{len(self) - 1})")
        return ParallelCorpus(
            name or self.name,
            tuple(self.ids[p] for p in index),
            {code: tuple(rows[p] for p in index) for code, rows in self.texts.items()},
        )

    def sample(self, n: int, seed: int) -> ParallelCorpus:
        """``n`` sentences drawn without replacement with ``default_rng(seed)``.

        The drawn rows keep their original corpus order, and the same rows
        are taken in every language, so alignment is preserved.
        """
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise CorpusError(f"sample size must be an integer, got {n!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise CorpusError(f"sample seed must be an integer, got {seed!r}")
        n = int(n)
        if n < 1:
            raise CorpusError(f"sample size must be at least 1, got {n}")
        if n > len(self):
            raise CorpusError(
                f"cannot sample {n} sentences from corpus {self.name!r}: only {len(self)} "
                f"are available; use n <= {len(self)} or a larger corpus/split"
            )
        rng = np.random.default_rng(int(seed))
        positions = np.sort(rng.choice(len(self), size=n, replace=False))
        return self.take(positions.tolist(), name=f"{self.name}[n={n},seed={int(seed)}]")

    # ----------------------------------------------------------- cache keys
    def fingerprint(self, language: str) -> str:
        """SHA-256 (hex) over the ids and the sentences of ``language``.

        Deterministic across processes and platforms (length-prefixed UTF-8,
        no Python ``hash``); any change to an id, a sentence or their order
        changes it. The corpus name is deliberately not part of it.
        """
        code = self._resolve(language)
        digest = hashlib.sha256(_FINGERPRINT_TAG)
        digest.update(len(self.ids).to_bytes(8, "big"))
        for sentence_id, sentence in zip(self.ids, self.texts[code]):
            for part in (sentence_id, sentence):
                data = part.encode("utf-8", "surrogatepass")
                digest.update(len(data).to_bytes(8, "big"))
                digest.update(data)
        return digest.hexdigest()
