"""SimAlign-style word alignment from contextual embeddings (Jalili Sabet et al., 2020).

Pipeline (our implementation of the method described in the paper):

1. Words: :func:`interlingua.alignment.words.segment` per sentence (character
   spans, punctuation dropped).
2. Word vectors: the sentence is tokenized once with the model's own special
   tokens (fast tokenizer, ``return_offsets_mapping=True``); the hidden state
   ``layer`` (0 = embedding output, k = output of block k) of every sub-word
   token whose character range (trimmed of surrounding whitespace) overlaps
   the word's span is averaged into the word vector (:func:`word_states`).
   Special tokens (the tokenizer's ``all_special_ids`` except ``<unk>``, and
   zero-width offsets) never count. A word that no token covers (e.g. cut by
   truncation) gets no vector and is never aligned.
3. Similarity: ``S[i, j] = (cos(x_i, y_j) + 1) / 2`` in ``[0, 1]`` (as SimAlign,
   so that discounting by ``alpha`` always lowers a score). Optional
   distortion (SimAlign's, off by default):
   ``S[i, j] *= 1 - distortion * (p_i - q_j)^2`` with ``p = linspace(0, 1, m)``,
   ``q = linspace(0, 1, n)`` the relative word positions.
4. Links from ``S`` (:func:`align_matrix`):

   - ``"fwd"``: every source word ``i`` to ``argmax_j S[i, j]``;
   - ``"rev"``: every target word ``j`` to ``argmax_i S[i, j]``;
   - ``"inter"`` (alias ``"argmax"``, SimAlign's "Argmax"): the intersection
     of fwd and rev, i.e. mutual argmax: ``(i, j)`` with ``j`` the best of row
     ``i`` AND ``i`` the best of column ``j``;
   - ``"itermax"`` (SimAlign's "IterMax"): round 1 is ``inter``; each further
     round (up to ``max_iter`` rounds in all, default 2, SimAlign's setting)
     reweights ``S``: a pair whose two words are both already aligned gets 0
     and cannot be linked; a pair with exactly one aligned word is multiplied
     by ``alpha`` (default 0.9); a pair with neither aligned is kept as is;
     the mutual-argmax links of the reweighted matrix that involve at least
     one still unaligned word are added. Rounds stop early when nothing is
     added or when every source or every target word is aligned.
     SimAlign's reference code (``simalign`` 0.4, ``iter_max``) additionally
     returns plain ``inter``, with no further round, when either sentence has
     at most 2 words; ``short_sentence_inter=True`` reproduces that (with it,
     interlingua's links equal the package's, ``benchmarks/bench_alignment.py``).
     The default is False: the rule is not part of the method as described,
     it only matters when the shorter side has exactly 2 words (with 1 word
     round 1 already aligns it), and there it leaves a word unaligned that
     IterMax exists to align; keeping the default also keeps stored
     alignments unchanged.
   - ``"match"`` (SimAlign's "Match"): the maximum-weight one-to-one matching
     of ``S`` (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``).

   Ties in an argmax go to the lowest index. ``itermax`` contains ``inter``
   by construction; swapping the two sentences transposes ``S`` and so
   transposes ``inter``, ``itermax`` and ``match`` and exchanges fwd/rev.

Any model that :func:`interlingua.data.models.load_model` loads can be the
encoder. SimAlign's best setting uses a bidirectional encoder (mBERT/XLM-R);
a causal decoder's state of a word has seen only the words to its left,
which makes it a weaker aligner (measure it with :mod:`interlingua.alignment.aer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from interlingua.alignment.config import middle_layer
from interlingua.alignment.words import AlignmentError, Word, segment
from interlingua.data.representations.depth import states_through
from interlingua.data.representations.extract import (
    _forward_kwargs,
    _model_device,
    _model_position_limit,
    length_sorted_batches,
    special_token_ids,
)
from interlingua.data.representations.sources import blocks_of, forward_module

if TYPE_CHECKING:
    from interlingua.alignment.config import AlignmentSpec

__all__ = [
    "METHODS",
    "AlignOptions",
    "SentenceAlignment",
    "WordStates",
    "align",
    "align_matrix",
    "align_states",
    "default_layer",
    "similarity_matrix",
    "token_word_map",
    "word_states",
]

METHODS: tuple[str, ...] = ("fwd", "rev", "inter", "argmax", "itermax", "match")
Link = tuple[int, int]


@dataclass(frozen=True)
class SentenceAlignment:
    """Word links of one sentence pair: ``(i, j)`` = ``words_a[i]`` to ``words_b[j]``, sorted."""

    words_a: tuple[Word, ...]
    words_b: tuple[Word, ...]
    links: tuple[Link, ...]


@dataclass(frozen=True)
class WordStates:
    """Word vectors of each sentence: ``vectors[s]`` is ``(len(layers), n_words, d)`` float32,
    ``covered[s]`` ``(n_words,)`` bool (False: no token covered the word, its vector is 0),
    ``n_tokens[s]`` the number of sub-word tokens averaged into each word."""

    layers: tuple[int, ...]
    vectors: list[np.ndarray]
    covered: list[np.ndarray]
    n_tokens: list[np.ndarray]


def default_layer(loaded: Any) -> int:
    """The middle hidden state: ``num_layers // 2`` (0 = embeddings; ``alignment.config.middle_layer``)."""
    return middle_layer(int(loaded.n_hidden_states) - 1)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise AlignmentError(f"unknown alignment method {method!r}; use one of {', '.join(METHODS)}")
    return "inter" if method == "argmax" else method


def similarity_matrix(x: np.ndarray, y: np.ndarray, distortion: float = 0.0) -> np.ndarray:
    """``(cos(x_i, y_j) + 1) / 2`` for word vectors ``x (m, d)``, ``y (n, d)``, with
    SimAlign's optional distortion ``1 - distortion * (p_i - q_j)^2`` (see module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise AlignmentError(f"word vectors must be (m, d) and (n, d), got {x.shape} and {y.shape}")
    xn = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    yn = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    sim = (xn @ yn.T + 1.0) / 2.0
    if distortion:
        p = np.linspace(0.0, 1.0, x.shape[0])[:, None]
        q = np.linspace(0.0, 1.0, y.shape[0])[None, :]
        sim = sim * (1.0 - distortion * (p - q) ** 2)
    return sim


def _mutual(sim: np.ndarray) -> np.ndarray:
    m, n = sim.shape
    fwd = np.zeros((m, n), dtype=bool)
    fwd[np.arange(m), sim.argmax(axis=1)] = True
    rev = np.zeros((m, n), dtype=bool)
    rev[sim.argmax(axis=0), np.arange(n)] = True
    return fwd & rev


def align_matrix(
    sim: np.ndarray,
    method: str = "itermax",
    *,
    max_iter: int = 2,
    alpha: float = 0.9,
    short_sentence_inter: bool = False,
) -> set[Link]:
    """Links ``(i, j)`` that ``method`` draws from a similarity matrix (module docstring).
    ``short_sentence_inter``: ``itermax`` returns ``inter`` when ``min(m, n) <= 2`` (as the
    ``simalign`` package does)."""
    method = _check_method(method)
    sim = np.asarray(sim, dtype=np.float64)
    if sim.ndim != 2:
        raise AlignmentError(f"similarity matrix must be 2-D, got shape {sim.shape}")
    m, n = sim.shape
    if m == 0 or n == 0:
        return set()
    if not np.isfinite(sim).all():
        raise AlignmentError("similarity matrix has NaN or inf")
    if max_iter < 1:
        raise AlignmentError(f"max_iter must be >= 1, got {max_iter}")
    if method == "fwd":
        return {(i, int(j)) for i, j in enumerate(sim.argmax(axis=1))}
    if method == "rev":
        return {(int(i), j) for j, i in enumerate(sim.argmax(axis=0))}
    if method == "match":
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(sim, maximize=True)
        return {(int(i), int(j)) for i, j in zip(rows, cols)}
    links = _mutual(sim)
    if method == "itermax" and not (short_sentence_inter and min(m, n) <= 2):
        for _ in range(max_iter - 1):
            row_done = np.asarray(links.any(axis=1))
            col_done = np.asarray(links.any(axis=0))
            if row_done.all() or col_done.all():
                break
            n_done = row_done[:, None].astype(int) + col_done[None, :].astype(int)
            weight = np.where(n_done == 0, 1.0, np.where(n_done == 1, alpha, 0.0))
            new = _mutual(sim * weight) & (n_done < 2)
            if not (new & ~links).any():
                break
            links |= new
    return {(int(i), int(j)) for i, j in zip(*np.nonzero(links))}


# ------------------------------------------------------------------ sub-words to words


def _fast_tokenizer(tokenizer: Any) -> Any:
    if not getattr(tokenizer, "is_fast", False):
        raise AlignmentError(
            f"word alignment needs character offsets from a fast (Rust) tokenizer; "
            f"{type(tokenizer).__name__} is not one. Load the model with a tokenizer.json "
            "(PreTrainedTokenizerFast)"
        )
    return tokenizer


def token_word_map(
    text: str, offsets: Sequence[tuple[int, int]], words: Sequence[Word], special: Sequence[bool]
) -> list[list[int]]:
    """Token indices covering each word: tokens whose character range, trimmed of
    whitespace, overlaps the word's span. Special and zero-width tokens never count."""
    spans: list[tuple[int, int]] = []
    for (s, e), is_special in zip(offsets, special):
        s, e = int(s), int(e)
        if is_special:
            spans.append((0, 0))
            continue
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        spans.append((s, e))
    out: list[list[int]] = []
    for w in words:
        out.append([t for t, (s, e) in enumerate(spans) if s < e and s < w.end and e > w.start])
    return out


def word_states(
    loaded: Any,
    sentences: Sequence[str],
    words: Sequence[Sequence[Word]],
    layers: Sequence[int] | None = None,
    *,
    batch_size: int = 16,
    max_tokens: int = 4096,
    max_length: int = 512,
    first_position: bool = True,
) -> WordStates:
    """Average each word's sub-word hidden states at ``layers`` (default: all).

    ``loaded`` is a :class:`~interlingua.data.models.LoadedModel` (or anything with
    ``.model``, ``.tokenizer``, ``.n_hidden_states``). Sentences longer than
    ``max_length`` tokens (or the model's limit) are truncated; words beyond
    the cut are left uncovered. ``first_position=False`` never averages the
    sentence's first position: in a causal model without a BOS token it is the
    first word's token and the attention sink, whose massive activation would
    dominate every comparison of word rows (a word made of that token alone is
    then uncovered).
    """
    if len(sentences) != len(words):
        raise AlignmentError(f"{len(sentences)} sentences but {len(words)} word lists; pass one list per sentence")
    n_states = int(loaded.n_hidden_states)
    layers = tuple(range(n_states)) if layers is None else tuple(int(k) for k in layers)
    bad = [k for k in layers if not 0 <= k < n_states]
    if bad or not layers:
        raise AlignmentError(
            f"layers {bad or '[]'} out of range: this model has hidden states 0..{n_states - 1} (0 = embeddings)"
        )
    tokenizer = _fast_tokenizer(loaded.tokenizer)
    model = forward_module(loaded.model)
    blocks = blocks_of(loaded, model)
    limit = _model_position_limit(model)
    max_length = min(max_length, limit) if limit else max_length
    specials = special_token_ids(tokenizer)
    enc = tokenizer(
        list(sentences),
        add_special_tokens=True,
        return_offsets_mapping=True,
        truncation=True,
        max_length=max_length,
        verbose=False,
    )
    ids_all = [list(x) for x in enc["input_ids"]]
    maps: list[list[list[int]]] = []
    for s, text in enumerate(sentences):
        special = [i in specials for i in ids_all[s]]
        if not first_position and special:
            special[0] = True
        maps.append(token_word_map(text, enc["offset_mapping"][s], words[s], special))
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = int(pad) if pad is not None else 0
    device = _model_device(model)
    kwargs = _forward_kwargs(model)
    vectors: list[np.ndarray] = [np.zeros(0)] * len(sentences)
    covered = [np.array([len(m) > 0 for m in mp], dtype=bool) for mp in maps]
    counts = [np.array([len(m) for m in mp], dtype=np.int64) for mp in maps]
    lengths = [max(1, len(x)) for x in ids_all]
    with torch.inference_mode():
        for batch in length_sorted_batches(lengths, batch_size, max_tokens):
            width = max(lengths[i] for i in batch)
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, i in enumerate(batch):
                input_ids[r, : len(ids_all[i])] = torch.tensor(ids_all[i], dtype=torch.long)
                mask[r, : len(ids_all[i])] = 1
            ids_dev, mask_dev = input_ids.to(device), mask.to(device)

            def forward(flag: bool, ids: torch.Tensor = ids_dev, m: torch.Tensor = mask_dev) -> Any:
                return model(input_ids=ids, attention_mask=m, **{**kwargs, "output_hidden_states": flag})

            # the forward stops after the deepest requested layer (the default, the middle one, halves it)
            hidden = states_through(forward, blocks, n_states, max(layers))
            stack = torch.stack([hidden[k].float() for k in layers])  # (L, B, T, d)
            del hidden
            for r, i in enumerate(batch):
                # each word's mean summed in float64, one word at a time: the bits do not depend on the
                # thread count (a BLAS product over all words did, so a Ray worker's differed from a local run)
                vec64 = torch.zeros((len(layers), len(maps[i]), stack.shape[-1]), dtype=torch.float64)
                for w, toks in enumerate(maps[i]):
                    if toks:
                        vec64[:, w] = stack[:, r, toks].double().sum(dim=1).cpu() / len(toks)
                vec = vec64.float().numpy()
                if not np.isfinite(vec).all():
                    raise AlignmentError(f"NaN or inf in the word states of sentence {i}; use float32 or bfloat16")
                vectors[i] = vec.astype(np.float32, copy=False)
    d = int(next((v.shape[-1] for v in vectors if v.ndim == 3), 0))
    vectors = [v if v.ndim == 3 else np.zeros((len(layers), 0, d), np.float32) for v in vectors]
    return WordStates(layers, vectors, covered, counts)


# ------------------------------------------------------------------ the aligner


def _check_pair(sentences_a: Sequence[str], sentences_b: Sequence[str]) -> None:
    for name, sents in (("sentences_a", sentences_a), ("sentences_b", sentences_b)):
        if isinstance(sents, str):
            raise AlignmentError(f"{name} must be a list of sentences, not one string")
    if len(sentences_a) == 0 or len(sentences_b) == 0:
        raise AlignmentError("no sentences to align; pass at least one sentence pair")
    if len(sentences_a) != len(sentences_b):
        raise AlignmentError(
            f"{len(sentences_a)} sentences on side a but {len(sentences_b)} on side b; "
            "pass parallel lists (row i translates row i)"
        )
    bad = [i for i, s in enumerate(list(sentences_a) + list(sentences_b)) if not isinstance(s, str)]
    if bad:
        raise AlignmentError("sentences must be strings")


@dataclass(frozen=True)
class AlignOptions:
    """How the aligner reads word states and links words (SimAlign's settings, module docstring), validated once
    and passed down whole; a run builds it from its ``alignment:`` section (:meth:`from_spec`)."""

    #: the hidden state read (0 = embedding output); None: :func:`default_layer` of the encoder
    layer: int | None = None
    #: the link rule (:data:`METHODS`)
    method: str = "itermax"
    #: ``itermax``: rounds in all (round 1 is ``inter``), at least 1
    max_iter: int = 2
    #: ``itermax``: the factor on a pair with exactly one word already aligned
    alpha: float = 0.9
    #: SimAlign's distortion on the similarity, ``1 - distortion * (p_i - q_j)^2`` (0: off)
    distortion: float = 0.0
    #: ``itermax`` returns ``inter`` when a sentence has at most 2 words (as the ``simalign`` package does)
    short_sentence_inter: bool = False
    #: sentences per forward pass
    batch_size: int = 16
    #: pool the sentence's first position into its word (:func:`word_states`)
    first_position: bool = True

    def __post_init__(self) -> None:
        _check_method(self.method)
        if self.max_iter < 1:
            raise AlignmentError(f"max_iter must be >= 1, got {self.max_iter}")

    @classmethod
    def from_spec(cls, spec: AlignmentSpec, *, layer: int | None, batch_size: int) -> AlignOptions:
        """The options a run's ``alignment:`` section sets (``layer``: resolved for the encoder; ``batch_size``:
        the run's)."""
        return cls(
            layer=layer, method=spec.method, batch_size=batch_size, first_position=spec.first_position == "include"
        )


def align(
    loaded: Any,
    sentences_a: Sequence[str],
    sentences_b: Sequence[str],
    *,
    language_a: str | None = None,
    language_b: str | None = None,
    words_a: Sequence[Sequence[Word]] | None = None,
    words_b: Sequence[Sequence[Word]] | None = None,
    loaded_b: Any = None,
    options: AlignOptions | None = None,
) -> list[SentenceAlignment]:
    """Align the words of each sentence pair with ``loaded`` at ``options.layer``
    (default :func:`default_layer`); see the module docstring for the method.

    Words come from :func:`~interlingua.alignment.words.segment` with the
    languages given, unless ``words_a``/``words_b`` are passed. ``loaded_b``
    (default ``loaded``) encodes side b, e.g. a second model at the same layer.
    ``options``: layer, link rule, batch size and first position
    (:class:`AlignOptions`; default its defaults).
    """
    opts = AlignOptions() if options is None else options
    layer, batch_size, first_position = opts.layer, opts.batch_size, opts.first_position
    _check_pair(sentences_a, sentences_b)
    if words_a is None:
        words_a = [segment(s, language_a) for s in sentences_a]
    if words_b is None:
        words_b = [segment(s, language_b) for s in sentences_b]
    if len(words_a) != len(sentences_a) or len(words_b) != len(sentences_b):
        raise AlignmentError("pass one word list per sentence")
    enc_b = loaded if loaded_b is None else loaded_b
    k = default_layer(loaded) if layer is None else int(layer)
    states_a = word_states(loaded, sentences_a, words_a, [k], batch_size=batch_size, first_position=first_position)
    states_b = word_states(enc_b, sentences_b, words_b, [k], batch_size=batch_size, first_position=first_position)
    return align_states(states_a, states_b, words_a, words_b, options=opts)


def align_states(
    states_a: WordStates,
    states_b: WordStates,
    words_a: Sequence[Sequence[Word]],
    words_b: Sequence[Sequence[Word]],
    *,
    layer_index: int = 0,
    options: AlignOptions | None = None,
) -> list[SentenceAlignment]:
    """:func:`align` from precomputed :func:`word_states` (``layer_index`` indexes
    ``states.layers``), so that several layers and methods share one forward pass. Of ``options`` the link rule is
    read (method, ``max_iter``, ``alpha``, distortion, ``short_sentence_inter``); the states were read already."""
    opts = AlignOptions() if options is None else options
    method, max_iter, alpha, distortion = opts.method, opts.max_iter, opts.alpha, opts.distortion
    short_sentence_inter = opts.short_sentence_inter
    out: list[SentenceAlignment] = []
    for s in range(len(states_a.vectors)):
        ia = np.flatnonzero(states_a.covered[s])
        ib = np.flatnonzero(states_b.covered[s])
        links: set[Link] = set()
        if len(ia) and len(ib):
            sim = similarity_matrix(
                states_a.vectors[s][layer_index][ia], states_b.vectors[s][layer_index][ib], distortion
            )
            links = {
                (int(ia[i]), int(ib[j]))
                for i, j in align_matrix(
                    sim, method, max_iter=max_iter, alpha=alpha, short_sentence_inter=short_sentence_inter
                )
            }
        out.append(SentenceAlignment(tuple(words_a[s]), tuple(words_b[s]), tuple(sorted(links))))
    return out
