"""Poolings equal their definitions (docs/protocol.md, "Poolings"), computed by explicit loops."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interlingua.errors import InterlinguaError
from interlingua.representations import (
    PoolingError,
    check_right_padded,
    last_token_pool,
    mean_pool,
    pool,
    sgpt_pool,
)

LENGTHS = [5, 3, 1]


def _batch(layers: int = 2, d: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    h = torch.randn(layers, len(LENGTHS), max(LENGTHS), d, generator=g, dtype=torch.float64)
    mask = torch.zeros(len(LENGTHS), max(LENGTHS), dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        mask[b, :n] = 1
    return h, mask


def test_mean_equals_loop() -> None:
    h, mask = _batch()
    got = mean_pool(h, mask)
    for layer in range(h.shape[0]):
        for b, n in enumerate(LENGTHS):
            total = torch.zeros(h.shape[-1], dtype=h.dtype)
            for t in range(n):
                total += h[layer, b, t]
            assert torch.allclose(got[layer, b], total / n, atol=1e-12)


def test_sgpt_equals_loop() -> None:
    h, mask = _batch()
    got = sgpt_pool(h, mask)
    for layer in range(h.shape[0]):
        for b, n in enumerate(LENGTHS):
            total = torch.zeros(h.shape[-1], dtype=h.dtype)
            weight = 0.0
            for t in range(n):
                total += (t + 1) * h[layer, b, t]
                weight += t + 1
            assert torch.allclose(got[layer, b], total / weight, atol=1e-12)


def test_sgpt_weights_later_tokens_more() -> None:
    # two tokens with states 0 and 1: SGPT = (1*0 + 2*1) / 3, mean = 1/2
    h = torch.tensor([[[0.0], [1.0]]])
    mask = torch.ones(1, 2, dtype=torch.long)
    assert sgpt_pool(h, mask).item() == pytest.approx(2 / 3)
    assert mean_pool(h, mask).item() == pytest.approx(1 / 2)


def test_last_token_picks_last_non_pad() -> None:
    h, mask = _batch()
    got = last_token_pool(h, mask)
    for b, n in enumerate(LENGTHS):
        assert torch.equal(got[:, b], h[:, b, n - 1])


def test_pad_positions_do_not_leak() -> None:
    h, mask = _batch()
    noisy = h.clone()
    noisy[:, mask == 0] = 1e6
    for name in ("mean", "sgpt", "last"):
        assert torch.allclose(pool(h, mask, name), pool(noisy, mask, name), atol=1e-12)


def test_single_layer_input_works() -> None:
    h, mask = _batch()
    assert torch.allclose(sgpt_pool(h[1], mask), sgpt_pool(h, mask)[1])


@pytest.mark.parametrize("fn", [sgpt_pool, mean_pool, last_token_pool])
def test_left_padding_is_refused(fn) -> None:
    h, _ = _batch()
    left = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]])
    with pytest.raises(PoolingError, match="not right-padded"):
        fn(h, left)


def test_hole_in_mask_is_refused() -> None:
    with pytest.raises(PoolingError, match="not right-padded"):
        check_right_padded(torch.tensor([[1, 0, 1]]))


def test_all_pad_row_is_an_error_not_nan() -> None:
    h, mask = _batch()
    mask[2] = 0
    with pytest.raises(PoolingError, match="no tokens"):
        sgpt_pool(h, mask)
    with pytest.raises(InterlinguaError):
        mean_pool(h, mask)


def test_unknown_pooling_and_bad_shapes() -> None:
    h, mask = _batch()
    with pytest.raises(PoolingError, match="unknown pooling 'max'"):
        pool(h, mask, "max")
    with pytest.raises(PoolingError, match="do not match mask"):
        mean_pool(h[..., :4, :], mask)
    with pytest.raises(PoolingError, match=r"shape \(B, T\)"):
        mean_pool(h, mask[0])


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=5),
    extra=st.integers(min_value=0, max_value=4),
    seed=st.integers(min_value=0, max_value=2**16),
    name=st.sampled_from(["mean", "sgpt", "last"]),
)
def test_row_vector_independent_of_batch_and_padding(
    lengths: list[int], extra: int, seed: int, name: str
) -> None:
    """Pooling a row inside a padded batch equals pooling it alone, unpadded."""
    width = max(lengths) + extra
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(3, len(lengths), width, 2, generator=g, dtype=torch.float64)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    batched = pool(h, mask, name)
    for b, n in enumerate(lengths):
        alone = pool(h[:, b : b + 1, :n], torch.ones(1, n, dtype=torch.long), name)
        assert torch.allclose(batched[:, b], alone[:, 0], atol=1e-12)
