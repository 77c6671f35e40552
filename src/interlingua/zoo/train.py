"""The zoo's training loop: GPT-2 from scratch on verses, and LoRA adapters over it.

Each batch holds ``batch_size`` whole verses (``[CLS] pieces [SEP]``, right
padded). Verses are drawn in a seeded order and grouped by length (each
group of 16 batches is sorted before it is cut), so a batch pads to a
length close to its longest verse. The loss is the mean next-token NLL over
real targets only: the LM head runs on the positions that predict a real
token, never on padding. Because verses are right padded and attention is
causal, no attention mask is needed (a real position never sees a pad).

Determinism: :func:`deterministic_torch` fixes the thread count and turns on
``torch.use_deterministic_algorithms`` for the duration of a build; the
model initialisation, the batch order and dropout draw from seeds derived
with :func:`derive_seed`. On one machine and thread count two builds are
bit-identical; across machines or thread counts floating-point reduction
order may differ (see the module docs of :mod:`interlingua.zoo`).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

    from interlingua.zoo.config import TrainSchedule

__all__ = [
    "TrainStats",
    "collate",
    "derive_seed",
    "deterministic_torch",
    "length_batches",
    "lm_loss",
    "mean_nll",
    "new_gpt2",
    "train_loop",
]


def derive_seed(seed: int, *parts: str) -> int:
    """A 31-bit seed from the family seed and labels (``"model", "eng_Latn"``): stable, order-free."""
    text = "\x00".join(["interlingua.zoo", str(int(seed)), *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


@contextmanager
def deterministic_torch(threads: int) -> Iterator[None]:
    """Fixed thread count and deterministic algorithms; the previous settings come back after.

    Also quiets transformers' and PEFT's chatter for the duration (progress
    bars of save_pretrained, the padding advice: this loop never attends to
    padding, see :func:`lm_loss`).
    """
    import warnings

    import torch.utils.deterministic as deterministic_module
    from transformers.utils import logging as hf_logging

    threads_before = torch.get_num_threads()
    det_before = torch.are_deterministic_algorithms_enabled()
    warn_before = torch.is_deterministic_algorithms_warn_only_enabled()
    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    # fill_uninitialized_memory is a module property that torch's stubs do not declare
    torch_deterministic: Any = deterministic_module
    fill_before = torch_deterministic.fill_uninitialized_memory
    torch.set_num_threads(int(threads))
    torch.use_deterministic_algorithms(True)
    # Filling every new tensor with NaN (a debugging aid that deterministic mode turns on)
    # costs a sixth of a training step; the loop never reads uninitialised memory.
    torch_deterministic.fill_uninitialized_memory = False
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Could not find a config file.*")
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
            yield
    finally:
        torch.use_deterministic_algorithms(det_before, warn_only=warn_before)
        torch_deterministic.fill_uninitialized_memory = fill_before
        torch.set_num_threads(threads_before)
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def length_batches(lengths: Sequence[int], batch_size: int, seed: int, group: int = 16) -> Iterator[list[int]]:
    """Endless batches of indices: a seeded shuffle per epoch, length-sorted within groups of batches."""
    rng = np.random.default_rng(int(seed))
    lengths_arr = np.asarray(lengths)
    n = len(lengths_arr)
    if n == 0:
        raise ValueError("no training sequences")
    span = batch_size * group
    while True:
        order = rng.permutation(n)
        batches: list[list[int]] = []
        for start in range(0, n, span):
            chunk = order[start : start + span]
            chunk = chunk[np.argsort(lengths_arr[chunk], kind="stable")]
            batches.extend(chunk[j : j + batch_size].tolist() for j in range(0, len(chunk), batch_size))
        for b in rng.permutation(len(batches)):
            yield batches[b]


def collate(seqs: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    """Right-padded ``(batch, longest)`` int64 ids."""
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), int(pad_id), dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def lm_loss(lm: GPT2LMHeadModel, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(sum of next-token NLL over real targets, number of targets) of a right-padded batch.

    ``lm`` is a ``GPT2LMHeadModel`` (possibly with LoRA layers injected).
    Position ``t`` predicts token ``t + 1``; targets are the real tokens
    after the first (``[CLS]``), ``[SEP]`` included.
    """
    hidden = lm.transformer(input_ids=ids).last_hidden_state
    positions = torch.arange(ids.shape[1] - 1)
    predicts = positions.unsqueeze(0) < (lengths - 1).unsqueeze(1)  # (batch, width - 1)
    logits = lm.lm_head(hidden[:, :-1][predicts])
    targets = ids[:, 1:][predicts]
    return F.cross_entropy(logits.float(), targets, reduction="sum"), int(targets.numel())


@torch.no_grad()
def mean_nll(
    lm: GPT2LMHeadModel, seqs: Sequence[Sequence[int]], pad_id: int, batch_size: int = 64
) -> tuple[float, int]:
    """(mean next-token NLL in nats per token, number of tokens) of ``seqs``, teacher forced."""
    was_training = lm.training
    lm.eval()
    order = sorted(range(len(seqs)), key=lambda i: (len(seqs[i]), i))
    total = 0.0
    count = 0
    for start in range(0, len(order), batch_size):
        batch = [seqs[i] for i in order[start : start + batch_size]]
        loss, n = lm_loss(lm, collate(batch, pad_id), torch.tensor([len(s) for s in batch]))
        total += float(loss)
        count += n
    lm.train(was_training)
    return total / max(count, 1), count


def new_gpt2(
    *,
    vocab_size: int,
    n_layer: int,
    n_embd: int,
    n_head: int,
    max_length: int,
    dropout: float,
    cls_id: int,
    sep_id: int,
    pad_id: int,
    seed: int,
):
    """A freshly initialised ``GPT2LMHeadModel`` (initialisation seeded with ``seed``).

    GPT-2's own architecture and tanh GELU; the embedding has exactly one row
    per tokenizer piece (so chance level is ln V with V = the vocabulary).
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=max_length,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        activation_function="gelu_pytorch_tanh",  # GPT-2's tanh GELU as one fused kernel
        bos_token_id=cls_id,
        eos_token_id=sep_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(int(seed))
    return GPT2LMHeadModel(config)


@dataclass
class TrainStats:
    """What a training run did: optimizer steps, real target tokens and seconds (excluding callbacks)."""

    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def _schedule(steps: int, warmup: int) -> Callable[[int], float]:
    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        span = max(steps - warmup, 1)
        progress = min((step - warmup) / span, 1.0)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def train_loop(
    lm: GPT2LMHeadModel,
    seqs: Sequence[Sequence[int]],
    *,
    schedule: TrainSchedule,
    pad_id: int,
    seed: int,
    checkpoints: Sequence[int] = (),
    on_checkpoint: Callable[[int], None] | None = None,
) -> TrainStats:
    """Train the trainable parameters of ``lm`` for ``schedule.steps`` AdamW steps on ``seqs``
    (:class:`~interlingua.zoo.config.TrainSchedule`: batch size, learning rate, warm-up, weight decay, clipping).

    ``on_checkpoint(step)`` runs after ``step`` optimizer steps for each step
    in ``checkpoints`` (0 = before any) and is not timed. Dropout (if the
    model has any) and the batch order are seeded by ``seed``.
    """
    steps, batch_size, lr = schedule.steps, schedule.batch_size, schedule.lr
    warmup, weight_decay, clip = schedule.warmup, schedule.weight_decay, schedule.clip
    params = [p for p in lm.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    try:
        optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-8, fused=True)
    except (RuntimeError, TypeError):  # no fused kernel for this device/dtype
        optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-8)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(steps, warmup))
    lengths = [len(s) for s in seqs]
    batches = length_batches(lengths, batch_size, seed)
    wanted = set(int(s) for s in checkpoints)
    stats = TrainStats()
    torch.manual_seed(int(seed))  # dropout draws
    lm.train()
    if 0 in wanted and on_checkpoint is not None:
        on_checkpoint(0)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        index = next(batches)
        batch = [seqs[i] for i in index]
        ids = collate(batch, pad_id)
        loss_sum, n = lm_loss(lm, ids, torch.tensor([len(s) for s in batch]))
        loss = loss_sum / n
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        stats.steps = step
        stats.tokens += n
        stats.losses.append(float(loss.detach()))
        if step in wanted and on_checkpoint is not None:
            stats.seconds += time.perf_counter() - start
            lm.eval()
            on_checkpoint(step)
            lm.train()
            start = time.perf_counter()
    stats.seconds += time.perf_counter() - start
    lm.eval()
    return stats
