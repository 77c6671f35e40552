"""Streaming linear CKA (feature-space sums over chunks) equals the in-memory measure.

Tolerance: every value is a few float64 sums and products of well-conditioned data; the streaming and the
in-memory paths differ in the order of the sums and in where the mean is subtracted (~1e-15 relative).
1e-10 leaves orders of margin, while a wrong term of the debiasing expansion moves the values here by more
than 1e-3.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from interlingua.analysis.measures import MeasureWarning, linear_cka
from interlingua.analysis.measures.streaming import StreamingLinearCKA, streaming_linear_cka
from interlingua.core.errors import MeasureInputError

RTOL = 1e-10


def _pair(rng: np.random.Generator, n: int, p: int, q: int, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    z = rng.standard_normal((n, 4))
    x = z @ rng.standard_normal((4, p)) + rng.standard_normal((n, p)) + offset
    y = z @ rng.standard_normal((4, q)) + 0.7 * rng.standard_normal((n, q)) - offset
    return x, y


def _feed(x: np.ndarray, y: np.ndarray, cuts: list[int]) -> StreamingLinearCKA:
    acc = StreamingLinearCKA()
    bounds = [0, *cuts, x.shape[0]]
    for a, b in zip(bounds[:-1], bounds[1:]):
        acc.update(x[a:b], y[a:b])
    return acc


def _unbiased_hsic(K: np.ndarray, L: np.ndarray) -> float:
    """Song et al. (2012), eq. (5), written out from the Grams (independent of interlingua's U-centring)."""
    n = K.shape[0]
    K, L = K.copy(), L.copy()
    np.fill_diagonal(K, 0.0)
    np.fill_diagonal(L, 0.0)
    one = np.ones(n)
    return float(
        (
            np.trace(K @ L)
            + (one @ K @ one) * (one @ L @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * (one @ K @ L @ one)
        )
        / (n * (n - 3))
    )


@pytest.mark.parametrize("shape", [(503, 40, 25), (60, 90, 7), (37, 3, 3)])
@pytest.mark.parametrize("offset", [0.0, 1e3])
@pytest.mark.parametrize("debiased", [False, True])
def test_streaming_equals_in_memory_on_uneven_chunks(
    shape: tuple[int, int, int], offset: float, debiased: bool
) -> None:
    n, p, q = shape
    rng = np.random.default_rng(n + p + q)
    x, y = _pair(rng, n, p, q, offset)
    cuts = sorted({1, 2, n // 3, n // 3 + 1, n - 5})  # a one-row chunk, a tiny one, uneven middles
    got = _feed(x, y, cuts).cka(debiased)
    assert got == pytest.approx(linear_cka(x, y, debiased=debiased), rel=RTOL, abs=0)


@pytest.mark.parametrize("debiased", [False, True])
def test_chunk_order_and_splitting_change_nothing_beyond_rounding(debiased: bool) -> None:
    rng = np.random.default_rng(7)
    x, y = _pair(rng, 400, 30, 20, offset=3.0)
    ref = _feed(x, y, [100, 200, 300]).cka(debiased)
    one = _feed(x, y, []).cka(debiased)  # a single chunk
    rows = rng.permutation(400)  # rows in another order, split elsewhere
    shuffled = _feed(x[rows], y[rows], [13, 14, 250]).cka(debiased)
    by_row = StreamingLinearCKA().extend((x[i : i + 1], y[i : i + 1]) for i in range(400)).cka(debiased)
    for v in (one, shuffled, by_row):
        assert v == pytest.approx(ref, rel=1e-12, abs=0)


def test_debiased_equals_the_unbiased_hsic_written_from_the_grams() -> None:
    rng = np.random.default_rng(3)
    x, y = _pair(rng, 45, 12, 9, offset=2.0)
    K, L = x @ x.T, y @ y.T  # Song et al.'s estimator needs no centring
    want = _unbiased_hsic(K, L) / np.sqrt(_unbiased_hsic(K, K) * _unbiased_hsic(L, L))
    assert _feed(x, y, [10, 11, 30]).cka(debiased=True) == pytest.approx(want, rel=1e-9, abs=0)


def test_independent_sides_give_debiased_near_zero_and_biased_inflated() -> None:
    """Known behaviour: at n = 50, width 200, independent noise has biased CKA far above 0 (~p / (p + n)),
    debiased CKA near 0."""
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((50, 200)), rng.standard_normal((50, 200))
    acc = _feed(x, y, [17, 33])
    assert acc.cka(False) > 0.6
    assert abs(acc.cka(True)) < 0.05


def test_torch_float32_chunks_equal_their_float64_values() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, y = _pair(rng, 120, 16, 10)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    acc = StreamingLinearCKA()
    for a in range(0, 120, 50):
        acc.update(torch.from_numpy(x32[a : a + 50]), torch.from_numpy(y32[a : a + 50]))
    for d in (False, True):
        want = linear_cka(x32.astype(np.float64), y32.astype(np.float64), debiased=d)
        assert acc.cka(d) == pytest.approx(want, rel=RTOL, abs=0)


def test_memory_does_not_grow_with_the_rows() -> None:
    rng = np.random.default_rng(1)
    acc = StreamingLinearCKA()
    acc.update(*_pair(rng, 10, 8, 6))
    before = acc.nbytes
    for _ in range(5):
        acc.update(*_pair(rng, 200, 8, 6))
    assert acc.nbytes == before and acc.n == 1010
    assert before == 8 * (8 * 8 + 6 * 6 + 8 * 6 + 3 * 8 + 3 * 6 + 6 + 8)  # S, s, shift, v per side; X^T Y, cross


def test_a_side_without_variance_gives_nan_with_a_warning() -> None:
    rng = np.random.default_rng(2)
    acc = StreamingLinearCKA().update(np.ones((20, 3)), rng.standard_normal((20, 4)))
    with pytest.warns(MeasureWarning, match="self-HSIC of X"):
        assert np.isnan(acc.cka())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        assert np.isnan(streaming_linear_cka([(np.ones((20, 3)), rng.standard_normal((20, 4)))]))


def test_bad_chunks_are_refused() -> None:
    rng = np.random.default_rng(0)
    acc = StreamingLinearCKA()
    with pytest.raises(MeasureInputError, match="same rows"):
        acc.update(rng.standard_normal((5, 3)), rng.standard_normal((4, 3)))
    acc.update(rng.standard_normal((3, 3)), rng.standard_normal((3, 2)))
    with pytest.raises(MeasureInputError, match="width 4, earlier chunks 3"):
        acc.update(rng.standard_normal((5, 4)), rng.standard_normal((5, 2)))
    with pytest.raises(MeasureInputError, match="debiased CKA needs at least 4 rows; 3"):
        acc.cka(debiased=True)
    bad = rng.standard_normal((5, 3))
    bad[1, 1] = np.nan
    with pytest.raises(MeasureInputError, match="NaN"):
        acc.update(bad, rng.standard_normal((5, 2)))
    assert acc.n == 3  # a refused chunk adds nothing
    with pytest.raises(MeasureInputError, match="debiased=False"):
        StreamingLinearCKA(debiased=False).update(*_pair(rng, 10, 3, 3)).cka(debiased=True)
    with pytest.raises(MeasureInputError, match="no chunks"):
        streaming_linear_cka(iter(()))
