"""Word alignments as stored data, and the rows they give: what a run keeps between tasks.

A run aligns a language pair once (an ``align`` task), stores the alignment
as JSON (:func:`to_json` / :func:`from_json`), then each model pools the
linked words of its side (:func:`linked_words`) in its own extraction, and a
comparison gathers the aligned rows of the two sides (:func:`word_rows`).
A pair on one language uses :func:`identity_alignments`: every word is
linked to itself (the same text, segmented once).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from interlingua.alignment.simalign import SentenceAlignment
from interlingua.alignment.words import AlignmentError, Word, segment

__all__ = ["WordRows", "from_json", "identity_alignments", "linked_words", "to_json", "word_rows"]


def to_json(alignments: Sequence[SentenceAlignment]) -> list[dict[str, Any]]:
    """One ``{"a": [[text, start, end], ...], "b": [...], "links": [[i, j], ...]}`` per sentence pair."""
    return [
        {
            "a": [[w.text, w.start, w.end] for w in al.words_a],
            "b": [[w.text, w.start, w.end] for w in al.words_b],
            "links": [[int(i), int(j)] for i, j in al.links],
        }
        for al in alignments
    ]


def from_json(data: Sequence[dict[str, Any]]) -> list[SentenceAlignment]:
    """The inverse of :func:`to_json`."""
    try:
        return [
            SentenceAlignment(
                tuple(Word(str(t), int(s), int(e)) for t, s, e in d["a"]),
                tuple(Word(str(t), int(s), int(e)) for t, s, e in d["b"]),
                tuple(sorted((int(i), int(j)) for i, j in d["links"])),
            )
            for d in data
        ]
    except (KeyError, TypeError, ValueError) as err:
        raise AlignmentError(
            f"a stored word alignment is damaged ({err}); delete it from the cache to recompute"
        ) from None


def identity_alignments(sentences: Sequence[str], language: str | None) -> list[SentenceAlignment]:
    """Each sentence against itself: every word (``segment(sentence, language)``) linked to itself."""
    out = []
    for text in sentences:
        words = tuple(segment(text, language))
        out.append(SentenceAlignment(words, words, tuple((i, i) for i in range(len(words)))))
    return out


def linked_words(alignments: Sequence[SentenceAlignment], side: str) -> list[list[int]]:
    """Per sentence, the sorted indices of side ``a`` or ``b`` words that some link uses."""
    if side not in ("a", "b"):
        raise AlignmentError(f"side must be 'a' or 'b', got {side!r}")
    k = 0 if side == "a" else 1
    return [sorted({link[k] for link in al.links}) for al in alignments]


@dataclass(frozen=True)
class WordRows:
    """Aligned rows over two sides' flattened linked-word arrays.

    ``index_a`` / ``index_b``: for each kept link (by sentence, then sorted
    link), its position in side a's / b's flat array of linked words (the
    order of :func:`linked_words`); ``sentence``: the sentence of each row;
    ``n_links`` links in all, ``n_dropped`` of them dropped because a side's
    tokens cover no character of the word (``dropped_a``, ``dropped_b``).
    """

    index_a: np.ndarray
    index_b: np.ndarray
    sentence: np.ndarray
    links: tuple[tuple[int, int], ...]
    n_links: int
    n_dropped: int
    dropped_a: int
    dropped_b: int


def word_rows(alignments: Sequence[SentenceAlignment], covered_a: np.ndarray, covered_b: np.ndarray) -> WordRows:
    """The rows two sides share: links whose two words are both covered.

    ``covered_a`` / ``covered_b``: flat boolean arrays over each side's linked
    words (:func:`linked_words` order), as extraction stores them.
    """
    used_a, used_b = linked_words(alignments, "a"), linked_words(alignments, "b")
    for side, used, covered in (("a", used_a, covered_a), ("b", used_b, covered_b)):
        if sum(len(u) for u in used) != len(covered):
            raise AlignmentError(
                f"side {side} holds {len(covered)} word vectors but the alignment links "
                f"{sum(len(u) for u in used)} of its words; the stored side belongs to another alignment"
            )
    index_a: list[int] = []
    index_b: list[int] = []
    sentence: list[int] = []
    links: list[tuple[int, int]] = []
    n_links = n_dropped = dropped_a = dropped_b = 0
    off_a = off_b = 0
    for s, al in enumerate(alignments):
        pos_a = {w: off_a + k for k, w in enumerate(used_a[s])}
        pos_b = {w: off_b + k for k, w in enumerate(used_b[s])}
        for i, j in sorted(al.links):
            n_links += 1
            ok_a, ok_b = bool(covered_a[pos_a[i]]), bool(covered_b[pos_b[j]])
            dropped_a += not ok_a
            dropped_b += not ok_b
            if not (ok_a and ok_b):
                n_dropped += 1
                continue
            index_a.append(pos_a[i])
            index_b.append(pos_b[j])
            sentence.append(s)
            links.append((i, j))
        off_a += len(used_a[s])
        off_b += len(used_b[s])
    return WordRows(
        np.asarray(index_a, dtype=np.int64),
        np.asarray(index_b, dtype=np.int64),
        np.asarray(sentence, dtype=np.int64),
        tuple(links),
        n_links,
        n_dropped,
        dropped_a,
        dropped_b,
    )
