"""Poolings equal their definitions (docs/protocol.md, "Poolings"), computed by explicit loops."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from interlingua.core.errors import InterlinguaError
from interlingua.data.representations import (
    PoolingError,
    check_right_padded,
    last_token_pool,
    mean_pool,
    pool,
    sgpt_pool,
)
from interlingua.data.representations.pooling import last_pooled_index, pooled_positions, pooling_weights

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
def test_row_vector_independent_of_batch_and_padding(lengths: list[int], extra: int, seed: int, name: str) -> None:
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


# ---------------------------------------------------------------- pooling positions


def _positions(mask: torch.Tensor, drop_first: bool, drop_last: bool) -> torch.Tensor:
    """Pooling positions inside the attention mask without the first and/or last token."""
    p = mask.clone()
    lengths = mask.sum(dim=1)
    for b, n in enumerate(lengths.tolist()):
        if drop_first and n > 1:
            p[b, 0] = 0
        if drop_last and n > 2:
            p[b, n - 1] = 0
    return p


def test_positions_default_to_the_attention_mask() -> None:
    h, mask = _batch()
    for name in ("mean", "sgpt", "last"):
        assert torch.equal(pool(h, mask, name, positions=mask), pool(h, mask, name))


def test_sgpt_ranks_count_pooled_positions_only() -> None:
    """Excluding a leading <bos> gives the content weights 1..T-1, as without <bos>."""
    h, mask = _batch()
    p = _positions(mask, drop_first=True, drop_last=False)
    got = sgpt_pool(h, mask, p)
    for b, n in enumerate(LENGTHS):
        if n == 1:
            continue
        alone = sgpt_pool(h[:, b : b + 1, 1:n], torch.ones(1, n - 1, dtype=torch.long))
        assert torch.allclose(got[:, b], alone[:, 0], atol=1e-12)


def test_last_reads_the_last_pooled_position() -> None:
    h, mask = _batch()
    p = _positions(mask, drop_first=True, drop_last=True)
    got = last_token_pool(h, mask, p)
    for b, n in enumerate(LENGTHS):
        index = n - 2 if n > 2 else n - 1
        assert torch.equal(got[:, b], h[:, b, index])
    assert torch.equal(last_pooled_index(mask, p), torch.tensor([3, 1, 0]))


@pytest.mark.parametrize("name", ["mean", "sgpt", "last"])
def test_non_finite_values_outside_the_pooled_positions_do_not_leak(name: str) -> None:
    h, mask = _batch()
    p = _positions(mask, drop_first=True, drop_last=False)
    noisy = h.clone()
    noisy[:, mask == 0] = float("nan")
    noisy[:, (mask == 1) & (p == 0)] = float("inf")
    expected = pool(h, mask, name, p)
    got = pool(noisy, mask, name, p)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, expected, atol=1e-12)


def test_bad_positions_are_refused() -> None:
    h, mask = _batch()
    outside = mask.clone()
    outside[2, 3] = 1  # a pad position
    with pytest.raises(PoolingError, match=r"rows \[2\] pool positions that are padding"):
        mean_pool(h, mask, outside)
    empty = mask.clone()
    empty[1] = 0
    with pytest.raises(PoolingError, match=r"rows \[1\] have no pooled position"):
        sgpt_pool(h, mask, empty)
    with pytest.raises(PoolingError, match="do not match the attention mask"):
        pooled_positions(mask, mask[:, :2])
    # right padding is still checked on the attention mask, not on the positions
    left = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 0, 1]])
    with pytest.raises(PoolingError, match="not right-padded"):
        mean_pool(h, left, left)


def test_weights_match_the_poolings() -> None:
    h, mask = _batch()
    p = _positions(mask, drop_first=True, drop_last=True)
    for name in ("mean", "sgpt", "last"):
        w = pooling_weights(mask, name, p).to(h.dtype)
        weighted = torch.einsum("lbtd,bt->lbd", h, w) / w.sum(1).unsqueeze(-1)
        assert torch.allclose(weighted, pool(h, mask, name, p), atol=1e-12)
    assert pooling_weights(mask, "sgpt", p)[0].tolist() == [0, 1, 2, 3, 0]


def test_half_precision_sgpt_denominator_does_not_overflow() -> None:
    # sum_i i for T = 400 is 80,200 > float16's largest finite value (65,504)
    h = torch.ones(1, 400, 2, dtype=torch.float16)
    mask = torch.ones(1, 400, dtype=torch.long)
    got = sgpt_pool(h, mask)
    assert got.dtype == torch.float16
    assert torch.equal(got, torch.ones(1, 2, dtype=torch.float16))


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(min_value=1, max_value=7), st.integers(min_value=0, max_value=2**7 - 1)),
        min_size=1,
        max_size=5,
    ),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_positions_equal_explicit_loops(rows: list[tuple[int, int]], seed: int) -> None:
    """Random pooling positions (bits of an integer, at least one per row) against loops."""
    width = max(n for n, _ in rows)
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(2, len(rows), width, 3, generator=g, dtype=torch.float64)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    p = torch.zeros(len(rows), width, dtype=torch.long)
    for b, (n, bits) in enumerate(rows):
        mask[b, :n] = 1
        chosen = [t for t in range(n) if bits >> t & 1] or [n - 1]
        p[b, chosen] = 1
    mean, sgpt, last = (pool(h, mask, name, p) for name in ("mean", "sgpt", "last"))
    for b in range(len(rows)):
        chosen = torch.nonzero(p[b]).flatten().tolist()
        ranks = torch.arange(1, len(chosen) + 1, dtype=h.dtype)
        states = h[:, b, chosen]  # (L, T', d)
        assert torch.allclose(mean[:, b], states.mean(dim=1), atol=1e-12)
        assert torch.allclose(sgpt[:, b], (states * ranks[:, None]).sum(1) / ranks.sum(), atol=1e-12)
        assert torch.equal(last[:, b], h[:, b, chosen[-1]])
