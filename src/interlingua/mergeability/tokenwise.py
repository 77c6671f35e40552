"""Tokenwise merge: an English backbone with an embedding table over a bilingual vocabulary.

A published set of "bilingual merged" checkpoints lost their merged weights:
only the bilingual tokenizer was uploaded, and its ids do not index the
English embedding rows, so the model scores near chance. This module rebuilds
the merge from (English model, L2 model, bilingual tokenizer). The original
recipe is unknown; what follows is a RECONSTRUCTION, stated exactly so that a
build can be reproduced and judged.

The rule (:func:`tokenwise_merge_table`)
----------------------------------------
Row ``b`` of the new table belongs to the bilingual token ``t`` with id ``b``.
``E`` is the English model's embedding table, ``L`` the L2 model's;
``E[t]`` / ``L[t]`` is the row of the token with the same string ``t`` in that
model's own vocabulary.

1. **Special tokens** (the bilingual tokenizer's special ids) map by role,
   never mixed and never by string: bilingual pad -> the English pad row, unk
   -> unk, bos -> bos, eos -> eos, cls -> cls, sep -> sep, mask -> mask (an id
   holding several roles takes the first of that order the English tokenizer
   has), then any other special token -> the English special token of the
   same string. A role the English tokenizer lacks takes the English ``<unk>``
   row (counted in ``special_fallback``). Source ``special``.
2. **Matching** of every other token is by exact token string, as each
   tokenizer stores it (``convert_ids_to_tokens`` / ``get_vocab``). For the
   SentencePiece (unigram) tokenizers of the zoo, and Goldfish, this is the
   piece string with its word-boundary marker ``'▁'`` (U+2581): ``'▁the'``
   (word-initial) and ``'the'`` (word-internal) are different tokens, and
   nothing is lower-cased or normalised. The English and L2 tokenizers' own
   special tokens never match a string. Tokenizers of other kinds are compared
   the same way; their strings are only comparable when all three tokenizers
   use the same convention (e.g. all byte-level BPE with ``'Ġ'``).
3. **L2 top-K.** Only the ``K`` highest-ranked L2 pieces take part; the others
   are treated as absent from the L2 vocabulary. Candidates are the L2
   tokens that are not special; they are ranked by ``l2_rank`` (higher
   first), ties by lower id. ``top_k`` is an ``int`` count ``K`` in
   ``0 .. len(l2_vocab)`` (a count above the number of candidates takes all
   of them) or a ``float`` fraction in ``[0, 1]``, ``K = floor(top_k * N)``
   with ``N`` the number of candidates (``1.0`` = all; ``0`` / ``0.0`` = no L2
   row at all). Note ``1`` (int) is one piece, ``1.0`` every piece.
   :func:`tokenwise_merge_table` ranks by ``l2_rank`` (default: lower id
   first); :func:`build_tokenwise_merge` passes the L2 SentencePiece model's
   piece scores (the unigram model's log-probabilities, i.e. frequency), read
   from ``spiece.model`` (or ``tokenizer.model`` / ``sentencepiece.bpe.model``),
   else the scores of a ``Unigram`` ``tokenizer.json``, else id order (rule
   names ``sentencepiece-score``, ``unigram-score``, ``id-order``).
4. A token found in **both** the English and the (top-K) L2 vocabulary:
   ``alpha * E[t] + (1 - alpha) * L[t]`` (``alpha`` = the weight of the English
   backbone's own row; ``alpha = 1`` gives ``E[t]`` exactly, ``alpha = 0``
   gives ``L[t]`` exactly, up to the cast to the English dtype). Source ``both``.
5. Found in **one** of them: that row, ``E[t]`` (source ``english``) or
   ``L[t]`` (source ``l2``), whatever ``alpha``.
6. In **neither** (source ``unseen``): the mean of the English rows of the
   pieces the English tokenizer splits the token into: the token string
   (``'▁'`` included, standing for the space before a word) is segmented by
   the English tokenizer's own segmentation model (for a ``tokenizers``
   backend: ``backend_tokenizer.model.tokenize``, the unigram/BPE model without
   normaliser, pre-tokeniser or added special tokens; this is how the English
   tokenizer cuts that text inside a sentence). Pieces that are special
   tokens (``<unk>`` included: characters the English vocabulary lacks) are
   dropped; a piece occurring twice counts twice. When nothing remains, the
   English ``<unk>`` row (counted in ``unseen_fallback``). Without an English
   ``<unk>``, every fallback is the mean of all non-special English rows.

Arithmetic is float64, cast once to the English table's dtype.
The provenance (:class:`MergeProvenance`) gives each row's source label
(``both``, ``english``, ``l2``, ``unseen``, ``special``) and the counts.

The LM head (:func:`build_tokenwise_merge`)
-------------------------------------------
When the English model's output embedding shares storage with its input
embedding (GPT-2, the zoo, ``tie_word_embeddings``), the rebuilt model keeps
it tied: the head IS the new table. When it is untied, the head table is
built by the same rule, with the same provenance, from the English and the
L2 models' output embeddings (heads with a bias are refused).

Writing
-------
The build is written into a temporary sibling folder
(``.tmp-<host>-<pid>-<name>-*`` next to ``out``) and renamed to ``out`` only
when complete; any failure removes the temporary folder, so ``out`` is either
absent or whole. An existing non-empty ``out`` is never overwritten: when it
holds an identical previous build (its ``tokenwise_merge.json`` has the same
recipe key and every file it lists is there with its sha256) the build is a
no-op returning that record; otherwise :class:`WeightsError`. An empty ``out``
folder is replaced.

A LoRA adapter over the English model is NOT merged (the new embedding and the
adapter are independent): it is checked (no ``modules_to_save``, no
embedding/head targets) and recorded; apply it at load time.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from interlingua.core.builds import build_folder, install_build, library_versions, previous_build
from interlingua.core.hashing import file_sha256
from interlingua.core.store import atomic_write, canonical_json, sha256_hex
from interlingua.data.models.hashing import ADAPTER_FILES, TOKENIZER_FILES, weight_files
from interlingua.mergeability.errors import WeightsError, unwritable

__all__ = [
    "MERGE_FILE",
    "RULES",
    "SOURCES",
    "SPECIAL_ROLES",
    "TOKENWISE_FORMAT",
    "MergeProvenance",
    "SpecialTokens",
    "build_tokenwise_merge",
    "tokenwise_merge_table",
    "tokenwise_recipe_key",
]

#: Part of every recipe key: bump it with any change of the rule or of what a build writes.
TOKENWISE_FORMAT = "interlingua.tokenwise/1"
#: The record written into every build folder.
MERGE_FILE = "tokenwise_merge.json"
#: Source labels of the rows, in this order in the counts.
SOURCES = ("both", "english", "l2", "unseen", "special")
_CODES = {"both": "b", "english": "e", "l2": "l", "unseen": "u", "special": "s"}
#: Roles of special tokens, in the order an id holding several roles is matched.
SPECIAL_ROLES = ("pad", "unk", "bos", "eos", "cls", "sep", "mask")
#: Rule names recorded in every build (part of the recipe key).
RULES = {
    "match": "exact token strings (SentencePiece pieces with their '▁' marker)",
    "both": "alpha * english_row + (1 - alpha) * l2_row",
    "english_only": "english_row",
    "l2_only": "l2_row",
    "unseen": "mean of the english rows of the english segmentation of the token string "
    "(special pieces dropped); english <unk> row when none",
    "special": "english row of the same role (pad, unk, bos, eos, cls, sep, mask, then other specials "
    "by string); english <unk> row when english lacks the role",
    "l2_top_k": "non-special l2 tokens ranked by score (higher first, ties by lower id); "
    "int = count, float = floor(fraction * candidates)",
    "arithmetic": "float64, cast to the english dtype",
    "head": "tied to the new embedding when the english head is tied; else the same rule over the heads",
}
_ROWS_PER_BLOCK = 4096
_WEIGHT_EXTRAS = ("config.json", "model.safetensors.index.json", "pytorch_model.bin.index.json")


# ====================================================================== the table rule
@dataclass(frozen=True)
class MergeProvenance:
    """Where each row of a merged table comes from.

    ``sources[b]``: the label of bilingual row ``b`` (one of :data:`SOURCES`).
    ``english_pieces[b]``: the English ids averaged into row ``b`` (one id for
    ``both`` / ``english`` / ``special``, the segmentation or the fallback for
    ``unseen``, none for ``l2``); ``l2_ids[b]``: the L2 id used, -1 when none.
    ``counts``: rows per source (sums to the vocabulary size).
    ``l2_candidates``: non-special L2 tokens; ``l2_selected``: how many of them
    the top-K kept. ``unseen_fallback`` / ``special_fallback``: rows that took
    the English ``<unk>`` row because nothing else applied.
    """

    sources: np.ndarray
    english_pieces: tuple[tuple[int, ...], ...]
    l2_ids: np.ndarray
    counts: dict[str, int]
    l2_candidates: int
    l2_selected: int
    unseen_fallback: int = 0
    special_fallback: int = 0
    notes: list[str] = field(default_factory=list)

    def codes(self) -> str:
        """One letter per row: b(oth), e(nglish), l(2), u(nseen), s(pecial)."""
        return "".join(_CODES[s] for s in self.sources.tolist())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: counts, top-K sizes, fallbacks and the per-row codes."""
        return {
            "counts": dict(self.counts),
            "vocab_size": int(len(self.sources)),
            "l2_candidates": self.l2_candidates,
            "l2_selected": self.l2_selected,
            "unseen_fallback": self.unseen_fallback,
            "special_fallback": self.special_fallback,
            "rows": self.codes(),
            "row_codes": {v: k for k, v in _CODES.items()},
        }


@dataclass(frozen=True)
class SpecialTokens:
    """The special tokens of the three tokenizers of a tokenwise merge, each ``role -> id`` (roles:
    :data:`SPECIAL_ROLES`, or any other name for other special tokens, matched by name across tokenizers)."""

    #: the English tokenizer's (the rows special bilingual tokens take, by role)
    english: Mapping[str, int] | None = None
    #: the L2 tokenizer's (never matched by string, never ranked into the top-K)
    l2: Mapping[str, int] | None = None
    #: the bilingual tokenizer's (its rows of source ``special``)
    bilingual: Mapping[str, int] | None = None


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise WeightsError(f"alpha must be a number in [0, 1] (the English row's weight), got {alpha!r}")
    value = float(alpha)
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise WeightsError(f"alpha must be in [0, 1] (1 = the English row, 0 = the L2 row), got {alpha!r}")
    return value


def _check_top_k(top_k: Any, l2_size: int | None = None) -> tuple[str, float | int]:
    """('count', K) or ('fraction', f); WeightsError for anything else."""
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Real):
        raise WeightsError(
            f"top_k must be an int count or a float fraction in [0, 1] of the L2 vocabulary, got {top_k!r}"
        )
    if isinstance(top_k, numbers.Integral):
        count = int(top_k)
        if count < 0:
            raise WeightsError(f"top_k must be >= 0 (0 = use no L2 row), got {count}")
        if l2_size is not None and count > l2_size:
            raise WeightsError(
                f"top_k = {count} is more than the L2 vocabulary ({l2_size} tokens); give at most "
                f"{l2_size}, or a fraction such as 1.0"
            )
        return "count", count
    value = float(top_k)
    if not math.isfinite(value) or value < 0:
        raise WeightsError(f"top_k must be >= 0 (0 = use no L2 row), got {top_k!r}")
    if value > 1.0:
        raise WeightsError(
            f"top_k = {top_k!r} as a float is a fraction of the L2 vocabulary and must be in [0, 1]; "
            "give an int for a count of pieces"
        )
    return "fraction", value


def _token_to_id(vocab: Any, what: str) -> dict[str, int]:
    if isinstance(vocab, Mapping):
        out = {}
        for token, idx in vocab.items():
            if isinstance(idx, bool) or not isinstance(idx, numbers.Integral) or idx < 0:
                raise WeightsError(f"{what}: token {token!r} has id {idx!r}, not an id >= 0")
            out[str(token)] = int(idx)
        return out
    if isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
        raise WeightsError(
            f"{what} must be a token -> id mapping or a list of tokens by id, got {type(vocab).__name__}"
        )
    out = {}
    for idx, token in enumerate(vocab):
        if token is None:
            continue
        out.setdefault(str(token), idx)
    return out


def _id_to_token(vocab: Any, what: str) -> list[str]:
    if isinstance(vocab, Mapping):
        size = len(vocab)
        tokens: list[str | None] = [None] * size
        for token, idx in _token_to_id(vocab, what).items():
            if idx >= size or tokens[idx] is not None:
                raise WeightsError(f"{what}: ids must be exactly 0..{size - 1}, one token each; {token!r} has id {idx}")
            tokens[idx] = token
        return tokens  # type: ignore[return-value]
    if isinstance(vocab, (str, bytes)) or not isinstance(vocab, Sequence):
        raise WeightsError(
            f"{what} must be a token -> id mapping or a list of tokens by id, got {type(vocab).__name__}"
        )
    if any(t is None for t in vocab):
        raise WeightsError(f"{what}: every id needs a token string (found None)")
    return [str(t) for t in vocab]


def _roles(specials: Mapping[str, int] | None, limit: int, what: str) -> dict[str, int]:
    if specials is None:
        return {}
    out: dict[str, int] = {}
    for role, idx in specials.items():
        if idx is None:
            continue
        if isinstance(idx, bool) or not isinstance(idx, numbers.Integral) or not 0 <= int(idx) < limit:
            raise WeightsError(f"{what}: role {role!r} has id {idx!r}, outside 0..{limit - 1}")
        out[str(role)] = int(idx)
    return out


def _role_order(role: str) -> tuple[int, str]:
    return (SPECIAL_ROLES.index(role), "") if role in SPECIAL_ROLES else (len(SPECIAL_ROLES), role)


def _as_tensor(table: Any, what: str):
    import torch

    if isinstance(table, torch.Tensor):
        t, numpy_in = table.detach(), False
    elif isinstance(table, np.ndarray):
        t, numpy_in = torch.from_numpy(np.ascontiguousarray(table)), True
    else:
        raise WeightsError(f"{what} must be a 2-D torch tensor or numpy array, got {type(table).__name__}")
    if t.ndim != 2 or not t.is_floating_point():
        raise WeightsError(
            f"{what} must be a 2-D floating-point table (rows x width), got shape {tuple(t.shape)} {t.dtype}"
        )
    return t.cpu(), numpy_in


def tokenwise_merge_table(
    english_emb: Any,
    english_vocab: Mapping[str, int] | Sequence[str],
    l2_emb: Any,
    l2_vocab: Mapping[str, int] | Sequence[str],
    bilingual_vocab: Mapping[str, int] | Sequence[str],
    *,
    alpha: float,
    top_k: float | int = 1.0,
    l2_rank: Sequence[float] | np.ndarray | None = None,
    unseen_rows: Mapping[str, Sequence[int]] | Callable[[str], Sequence[int]] | None = None,
    specials: SpecialTokens | None = None,
) -> tuple[Any, MergeProvenance]:
    """The bilingual embedding table and its provenance (the rule: see the module docstring).

    ``english_emb`` / ``l2_emb``: 2-D tables (torch or numpy) of the same width.
    Vocabularies: ``token -> id`` mappings (``get_vocab()``) or lists of tokens
    by id; ``bilingual_vocab`` must cover ids ``0..V-1``, its table has ``V``
    rows. ``l2_rank[i]``: the rank score of L2 id ``i`` (higher merged first;
    default: lower id first). ``unseen_rows``: the English ids a token in
    neither vocabulary is split into (mapping or callable; absent = fallback
    only). ``specials``: each tokenizer's special tokens by role
    (:class:`SpecialTokens`; default none).
    Returns a table of the English dtype: a torch tensor, or a numpy array when
    ``english_emb`` is one.
    """
    alpha = _check_alpha(alpha)
    E, numpy_out = _as_tensor(english_emb, "english_emb")
    L, _ = _as_tensor(l2_emb, "l2_emb")
    if E.shape[1] != L.shape[1]:
        raise WeightsError(
            f"the L2 embedding is {L.shape[1]} wide and the English one {E.shape[1]}: rows of different "
            "widths cannot be mixed (a tokenwise merge needs two models of the same hidden size)"
        )
    eng = _token_to_id(english_vocab, "english_vocab")
    l2 = _token_to_id(l2_vocab, "l2_vocab")
    bi = _id_to_token(bilingual_vocab, "bilingual_vocab")
    for name, vocab, table in (("english", eng, E), ("L2", l2, L)):
        top = max(vocab.values(), default=-1)
        if top >= table.shape[0]:
            raise WeightsError(
                f"the {name} vocabulary has id {top} but its embedding only {table.shape[0]} rows: "
                "that tokenizer does not belong to that table"
            )
    kind, value = _check_top_k(top_k, len(l2))
    sp = SpecialTokens() if specials is None else specials
    eng_sp = _roles(sp.english, E.shape[0], "specials.english")
    l2_sp = _roles(sp.l2, L.shape[0], "specials.l2")
    bi_sp = _roles(sp.bilingual, len(bi), "specials.bilingual")
    eng_special_ids, l2_special_ids = set(eng_sp.values()), set(l2_sp.values())

    # ------------------------------------------------------------------ L2 top-K
    candidates = sorted({i for i in l2.values() if i not in l2_special_ids})
    n_cand = len(candidates)
    k = min(int(value), n_cand) if kind == "count" else int(math.floor(value * n_cand + 1e-9))  # a count is an int
    if l2_rank is None:
        ranked = candidates  # lower id first
    else:
        rank = np.asarray(l2_rank, dtype=np.float64).reshape(-1)
        if candidates and rank.shape[0] <= candidates[-1]:
            raise WeightsError(f"l2_rank has {rank.shape[0]} scores but the L2 vocabulary has id {candidates[-1]}")
        if np.isnan(rank[candidates]).any():
            raise WeightsError("l2_rank has NaN scores; give every L2 token a number")
        ranked = sorted(candidates, key=lambda i: (-rank[i], i))
    selected = set(ranked[:k])
    l2_lookup = {t: i for t, i in l2.items() if i in selected}
    eng_lookup = {t: i for t, i in eng.items() if i not in eng_special_ids}

    # ------------------------------------------------------------------ fallback row
    unk = eng_sp.get("unk")
    if unk is not None:
        fallback: tuple[int, ...] = (unk,)
    else:
        fallback = tuple(sorted(set(eng_lookup.values()))) or tuple(range(E.shape[0]))

    # ------------------------------------------------------------------ one source per row
    eng_by_role_string = {role: i for role, i in eng_sp.items()}
    bi_roles: dict[int, list[str]] = {}
    for role, i in bi_sp.items():
        bi_roles.setdefault(i, []).append(role)
    if callable(unseen_rows):
        split = unseen_rows
    elif unseen_rows is None:
        split = lambda token: ()  # noqa: E731
    elif isinstance(unseen_rows, Mapping):
        split = lambda token: unseen_rows.get(token, ())  # noqa: E731
    else:
        raise WeightsError(f"unseen_rows must be a mapping, a callable or None, got {type(unseen_rows).__name__}")

    V = len(bi)
    sources = np.empty(V, dtype="<U7")
    pieces: list[tuple[int, ...]] = [()] * V
    l2_ids = np.full(V, -1, dtype=np.int64)
    unseen_fallback = special_fallback = 0
    for b, token in enumerate(bi):
        if b in bi_roles:
            sources[b] = "special"
            roles = sorted(bi_roles[b], key=_role_order)
            match = next((eng_by_role_string[r] for r in roles if r in eng_by_role_string), None)
            if match is None:
                pieces[b] = fallback
                special_fallback += 1
            else:
                pieces[b] = (match,)
            continue
        ie, il = eng_lookup.get(token), l2_lookup.get(token)
        if ie is not None and il is not None:
            sources[b], pieces[b], l2_ids[b] = "both", (ie,), il
        elif ie is not None:
            sources[b], pieces[b] = "english", (ie,)
        elif il is not None:
            sources[b], l2_ids[b] = "l2", il
        else:
            sources[b] = "unseen"
            ids: list[int] = []
            for i in split(token) or ():
                if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= int(i) < E.shape[0]:
                    raise WeightsError(f"unseen_rows gave English id {i!r} for {token!r}, outside 0..{E.shape[0] - 1}")
                if int(i) not in eng_special_ids:
                    ids.append(int(i))
            if not ids:
                unseen_fallback += 1
            pieces[b] = tuple(ids) or fallback
    counts = {s: int((sources == s).sum()) for s in SOURCES}
    provenance = MergeProvenance(
        sources=sources,
        english_pieces=tuple(pieces),
        l2_ids=l2_ids,
        counts=counts,
        l2_candidates=n_cand,
        l2_selected=len(selected),
        unseen_fallback=unseen_fallback,
        special_fallback=special_fallback,
    )
    table = _apply(provenance, E, L, alpha)
    return (table.numpy() if numpy_out else table), provenance


def _apply(provenance: MergeProvenance, E: Any, L: Any, alpha: float):
    """Fill the table a provenance describes from ``E`` and ``L`` (float64 blocks, cast to E's dtype)."""
    import torch

    V, d = len(provenance.sources), E.shape[1]
    out = torch.empty((V, d), dtype=E.dtype)
    for start in range(0, V, _ROWS_PER_BLOCK):
        stop = min(start + _ROWS_PER_BLOCK, V)
        rows = range(start, stop)
        flat = [i for b in rows for i in provenance.english_pieces[b]]
        seg = [b - start for b in rows for _ in provenance.english_pieces[b]]
        n = torch.tensor([len(provenance.english_pieces[b]) for b in rows], dtype=torch.float64)
        block = torch.zeros((stop - start, d), dtype=torch.float64)
        if flat:
            block.index_add_(0, torch.tensor(seg, dtype=torch.long), E[torch.tensor(flat, dtype=torch.long)].double())
        has_eng = n > 0
        block[has_eng] /= n[has_eng].unsqueeze(1)
        l2 = torch.from_numpy(provenance.l2_ids[start:stop])
        has_l2 = l2 >= 0
        if bool(has_l2.any()):
            l2_rows = L[l2[has_l2]].double()
            mixed = has_eng[has_l2]
            part = block[has_l2]
            part[mixed] = alpha * part[mixed] + (1.0 - alpha) * l2_rows[mixed]
            part[~mixed] = l2_rows[~mixed]
            block[has_l2] = part
        out[start:stop] = block.to(E.dtype)
    return out


# ====================================================================== files and keys
def _folder(path: Any, what: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.exists():
        raise WeightsError(f"the {what} folder {folder} does not exist")
    if not folder.is_dir():
        raise WeightsError(f"the {what} path {folder} is not a folder")
    return folder


def _model_files(folder: Path, what: str) -> list[Path]:
    if not (folder / "config.json").is_file():
        raise WeightsError(f"the {what} folder {folder} has no config.json: not a saved transformers model")
    weights = weight_files(folder)
    if not weights:
        raise WeightsError(f"the {what} folder {folder} has no weight files (*.safetensors, *.bin)")
    extras = [folder / n for n in _WEIGHT_EXTRAS if (folder / n).is_file()]
    return sorted(set(weights + extras + _tokenizer_files(folder, what, required=False)))


def _tokenizer_files(folder: Path, what: str, *, required: bool = True) -> list[Path]:
    files = [folder / n for n in TOKENIZER_FILES if (folder / n).is_file()]
    if required and not files:
        raise WeightsError(
            f"the {what} folder {folder} holds no tokenizer files ({', '.join(TOKENIZER_FILES[:3])}, ...)"
        )
    return files


def _hashes(files: list[Path]) -> dict[str, str]:
    return {p.name: file_sha256(p) for p in sorted(files)}


def _input_files(english: Path, l2: Path, tokenizer: Path, adapter: Path | None) -> dict[str, dict[str, Any]]:
    inputs = {
        "english": {"folder": str(english.resolve()), "files": _hashes(_model_files(english, "English model"))},
        "l2": {"folder": str(l2.resolve()), "files": _hashes(_model_files(l2, "L2 model"))},
        "tokenizer": {
            "folder": str(tokenizer.resolve()),
            "files": _hashes(_tokenizer_files(tokenizer, "bilingual tokenizer")),
        },
    }
    if not _tokenizer_files(english, "English model", required=False):
        raise WeightsError(f"the English model folder {english} has no tokenizer files; the merge needs its tokenizer")
    if not _tokenizer_files(l2, "L2 model", required=False):
        raise WeightsError(f"the L2 model folder {l2} has no tokenizer files; the merge needs its tokenizer")
    if adapter is not None:
        files = [adapter / n for n in ADAPTER_FILES if (adapter / n).is_file()]
        if not (adapter / "adapter_config.json").is_file():
            raise WeightsError(f"the adapter folder {adapter} has no adapter_config.json: not a PEFT adapter")
        inputs["adapter"] = {"folder": str(adapter.resolve()), "files": _hashes(files)}
    return inputs


def _key_payload(alpha: float, top_k: tuple[str, float | int], inputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "format": TOKENWISE_FORMAT,
        "alpha": alpha,
        "top_k": {"kind": top_k[0], "value": top_k[1]},
        "rules": RULES,
        "inputs": {role: entry["files"] for role, entry in sorted(inputs.items())},
    }


def tokenwise_recipe_key(
    english: str | os.PathLike[str],
    l2: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str],
    *,
    alpha: float,
    top_k: float | int = 1.0,
    adapter: str | os.PathLike[str] | None = None,
) -> str:
    """Content key of a build (sha256 hex): format, rules, alpha, top_k and every input file's sha256.

    The inputs are the English and L2 folders' weight files, ``config.json``
    and tokenizer files, the bilingual tokenizer's files and (when given) the
    adapter's files; folder names are not part of the key, so the same files
    elsewhere give the same key. ``top_k`` keeps its kind: ``1.0`` (all) and
    the int count of all pieces are different keys.
    """
    alpha_ = _check_alpha(alpha)
    top = _check_top_k(top_k)
    inputs = _input_files(
        _folder(english, "English model"),
        _folder(l2, "L2 model"),
        _folder(tokenizer, "bilingual tokenizer"),
        None if adapter is None else _folder(adapter, "adapter"),
    )
    return sha256_hex(canonical_json(_key_payload(alpha_, top, inputs)))


# ====================================================================== loading
@contextmanager
def _quiet() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


#: What a failed load raises: tokenizers' parse errors are plain ``Exception``s, so any Exception
#: (never KeyboardInterrupt / SystemExit) is reported as a WeightsError naming the folder.
_LOAD_ERRORS = (Exception,)


def _load_tokenizer(folder: Path, what: str):
    from transformers import AutoTokenizer

    try:
        with _quiet():
            return AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    except _LOAD_ERRORS as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsError(f"the {what} tokenizer at {folder} cannot be loaded ({first})") from exc


def _load_lm(folder: Path, what: str) -> Any:
    """A causal LM (a transformers PreTrainedModel; Any because torch's stubs read every submodule's
    ``.weight`` as ``Tensor | Module``, and the merge reads and writes the embeddings' weights)."""
    from transformers import AutoModelForCausalLM

    try:
        with _quiet():
            # output_loading_info=True: (model, loading info), which the stubs do not say
            model, info = cast(
                "tuple[Any, dict[str, Any]]",
                AutoModelForCausalLM.from_pretrained(
                    str(folder), dtype="auto", trust_remote_code=False, output_loading_info=True
                ),
            )
    except _LOAD_ERRORS as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise WeightsError(f"the {what} at {folder} cannot be loaded as a causal LM ({first})") from exc
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(str(k) for k in info.get("mismatched_keys") or ())
    if missing or mismatched:
        raise WeightsError(
            f"the {what} at {folder} does not cover {type(model).__name__}: {len(missing)} weights missing, "
            f"{len(mismatched)} of the wrong shape (e.g. {', '.join((missing + mismatched)[:3])})"
        )
    return model.eval()


def _specials(tok: Any) -> dict[str, int]:
    """role -> id of a tokenizer's special tokens (named roles, then the rest by their string)."""
    out: dict[str, int] = {}
    for role in SPECIAL_ROLES:
        token = getattr(tok, f"{role}_token", None)
        if token is None:
            continue
        idx = tok.convert_tokens_to_ids(token)
        if isinstance(idx, int) and idx >= 0:
            out[role] = idx
    named = set(out.values())
    for token, idx in zip(tok.all_special_tokens, tok.all_special_ids):
        if idx is not None and idx not in named:
            out.setdefault(f"special:{token}", int(idx))
    return out


def _l2_rank(folder: Path, vocab: Mapping[str, int]) -> tuple[np.ndarray | None, str]:
    """Rank scores by L2 id: SentencePiece scores, else Unigram tokenizer.json scores, else id order."""
    size = max(vocab.values(), default=-1) + 1
    scores: dict[str, float] | None = None
    rule = "id-order"
    for name in ("spiece.model", "tokenizer.model", "sentencepiece.bpe.model"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            import sentencepiece as spm

            sp = spm.SentencePieceProcessor(model_file=str(path))
            scores = {sp.id_to_piece(i): float(sp.get_score(i)) for i in range(sp.get_piece_size())}
            rule = "sentencepiece-score"
            break
        except (ImportError, OSError, RuntimeError):
            continue
    if scores is None and (folder / "tokenizer.json").is_file():
        try:
            model = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8")).get("model") or {}
        except (OSError, ValueError):
            model = {}
        if model.get("type") == "Unigram" and isinstance(model.get("vocab"), list):
            scores = {str(p): float(s) for p, s in model["vocab"]}
            rule = "unigram-score"
    if scores is None:
        return None, rule
    rank = np.full(size, -np.inf)
    for token, idx in vocab.items():
        if token in scores:
            rank[idx] = scores[token]
    return rank, rule


def _english_split(tok: Any) -> Callable[[str], list[int]]:
    """The English ids a token string is segmented into by the English tokenizer's own model."""
    backend = getattr(tok, "backend_tokenizer", None)
    model = getattr(backend, "model", None)
    if model is not None and hasattr(model, "tokenize"):
        return lambda token: [int(t.id) for t in model.tokenize(token)]

    def slow(token: str) -> list[int]:  # no tokenizers backend: the surface text, '▁' as a space
        ids = tok.convert_tokens_to_ids(tok.tokenize(token.replace("\u2581", " ")))
        return [int(i) for i in ids if i is not None]

    return slow


def _check_adapter(adapter: Path) -> dict[str, Any]:
    try:
        config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WeightsError(f"the adapter config {adapter / 'adapter_config.json'} is unreadable ({exc})") from None
    if not isinstance(config, dict):
        raise WeightsError(f"the adapter config {adapter / 'adapter_config.json'} is not a JSON object")
    saved = config.get("modules_to_save") or []
    targets = config.get("target_modules") or []
    targets = [targets] if isinstance(targets, str) else list(targets)
    embedding_names = ("wte", "embed_tokens", "embed_in", "word_embeddings", "lm_head", "embed_out")
    touched = [m for m in [*saved, *targets] if any(e in str(m) for e in embedding_names)]
    if saved or touched:
        raise WeightsError(
            f"the adapter {adapter} saves or adapts whole modules ({', '.join(map(str, saved or touched))}); "
            "an adapter that replaces the embedding or the head cannot be applied to a rebuilt vocabulary"
        )
    return config


# ====================================================================== the build


def _refuse(out: Path) -> WeightsError:
    return WeightsError(
        f"{out} exists and holds something other than an identical tokenwise build (a different recipe, "
        "other files, or a damaged build); choose another output folder or delete it"
    )


def build_tokenwise_merge(
    english: str | os.PathLike[str],
    l2: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    alpha: float,
    top_k: float | int = 1.0,
    adapter: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Rebuild the tokenwise merge of ``english`` and ``l2`` over ``tokenizer`` into ``out``; return its record.

    ``english`` / ``l2``: saved causal LMs with their tokenizers (loaded with
    ``AutoModelForCausalLM``, ``trust_remote_code`` off, stored dtype);
    ``tokenizer``: the bilingual tokenizer's folder. ``out`` receives the
    English model with the new embedding (``save_pretrained``, safetensors;
    ``config.vocab_size`` = the bilingual vocabulary; pad/bos/eos/cls/sep ids
    from the bilingual tokenizer), the bilingual tokenizer's files and
    ``tokenwise_merge.json`` (the returned record: recipe, rules, sources with
    their sha256, provenance, the written files' sha256). ``adapter``: a PEFT
    LoRA over the English model, recorded, NOT merged. See the module
    docstring for the rule, the head and the atomic, no-overwrite writing.
    Raises :class:`WeightsError` for bad ``alpha`` / ``top_k``, missing
    folders or files, tokenizers or models that cannot be loaded, and
    embeddings of different widths.
    """
    alpha_ = _check_alpha(alpha)
    top = _check_top_k(top_k)
    english_dir = _folder(english, "English model")
    l2_dir = _folder(l2, "L2 model")
    tok_dir = _folder(tokenizer, "bilingual tokenizer")
    adapter_dir = None if adapter is None else _folder(adapter, "adapter")
    out = Path(out).expanduser()
    inputs = _input_files(english_dir, l2_dir, tok_dir, adapter_dir)
    adapter_config = _check_adapter(adapter_dir) if adapter_dir is not None else None
    key = sha256_hex(canonical_json(_key_payload(alpha_, top, inputs)))
    if out.exists():
        if not out.is_dir():
            raise WeightsError(f"the output {out} exists and is a file; give a folder path")
        if any(out.iterdir()):
            previous = previous_build(out, MERGE_FILE, key)
            if previous is None:
                raise _refuse(out)
            return previous

    import torch

    eng_tok = _load_tokenizer(english_dir, "English model's")
    l2_tok = _load_tokenizer(l2_dir, "L2 model's")
    bi_tok = _load_tokenizer(tok_dir, "bilingual")
    _check_top_k(top_k, len(l2_tok.get_vocab()))
    model = _load_lm(english_dir, "English model")
    l2_model = _load_lm(l2_dir, "L2 model")
    in_emb, l2_in = model.get_input_embeddings(), l2_model.get_input_embeddings()
    head = model.get_output_embeddings()
    if in_emb is None or head is None:
        raise WeightsError(f"the English model at {english_dir} has no input embedding or no LM head")
    width, l2_width = in_emb.weight.shape[1], l2_in.weight.shape[1]
    if width != l2_width:
        raise WeightsError(
            f"the L2 model's embedding is {l2_width} wide and the English model's {width}: rows of different "
            "widths cannot be mixed (a tokenwise merge needs two models of the same hidden size)"
        )
    tied = head.weight is in_emb.weight or head.weight.data_ptr() == in_emb.weight.data_ptr()
    if getattr(head, "bias", None) is not None:
        raise WeightsError("the English model's LM head has a bias; rebuilding a biased head is not supported")

    bi_vocab = bi_tok.get_vocab()
    if sorted(bi_vocab.values()) != list(range(len(bi_vocab))):
        raise WeightsError(f"the bilingual tokenizer at {tok_dir} has ids that are not 0..{len(bi_vocab) - 1}")
    bi_tokens = bi_tok.convert_ids_to_tokens(list(range(len(bi_vocab))))
    rank, rank_rule = _l2_rank(l2_dir, l2_tok.get_vocab())
    specials = SpecialTokens(_specials(eng_tok), _specials(l2_tok), _specials(bi_tok))
    with torch.no_grad():
        table, provenance = tokenwise_merge_table(
            in_emb.weight,
            eng_tok.get_vocab(),
            l2_in.weight,
            l2_tok.get_vocab(),
            bi_tokens,
            alpha=alpha_,
            top_k=top_k,
            l2_rank=rank,
            unseen_rows=_english_split(eng_tok),
            specials=specials,
        )
        head_table = None
        if not tied:
            l2_head = l2_model.get_output_embeddings()
            if l2_head is None or l2_head.weight.shape[1] != width:
                raise WeightsError(
                    f"the English head is untied, so the L2 model's head is needed, and the L2 model at {l2_dir} "
                    "has none of the English width"
                )
            head_table = _apply(provenance, head.weight.detach().cpu(), l2_head.weight.detach().cpu(), alpha_)
        del l2_model
        V = len(bi_tokens)
        model.resize_token_embeddings(V, mean_resizing=False)
        new_in, new_head = model.get_input_embeddings(), model.get_output_embeddings()
        new_in.weight.copy_(table.to(new_in.weight.device))
        if head_table is not None:
            new_head.weight.copy_(head_table.to(new_head.weight.device))
    now_tied = new_head.weight.data_ptr() == new_in.weight.data_ptr()
    if now_tied != tied:
        raise WeightsError(f"internal: the head was {'tied' if tied else 'untied'} and is not after the resize")
    text_config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if int(getattr(text_config, "vocab_size", V)) != V:
        raise WeightsError(f"internal: config.vocab_size is {text_config.vocab_size}, not {V}, after the resize")
    ids = {
        f"{role}_token_id": getattr(bi_tok, f"{role}_token_id", None) for role in ("pad", "bos", "eos", "cls", "sep")
    }
    for name, value in ids.items():
        setattr(model.config, name, value)
        if text_config is not model.config:
            setattr(text_config, name, value)
        if (
            name in ("pad_token_id", "bos_token_id", "eos_token_id")
            and getattr(model, "generation_config", None) is not None
        ):
            setattr(model.generation_config, name, value)

    record: dict[str, Any] = {
        "format": TOKENWISE_FORMAT,
        "key": key,
        "recipe": {
            "alpha": alpha_,
            "top_k": top[1],
            "top_k_kind": top[0],
            "l2_rank": rank_rule,
            "unseen_split": "tokenizers-model"
            if getattr(getattr(eng_tok, "backend_tokenizer", None), "model", None) is not None
            else "tokenize-surface",
            "head": "tied to the new embedding" if tied else "untied: same rule over the English and L2 heads",
            "rules": RULES,
        },
        "sources": {role: inputs[role] for role in ("english", "l2", "tokenizer")},
        "adapter": None
        if adapter_config is None  # None exactly when there is no adapter_dir
        else {
            **inputs["adapter"],
            "merged": False,
            "peft_type": adapter_config.get("peft_type"),
            "target_modules": adapter_config.get("target_modules"),
            "note": "not merged: apply it at load time over this folder (PeftModel.from_pretrained)",
        },
        "provenance": provenance.to_dict(),
        "model": {
            "architecture": type(model).__name__,
            "vocab_size": V,
            "width": int(width),
            "dtype": str(new_in.weight.dtype).replace("torch.", ""),
            "tied": tied,
            "special_token_ids": ids,
        },
        "libraries": library_versions(
            ("interlingua", "torch", "transformers", "tokenizers", "sentencepiece", "safetensors")
        ),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    _write_atomically(out, key, model, bi_tok, tok_dir, record)
    return json.loads((out / MERGE_FILE).read_text(encoding="utf-8")) if (out / MERGE_FILE).is_file() else record


def _write_atomically(out: Path, key: str, model: Any, bi_tok: Any, tok_dir: Path, record: dict[str, Any]) -> None:
    with build_folder(out, unwritable) as tmp:
        with _quiet():
            model.save_pretrained(str(tmp))
        if not list(tmp.glob("*.safetensors")):
            raise WeightsError(f"internal: save_pretrained wrote no safetensors file into {tmp}")
        for src in _tokenizer_files(tok_dir, "bilingual tokenizer"):
            shutil.copyfile(src, tmp / src.name)
        written = _load_tokenizer(tmp, "written bilingual")
        if written.get_vocab() != bi_tok.get_vocab():
            raise WeightsError(f"internal: the tokenizer written into {tmp} differs from {tok_dir}")
        record["files"] = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        atomic_write(tmp / MERGE_FILE, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))
        install_build(tmp, out, MERGE_FILE, key, _refuse)  # nothing at out is ever replaced
