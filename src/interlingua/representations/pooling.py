"""Sentence poolings of token hidden states (docs/protocol.md, "Poolings").

All functions take hidden states ``h`` of shape ``(..., B, T, d)`` (a leading
layer axis ``L`` is allowed, so every layer is pooled in one vectorised call)
and a RIGHT-padded attention mask of shape ``(B, T)`` (1 = token, 0 = pad).
They return ``(..., B, d)`` in the dtype of ``h``.

Right padding is required: the SGPT weights ``w_i = i`` count positions from
the first token, and "last token" is read from the count of real tokens, both
of which would silently change with batch composition under left padding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from interlingua.errors import InterlinguaError

__all__ = [
    "POOLINGS",
    "PoolingError",
    "check_right_padded",
    "last_token_pool",
    "mean_pool",
    "pool",
    "sgpt_pool",
    "validate_poolings",
]

POOLINGS: tuple[str, ...] = ("mean", "sgpt", "last")


class PoolingError(InterlinguaError, ValueError):
    """Hidden states or attention mask cannot be pooled (bad shape, padding, empty row)."""


def _check_inputs(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Validate shapes and padding; return the mask as a 0/1 tensor of ``hidden``'s dtype."""
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
    check_right_padded(mask)
    return mask.to(device=hidden.device, dtype=hidden.dtype)


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


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked mean: ``sum_i m_i h_i / sum_i m_i`` over the real tokens of each row."""
    m = _check_inputs(hidden, mask)
    summed = torch.einsum("...btd,bt->...bd", hidden, m)
    return summed / m.sum(dim=1).unsqueeze(-1)


def sgpt_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SGPT position-weighted mean (Muennighoff 2022): ``w_i = i * m_i``, ``i = 1..T``.

    Later tokens of a causal model have seen more of the sentence, so they
    weigh more. Right padding is enforced; the denominator ``sum_i w_i`` is
    at least 1 for any non-empty row (empty rows are refused).
    """
    m = _check_inputs(hidden, mask)
    positions = torch.arange(1, m.shape[1] + 1, device=m.device, dtype=m.dtype)
    w = m * positions  # (B, T)
    summed = torch.einsum("...btd,bt->...bd", hidden, w)
    return summed / w.sum(dim=1).unsqueeze(-1)


def last_token_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """State at the last non-pad position of each row (right padding)."""
    _check_inputs(hidden, mask)
    last = mask.long().sum(dim=1).to(hidden.device) - 1  # (B,)
    batch = torch.arange(hidden.shape[-3], device=hidden.device)
    return hidden[..., batch, last, :]


_POOL_FUNCTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mean": mean_pool,
    "sgpt": sgpt_pool,
    "last": last_token_pool,
}


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """Apply the pooling named ``pooling`` (one of :data:`POOLINGS`)."""
    try:
        fn = _POOL_FUNCTIONS[pooling]
    except KeyError:
        raise PoolingError(
            f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}"
        ) from None
    return fn(hidden, mask)


def validate_poolings(poolings: str | Sequence[str]) -> tuple[str, ...]:
    """Return poolings as a tuple without duplicates, refusing unknown names."""
    names = (poolings,) if isinstance(poolings, str) else tuple(poolings)
    if not names:
        raise PoolingError(f"no pooling requested; pass one or more of {', '.join(POOLINGS)}")
    unknown = [p for p in names if p not in _POOL_FUNCTIONS]
    if unknown:
        raise PoolingError(
            f"unknown pooling(s) {unknown}; choose from {', '.join(POOLINGS)}"
        )
    return tuple(dict.fromkeys(names))
