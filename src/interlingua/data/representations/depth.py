"""Hidden states 0..k of one forward pass, without running the blocks after block k.

A study that reads a middle layer (a word aligner at the encoder's middle
layer, a grid over the first half of a model) needs only the blocks up to it;
Hugging Face's ``output_hidden_states=True`` runs every block and returns every
state. :func:`states_through` runs the same forward but stops it where the
deepest requested state is complete: a pre-hook on each block ``j <= k`` keeps
the block's input, which is hidden state ``j`` in the Hugging Face convention
(index 0 the embedding output, index j the output of block j), and the hook on
block ``k`` ends the forward. The kept tensors are the very tensors the full
forward hands to those blocks, so the states are bit-identical to the first
``k + 1`` entries of ``hidden_states``; the blocks after ``k`` and the final
norm are never run.

The last state (index L) is the final norm's output, not a block's input, so a
request that reaches it runs the whole model; so does a model whose blocks are
not known (``blocks=None``, e.g. a TransformerLens wrapper).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from interlingua.core.errors import ModelError

__all__ = ["states_through"]


class _Reached(Exception):
    """Raised by the hook on the first block not needed: the states asked for are complete."""


def states_through(
    forward: Callable[[bool], Any], blocks: nn.ModuleList | None, n_states: int, max_layer: int
) -> list[torch.Tensor]:
    """Hidden states ``0..max_layer`` of ``forward(output_hidden_states)``, stopping after block ``max_layer``.

    ``forward(flag)`` calls the model with ``output_hidden_states=flag`` (``False``
    when the states are read from the blocks' inputs); ``n_states`` is the
    model's count of hidden states (blocks + 1). Raises :class:`ModelError` when
    the model returns the wrong number of states or never calls its blocks.
    """
    if not 0 <= max_layer < n_states:
        raise ModelError(f"max_layer {max_layer} out of range: this model has hidden states 0..{n_states - 1}")
    if blocks is None or max_layer >= n_states - 1 or len(blocks) != n_states - 1:
        hidden = getattr(forward(True), "hidden_states", None)
        if hidden is None or len(hidden) != n_states:
            got = "none" if hidden is None else len(hidden)
            raise ModelError(
                f"model returned {got} hidden states, expected {n_states} (num_layers + 1); pass the base "
                "transformer that accepts output_hidden_states=True"
            )
        return list(hidden[: max_layer + 1])

    kept: list[torch.Tensor] = []
    caller = threading.get_ident()

    def keep_input(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if threading.get_ident() != caller:  # another thread's forward through the same module: not ours
            return
        h = args[0] if args else kwargs.get("hidden_states")
        if not isinstance(h, torch.Tensor):
            raise ModelError(
                f"block {len(kept)} ({type(module).__name__}) was called without its hidden states as the first "
                "argument or hidden_states=; extract every layer (max_layer=None) for this model"
            )
        kept.append(h)
        if len(kept) == max_layer + 1:
            raise _Reached

    handles = [blocks[j].register_forward_pre_hook(keep_input, with_kwargs=True) for j in range(max_layer + 1)]
    try:
        forward(False)
    except _Reached:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if len(kept) != max_layer + 1:
        raise ModelError(
            f"the forward pass called {len(kept)} of the first {max_layer + 1} blocks; the architecture's block "
            "list is not the one its forward runs: extract every layer (max_layer=None) for this model"
        )
    return kept
