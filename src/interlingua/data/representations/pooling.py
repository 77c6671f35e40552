"""Sentence poolings of token hidden states (docs/protocol.md, "Poolings").

All functions take hidden states ``h`` of shape ``(..., B, T, d)`` (a leading
layer axis ``L`` is allowed, so every layer is pooled in one vectorised call),
a RIGHT-padded attention mask of shape ``(B, T)`` (1 = token the model saw,
0 = pad) and, optionally, a pooling-position mask ``positions`` of the same
shape (1 = position that enters the sentence vector). ``positions`` defaults
to the attention mask; it must lie inside it and leave every row at least one
position. Extraction passes it to leave the tokenizer's special tokens
(``<bos>``, ``[CLS]``, ``[SEP]``...) out of the pooled vector while the model
still sees them. The functions return ``(..., B, d)`` in the dtype of ``h``.

- mean: ``sum_i p_i h_i / sum_i p_i``.
- sgpt (Muennighoff 2022): weights ``w_i = r_i``, the RANK of position ``i``
  among the pooled positions of its row (1, 2, ..., T'), so a tokenizer that
  prepends ``<bos>`` gives the content tokens the same weights as one that
  does not once ``<bos>`` is excluded. With ``positions`` equal to the
  attention mask (right padding) ``r_i = i``, the original definition.
- last: the state at the last pooled position.

Right padding is required (checked on the attention mask): with left padding
the SGPT weights and the last position would silently depend on batch
composition. Values at positions that are not pooled (padding, excluded
special tokens) never reach the result, even when they are NaN or inf.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from interlingua.core.errors import InterlinguaError

__all__ = [
    "POOLINGS",
    "PoolingError",
    "check_right_padded",
    "last_pooled_index",
    "last_token_pool",
    "mean_pool",
    "pool",
    "pooled_positions",
    "pooling_weights",
    "sgpt_pool",
    "validate_poolings",
]

POOLINGS: tuple[str, ...] = ("mean", "sgpt", "last")


class PoolingError(InterlinguaError, ValueError):
    """Hidden states or attention mask cannot be pooled (bad shape, padding, empty row)."""


def check_right_padded(mask: torch.Tensor) -> None:
    """Raise :class:`PoolingError` unless every mask row is ones then zeros and non-empty.

    Left padding (zeros before ones) or holes inside a row would make SGPT
    weights and the last-token index depend on the batch; an all-pad row has
    no sentence vector (its denominator is 0).
    """
    m = mask.bool()
    if m.shape[1] > 1 and bool((~m[:, :-1] & m[:, 1:]).any()):
        bad = torch.nonzero((~m[:, :-1] & m[:, 1:]).any(dim=1)).flatten().tolist()
        raise PoolingError(
            f"attention mask is not right-padded (rows {bad[:10]} have a pad before a "
            "token); set tokenizer.padding_side = 'right' before extracting"
        )
    empty = torch.nonzero(m.sum(dim=1) == 0).flatten().tolist()
    if empty:
        raise PoolingError(
            f"rows {empty[:10]} of the attention mask have no tokens, so their pooled "
            "vector is undefined (0/0); drop empty sentences before extracting"
        )


def pooled_positions(mask: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Validate the attention mask (and ``positions``); return the pooled positions as bool (B, T).

    ``positions=None`` pools every token of the attention mask.
    """
    if mask.dim() != 2:
        raise PoolingError(
            f"attention mask must have shape (B, T), got {tuple(mask.shape)}; "
            "pass the tokenizer's attention_mask for the batch"
        )
    check_right_padded(mask)
    m = mask.bool()
    if positions is None:
        return m
    if tuple(positions.shape) != tuple(mask.shape):
        raise PoolingError(
            f"pooling positions of shape {tuple(positions.shape)} do not match the attention "
            f"mask {tuple(mask.shape)}; pass one (B, T) 0/1 row per sentence"
        )
    p = positions.to(device=m.device).bool()
    outside = torch.nonzero((p & ~m).any(dim=1)).flatten().tolist()
    if outside:
        raise PoolingError(
            f"rows {outside[:10]} pool positions that are padding (outside the attention "
            "mask); pooling positions must be a subset of the tokens the model saw"
        )
    empty = torch.nonzero(p.sum(dim=1) == 0).flatten().tolist()
    if empty:
        raise PoolingError(
            f"rows {empty[:10]} have no pooled position (e.g. only special tokens), so "
            "their vector is undefined (0/0); keep at least one position per row"
        )
    return p


def pooling_weights(mask: torch.Tensor, pooling: str, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Unnormalised (B, T) float64 weights ``w`` with ``pooled = sum_i w_i h_i / sum_i w_i``.

    mean: ``p_i``; sgpt: ``r_i p_i`` (rank among pooled positions); last: 1 at
    the last pooled position, else 0.
    """
    return _weights(pooled_positions(mask, positions), pooling)


def _weights(p: torch.Tensor, pooling: str) -> torch.Tensor:
    """:func:`pooling_weights` for already validated bool pooled positions ``p``."""
    if pooling == "mean":
        return p.double()
    if pooling == "sgpt":
        return torch.cumsum(p.double(), dim=1) * p
    if pooling == "last":
        w = torch.zeros(p.shape, dtype=torch.float64, device=p.device)
        w[torch.arange(p.shape[0], device=p.device), _last_index(p)] = 1.0
        return w
    raise PoolingError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")


def _last_index(p: torch.Tensor) -> torch.Tensor:
    """Index of the last True of each row of a bool (B, T) tensor with non-empty rows."""
    steps = torch.arange(1, p.shape[1] + 1, device=p.device)
    return (p.long() * steps).argmax(dim=1)


def last_pooled_index(mask: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """(B,) long: index of the last pooled position of each row."""
    return _last_index(pooled_positions(mask, positions))


def _validate(hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
    """Check shapes, padding and positions; return the pooled positions on ``hidden``'s device."""
    if mask.dim() != 2:
        raise PoolingError(
            f"attention mask must have shape (B, T), got {tuple(mask.shape)}; "
            "pass the tokenizer's attention_mask for the batch"
        )
    if hidden.dim() < 3 or tuple(hidden.shape[-3:-1]) != tuple(mask.shape):
        raise PoolingError(
            f"hidden states of shape {tuple(hidden.shape)} do not match mask "
            f"{tuple(mask.shape)}; expected (..., B, T, d) with the mask's (B, T)"
        )
    return pooled_positions(mask, positions).to(hidden.device)


def _weighted(hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None, pooling: str) -> torch.Tensor:
    p = _validate(hidden, mask, positions)
    dtype = hidden.dtype
    if dtype in (torch.float16, torch.bfloat16):  # sum_i w_i overflows float16 at T > 361
        hidden = hidden.float()
    w = _weights(p, pooling).to(dtype=hidden.dtype)
    if not bool(torch.isfinite(hidden).all()):  # 0 * inf = NaN: zero what is not pooled
        hidden = hidden.masked_fill(~p.unsqueeze(-1), 0)
    summed = torch.einsum("...btd,bt->...bd", hidden, w)
    return (summed / w.sum(dim=1).unsqueeze(-1)).to(dtype)


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Masked mean ``sum_i p_i h_i / sum_i p_i`` over the pooled positions of each row."""
    return _weighted(hidden, mask, positions, "mean")


def sgpt_pool(hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """SGPT position-weighted mean (Muennighoff 2022): ``w_i = r_i p_i``.

    ``r_i`` is the rank of position ``i`` among the row's pooled positions
    (1..T'); later tokens of a causal model have seen more of the sentence,
    so they weigh more. The denominator is at least 1 for any row with a
    pooled position (empty rows are refused).
    """
    return _weighted(hidden, mask, positions, "sgpt")


def last_token_pool(hidden: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """State at the last pooled position of each row (by default the last non-pad token)."""
    last = _last_index(_validate(hidden, mask, positions))  # (B,)
    batch = torch.arange(hidden.shape[-3], device=hidden.device)
    return hidden[..., batch, last, :]


_POOL_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "mean": mean_pool,
    "sgpt": sgpt_pool,
    "last": last_token_pool,
}


def pool(
    hidden: torch.Tensor,
    mask: torch.Tensor,
    pooling: str,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Apply the pooling named ``pooling`` (one of :data:`POOLINGS`)."""
    try:
        fn = _POOL_FUNCTIONS[pooling]
    except KeyError:
        raise PoolingError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}") from None
    return fn(hidden, mask, positions)


def validate_poolings(poolings: str | Sequence[str]) -> tuple[str, ...]:
    """Return poolings as a tuple without duplicates, refusing unknown names."""
    names = (poolings,) if isinstance(poolings, str) else tuple(poolings)
    if not names:
        raise PoolingError(f"no pooling requested; pass one or more of {', '.join(POOLINGS)}")
    unknown = [p for p in names if p not in _POOL_FUNCTIONS]
    if unknown:
        raise PoolingError(f"unknown pooling(s) {unknown}; choose from {', '.join(POOLINGS)}")
    return tuple(dict.fromkeys(names))
