"""Sentence retrieval between mapped queries and targets: cosine and CSLS ranks, blockwise.

Query i's correct answer is target i. The rank of query i is the number of
OTHER targets scoring at least as high as target i:

    rank_i = #{ j != i : s(i, j) >= s(i, i) }

so 0 means retrieved first. Ties count against the query (a collapsed map
whose queries all look alike gets the worst rank, never a lucky first place);
a query or target of zero norm has cosine 0 with everything. From the ranks:
``P@k = mean(rank < k)`` and ``MRR = mean(1 / (rank + 1))``.

A constant side (every query, or every target, the same vector) leaves nothing
to retrieve by: the ranks are still the worst ones (ties count against the
query), but :attr:`RetrievalRanks.reason` says why and
:meth:`RetrievalRanks.metrics` returns nan for every metric, with a
:class:`~interlingua.maps.MapWarning` carrying the same reason.

CSLS (Conneau et al. 2018, hubness correction) with k neighbours:

    csls(i, j) = 2 cos(q_i, t_j) - r_T(q_i) - r_Q(t_j)
    r_T(q_i)   = mean of the k largest cos(q_i, t_j') over all targets j'
    r_Q(t_j)   = mean of the k largest cos(q_i', t_j) over all queries i'

(the neighbourhoods include the correct partner; k is cut to the number of
rows when it is larger).

Memory: the n x n similarity matrix is never formed. Rows are processed in
blocks of ``b`` queries (or targets) at a time, ``b = max(1, memory_bytes //
(32 n))``; a block holds its ``b x n`` float64 similarities and at most three
temporaries of the same shape (32 bytes per entry), so the working memory is
at most ``memory_bytes`` (default 256 MiB; b = 838 rows at n = 10,000) plus
the two normalised ``(n, d)`` inputs. CSLS costs two passes (one over target
blocks for ``r_Q``, one over query blocks), cosine alone one.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from interlingua.maps._checks import as_matrix
from interlingua.maps.errors import MapInputError, MapWarning

__all__ = [
    "DEFAULT_MEMORY_BYTES",
    "RetrievalRanks",
    "retrieval_ranks",
    "rank_metrics",
    "block_rows",
    "constant_side",
]

DEFAULT_MEMORY_BYTES = 256 * 2**20
_BYTES_PER_ENTRY = 32  # the block's similarities plus three temporaries of the same shape


@dataclass(frozen=True, eq=False)
class RetrievalRanks:
    """Per-query ranks of the correct target (0 = first): ``cosine`` and, when asked, ``csls`` (else None).

    ``reason``: why retrieval is undefined (a constant side), "" when it is defined.
    """

    cosine: np.ndarray
    csls: np.ndarray | None
    csls_k: int
    block_rows: int
    reason: str = ""

    def metrics(self, ks: tuple[int, ...] = (1, 5)) -> dict[str, float]:
        """``p1``, ``p5``, ``mrr`` and, with CSLS, ``p1_csls``, ``p5_csls``, ``mrr_csls`` (all nan when undefined)."""
        out = rank_metrics(self.cosine, ks)
        if self.reason:
            out = dict.fromkeys(out, float("nan"))
        if self.csls is not None:
            csls = rank_metrics(self.csls, ks)
            out.update({f"{k}_csls": (float("nan") if self.reason else v) for k, v in csls.items()})
        return out


def constant_side(queries: np.ndarray, targets: np.ndarray) -> str:
    """Why retrieval between these sides is undefined ("" when it is): a side whose rows are all the same vector."""
    flat = [name for name, a in (("queries", queries), ("targets", targets)) if _rows_equal(a)]
    if not flat:
        return ""
    return (
        f"retrieval is undefined: every row of the {' and the '.join(flat)} is the same vector, so no sentence "
        "can be told from another; metrics are nan (check the extraction, or use a layer or pooling whose rows differ)"
    )


def _rows_equal(a: np.ndarray) -> bool:
    if a.shape[0] < 2:
        return False
    hi, lo = a.max(axis=0), a.min(axis=0)
    return bool(np.all(hi - lo <= 1e-12 * np.maximum(np.abs(hi), np.abs(lo))))


def rank_metrics(ranks: np.ndarray, ks: tuple[int, ...] = (1, 5)) -> dict[str, float]:
    """``p{k}`` = mean(rank < k) for each k, and ``mrr`` = mean(1 / (rank + 1))."""
    r = np.asarray(ranks)
    out = {f"p{k}": float(np.mean(r < k)) for k in ks}
    out["mrr"] = float(np.mean(1.0 / (r + 1.0)))
    return out


def block_rows(n: int, memory_bytes: int = DEFAULT_MEMORY_BYTES) -> int:
    """Rows per block so that a block's similarities and temporaries stay within ``memory_bytes``."""
    return int(max(1, min(n, memory_bytes // (_BYTES_PER_ENTRY * max(n, 1)))))


def _unit_rows(a: np.ndarray) -> np.ndarray:
    norms = np.sqrt(np.einsum("ij,ij->i", a, a))
    safe = np.where(norms > 0, norms, 1.0)
    return a / safe[:, None]  # a zero row stays zero: cosine 0 with everything


def _topk_mean(block: np.ndarray, k: int) -> np.ndarray:
    """Mean of the k largest entries of each row of ``block``."""
    n = block.shape[1]
    if k >= n:
        return block.mean(axis=1)
    part = np.partition(block, n - k, axis=1)[:, n - k :]
    return part.mean(axis=1)


def _ranks_of_block(scores: np.ndarray, i0: int) -> np.ndarray:
    """rank of row r (query i0 + r): #{j != i : s_ij >= s_ii}; the diagonal comes from the block itself."""
    b = scores.shape[0]
    diag = scores[np.arange(b), i0 + np.arange(b)]
    return np.count_nonzero(scores >= diag[:, None], axis=1) - 1


def retrieval_ranks(
    queries: Any,
    targets: Any,
    *,
    csls_k: int | None = 10,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> RetrievalRanks:
    """Ranks of each query's own target among all targets, by cosine and (``csls_k`` > 0) by CSLS.

    ``queries`` (n, d) and ``targets`` (n, d): mapped source rows and target
    rows in the same space, row i of both the same sentence. Any centring is
    the caller's (the evaluation subtracts training means first). Blockwise:
    see the module docstring for the memory bound.
    """
    q = as_matrix(queries, "queries")
    t = as_matrix(targets, "targets")
    if q.shape != t.shape:
        raise MapInputError(f"queries {q.shape} and targets {t.shape} must have the same shape (n sentences x width).")
    n = q.shape[0]
    if n < 2:
        raise MapInputError(f"retrieval needs at least 2 held-out sentences; got {n}.")
    reason = constant_side(q, t)
    if reason:
        warnings.warn(reason, MapWarning, stacklevel=2)
    qn, tn = _unit_rows(q), _unit_rows(t)
    b = block_rows(n, memory_bytes)
    k_asked = int(csls_k) if csls_k else 0
    use_csls = k_asked > 0
    k = min(k_asked, n) if use_csls else 0
    r_q = np.empty(0)
    if use_csls:  # pass 1: each target's neighbourhood among the queries
        r_q = np.empty(n)
        for j0 in range(0, n, b):
            r_q[j0 : j0 + b] = _topk_mean(tn[j0 : j0 + b] @ qn.T, k)
    rank_cos = np.empty(n, dtype=np.int64)
    rank_csls = np.empty(n, dtype=np.int64) if use_csls else None
    for i0 in range(0, n, b):  # pass 2: query blocks
        s = qn[i0 : i0 + b] @ tn.T
        rank_cos[i0 : i0 + s.shape[0]] = _ranks_of_block(s, i0)
        if rank_csls is not None:
            r_t = _topk_mean(s, k)
            s *= 2.0
            s -= r_t[:, None]
            s -= r_q[None, :]
            rank_csls[i0 : i0 + s.shape[0]] = _ranks_of_block(s, i0)
    return RetrievalRanks(cosine=rank_cos, csls=rank_csls, csls_k=k, block_rows=b, reason=reason)
