"""Retrieval ranks: blockwise == dense == explicit loops; CSLS == the formula written from scratch.

Ranks compare floating-point scores, so two ways of computing a score can
only disagree where two scores are within rounding of each other. Every test
first checks that no competing score lies within 1e-9 of the correct one
(float64 rounding of a cosine is ~1e-16), so equal ranks are a fact about the
code, not luck.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from interlingua.maps import MapInputError, MapWarning, rank_metrics, retrieval_ranks
from interlingua.maps.retrieval import block_rows


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = math.sqrt(sum(v * v for v in a)), math.sqrt(sum(v * v for v in b))
    return sum(u * v for u, v in zip(a, b)) / (na * nb) if na > 0 and nb > 0 else 0.0


def _brute(q: np.ndarray, t: np.ndarray, k: int) -> tuple[list[int], list[int], float]:
    """Ranks by explicit loops; also the smallest gap between a competitor's score and the correct one."""
    n = len(q)
    s = [[_cos(q[i], t[j]) for j in range(n)] for i in range(n)]
    r_t = [sum(sorted(s[i], reverse=True)[:k]) / k for i in range(n)]
    r_q = [sum(sorted((s[i][j] for i in range(n)), reverse=True)[:k]) / k for j in range(n)]
    c = [[2 * s[i][j] - r_t[i] - r_q[j] for j in range(n)] for i in range(n)]
    rank_cos, rank_csls, gap = [], [], math.inf
    for i in range(n):
        rank_cos.append(sum(1 for j in range(n) if j != i and s[i][j] >= s[i][i]))
        rank_csls.append(sum(1 for j in range(n) if j != i and c[i][j] >= c[i][i]))
        gap = min(gap, min(abs(s[i][j] - s[i][i]) for j in range(n) if j != i))
        gap = min(gap, min(abs(c[i][j] - c[i][i]) for j in range(n) if j != i))
    return rank_cos, rank_csls, gap


def _noisy_pairs(seed: int, n: int, d: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((n, d))
    return t + noise * rng.standard_normal((n, d)), t


@pytest.mark.parametrize("memory_bytes", [1, 32 * 37 * 5, 32 * 37 * 37])  # 1 row, 5 rows, one block
def test_blockwise_ranks_equal_explicit_loops(memory_bytes):
    q, t = _noisy_pairs(0, 37, 6, 1.2)  # noisy enough that many queries are not first
    rank_cos, rank_csls, gap = _brute(q, t, k=4)
    assert gap > 1e-9
    assert block_rows(37, memory_bytes) == {1: 1, 32 * 37 * 5: 5, 32 * 37 * 37: 37}[memory_bytes]
    got = retrieval_ranks(q, t, csls_k=4, memory_bytes=memory_bytes)
    np.testing.assert_array_equal(got.cosine, rank_cos)
    np.testing.assert_array_equal(got.csls, rank_csls)
    assert 0 < np.mean(got.cosine == 0) < 1  # the data exercise both outcomes


def test_csls_changes_ranks_where_a_hub_attracts_queries():
    rng = np.random.default_rng(1)
    t = rng.standard_normal((30, 5))
    q = t + 0.8 * rng.standard_normal((30, 5))
    hub = q.mean(axis=0) * 6  # a target close to every query
    t[0] = hub
    ranks = retrieval_ranks(q, t, csls_k=5)
    _, rank_csls, gap = _brute(q, t, 5)
    assert gap > 1e-9
    np.testing.assert_array_equal(ranks.csls, rank_csls)
    m = ranks.metrics()
    assert m["p1_csls"] >= m["p1"]


def test_metrics_from_ranks():
    ranks = np.array([0, 0, 1, 4, 5, 9])
    m = rank_metrics(ranks)
    assert m["p1"] == pytest.approx(2 / 6)
    assert m["p5"] == pytest.approx(4 / 6)
    assert m["mrr"] == pytest.approx((1 + 1 + 1 / 2 + 1 / 5 + 1 / 6 + 1 / 10) / 6)


def test_ties_count_against_the_query_and_zero_rows_rank_last():
    t = np.eye(4)
    q = np.zeros((4, 4))  # a collapsed map: every cosine is 0, all tie
    r = retrieval_ranks(q, t, csls_k=2)
    np.testing.assert_array_equal(r.cosine, [3, 3, 3, 3])
    np.testing.assert_array_equal(r.csls, [3, 3, 3, 3])
    perfect = retrieval_ranks(t * 5, t, csls_k=2)
    np.testing.assert_array_equal(perfect.cosine, [0, 0, 0, 0])


def test_k_larger_than_n_is_cut_and_inputs_are_checked():
    q, t = _noisy_pairs(2, 6, 3, 0.1)
    assert retrieval_ranks(q, t, csls_k=50).csls_k == 6
    assert retrieval_ranks(q, t, csls_k=0).csls is None
    with pytest.raises(MapInputError, match="same shape"):
        retrieval_ranks(q, t[:, :2])
    bad = q.copy()
    bad[2, 0] = np.nan
    with pytest.raises(MapInputError, match=r"queries contains 1 NaN and 0 inf in row\(s\) 2"):
        retrieval_ranks(bad, t)


def test_memory_bound_at_n_10000():
    # the docstring's numbers: 256 MiB budget, 32 bytes per entry of a block -> 838 rows of 10,000
    assert block_rows(10_000) == 838
    assert 32 * block_rows(10_000) * 10_000 <= 256 * 2**20


def test_a_constant_side_makes_retrieval_nan_with_a_reason():
    q, t = _noisy_pairs(3, 8, 4, 0.1)
    flat = np.tile(t[0], (8, 1))
    for queries, targets, who in ((q, flat, "targets"), (flat, t, "queries"), (np.zeros_like(q), flat, "queries and")):
        with pytest.warns(MapWarning, match=f"every row of the {who}"):
            r = retrieval_ranks(queries, targets, csls_k=2)
        assert r.reason.startswith("retrieval is undefined")
        m = r.metrics()
        assert set(m) == {"p1", "p5", "mrr", "p1_csls", "p5_csls", "mrr_csls"}
        assert all(np.isnan(v) for v in m.values())
        if who == "targets":  # every score of a query ties: the ranks keep the worst-rank convention
            np.testing.assert_array_equal(r.cosine, [7] * 8)
    ok = retrieval_ranks(q, t, csls_k=2)
    assert ok.reason == "" and np.isfinite(list(ok.metrics().values())).all()
