"""Reading and overwriting a causal LM's residual stream with plain forward hooks.

Residual site of hidden-state index ``k`` (the project's convention: 0 = embedding output,
``k`` = output of block ``k``, ``L`` = number of blocks; docs/protocol.md):

* ``k >= 1``: the output of ``blocks[k - 1]`` (a forward hook; tuple outputs have the state first);
* ``k = 0``: the input of ``blocks[0]`` (a forward pre-hook): the embedding output after whatever
  the model adds before its first block (GPT-2's position embeddings, Gemma's scaling).

So the state read at ``k < L`` equals ``output_hidden_states[k]``; at ``k = L`` it is the last
block's output BEFORE the final norm (Hugging Face's last hidden state is after it). Patching at
``L`` at positions before the last one cannot change the next-token prediction at the last
position: no later layer reads them.

The blocks come from the architecture table (:func:`interlingua.data.models.architectures.resolve_architecture`),
so any model family the project supports can be patched. Hooks are registered for one forward
pass and removed in ``finally``, also when the pass raises. Why not nnsight or pyvene: both add a
dependency (and their own model wrappers) for what is here two 10-line hook functions on modules
the project already locates.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from interlingua.patching.errors import InterventionError

__all__ = ["PatchModel", "Patch", "residual_hooks", "capture_residuals", "run_patched", "Readout"]


@dataclass
class PatchModel:
    """A causal LM (with its head), its tokenizer and its resolved architecture."""

    lm: nn.Module
    tokenizer: Any
    arch: Any
    name: str

    @classmethod
    def wrap(cls, lm: nn.Module, tokenizer: Any, name: str | None = None) -> PatchModel:
        """Wrap a loaded causal LM (``AutoModelForCausalLM``, or a PEFT wrapper of one)."""
        from interlingua.data.models.architectures import resolve_architecture

        base_of = getattr(lm, "get_base_model", None)  # a PEFT wrapper's model
        hf = base_of() if callable(base_of) else lm
        arch = resolve_architecture(hf, hf.config)
        if not getattr(tokenizer, "is_fast", False):
            raise InterventionError(
                f"{type(tokenizer).__name__} is not a fast tokenizer: locating the subject needs character "
                "offsets (return_offsets_mapping); load it with use_fast=True."
            )
        lm.eval()
        return cls(lm, tokenizer, arch, name or str(getattr(hf.config, "name_or_path", "") or type(hf).__name__))

    @classmethod
    def from_spec(cls, spec: Any, cache_dir: Any = None) -> PatchModel:
        """Load ``spec`` (a :class:`~interlingua.data.models.ModelSpec`) with its LM head (``load_causal_lm``)."""
        from interlingua.data.causal_lm import load_causal_lm

        lm, tok = load_causal_lm(spec, cache_dir)
        return cls.wrap(lm, tok, spec.label)

    @property
    def num_layers(self) -> int:
        return int(self.arch.num_blocks)

    @property
    def n_states(self) -> int:
        """Hidden-state indices 0..L."""
        return self.num_layers + 1

    @property
    def width(self) -> int:
        return int(self.arch.embedding.weight.shape[-1])

    @property
    def device(self) -> torch.device:
        return next(self.lm.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.lm.parameters()).dtype

    @property
    def pad_id(self) -> int:
        for attr in ("pad_token_id", "eos_token_id", "unk_token_id", "bos_token_id"):
            value = getattr(self.tokenizer, attr, None)
            if value is not None:
                return int(value)
        return 0


#: one prompt's patch at one layer: (token positions, values (len(positions), d) or (d,) broadcast)
Patch = tuple[Sequence[int], torch.Tensor]


def _check_layers(model: PatchModel, layers: Sequence[int]) -> list[int]:
    out = []
    for k in layers:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= model.num_layers:
            raise InterventionError(
                f"layer {k!r} is out of range for {model.name}: hidden-state indices run 0..{model.num_layers}."
            )
        out.append(int(k))
    return out


@contextmanager
def residual_hooks(
    model: PatchModel, layers: Sequence[int], fn: Callable[[int, torch.Tensor], torch.Tensor | None]
) -> Iterator[None]:
    """Call ``fn(k, state)`` at the residual site of every ``k`` in ``layers`` during forward passes.

    ``state`` is the ``(batch, tokens, d)`` residual; ``fn`` returns a replacement or ``None``
    (keep). The hooks are removed when the block exits, whatever happens inside it.
    """
    blocks = model.arch.blocks
    handles = []

    def post(k: int) -> Callable[..., Any]:
        def hook(_module: nn.Module, _args: Any, output: Any) -> Any:
            state = output[0] if isinstance(output, (tuple, list)) else output
            new = fn(k, state)
            if new is None:
                return None
            return (new, *output[1:]) if isinstance(output, tuple) else new

        return hook

    def pre(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args:
            new = fn(0, args[0])
            return None if new is None else ((new, *args[1:]), kwargs)
        new = fn(0, kwargs["hidden_states"])
        return None if new is None else (args, {**kwargs, "hidden_states": new})

    try:
        for k in _check_layers(model, layers):
            if k == 0:
                handles.append(blocks[0].register_forward_pre_hook(pre, with_kwargs=True))
            else:
                handles.append(blocks[k - 1].register_forward_hook(post(k)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def _batches(n: int, size: int) -> Iterator[list[int]]:
    if size < 1:
        raise InterventionError(f"batch_size must be >= 1; got {size}.")
    for start in range(0, n, size):
        yield list(range(start, min(n, start + size)))


def _pad(model: PatchModel, prompts: Sequence[Sequence[int]], rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask (positions are those of each prompt alone)."""
    width = max(len(prompts[i]) for i in rows)
    ids = torch.full((len(rows), width), model.pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, i in enumerate(rows):
        ids[r, : len(prompts[i])] = torch.tensor(list(prompts[i]), dtype=torch.long)
        mask[r, : len(prompts[i])] = 1
    return ids.to(model.device), mask.to(model.device)


def _keeps_logits(lm: nn.Module) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(lm.forward).parameters
    except (TypeError, ValueError):
        return False


def _cache_argument(module: nn.Module) -> str:
    """The keyword a model's forward takes its key/value cache by.

    ``cache`` (recent transformers) or ``past_key_values``.
    """
    try:
        params = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _logprobs_at(
    model: PatchModel,
    ids: torch.Tensor,
    mask: torch.Tensor,
    reads: Sequence[Sequence[int]],
    past: Any = None,
) -> torch.Tensor:
    """Float32 log-probabilities of the next token at positions ``reads[r]`` of each row ``r``.

    Returns ``(sum of len(reads[r]), V)``: row 0's positions first, in the order given. With
    ``past`` (a key/value cache of a prefix every row shares), ``ids``, ``mask`` and ``reads``
    hold only the tokens after that prefix. Only the positions read go through the LM head
    (``logits_to_keep``) where the model's forward takes it.
    """
    row = torch.tensor([r for r, pos in enumerate(reads) for _ in pos], dtype=torch.long, device=ids.device)
    where = torch.tensor([int(p) for pos in reads for p in pos], dtype=torch.long, device=ids.device)
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "use_cache": False}
    if past is not None:
        prefix = past.get_seq_length()
        kwargs.update(
            {
                "use_cache": True,
                _cache_argument(model.lm): past,
                "attention_mask": torch.cat(
                    [torch.ones((ids.shape[0], prefix), dtype=mask.dtype, device=mask.device), mask], 1
                ),
            }
        )
    if _keeps_logits(model.lm):
        keep = torch.unique(where)
        kwargs["logits_to_keep"] = keep
        logits = model.lm(**kwargs).logits  # (batch, len(keep), V)
        picked = logits[row, torch.searchsorted(keep, where)]
    else:
        logits = model.lm(**kwargs).logits
        picked = logits[row, where]
    return torch.log_softmax(picked.float(), dim=-1)


def _last_logprobs(model: PatchModel, ids: torch.Tensor, mask: torch.Tensor, past: Any = None) -> torch.Tensor:
    """``(batch, V)`` float32 log-probabilities of the next token after each row's last real token."""
    return _logprobs_at(model, ids, mask, [[int(n) - 1] for n in mask.sum(dim=1).tolist()], past)


class _AllCaptured(Exception):
    """Raised by :func:`capture_residuals`' hook once every requested state is read: the forward stops there."""


def capture_residuals(
    model: PatchModel,
    prompts: Sequence[Sequence[int]],
    layers: Sequence[int],
    *,
    batch_size: int = 16,
    logprobs: bool = False,
) -> tuple[list[dict[int, torch.Tensor]], torch.Tensor | None]:
    """Residual states of every prompt at ``layers``: ``[{k: (n_tokens_i, d) float32 CPU}]``, in input order.

    With ``logprobs=True`` also the ``(n, V)`` next-token log-probabilities at each last token
    (the unpatched run), else None; without them each forward stops once the deepest requested state is read
    (the blocks after it never run, and the states are the tensors a full pass computes).
    """
    layers = _check_layers(model, layers)
    out: list[dict[int, torch.Tensor]] = [{} for _ in prompts]
    lps: list[torch.Tensor] = []
    for rows in _batches(len(prompts), batch_size):
        ids, mask = _pad(model, prompts, rows)
        seen: dict[int, torch.Tensor] = {}

        def keep(k: int, state: torch.Tensor, *, seen: dict[int, torch.Tensor] = seen) -> None:
            seen[k] = state.detach().float().cpu()
            if not logprobs and len(seen) == len(layers):  # every state read: the deeper blocks are not needed
                raise _AllCaptured

        with torch.inference_mode(), residual_hooks(model, layers, keep):
            if logprobs:
                lps.append(_last_logprobs(model, ids, mask).cpu())
            else:
                with suppress(_AllCaptured):
                    model.arch.text_module(input_ids=ids, attention_mask=mask, use_cache=False)
        for r, i in enumerate(rows):
            n = len(prompts[i])
            out[i] = {k: seen[k][r, :n].clone() for k in layers}
    return out, (torch.cat(lps) if logprobs else None)


@dataclass(frozen=True)
class Readout:
    """Next-token read-out of a batch of prompts: log-probabilities of chosen ids and the top-1 id."""

    selected: torch.Tensor  # (n, m) float32: log p of each prompt's requested ids
    top1: torch.Tensor  # (n,) int64
    full: torch.Tensor | None  # (n, V) float32 when requested
    states: list[dict[int, torch.Tensor]] | None = None  # per prompt {layer: (n_tokens, d)} when captured
    answer: torch.Tensor | None = None  # (n,) float64: log p of each prompt's whole continuation, when given


def _shared_prefix(
    prompts: Sequence[Sequence[int]],
    rows: list[int],
    checked: Sequence[Mapping[int, Any]],
    compute_from: Sequence[int] | None = None,
) -> int:
    """Leading tokens every prompt of ``rows`` shares, none of them patched, the last token of each left out.

    In a causal model these positions have the same states in every row at every layer, whatever
    is patched after them, so they are computed once and reused (their key/value cache).
    """
    first = [list(prompts[i]) for i in rows]
    limit = min(len(p) - 1 for p in first)
    for i in rows:
        for pos, _ in checked[i].values():
            limit = min(limit, int(pos.min()))
        if compute_from is not None:
            limit = min(limit, int(compute_from[i]))
    n = 0
    while n < limit and all(p[n] == first[0][n] for p in first):
        n += 1
    return n


def _prefix_cache(
    model: PatchModel, prefix: Sequence[int], capture: Sequence[int]
) -> tuple[Any, dict[int, torch.Tensor]]:
    """The key/value cache of ``prefix`` (batch 1) and its residual states at ``capture`` (``(P, d)`` each)."""
    ids = torch.tensor([list(prefix)], dtype=torch.long, device=model.device)
    seen: dict[int, torch.Tensor] = {}

    def keep(k: int, state: torch.Tensor) -> None:
        seen[k] = state[0].detach().float().cpu()

    with torch.inference_mode(), residual_hooks(model, capture, keep):
        out = model.arch.text_module(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    cache = (
        getattr(out, "cache", None)
        if "cache" in getattr(out, "keys", dict)()
        else getattr(out, "past_key_values", None)
    )
    if cache is None or not hasattr(cache, "batch_repeat_interleave") or cache.get_seq_length() != len(prefix):
        raise InterventionError(
            f"{model.name} returned no usable key/value cache; call run_patched with reuse_prefix=False."
        )
    return cache, seen


def _check_patch(model: PatchModel, n_tokens: int, k: int, patch: Patch) -> tuple[torch.Tensor, torch.Tensor]:
    positions, values = patch
    where = [int(p) for p in positions]
    if not where or min(where) < 0 or max(where) >= n_tokens:
        raise InterventionError(
            f"patch positions {list(positions)} at layer {k} are outside the prompt's {n_tokens} tokens."
        )
    pos = torch.tensor(where, dtype=torch.long)
    v = torch.as_tensor(values)
    if v.dim() == 1:
        v = v.unsqueeze(0).expand(pos.numel(), -1)
    if v.dim() != 2 or v.shape[0] != pos.numel() or v.shape[1] != model.width:
        raise InterventionError(
            f"patch values at layer {k} have shape {tuple(torch.as_tensor(values).shape)}; expected ({model.width},) "
            f"or ({pos.numel()}, {model.width}) for {model.name}."
        )
    return pos, v


def _check_finite(checked: Sequence[Mapping[int, tuple[torch.Tensor, torch.Tensor]]]) -> None:
    """Refuse NaN or inf in any patch value (one vectorised check; the offending prompt and layer named)."""
    values = [v[:1] if v.stride(0) == 0 else v for c in checked for _, v in c.values()]  # a broadcast vector once
    if not values or bool(torch.isfinite(torch.cat([v.reshape(-1).float() for v in values])).all()):
        return
    for i, c in enumerate(checked):
        for k, (_, v) in c.items():
            if not torch.isfinite(v).all():
                raise InterventionError(f"patch values of prompt {i} at layer {k} contain NaN or inf.")


def run_patched(
    model: PatchModel,
    prompts: Sequence[Sequence[int]],
    patches: Sequence[Mapping[int, Patch]],
    *,
    token_ids: Sequence[Sequence[int]] | None = None,
    batch_size: int = 16,
    full: bool = False,
    reuse_prefix: bool = True,
    capture: Sequence[int] = (),
    compute_from: Sequence[int] | None = None,
    continuations: Sequence[Sequence[int]] | None = None,
) -> Readout:
    """Run ``prompts`` with ``patches[i]`` (``{layer: (positions, values)}``) written into the residual stream.

    At each listed layer the residual of prompt ``i`` at ``positions`` is REPLACED by ``values``
    (a ``(d,)`` vector is broadcast to every position). Prompts are right-padded in batches of
    similar length, so each keeps the positions it has alone. Returns the next-token
    log-probabilities at each prompt's last token for ``token_ids[i]``, the top-1 ids and, with
    ``full=True``, the whole ``(n, V)`` distribution; with ``capture`` (layers), every prompt's
    residual states there as computed in this run.

    ``reuse_prefix``: the leading tokens all prompts of a batch share before the first patched
    position (``<bos>The capital of``) are run once and their key/value cache is reused by every
    row (their states cannot depend on anything patched later), so a forward pass computes only
    the tokens from the subject on: the same function, about half the work for the probes. The
    outputs equal a full forward's to float rounding; patched and unpatched calls with the same
    inputs take the same path, so a patch that writes back the run's own states changes nothing,
    bit for bit. ``compute_from`` (per prompt): compute from this position on even where more is
    shared (an unpatched baseline that does the same work as a patched run of the same prompts).

    ``continuations`` (per prompt, token ids, at least one): the whole answer is scored in the same
    pass by teacher forcing: the prompt is run with all but the last continuation token appended,
    and ``Readout.answer[i]`` is the sum of log p of each continuation token given the prompt (as
    patched) and the tokens before it. The appended tokens come after every patched position, so
    the patch and the read-out at the prompt's last token are those of the prompt alone.
    """
    if len(patches) != len(prompts):
        raise InterventionError(
            f"{len(prompts)} prompts but {len(patches)} patch sets; give one (possibly empty) per prompt."
        )
    if token_ids is not None and len(token_ids) != len(prompts):
        raise InterventionError(f"{len(prompts)} prompts but {len(token_ids)} token-id lists.")
    checked = [
        {int(k): _check_patch(model, len(prompts[i]), int(k), p) for k, p in patches[i].items()}
        for i in range(len(prompts))
    ]
    _check_finite(checked)
    layers = sorted({k for c in checked for k in c})
    _check_layers(model, layers)
    capture = _check_layers(model, list(capture))
    n = len(prompts)
    if continuations is not None:
        if len(continuations) != n:
            raise InterventionError(f"{n} prompts but {len(continuations)} continuations.")
        if any(len(c) == 0 for c in continuations):
            raise InterventionError("a continuation to score is empty; give at least one token id per prompt.")
    conts = [list(c) for c in continuations] if continuations is not None else [[] for _ in range(n)]
    # what is run: each prompt with its continuation but the last token (whose successor is not scored)
    runs = [list(prompts[i]) + conts[i][:-1] for i in range(n)]
    if compute_from is not None and len(compute_from) != n:
        raise InterventionError(f"{n} prompts but {len(compute_from)} compute_from positions.")
    order = sorted(range(n), key=lambda i: len(runs[i]))  # similar lengths share a batch: less padding
    selected: list[torch.Tensor | None] = [None] * n
    top1 = torch.empty(n, dtype=torch.long)
    fulls: list[torch.Tensor | None] = [None] * n
    answer = torch.full((n,), float("nan"), dtype=torch.float64)
    states: list[dict[int, torch.Tensor]] = [{} for _ in range(n)]
    prefixes: dict[tuple[int, ...], tuple[Any, dict[int, torch.Tensor]]] = {}
    for chunk in _batches(n, batch_size):
        rows = [order[c] for c in chunk]
        start = _shared_prefix(prompts, rows, checked, compute_from) if reuse_prefix else 0
        past: Any = None
        head: dict[int, torch.Tensor] = {}
        if start:
            key = tuple(prompts[rows[0]][:start])
            if key not in prefixes:
                prefixes[key] = _prefix_cache(model, key, capture)
            template, head = prefixes[key]
            past = copy.deepcopy(template)
            past.batch_repeat_interleave(len(rows))
        tails = [runs[i][start:] for i in rows]
        ends = [len(prompts[i]) - start for i in rows]  # each prompt's own length in tail coordinates
        ids, mask = _pad(model, tails, list(range(len(rows))))
        per_layer: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        for k in layers:
            r_idx, p_idx, vals = [], [], []
            for r, i in enumerate(rows):
                if k in checked[i]:
                    pos, v = checked[i][k]
                    r_idx.append(torch.full_like(pos, r))
                    p_idx.append(pos - start)
                    vals.append(v)
            if r_idx:
                per_layer[k] = (
                    torch.cat(r_idx).to(model.device),
                    torch.cat(p_idx).to(model.device),
                    torch.cat(vals).to(device=model.device, dtype=model.dtype),
                )
        seen: dict[int, torch.Tensor] = {}

        def write(
            k: int,
            state: torch.Tensor,
            *,
            per_layer: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = per_layer,
            seen: dict[int, torch.Tensor] = seen,
        ) -> torch.Tensor | None:
            new = None
            if k in per_layer:
                r_idx, p_idx, vals = per_layer[k]
                new = state.clone()
                new[r_idx, p_idx] = vals
            if k in capture:
                seen[k] = (state if new is None else new).detach().float().cpu()
            return new

        reads = [list(range(e - 1, e - 1 + max(1, len(conts[i])))) for e, i in zip(ends, rows)]
        with torch.inference_mode(), residual_hooks(model, sorted(set(per_layer) | set(capture)), write):
            lp_all = _logprobs_at(model, ids, mask, reads, past)
        first = [sum(len(x) for x in reads[:r]) for r in range(len(reads))]  # row r's first read in lp_all
        lp = lp_all[torch.tensor(first, dtype=torch.long, device=lp_all.device)]
        best = lp.argmax(dim=-1).cpu()
        for r, i in enumerate(rows):
            if conts[i]:
                idx = torch.arange(first[r], first[r] + len(conts[i]), device=lp_all.device)
                answer[i] = float(
                    lp_all[idx, torch.as_tensor(conts[i], dtype=torch.long, device=lp_all.device)].double().sum()
                )
            top1[i] = best[r]
            if token_ids is not None:
                want = list(token_ids[i])
                selected[i] = (
                    lp[r, torch.as_tensor(want, dtype=torch.long, device=lp.device)].cpu() if want else torch.empty(0)
                )
            if full:
                fulls[i] = lp[r].cpu()
            if capture:
                states[i] = {
                    k: torch.cat([head[k], seen[k][r, : ends[r]]]) if start else seen[k][r, : ends[r]].clone()
                    for k in capture
                }
    width = max((len(t) for t in token_ids), default=0) if token_ids is not None else 0
    sel_all = torch.full((n, width), float("nan"))
    for i, sel in enumerate(selected):
        if sel is not None and sel.numel():
            sel_all[i, : sel.numel()] = sel
    return Readout(
        sel_all,
        top1,
        torch.stack([f for f in fulls if f is not None]) if full and n else None,
        states if capture else None,
        answer if continuations is not None else None,
    )
