"""Word-aligned token-level pooling: one row per aligned word pair, every layer.

``word_aligned_pool(model, sentences_a, sentences_b, alignments)`` turns word
alignments (from :func:`interlingua.alignment.simalign.align`, or any
:class:`~interlingua.alignment.simalign.SentenceAlignment` with character
spans) into paired representations:

- for each link ``(i, j)`` of each sentence pair, side a's row is the mean of
  ``model``'s sub-word hidden states whose characters overlap word ``i``'s span
  (offset mappings, whitespace trimmed), side b's the mean of ``model_b``'s
  (default ``model``) states over word ``j``; every hidden state 0..L;
- special tokens (BOS/CLS/SEP/EOS..., zero-width offsets) are never averaged;
  the model still sees them, as in sentence extraction;
- a link whose word no token of a model covers (rare: truncation, a
  tokenizer that drops characters) is dropped and counted (``n_dropped``);
- rows are ordered by sentence, then link (sorted ``(i, j)``); a word linked
  twice (``itermax``) gives two rows;
- the shuffled control is ONE permutation of the rows,
  :func:`interlingua.analysis.inference.permutation.shuffle_permutation` ``(n_rows, seed)``,
  returned with the seed; apply it to side b (``reps_b[:, permutation]``) at
  every layer. Pass the pair's seed (e.g. ``pair_seed(seeds.control, a, b)``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from interlingua.alignment.simalign import SentenceAlignment, word_states
from interlingua.alignment.words import AlignmentError

__all__ = ["WordAlignedPooling", "WordRow", "word_aligned_pool"]


@dataclass(frozen=True)
class WordRow:
    """Where a row comes from: sentence index, word indices and texts, character spans."""

    sentence: int
    index_a: int
    index_b: int
    word_a: str
    word_b: str
    span_a: tuple[int, int]
    span_b: tuple[int, int]


@dataclass(frozen=True)
class WordAlignedPooling:
    """``reps_a`` ``(n_hidden_states_a, rows, d_a)``, ``reps_b`` ``(n_hidden_states_b, rows, d_b)``
    float32; ``rows`` one :class:`WordRow` each; ``n_links`` links in the input,
    ``n_dropped`` of them dropped (uncovered word), so ``len(rows) == n_links - n_dropped``;
    ``permutation`` the shuffled control drawn from ``seed``.
    Unpacks as ``reps_a, reps_b, rows = result``."""

    reps_a: np.ndarray
    reps_b: np.ndarray
    rows: tuple[WordRow, ...]
    n_links: int
    n_dropped: int
    dropped_a: int
    dropped_b: int
    permutation: np.ndarray
    seed: int

    def __iter__(self) -> Iterator[Any]:
        return iter((self.reps_a, self.reps_b, self.rows))

    @property
    def shuffled_b(self) -> np.ndarray:
        """``reps_b`` with rows in the control's order (the same at every layer)."""
        return self.reps_b[:, self.permutation]


def _check_alignments(sentences: Sequence[str], alignments: Sequence[SentenceAlignment], side: str) -> None:
    for s, (text, al) in enumerate(zip(sentences, alignments)):
        words = al.words_a if side == "a" else al.words_b
        for w in words:
            if not (0 <= w.start < w.end <= len(text)) or text[w.start : w.end] != w.text:
                raise AlignmentError(
                    f"alignment {s}: word {w.text!r} at {w.start}:{w.end} is not in sentence "
                    f"{side} ({text[:60]!r}); align these very sentences"
                )
        n = len(words)
        for i, j in al.links:
            k = i if side == "a" else j
            if not 0 <= k < n:
                raise AlignmentError(f"alignment {s}: link ({i}, {j}) indexes no word of side {side}")


def word_aligned_pool(
    model: Any,
    sentences_a: Sequence[str],
    sentences_b: Sequence[str],
    alignments: Sequence[SentenceAlignment],
    *,
    model_b: Any = None,
    seed: int = 0,
    batch_size: int = 16,
    max_length: int = 512,
    first_position: bool = True,
) -> WordAlignedPooling:
    """Pool aligned words at every layer (module docstring). ``model`` encodes side a,
    ``model_b`` (default ``model``) side b. ``first_position=False`` leaves each sentence's
    first position out (:func:`~interlingua.alignment.simalign.word_states`; a run's default)."""
    for name, x in (("sentences_a", sentences_a), ("sentences_b", sentences_b), ("alignments", alignments)):
        if isinstance(x, str):
            raise AlignmentError(f"{name} must be a list, not one string")
    if len(sentences_a) == 0:
        raise AlignmentError("no sentences to pool; pass at least one aligned sentence pair")
    if not len(sentences_a) == len(sentences_b) == len(alignments):
        raise AlignmentError(
            f"{len(sentences_a)} sentences a, {len(sentences_b)} sentences b and "
            f"{len(alignments)} alignments; pass one alignment per sentence pair"
        )
    _check_alignments(sentences_a, alignments, "a")
    _check_alignments(sentences_b, alignments, "b")
    enc_b = model if model_b is None else model_b
    # only linked words are pooled (memory ~ rows x layers x d, not every word of the corpus)
    from interlingua.alignment.links import linked_words, word_rows

    used_a, used_b = linked_words(alignments, "a"), linked_words(alignments, "b")
    sa = word_states(
        model,
        sentences_a,
        [[al.words_a[i] for i in u] for al, u in zip(alignments, used_a)],
        batch_size=batch_size,
        max_length=max_length,
        first_position=first_position,
    )
    sb = word_states(
        enc_b,
        sentences_b,
        [[al.words_b[j] for j in u] for al, u in zip(alignments, used_b)],
        batch_size=batch_size,
        max_length=max_length,
        first_position=first_position,
    )
    kept = word_rows(alignments, np.concatenate(sa.covered), np.concatenate(sb.covered))
    rows: list[WordRow] = []
    for s, (i, j) in zip(kept.sentence.tolist(), kept.links):
        wa, wb = alignments[s].words_a[i], alignments[s].words_b[j]
        rows.append(WordRow(s, i, j, wa.text, wb.text, (wa.start, wa.end), (wb.start, wb.end)))
    n_links, n_dropped, dropped_a, dropped_b = kept.n_links, kept.n_dropped, kept.dropped_a, kept.dropped_b
    if len(rows) < 2:
        raise AlignmentError(
            f"only {len(rows)} aligned word rows ({n_links} links, {n_dropped} dropped); "
            "a representation comparison needs at least 2: align more sentences"
        )

    def gather(states: Any, index: np.ndarray) -> np.ndarray:
        return np.concatenate(states.vectors, axis=1)[:, index].astype(np.float32, copy=False)

    from interlingua.analysis.inference.permutation import shuffle_permutation

    return WordAlignedPooling(
        gather(sa, kept.index_a),
        gather(sb, kept.index_b),
        tuple(rows),
        n_links,
        n_dropped,
        dropped_a,
        dropped_b,
        shuffle_permutation(len(rows), seed),
        int(seed),
    )
