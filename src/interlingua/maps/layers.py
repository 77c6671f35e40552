"""Which layer of side A is mapped to which layer of side B.

Layers are hidden-state indices (0 = embedding output, ``L`` = last block,
docs/protocol.md); a side with L blocks has ``L + 1`` states, and the
relative depth of index i is ``i / L``.

- equal numbers of states: one-to-one, ``(i, i)`` for every i;
- different numbers: every state of the SHALLOWER side is paired with the
  state of the deeper side nearest in relative depth,
  ``j = round_half_up(i * (L_deep) / (L_shallow))``, computed in integers as
  ``(2 i L_deep + L_shallow) // (2 L_shallow)``; so the embeddings pair with
  the embeddings, the last state with the last state, and an exact half
  (relative depth midway between two states) goes to the deeper of the two.
  With 19 and 31 states (18 and 30 blocks) this gives 19 pairs
  ``(0,0), (1,2), (2,3), (3,5), ..., (18,30)``;
- ``"grid"``: every ``(i, j)``; ``"last"``: only the last states.
"""

from __future__ import annotations

from collections.abc import Sequence

from interlingua.maps.errors import MapInputError

__all__ = ["layer_pairs", "relative_depth_partner"]


def relative_depth_partner(i: int, n_shallow: int, n_deep: int) -> int:
    """Index in the deeper side (``n_deep`` states) nearest in relative depth to state i of the shallower one."""
    ls, ld = n_shallow - 1, n_deep - 1
    if ls == 0:
        return 0
    return (2 * i * ld + ls) // (2 * ls)


def layer_pairs(
    n_states_a: int, n_states_b: int, mode: str | Sequence[tuple[int, int]] = "auto"
) -> list[tuple[int, int]]:
    """The ``(layer_a, layer_b)`` pairs to evaluate: ``"auto"``, ``"grid"``, ``"last"`` or an explicit list."""
    if n_states_a < 1 or n_states_b < 1:
        raise MapInputError(f"both sides need at least one layer; got {n_states_a} and {n_states_b}.")
    if not isinstance(mode, str):
        pairs = [(int(a), int(b)) for a, b in mode]
        for a, b in pairs:
            if not (0 <= a < n_states_a and 0 <= b < n_states_b):
                raise MapInputError(
                    f"layer pair ({a}, {b}) is out of range: side A has {n_states_a} states, side B {n_states_b}."
                )
        return pairs
    if mode == "grid":
        return [(a, b) for a in range(n_states_a) for b in range(n_states_b)]
    if mode == "last":
        return [(n_states_a - 1, n_states_b - 1)]
    if mode != "auto":
        raise MapInputError(f"layers must be 'auto', 'grid', 'last' or a list of (layer_a, layer_b); got {mode!r}.")
    if n_states_a == n_states_b:
        return [(i, i) for i in range(n_states_a)]
    if n_states_a < n_states_b:
        return [(i, relative_depth_partner(i, n_states_a, n_states_b)) for i in range(n_states_a)]
    return [(relative_depth_partner(j, n_states_b, n_states_a), j) for j in range(n_states_b)]
