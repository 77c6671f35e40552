"""Sentence representations at every layer, in one forward pass per batch.

``extract(loaded, sentences, poolings)`` tokenizes once, sorts sentences by
length so that batches carry little padding, caps each batch by a token
budget, runs the BASE transformer (never the LM head: Gemma 3's 262k-row head
would dominate the cost) with ``output_hidden_states=True`` and pools each
layer's states as they come, without stacking them, into preallocated
``(n_hidden_states, n, d)`` float32 arrays scattered back to the input order.
It returns an :class:`Extraction`: the pooled arrays plus per-sentence token
counts, truncation, and the share of the pooled variance that the tokenizer's
special tokens carry (``special_tokens="include"`` reproduces the pooling of
interlingua 0.1).

Special tokens (``special_tokens="exclude"``, the default): positions whose id
is one of the tokenizer's special tokens (``all_special_ids``: ``<bos>``,
``[CLS]``, ``[SEP]``, ``<eos>``...; ``<unk>`` is NOT one here, it stands for
real text) are left out of the pooled vector; the model still sees them.
SGPT weights count ranks among the pooled positions (1..T'), so a tokenizer
that prepends ``<bos>`` gives the content the same weights as one that does
not. ``"include"`` pools every token the model saw (the behaviour before).

Every pooled token state and every pooled vector is checked after each batch;
NaN or inf raises :class:`~interlingua.core.errors.NonFiniteError` naming the
layers and sentences, so nothing non-finite is returned or cached.

Hidden-state convention (docs/protocol.md, "Poolings"): index 0 is the embedding
output, index k the output of block k; Hugging Face applies the final layer
norm to the LAST entry (GPT-2 ``ln_f``, Llama/Gemma ``norm``), so layer L is
post-norm while layers 1..L-1 are raw residual-stream states. The attention
implementation is the model's own (``load_model`` gets ``sdpa``, the
transformers default). CPU threads follow the run's policy
(:func:`interlingua.core.numerics.default_threads`, docs/threads.md): a fixed
count, so the same call gives the same bits; ``threads="auto"`` chooses by
measured speed instead (:class:`_ThreadTuner`), not bit-reproducible.
"""

from __future__ import annotations

import inspect
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from interlingua.core.errors import CorpusError, ModelError, NonFiniteError
from interlingua.core.numerics import default_threads as policy_threads
from interlingua.data.representations.depth import states_through
from interlingua.data.representations.pooling import (
    PoolingError,
    _last_index,
    _weights,
    pooled_positions,
    validate_poolings,
)
from interlingua.data.representations.sources import as_extractable, eval_mode

__all__ = [
    "DEFAULT_SPECIAL_TOKENS",
    "SPECIAL_TOKEN_MODES",
    "Extraction",
    "TokenizedSentences",
    "extract",
    "length_sorted_batches",
    "special_token_ids",
    "tokenize_for_extraction",
]

DEFAULT_BATCH_SIZE = 32
DEFAULT_MAX_TOKENS = 8192
SPECIAL_TOKEN_MODES: tuple[str, ...] = ("exclude", "include")
DEFAULT_SPECIAL_TOKENS = "exclude"
THREAD_PROBE_INTERVAL_S = 30.0
THREAD_BUSY_SHARE = 0.75
FLOAT16_HINT = "float16 on CPU overflows in some models (e.g. Gemma 3): use dtype float32 or bfloat16"


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract` computed for one list of sentences.

    - ``pooled``: ``{pooling: (n_hidden_states, n, d) float32}``, input order.
    - ``n_tokens``: (n,) int64, tokens the model saw per sentence (special
      tokens included, after truncation).
    - ``n_pooled``: (n,) int64, positions the mean and SGPT poolings averaged
      per sentence (``n_tokens`` minus special tokens when they are excluded);
      ``last`` always reads one position, the last of these.
    - ``truncated``: indices of the sentences cut to ``max_length``.
    - ``max_length``: the effective limit (requested, capped by the model's
      position limit).
    - ``special_tokens``: ``"exclude"`` or ``"include"``.
    - ``special_share``: ``{pooling: (n_hidden_states,) float64}``. Writing each
      pooled vector as ``content_part + special_part`` (the special-token
      positions' weighted states over the same denominator), the share is
      ``||centre(special_part)||^2 / ||centre(pooled)||^2`` per layer, columns
      centred over the n sentences. 0.0 where no special position is pooled
      (always with ``"exclude"``) or the pooled vectors have no variance
      (e.g. n = 1). It is a ratio of variances, not a fraction of a sum: it
      can exceed 1 when the two parts are anti-correlated.
    """

    pooled: dict[str, np.ndarray]
    n_tokens: np.ndarray
    n_pooled: np.ndarray
    truncated: tuple[int, ...]
    max_length: int
    special_tokens: str
    special_share: dict[str, np.ndarray] = field(default_factory=dict)
    position_limit: int | None = None  # the model's declared position limit (None: it declares none)


@dataclass(frozen=True)
class TokenizedSentences:
    """Token ids per sentence (special tokens included) and which were truncated."""

    input_ids: list[list[int]]
    truncated: tuple[int, ...]
    max_length: int

    @property
    def n_tokens(self) -> int:
        """Number of real (non-pad) tokens the model will see."""
        return sum(len(ids) for ids in self.input_ids)


def _model_position_limit(model: torch.nn.Module) -> int | None:
    """Largest sequence the model's position embeddings accept, if it declares one."""
    config = getattr(model, "config", None)
    for attr in ("max_position_embeddings", "n_positions"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def truncation_advice(max_length: int, position_limit: int | None) -> str:
    """What a user can do about sentences truncated at ``max_length`` tokens, for THIS model.

    Raising ``max_length`` is advice only where the model accepts longer inputs: at its position limit the
    sentences cannot be kept whole, and saying "raise max_length" there sends the user in a circle.
    """
    if position_limit is not None and max_length >= position_limit:
        return (
            f"{position_limit} tokens is this model's position limit, so they cannot be kept whole: shorten or "
            "split the sentences, or compare a model with a longer context"
        )
    if position_limit is not None:
        return f"raise max_length (this model accepts up to {position_limit} tokens) to keep them whole"
    return "raise max_length to keep them whole (no position limit is declared for this model)"


def tokenize_for_extraction(tokenizer: Any, sentences: Sequence[str], max_length: int) -> TokenizedSentences:
    """Tokenize with the tokenizer's own special tokens, truncating to ``max_length``.

    The tokenizer decides its prefix/suffix tokens (Goldfish's ``[CLS]``,
    Gemma's ``<bos>``); long sentences are re-tokenized with
    ``truncation=True`` so that those special tokens survive truncation.
    """
    if max_length < 1:
        raise CorpusError(f"max_length must be >= 1, got {max_length}; use e.g. 512")
    bad = [i for i, s in enumerate(sentences) if not isinstance(s, str)]
    if bad:
        raise CorpusError(f"sentences {bad[:10]} are not strings; pass a list of str (one per sentence)")
    if not sentences:
        return TokenizedSentences([], (), max_length)
    full = tokenizer(list(sentences), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    ids = [list(x) for x in full]
    long = tuple(i for i, x in enumerate(ids) if len(x) > max_length)
    if long:
        cut = tokenizer(
            [sentences[i] for i in long],
            add_special_tokens=True,
            truncation=True,
            max_length=max_length,
            verbose=False,
        )["input_ids"]
        for i, x in zip(long, cut):
            ids[i] = list(x)
    empty = [i for i, x in enumerate(ids) if len(x) == 0]
    if empty:
        raise CorpusError(
            f"sentences {empty[:10]} have no tokens (empty text?); a pooled vector of "
            "nothing is undefined, so drop or fill them before extracting"
        )
    return TokenizedSentences(ids, long, max_length)


def length_sorted_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Group sentence indices, longest first, into batches of at most ``batch_size``
    sentences and ``max_tokens`` padded tokens (a single sentence always fits)."""
    if batch_size < 1 or max_tokens < 1:
        raise CorpusError(f"batch_size ({batch_size}) and max_tokens ({max_tokens}) must be >= 1")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and (len(current) >= batch_size or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _forward_kwargs(model: torch.nn.Module) -> dict[str, Any]:
    """Keyword arguments that turn off the KV cache when the forward accepts it."""
    params = inspect.signature(model.forward).parameters
    extra: dict[str, Any] = {"output_hidden_states": True, "return_dict": True}
    if "use_cache" in params:
        extra["use_cache"] = False
    return extra


def special_token_ids(tokenizer: Any) -> frozenset[int]:
    """Ids that :func:`extract` leaves out with ``special_tokens="exclude"``.

    The tokenizer's ``all_special_ids`` (BOS/CLS, EOS/SEP, pad, mask, chat
    markers...) minus ``unk_token_id``: an ``<unk>`` replaces a piece of the
    sentence, so it is content.
    """
    ids = {int(i) for i in (getattr(tokenizer, "all_special_ids", None) or ())}
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is not None:
        ids.discard(int(unk))
    return frozenset(ids)


class _CentredSquares:
    """Running ``||X - mean(X)||_F^2`` per layer of row blocks ``(L, b, d)``.

    Sums are float64 and shifted by the first row seen, so a large common
    offset (a ``<bos>`` state, identical in every sentence) does not cancel
    catastrophically.
    """

    def __init__(self) -> None:
        self.shift: np.ndarray | None = None
        self.total: np.ndarray | None = None
        self.squares: np.ndarray | None = None
        self.n = 0

    def add(self, block: np.ndarray) -> None:
        x = block.astype(np.float64)
        if self.shift is None:
            self.shift = x[:, :1].copy()
            self.total = np.zeros((x.shape[0], x.shape[2]))
            self.squares = np.zeros(x.shape[0])
        x -= self.shift
        assert self.total is not None and self.squares is not None
        self.total += x.sum(axis=1)
        self.squares += np.einsum("lbd,lbd->l", x, x)
        self.n += x.shape[1]

    def value(self, n_layers: int) -> np.ndarray:
        if self.n == 0 or self.total is None or self.squares is None:
            return np.zeros(n_layers)
        centred = self.squares - np.einsum("ld,ld->l", self.total, self.total) / self.n
        return np.maximum(centred, 0.0)


class _ThreadTuner:
    """Chooses torch's CPU thread count by measured speed (``threads=None``).

    When other processes keep the cores busy, OpenMP threads that wait for
    each other at every matrix product make N threads slower than fewer: on
    2 shared cores at load 6, Gemma 3 270M ran 2-5x faster with 1 thread than
    with torch's default 2. The tuner climbs one halving or doubling at a
    time, on CPU only:

    - after a batch at ``n`` threads that got less than
      :data:`THREAD_BUSY_SHARE` of ``n`` cores (process CPU time over wall
      time x ``n``: other processes hold the cores), the next batch runs at
      ``n // 2``, kept if at least 10% faster per padded position;
    - below torch's setting, doubling is tried;
    - a step that paid off may be followed by the next one at once; after one
      that did not, the next probe waits max(:data:`THREAD_PROBE_INTERVAL_S`,
      20 x that probe's duration).

    It starts at ONE thread (the count that does not lose on busy cores, see
    docs/threads.md), not at torch's setting: batches come longest first, so
    the first ones are the most expensive, and they run at the safe count. A
    probe is made only on a batch no longer than the call's median batch
    (``before_batch(cost)``), never on the expensive head. A halving probe
    costs at most one batch at half speed, and a bad doubling (several times
    slower under load) recurs only after 20x its duration (<= ~5%). The first
    batch of a process (warm-up) decides nothing. The choice carries over to
    later calls. Thread counts change float32 rounding (~1e-7 relative), not
    values; ``threads=`` fixes the count.
    """

    state: dict[str, float] = {"threads": 0.0, "last_probe_at": -math.inf, "probe_s": 0.0, "warm": 0.0}

    def __init__(
        self,
        default: int,
        clock: Callable[[], float] = time.perf_counter,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        self.default = max(1, default)
        chosen = int(self.state["threads"])
        self.current = min(chosen, self.default) if chosen >= 1 else 1
        self.probe_limit = math.inf  # probes only on batches costing at most this (padded positions)
        self.clock = clock
        self.cpu_clock = cpu_clock
        self.probe: int | None = None
        self.baseline: float | None = None
        self.running = self.current
        self.wall0 = self.cpu0 = 0.0

    @property
    def active(self) -> bool:
        return self.default > 1

    def before_batch(self, cost: float = 0.0) -> int:
        """Set and return the thread count for the next batch (``cost``: its padded positions; a pending
        probe waits for a batch costing at most :attr:`probe_limit`)."""
        probing = self.probe is not None and cost <= self.probe_limit
        self.running = self.probe if probing and self.probe is not None else self.current
        self._probing = probing
        if torch.get_num_threads() != self.running:
            torch.set_num_threads(self.running)
        self.wall0, self.cpu0 = self.clock(), self.cpu_clock()
        return self.running

    def after_batch(self, padded_positions: int) -> None:
        """Judge a probe, or decide whether the next batch probes."""
        wall = self.clock() - self.wall0
        cpu = self.cpu_clock() - self.cpu0
        cost = wall / max(1, padded_positions)
        if not self.state["warm"]:
            self.state["warm"] = 1.0
            return
        now = self.clock()
        if self.probe is not None and not getattr(self, "_probing", True):
            self.baseline = cost  # the probe still waits for a cheap batch
            return
        if self.probe is not None:
            probed, self.probe = self.probe, None
            if self.baseline is not None and cost < 0.9 * self.baseline:
                self.current = probed  # a step that paid off may be followed by another
                self.state["threads"] = float(probed)
                self.baseline = cost
            else:  # a step that did not pay off is retried only after the wait
                self.state["last_probe_at"] = now
                self.state["probe_s"] = wall
            return
        self.baseline = cost
        busy = cpu / max(wall * self.current, 1e-9)
        since = now - self.state["last_probe_at"]
        wait = max(THREAD_PROBE_INTERVAL_S, 20 * self.state["probe_s"])
        if self.current > 1 and busy < THREAD_BUSY_SHARE and since > wait:
            self.probe = self.current // 2
        elif self.current < self.default and since > wait:
            self.probe = min(self.default, 2 * self.current)


def _centred_squares(pooled: np.ndarray) -> np.ndarray:
    """``||X_k - mean(X_k)||_F^2`` for each layer ``X_k`` of ``(L, n, d)`` (float64)."""
    out = np.empty(pooled.shape[0])
    for k in range(pooled.shape[0]):
        x = pooled[k].astype(np.float64)
        x -= x.mean(axis=0)
        out[k] = np.einsum("nd,nd->", x, x)
    return out


def progress_label(context: str | None) -> str:
    """The extraction bar's description: what is read, e.g. ``hidden states of model 'x' (float32) on eng_Latn``."""
    return f"hidden states of {context}" if context else "hidden states"


def _labels(sentence_ids: Sequence[str] | None, n: int) -> list[str] | list[int]:
    """Names of sentences in messages: their ids, else their indices."""
    if sentence_ids is None:
        return list(range(n))
    labels = [str(x) for x in sentence_ids]
    if len(labels) != n:
        raise CorpusError(
            f"sentence_ids has {len(labels)} entries for {n} sentences; pass one id per sentence (or none)"
        )
    return labels


def _check_ids_in_embedding(input_ids: list[list[int]], rows: int, labels: list[str] | list[int]) -> None:
    """Every token id indexes a row of the embedding (else the tokenizer belongs to other weights)."""
    bad = [i for i, ids in enumerate(input_ids) if max(ids) >= rows]
    if bad:
        top = max(max(input_ids[i]) for i in bad)
        raise ModelError(
            f"the tokenizer gives ids up to {top} but the model's embedding has {rows} rows (sentences "
            f"{[labels[i] for i in bad[:10]]}); pass the tokenizer these weights were trained with"
        )


def _model_dtype(model: torch.nn.Module) -> str:
    for p in model.parameters():
        return str(p.dtype).removeprefix("torch.")
    return "float32"


def _non_finite_error(
    where: str,
    bad_layers: list[int],
    rows: list[int],
    batch_size: int,
    labels: list[str] | list[int],
    unpooled_layers: list[int],
) -> NonFiniteError:
    shown = [labels[i] for i in sorted(rows)[:10]]
    more = f" (first 10 of {len(rows)})" if len(rows) > 10 else ""
    earlier = ""
    if unpooled_layers and unpooled_layers[0] < bad_layers[0]:
        earlier = (
            f"; positions the model saw but does not pool (special tokens) were already "
            f"non-finite from layer {unpooled_layers[0]}"
        )
    return NonFiniteError(
        f"NaN or inf in the hidden states of {where}: first bad layer {bad_layers[0]} "
        f"(0 = embeddings), bad layers {bad_layers}{earlier}; sentences affected in the "
        f"first failing batch ({len(rows)} of {batch_size}): {shown}{more}. "
        f"{FLOAT16_HINT}. Nothing was returned for this side"
    )


def _sentence_list(sentences: Any) -> list[str]:
    """``sentences`` as a list, or a :class:`CorpusError` when it is one string or not a sequence at all."""
    if isinstance(sentences, (str, bytes)):
        text = sentences if isinstance(sentences, str) else repr(sentences)
        raise CorpusError(
            f"sentences is one string ({text[:40]!r}{'...' if len(text) > 40 else ''}), which would be read as one "
            "sentence per character; pass a list of sentences, e.g. extract(model, [sentence])."
        )
    try:
        return list(sentences)  # items that are not strings are refused where the sentences are tokenised
    except TypeError:
        raise CorpusError(f"sentences must be a list of strings; got {type(sentences).__name__}.") from None


def extract(
    model: Any,
    sentences: Sequence[str],
    poolings: str | Sequence[str],
    *,
    tokenizer: Any = None,
    special_tokens: str = DEFAULT_SPECIAL_TOKENS,
    max_length: int = 512,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    progress: bool = True,
    context: str = "",
    sentence_ids: Sequence[str] | None = None,
    threads: int | str | None = None,
    max_layer: int | None = None,
) -> Extraction:
    """Pool every hidden state of ``model`` for each sentence; see :class:`Extraction`.

    ``model`` is an interlingua :class:`~interlingua.data.models.LoadedModel` (or
    any object with ``.model``, a transformer returning ``hidden_states``,
    ``.tokenizer``, right padding, and ``.n_hidden_states``), a Hugging Face
    model (with or without its LM head) together with ``tokenizer=`` (its
    tokenizer object, copied and prepared as ``load_model`` prepares its own),
    or a TransformerLens ``HookedTransformer`` (see
    :mod:`interlingua.data.representations.sources`); anything else is a
    :class:`~interlingua.core.errors.ModelError` saying what to pass.
    ``special_tokens`` is ``"exclude"`` (pool only the sentence's own tokens)
    or ``"include"`` (pool every token the model saw); the model's input is
    the same either way. ``max_tokens`` caps ``batch_size * longest`` per
    batch; sentences longer than ``max_length`` tokens (or the model's
    position limit) are truncated with a warning giving their count.
    ``context`` (e.g. ``"model 'gemma3-270m' (float16) on deu_Latn"``) and
    ``sentence_ids`` only name things in error messages. ``threads`` fixes
    torch's CPU thread count for this call; ``None`` takes the same count as
    ``interlingua run`` (:func:`interlingua.core.numerics.default_threads`:
    ``OMP_NUM_THREADS`` if set, else 1; docs/threads.md), ``"auto"`` picks it by
    measured speed (see :class:`_ThreadTuner`; not bit-reproducible); torch's
    setting is restored afterwards. ``max_layer=k`` pools hidden states 0..k
    only (arrays ``(k + 1, n, d)``, index j still layer j) and stops each
    forward pass after block k (:mod:`interlingua.data.representations.depth`):
    the states are bit-identical to the first k + 1 of a full extraction, and
    the blocks after k are never run.

    Raises :class:`CorpusError` for empty input, a sentence without tokens or,
    with ``"exclude"``, a sentence made only of special tokens;
    :class:`NonFiniteError` when a pooled state or vector is NaN or inf; :class:`CorpusError` also when
    ``sentences`` is one string (it would be read as one sentence per character) or not a sequence.
    """
    sentences = _sentence_list(sentences)
    names = validate_poolings(poolings)
    if special_tokens not in SPECIAL_TOKEN_MODES:
        raise PoolingError(f"special_tokens must be one of {', '.join(SPECIAL_TOKEN_MODES)}, got {special_tokens!r}")
    exclude = special_tokens == "exclude"
    source = as_extractable(model, tokenizer)
    model, tokenizer, n_states = source.model, source.tokenizer, source.n_hidden_states
    if max_layer is not None and (isinstance(max_layer, bool) or not isinstance(max_layer, int)):
        raise PoolingError(f"max_layer must be a hidden-state index (0 = embeddings) or None, got {max_layer!r}")
    if max_layer is not None and not 0 <= max_layer < n_states:
        raise PoolingError(
            f"max_layer {max_layer} out of range: this model has hidden states 0..{n_states - 1} (0 = embeddings); "
            "pass one of them, or None for every layer"
        )
    n_kept = n_states if max_layer is None else max_layer + 1
    limit = _model_position_limit(model)
    effective = min(max_length, limit) if limit else max_length

    tok = tokenize_for_extraction(tokenizer, sentences, effective)
    n = len(tok.input_ids)
    if tok.truncated:
        warnings.warn(
            f"{context + ': ' if context else ''}{len(tok.truncated)} of {n} sentences are longer than "
            f"{effective} tokens and were truncated (first: {list(tok.truncated[:5])}); "
            + truncation_advice(effective, limit),
            UserWarning,
            stacklevel=2,
        )
    if n == 0:
        raise CorpusError("no sentences to extract; pass at least one sentence")
    labels = _labels(sentence_ids, n)
    if source.embedding_rows is not None:
        _check_ids_in_embedding(tok.input_ids, source.embedding_rows, labels)

    specials = np.fromiter(special_token_ids(tokenizer), dtype=np.int64)
    is_special = [np.isin(np.asarray(ids, dtype=np.int64), specials) for ids in tok.input_ids]
    n_tokens = np.array([len(ids) for ids in tok.input_ids], dtype=np.int64)
    n_special = np.array([int(s.sum()) for s in is_special], dtype=np.int64)
    n_pooled = n_tokens - n_special if exclude else n_tokens.copy()
    if exclude:
        only_special = np.flatnonzero(n_pooled == 0).tolist()
        if only_special:
            raise CorpusError(
                f"sentences {[labels[i] for i in only_special[:10]]} consist only of special "
                "tokens (e.g. the text is itself '<bos>' or '[SEP]'), so excluding special "
                "tokens leaves nothing to pool; drop or fix them, or pass "
                "special_tokens='include'"
            )

    pad_id = getattr(tokenizer, "pad_token_id", None)
    pad_id = int(pad_id) if pad_id is not None else 0
    device = _model_device(model)
    kwargs = _forward_kwargs(model)
    where = context or f"the model ({_model_dtype(model)})"
    lengths = n_tokens.tolist()
    batches = length_sorted_batches(lengths, batch_size, max_tokens)

    weighted = [name for name in names if name != "last"]
    want_last = "last" in names
    out: dict[str, np.ndarray] = {}
    shares = {name: _CentredSquares() for name in names}
    if threads is not None and threads != "auto" and (not isinstance(threads, int) or threads < 1):
        raise PoolingError(f"threads must be >= 1, 'auto' (measured) or None (the run's policy), got {threads!r}")
    default_threads = torch.get_num_threads()
    if threads is None:
        threads = policy_threads()
    tuner = _ThreadTuner(default_threads) if threads == "auto" and device.type == "cpu" else None
    if tuner is not None:  # probes only on the cheaper half of the batches (they come longest first)
        costs = sorted(len(b) * max(lengths[i] for i in b) for b in batches)
        tuner.probe_limit = float(costs[len(costs) // 2]) if costs else math.inf
    plan = _BatchPlan(
        model=model,
        kwargs=kwargs,
        input_ids=tok.input_ids,
        is_special=is_special,
        pad_id=pad_id,
        device=device,
        blocks=source.blocks,
        n_states=n_states,
        n_kept=n_kept,
        weighted=weighted,
        want_last=want_last,
        exclude=exclude,
        where=where,
        labels=labels,
    )
    bar = tqdm(total=n, unit="sent", desc=progress_label(context), disable=not progress, leave=False)
    try:
        if isinstance(threads, int):
            torch.set_num_threads(threads)
        with torch.inference_mode(), eval_mode(model):
            for batch in batches:
                if tuner is not None and tuner.active:
                    tuner.before_batch(len(batch) * max(lengths[i] for i in batch))
                parts = _run_batch(plan, batch)
                if tuner is not None and tuner.active:
                    tuner.after_batch(len(batch) * max(lengths[i] for i in batch))
                index = np.asarray(batch)
                for name, (vectors, special_part) in parts.items():
                    if name not in out:
                        out[name] = np.empty((n_kept, n, vectors.shape[-1]), dtype=np.float32)
                    out[name][:, index, :] = vectors
                    if special_part is not None:
                        shares[name].add(special_part)
                bar.update(len(batch))
    finally:
        bar.close()
        if torch.get_num_threads() != default_threads:
            torch.set_num_threads(default_threads)

    special_share: dict[str, np.ndarray] = {}
    for name in names:
        numerator = shares[name].value(n_kept)
        if not numerator.any():
            special_share[name] = np.zeros(n_kept)
            continue
        denominator = _centred_squares(out[name])
        ratio = np.divide(numerator, denominator, out=np.zeros(n_kept), where=denominator > 0)
        special_share[name] = np.nan_to_num(ratio, nan=0.0, posinf=0.0, neginf=0.0)
    return Extraction(
        pooled={name: out[name] for name in names},
        n_tokens=n_tokens,
        n_pooled=n_pooled,
        truncated=tuple(tok.truncated),
        max_length=effective,
        special_tokens=special_tokens,
        special_share=special_share,
        position_limit=limit,
    )


@dataclass(frozen=True)
class _BatchPlan:
    """What every batch of one :func:`extract` call shares: the model, the tokenized corpus, the poolings."""

    model: torch.nn.Module
    kwargs: dict[str, Any]
    input_ids: list[list[int]]
    is_special: list[np.ndarray]
    pad_id: int
    device: torch.device
    blocks: torch.nn.ModuleList | None
    n_states: int
    n_kept: int
    weighted: list[str]
    want_last: bool
    exclude: bool
    where: str
    labels: list[str] | list[int]


def _run_batch(plan: _BatchPlan, batch: list[int]) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """One forward pass; ``{pooling: (vectors (K, B, d), special part (K, B, d) | None)}``, K = ``plan.n_kept``."""
    input_ids_all, is_special, pad_id, device = plan.input_ids, plan.is_special, plan.pad_id, plan.device
    weighted, want_last, exclude, n_kept = plan.weighted, plan.want_last, plan.exclude, plan.n_kept
    size = len(batch)
    width = max(len(input_ids_all[i]) for i in batch)
    input_ids = torch.full((size, width), pad_id, dtype=torch.long)
    mask = torch.zeros((size, width), dtype=torch.long)
    special = torch.zeros((size, width), dtype=torch.bool)
    for row, i in enumerate(batch):
        ids = input_ids_all[i]
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[row, : len(ids)] = 1
        special[row, : len(ids)] = torch.from_numpy(is_special[i])
    positions = mask.bool() & ~special if exclude else mask.bool()
    pooled = pooled_positions(mask, positions)  # validates padding and emptiness
    # Weight rows: per weighted pooling its weights and, when special tokens are
    # pooled, the same weights on the special positions only (the special part).
    rows: list[torch.Tensor] = []
    slots: dict[str, tuple[int, int | None]] = {}
    denominators: list[torch.Tensor] = []
    track_special = not exclude and bool((special & pooled).any())
    for name in weighted:
        w = _weights(pooled, name)
        slots[name] = (len(rows), len(rows) + 1 if track_special else None)
        rows.append(w)
        denominators.append(w.sum(dim=1))
        if track_special:
            rows.append(w * special)
            denominators.append(w.sum(dim=1))
    last_index = _last_index(pooled)
    last_special = special[torch.arange(size), last_index].numpy()
    # one (B, 1, T) @ (B, T, d) product per row: a pooling's bits do not depend on
    # which other poolings were requested (cache entries computed together or apart agree)
    weights = [w.to(device=device, dtype=torch.float32).unsqueeze(1) for w in rows]
    denom = torch.stack(denominators, dim=1).to(device=device, dtype=torch.float32).unsqueeze(-1) if rows else None
    pooled_dev = pooled.to(device)
    last_dev = last_index.to(device)
    batch_rows = torch.arange(size, device=device)

    ids_dev, mask_dev = input_ids.to(device), mask.to(device)

    def forward(output_hidden_states: bool) -> Any:
        kwargs = {**plan.kwargs, "output_hidden_states": output_hidden_states}
        return plan.model(input_ids=ids_dev, attention_mask=mask_dev, **kwargs)

    with torch.profiler.record_function("interlingua.forward"):  # ranges for bench profiles
        states = states_through(forward, plan.blocks, plan.n_states, n_kept - 1)

    n_rows = len(rows) + int(want_last)
    width_d = states[0].shape[-1]
    buffer = torch.empty((n_kept, size, n_rows, width_d), dtype=torch.float32, device=device)

    def pool_layer(k: int, h: torch.Tensor) -> None:
        """Weighted sums (undivided) and the last pooled state of layer ``k`` into ``buffer``."""
        for r, w in enumerate(weights):
            buffer[k, :, r] = torch.bmm(w, h).squeeze(1)
        if want_last:
            buffer[k, :, len(rows)] = h[batch_rows, last_dev]

    with torch.profiler.record_function("interlingua.pool"):
        for k in range(n_kept):
            h = states[k]
            pool_layer(k, h if h.dtype == torch.float32 else h.float())
        if denom is not None:
            buffer[:, :, : len(rows)] /= denom
        # A NaN or inf at a pooled position (weight > 0) makes its pooled vector
        # non-finite, so checking the pooled vectors finds every bad pooled state;
        # only then are the states inspected (0 * inf from a pad also lands here).
        if not bool(torch.isfinite(buffer).all()):
            bad_layers, bad_rows, unpooled_bad = _inspect_non_finite(
                states,
                pool_layer,
                buffer,
                denom,
                len(rows),
                pooled_dev,
                _read_positions(pooled_dev, weighted, batch_rows, last_dev),
                mask.to(device).bool(),
            )
            if bad_layers:
                raise _non_finite_error(
                    plan.where, bad_layers, [batch[r] for r in bad_rows], size, plan.labels, unpooled_bad
                )
        values = buffer.cpu().numpy()
    del states

    parts: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for name in weighted:
        main, extra = slots[name]
        parts[name] = (values[:, :, main], values[:, :, extra] if extra is not None else None)
    if want_last:
        vectors = values[:, :, len(rows)]
        special_part = None
        if not exclude and last_special.any():
            special_part = vectors * last_special[None, :, None]
        parts["last"] = (vectors, special_part)
    return parts


def _read_positions(
    pooled: torch.Tensor, weighted: list[str], batch_rows: torch.Tensor, last: torch.Tensor
) -> torch.Tensor:
    """(B, T) bool: positions some requested pooling reads (all pooled ones, or only the last)."""
    if weighted:
        return pooled
    at = torch.zeros_like(pooled)
    at[batch_rows, last] = True
    return at


def _inspect_non_finite(
    states: list[torch.Tensor],
    pool_layer: Callable[[int, torch.Tensor], None],
    buffer: torch.Tensor,
    denom: torch.Tensor | None,
    n_weighted: int,
    pooled: torch.Tensor,
    read: torch.Tensor,
    seen: torch.Tensor,
) -> tuple[list[int], list[int], list[int]]:
    """Slow path after a non-finite pooled vector: find the bad layers and rows.

    Re-pools layers whose NaN/inf lie only at positions that are not read
    (padding, excluded special tokens), with those positions zeroed. Returns
    (layers with a non-finite read state or pooled vector, batch rows
    affected, layers non-finite only at seen-but-unread positions).
    """
    bad_layers: set[int] = set()
    bad_rows: set[int] = set()
    unread_bad: list[int] = []
    for k, h in enumerate(states):
        h = h if h.dtype == torch.float32 else h.float()
        finite = torch.isfinite(h).all(dim=-1)  # (B, T)
        if bool(finite.all()):
            continue
        bad = ~finite & read
        if bool(bad.any()):
            bad_layers.add(k)
            bad_rows.update(torch.nonzero(bad.any(dim=1)).flatten().tolist())
        if bool((~finite & seen & ~read).any()):
            unread_bad.append(k)
        pool_layer(k, h.masked_fill(~pooled.unsqueeze(-1), 0))
        if denom is not None:
            buffer[k, :, :n_weighted] /= denom
    # finite states can still overflow in the weighted sum
    finite_out = torch.isfinite(buffer).all(dim=-1).all(dim=-1)  # (L+1, B)
    if not bool(finite_out.all()):
        bad_layers.update(torch.nonzero(~finite_out.all(dim=1)).flatten().tolist())
        bad_rows.update(torch.nonzero(~finite_out.all(dim=0)).flatten().tolist())
    return sorted(bad_layers), sorted(bad_rows), unread_bad
