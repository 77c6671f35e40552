"""Nulls of Gram-form measures from their unit Grams: permuting or resampling rows without recomputing Grams.

The Grams themselves come from the measures (``measure.unit_gram(X)`` of a
measure with ``metadata.gram``; for linear CKA
:func:`interlingua.analysis.measures.unit_centred_gram` and
:func:`interlingua.analysis.measures.centred_linear_gram`): one implementation, shared
with :func:`interlingua.analysis.measures.cka_grid`.

Facts used here (X is n x p, K = Xc Xc^T its centred Gram, P a permutation matrix):

- Centring commutes with row permutations: the centred Gram of ``Y[p]`` is
  ``Lc[p][:, p]``. U-centring (the debiased estimator) commutes too: it is
  built from row sums, column sums and the total, all permutation-equivariant,
  and zeroes the diagonal, which a symmetric permutation keeps on the diagonal.
  The norms ``||Lc||`` do not change, so each permuted CKA is ONE inner
  product ``<Kc, Lc[p][:, p]>`` of unit-norm Grams: an O(n^2) gather.
  (Every measure declaring ``metadata.gram`` promises this equivariance.)
- Both Grams are symmetric (to rounding), so ``<K, M> = sum_i K_ii M_ii + 2 sum_{i<j} K_ij M_ij``:
  only the upper triangle of the permuted Gram is gathered (half the memory
  traffic). Rows are processed in blocks that fit in cache, and the inner
  products of many layers of side A with many layers of side B (the grid) are
  one matrix product per block.
- Resampling rows (jackknife, bootstrap) does NOT commute with centring (the
  mean changes), so resampled CKA gathers the raw Gram and centres it again:
  still O(m^2) instead of O(m^2 p).

Feature form of a linear CKA null (:class:`FeatureNull`, no n x n matrix). With column-centred
X (n x p) and Y (n x q), ``K = X X^T``, ``L = Y Y^T`` and a permutation p of Y's rows:

- biased: ``<K, L[p][:, p]> = ||X^T Y[p]||_F^2``, and ``||K||_F = ||X^T X||_F``;
- debiased (U-centring, ``K1 = 0`` for centred X): with ``d = diag K``, ``e = diag L``,
  ``<U(K), U(L[p][:, p])> = ||X^T Y[p]||^2 - n/(n-2) d.e[p] + sum(d) sum(e) / ((n-1)(n-2))``
  (the unbiased HSIC of Song et al. 2012 times n(n-3), from ``tr(K~ L~)``, ``1^T K~ 1`` and
  ``1^T K~ L~ 1`` of the zero-diagonal Grams), and ``||U(K)||^2`` is the same with Y = X.

A draw then costs ``2 n p q`` flops and memory ``O(n (p + q) + p q)``, against ``GATHER_COST n^2`` for
the Gram gather: :func:`feature_null_is_cheaper` picks the form the cost model prices lower.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from interlingua.analysis.measures.cka import center_gram, cka_from_grams

__all__ = [
    "DEFAULT_MEMORY_BYTES",
    "GATHER_COST",
    "FeatureNull",
    "feature_null_is_cheaper",
    "feature_null_peak_bytes",
    "GramGather",
    "permutation_batches",
    "resampled_cka",
    "gram_path_is_cheaper",
    "grid_null_peak_bytes",
]

DEFAULT_MEMORY_BYTES = 256 * 2**20
#: A gathered Gram entry (memory-bound) costs about this many float64 multiply-adds (the cost model's figure).
GATHER_COST = 6.0
#: Above this many rows the Gram path is not taken at all (three n x n float64 arrays ~3.5 GB).
GRAM_MAX_N = 12_000


def feature_null_is_cheaper(n: int, widths_a: Sequence[int], widths_b: Sequence[int]) -> bool:
    """Whether a linear-CKA permutation null is cheaper in feature form than by gathering unit Grams.

    Per draw the gather costs ``GATHER_COST n^2`` per cell (La Lb cells) and the feature form
    ``2 n sum(p_a) sum(q_b)`` (every layer of A against every permuted layer of B), so the feature form wins
    when the widths' product is below about 3 n; above :data:`GRAM_MAX_N` rows it is the only form kept.
    """
    if n > GRAM_MAX_N:
        return True
    cells = len(widths_a) * len(widths_b)
    return 2.0 * n * float(sum(widths_a)) * float(sum(widths_b)) < GATHER_COST * n * n * cells


def feature_null_peak_bytes(n: int, widths_a: Sequence[int], widths_b: Sequence[int]) -> int:
    """Bytes the feature-form grid null allocates at its peak: the float64 copies of the layers that
    ``grid_permutation_test`` checks, their centred copies, side A's side by side once more, the Grams'
    diagonals, one permuted layer of B and one ``sum(p) x q`` product. Linear in n."""
    pa, qb = int(sum(widths_a)), int(sum(widths_b))
    q = max(widths_b)
    return int(8 * (n * (3 * pa + 2 * qb + q + len(widths_a) + len(widths_b)) + pa * q))


class FeatureNull:
    """Linear CKA of every layer of A with every permuted layer of B from the centred data (see the module
    docstring): ``values(P)`` is ``(b, La, Lb)`` for a ``(b, n)`` batch of permutations, equal to
    :class:`GramGather`'s on the measure's unit Grams to rounding, with no n x n matrix.

    Memory: the centred float64 layers (``n (sum p + sum q)``), side A's layers side by side once more, and
    one ``(sum p) x q`` product at a time. A side whose centred Gram is 0 gives nan, as its unit Gram does.
    """

    def __init__(self, layers_a: Sequence[np.ndarray], layers_b: Sequence[np.ndarray], *, debiased: bool) -> None:
        from interlingua.analysis.measures.validation import centre_columns_rescaled

        self.debiased = bool(debiased)
        self.n = int(layers_b[0].shape[0])
        a = [np.asarray(centre_columns_rescaled(np.asarray(x, dtype=np.float64))) for x in layers_a]
        self._b = [np.ascontiguousarray(centre_columns_rescaled(np.asarray(y, dtype=np.float64))) for y in layers_b]
        self.la, self.lb = len(a), len(self._b)
        self._xa = np.ascontiguousarray(np.concatenate(a, axis=1))  # (n, sum p)
        self._starts = np.cumsum([0] + [x.shape[1] for x in a[:-1]])
        self._da = np.stack([np.einsum("ij,ij->i", x, x) for x in a])  # (La, n): diag of each K
        self._db = [np.einsum("ij,ij->i", y, y) for y in self._b]
        self._na = np.array([self._norm(x, d) for x, d in zip(a, self._da)])
        self._nb = np.array([self._norm(y, d) for y, d in zip(self._b, self._db)])
        flat = int(np.count_nonzero(np.isnan(self._na)) + np.count_nonzero(np.isnan(self._nb)))
        if flat:  # as the unit Gram of such a side says (the Gram form's warning)
            import warnings

            from interlingua.analysis.measures.validation import MeasureWarning

            warnings.warn(
                f"CKA is undefined for {flat} layer(s): the centred Gram is 0 (no variance after centring, e.g. "
                "constant or duplicated rows); every CKA computed from such a layer is nan.",
                MeasureWarning,
                stacklevel=3,
            )

    @property
    def batch_size(self) -> int:
        """Permutations per batch (each is a loop of Lb matrix products; batching only amortises Python)."""
        return 64

    def _u_terms(self, cross: np.ndarray, dd: np.ndarray, sa: np.ndarray, sb: float) -> np.ndarray:
        """``<U(K), U(L)>`` from ``tr(K L)``, ``d.e`` and the diagonals' sums (debiased) or ``tr(K L)`` (biased)."""
        if not self.debiased:
            return cross
        n = self.n
        return cross - n / (n - 2) * dd + sa * sb / ((n - 1) * (n - 2))

    def _norm(self, x: np.ndarray, d: np.ndarray) -> float:
        sq = float(np.sum((x.T @ x) ** 2))
        sq = float(self._u_terms(np.array(sq), np.array(float(d @ d)), np.array(float(d.sum())), float(d.sum())))
        return float(np.sqrt(sq)) if 0 < sq < np.inf else float("nan")

    def values(self, perms: np.ndarray) -> np.ndarray:
        b = perms.shape[0]
        out = np.empty((b, self.la, self.lb))
        sa = self._da.sum(axis=1)
        for k in range(b):
            p = perms[k]
            for j, (y, e) in enumerate(zip(self._b, self._db)):
                prod = self._xa.T @ y[p]  # (sum p, q)
                cross = np.add.reduceat(np.einsum("ij,ij->i", prod, prod), self._starts)  # ||X_a^T Y[p]||^2
                dd = self._da @ e[p] if self.debiased else cross
                out[k, :, j] = self._u_terms(cross, dd, sa, float(e.sum())) / (self._na * self._nb[j])
        return out


def gram_path_is_cheaper(n: int, p: int, q: int) -> bool:
    """Whether gathering an n x n Gram per replicate beats recomputing CKA in feature form.

    A permuted Gram costs about n^2 / 2 gathered elements (~30x a flop on a
    CPU); the feature form costs n (pq + p^2 + q^2) flops. Grams are also kept
    in memory, so n is capped at 12,000 (three n x n float64 arrays ~3.5 GB).
    """
    if n > GRAM_MAX_N:
        return False
    return 30 * n <= p * q + p * p + q * q


def grid_null_peak_bytes(n: int, la: int, lb: int, *, width_a: int = 0, width_b: int = 0, block_rows: int = 32) -> int:
    """Bytes the CPU path of ``grid_permutation_test`` allocates at its peak for La x Lb layers of n rows.

    Side B's unit Grams whole (``Lb n^2`` floats: every draw gathers a permuted
    copy of them), side A's weighted upper triangles in row blocks (about
    ``La n (n + block_rows) / 2``), one Gram being built (``n^2``), one batch of
    gathered blocks (at most 2 MB, see :attr:`GramGather.batch_size`), and, given
    the widths, the float64 copies of the layers (``n (La width_a + Lb width_b)``)
    and one centred layer. Quadratic in n: this is the part of a comparison that is.
    """
    data = n * (la * width_a + lb * width_b + max(width_a, width_b))
    return int(8 * (lb * n * n + la * n * (n + block_rows) / 2 + n * n + data) + 2 * 2**20)


def permutation_batches(n: int, n_permutations: int, seed: int, batch: int) -> Iterator[np.ndarray]:
    """The seeded null permutations, ``batch`` at a time, as int64 arrays of shape ``(b, n)``.

    Permutation k is the k-th call of ``default_rng(seed).permutation(n)``, so
    the sequence does not depend on ``batch`` (or on the measure or backend).
    """
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_permutations:
        b = min(batch, n_permutations - done)
        yield np.stack([rng.permutation(n) for _ in range(b)])
        done += b


class GramGather:
    """Inner products ``<A_i, B_j[p][:, p]>`` of unit centred Grams for many permutations ``p``.

    ``grams_a``: La symmetric (n, n) arrays (a measure's ``unit_gram``), read one at a time, so a
    sequence that computes each on access holds one at a time; ``grams_b``: Lb arrays (an ``(Lb, n, n)``
    float64 array is kept without a copy). Memory on the numpy path: ``(Lb + La / 2) n^2`` floats
    (side B whole, for the gathers; side A's weighted upper triangles). ``values(P)``
    returns an ``(b, La, Lb)`` array for a ``(b, n)`` batch of permutations.
    With ``device=None`` the numpy triangle-block path runs; otherwise torch on
    ``device`` gathers whole permuted Grams in batches (fast on a GPU).
    """

    def __init__(
        self,
        grams_a: Sequence[np.ndarray],
        grams_b: Sequence[np.ndarray] | np.ndarray,
        *,
        device: Any = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        block_rows: int = 32,
    ) -> None:
        self.n = int(grams_b[0].shape[0])  # side A may compute its Grams on access: read each once
        self._block_rows = int(block_rows)
        self.la, self.lb = len(grams_a), len(grams_b)
        self.memory_bytes = int(memory_bytes)
        self.device = device
        n = self.n
        if device is None:
            # an (Lb, n, n) float64 stack is used as is (no second copy of side B's Grams)
            self._b = np.ascontiguousarray(grams_b if isinstance(grams_b, np.ndarray) else np.stack(list(grams_b)))
            self._blocks: list[tuple[int, int, np.ndarray]] = []
            for r0 in range(0, n, block_rows):
                r1 = min(n, r0 + block_rows)
                self._blocks.append((r0, r1, np.empty((self.la, (r1 - r0) * (n - r0)))))
            # one Gram of side A at a time (grams_a may compute them on access): its weighted upper
            # triangle goes into the row blocks, weights 1 on the diagonal, 2 above it, 0 below
            for i in range(self.la):
                g = grams_a[i]
                for r0, r1, wa in self._blocks:
                    w = np.full((r1 - r0, n - r0), 2.0)
                    w[:, : r1 - r0] = np.triu(w[:, : r1 - r0], 1) + np.eye(r1 - r0)
                    np.multiply(g[r0:r1, r0:], w, out=wa[i].reshape(r1 - r0, n - r0))
                del g
        else:
            import torch

            self._torch = torch
            self._ta = torch.as_tensor(np.stack(grams_a).reshape(self.la, n * n), device=device)
            self._tb = torch.as_tensor(
                np.asarray(grams_b) if isinstance(grams_b, np.ndarray) else np.stack(list(grams_b)), device=device
            )

    @property
    def batch_size(self) -> int:
        """Permutations per batch.

        torch: as many whole permuted Grams as fit in ``memory_bytes``. numpy:
        enough that one row block of the batch (~2 MB) stays in cache; larger
        batches only add memory traffic (see benchmarks/README.md).
        """
        if self.device is not None:
            per_perm = self.lb * self.n * self.n * 8
            return int(max(1, min(256, self.memory_bytes // max(per_perm, 1))))
        per_perm = self.lb * self._block_rows * self.n * 8
        return int(max(1, min(64, min(2 * 2**20, self.memory_bytes) // max(per_perm, 1))))

    def values(self, perms: np.ndarray) -> np.ndarray:
        if self.device is not None:
            return self._values_torch(perms)
        return self._values_numpy(perms)

    def _values_numpy(self, perms: np.ndarray) -> np.ndarray:
        b = perms.shape[0]
        out = np.zeros((b * self.lb, self.la))
        for r0, r1, wa in self._blocks:
            m, width = r1 - r0, self.n - r0
            gathered = np.empty((b, self.lb, m * width))
            for k in range(b):
                p = perms[k]
                rows = self._b[:, p[r0:r1]]  # (Lb, m, n): contiguous row copies
                gathered[k] = rows[:, :, p[r0:]].reshape(self.lb, -1)  # column gather within cached rows
            g2 = gathered.reshape(b * self.lb, -1)
            if self.la == 1:
                # einsum, not BLAS: a threaded BLAS dot/gemv on one vector, interleaved with the
                # gathers, waits on sleeping BLAS threads (much slower on few cores)
                out[:, 0] += np.einsum("ij,j->i", g2, wa[0])
            else:
                out += g2 @ wa.T
        return out.reshape(b, self.lb, self.la).transpose(0, 2, 1)

    def _values_torch(self, perms: np.ndarray) -> np.ndarray:
        torch = self._torch
        P = torch.as_tensor(perms, device=self._tb.device)
        b, n = P.shape
        g = self._tb[:, P[:, :, None], P[:, None, :]]  # (Lb, b, n, n)
        vals = self._ta @ g.reshape(self.lb * b, n * n).T  # (La, Lb * b)
        return vals.reshape(self.la, self.lb, b).permute(2, 0, 1).cpu().numpy()


def resampled_cka(Kx: np.ndarray, Ly: np.ndarray, idx: np.ndarray, debiased: bool) -> float:
    """Linear CKA of ``X[idx], Y[idx]`` from the H-centred full-sample Grams ``Kx``, ``Ly``.

    The Gram of ``X[idx]`` is ``K[idx][:, idx]`` and centring is invariant to
    translating X, so re-centring the gathered block gives exactly the centred
    Gram of the resampled rows (duplicates included).
    """
    Ks = Kx[np.ix_(idx, idx)]
    Ls = Ly[np.ix_(idx, idx)]
    return cka_from_grams(center_gram(Ks, unbiased=debiased), center_gram(Ls, unbiased=debiased))
