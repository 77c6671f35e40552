"""Mutual k-nearest-neighbour overlap (Huh et al. 2024, "The Platonic Representation Hypothesis").

For each example i, take its k nearest neighbours among the OTHER examples by
cosine similarity in X and in Y; the score is the mean over i of
``|N_X(i) & N_Y(i)| / k``. Rows are not centred (cosine of the raw vectors, as
in the reference implementation).

Ties: when a row's k-th and (k+1)-th most similar other rows are equally similar
(to ``TIE_TOL``; duplicated rows, or a constant side where every row is alike),
its neighbour set is not defined and any tie-break would decide the overlap
(a constant side scores 1.0 against itself by argpartition's index order). The
measure is then nan, with a :class:`~interlingua.analysis.measures.MeasureWarning` and the
``reason`` in the details that say which side and how many rows.

Chance level: if the two neighbour sets were independent uniform k-subsets
of the n - 1 other examples, the expected overlap is ``k / (n - 1)``
(:func:`mutual_knn_chance`).

Prepared path (``metadata.prepared``): each side's similarities, neighbour
lists and tie flags are computed once (``O(n^2 p)``). Permuting the rows of a
side permutes its neighbour sets with them (``N_{Y[p]}(i) = p^{-1}(N_Y(p(i)))``:
the similarities move with the rows, and a set with no tie at the k-th
neighbour is the same set whichever order the rows come in), so a permutation
costs one gather of ``n k`` booleans from the other side's neighbour mask
(``O(n k)``) instead of an ``O(n^2 p)`` similarity matrix and an ``O(n^2)``
partition. The per-example overlaps are summed in the direct call's order, so
the values are bit-for-bit the direct call's and a permutation p-value, whose
null takes few distinct values, counts the same ties. Ties are permutation
invariant: a side with a tie gives nan for every permutation, as the direct
call does. Resampled rows (the delete-a-group jackknife) are computed directly:
a neighbour among the left-out rows is replaced by the next one.

Leave-one-out values (:func:`mutual_knn_leave_one_out`): removing row r changes
row j's neighbour set only if r was in it, and then r is replaced by j's
(k+1)-th nearest row, so all n leave-one-out values follow from each side's
k-NN mask and (k+1)-th neighbour in ``O(n^2)`` after the one ``O(n^2 p)``
similarity matrix. The bootstrap interval uses them (see
``inference.bootstrap_interval``): a resample with replacement is not a sample
this measure is defined on (a copy would be its own nearest neighbour).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.analysis.measures.base import Measure, MeasureMetadata, MeasureResult, register, register_family
from interlingua.analysis.measures.validation import as_matrix, check_pair, rescale_rows, warn
from interlingua.core.errors import MeasureInputError

__all__ = [
    "mutual_knn",
    "mutual_knn_result",
    "mutual_knn_leave_one_out",
    "mutual_knn_chance",
    "knn_sets",
    "tied_rows",
    "TIE_TOL",
]

# cosine similarities closer than this count as tied: float64 rounding of equal rows is ~1e-16, while
# distinct float32 activations differ by far more than 1e-10
TIE_TOL = 1e-10


def mutual_knn_chance(n: int, k: int) -> float:
    """Expected mutual-kNN overlap of unrelated representations: ``k / (n - 1)``."""
    _check_k(n, k)
    return k / (n - 1)


def _check_k(n: int, k: int) -> None:
    if int(k) != k or k < 1:
        raise MeasureInputError(f"k must be a positive integer; got {k}.")
    if k > n - 2:
        raise MeasureInputError(
            f"mutual kNN with k={k} needs at least k + 2 = {k + 2} paired examples (rows): each row has n - 1 "
            f"candidate neighbours, and k = n - 1 would make every overlap 1; got n={n}."
        )


def _similarities(x: np.ndarray, side: str) -> np.ndarray:
    """Cosine similarities between rows, the diagonal (self) set to -inf."""
    x = rescale_rows(x)  # cosine ignores each row's scale: exact power-of-two rescale, norms stay in float64
    norms = np.linalg.norm(x, axis=1)
    zero = int(np.count_nonzero(norms == 0))
    if zero:
        raise MeasureInputError(f"{side} has {zero} all-zero row(s); cosine similarity is undefined for them.")
    xn = x / norms[:, None]
    sim = xn @ xn.T
    np.fill_diagonal(sim, -np.inf)  # exclude self
    return sim


def _sets_and_ties(sim: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k-NN mask of each row and whether its k-th and (k+1)-th neighbours are tied (needs k <= n - 2)."""
    n = sim.shape[0]
    part = np.partition(sim, (n - k - 1, n - k), axis=1)
    tied = part[:, n - k] - part[:, n - k - 1] <= TIE_TOL
    idx = np.argpartition(sim, -k, axis=1)[:, -k:]
    mask = np.zeros(sim.shape, dtype=bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return mask, tied


def knn_sets(x: np.ndarray, k: int, side: str = "X") -> np.ndarray:
    """Boolean (n, n) matrix: row i marks the k nearest other rows of ``x`` by cosine similarity.

    Ties at the k-th neighbour are broken arbitrarily here; :func:`tied_rows` says where they are.
    """
    return _sets_and_ties(_similarities(x, side), k)[0]


def tied_rows(x: np.ndarray, k: int, side: str = "X") -> np.ndarray:
    """Boolean (n,): rows whose k-th and (k+1)-th nearest other rows are equally similar (to ``TIE_TOL``)."""
    _check_k(x.shape[0], k)
    return _sets_and_ties(_similarities(x, side), k)[1]


def mutual_knn_result(X: Any, Y: Any, k: int = 10) -> MeasureResult:
    """Mutual kNN with per-example overlaps and the chance level recorded (see :func:`mutual_knn`)."""
    x, y = check_pair(X, Y, min_n=3, what="mutual kNN")
    n = x.shape[0]
    _check_k(n, k)
    mx, tx = _sets_and_ties(_similarities(x, "X"), k)
    my, ty = _sets_and_ties(_similarities(y, "Y"), k)
    overlap = (mx & my).sum(axis=1) / k
    details: dict[str, Any] = {"k": k, "chance": k / (n - 1), "overlap_per_example": overlap}
    est = f"mutual {k}-NN overlap, cosine similarity, self excluded (Huh et al. 2024)"
    if tx.any() or ty.any():
        sides = ", ".join(f"{int(t.sum())} of {n} rows of {name}" for name, t in (("X", tx), ("Y", ty)) if t.any())
        reason = (
            f"mutual {k}-NN is undefined: {sides} have their {k}-th and {k + 1}-th nearest neighbours equally "
            "similar (constant or duplicated rows), so the neighbour sets depend on an arbitrary tie-break; "
            "returned nan (remove duplicated examples, or use a layer or pooling whose rows differ)."
        )
        warn(reason)
        details["reason"] = reason
        details["tied_rows"] = {"X": int(tx.sum()), "Y": int(ty.sum())}
        return MeasureResult(float("nan"), f"mknn_k{k}", est, n, details)
    return MeasureResult(float(overlap.mean()), f"mknn_k{k}", est, n, details)


def mutual_knn(X: Any, Y: Any, k: int = 10) -> float:
    """Mean fraction of shared k nearest neighbours (cosine, self excluded) of each example in X and Y.

    In [0, 1]; chance is ``mutual_knn_chance(n, k) = k / (n - 1)``. Needs n >= k + 2.
    """
    return mutual_knn_result(X, Y, k).value


def _next_and_tie(sim: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's (k+1)-th nearest other row, and whether its (k+1)-th and (k+2)-th are tied (n >= k + 3)."""
    n = sim.shape[0]
    part = np.partition(sim, (n - k - 2, n - k - 1), axis=1)
    nxt = np.argpartition(sim, n - k - 1, axis=1)[:, n - k - 1]
    return nxt, part[:, n - k - 1] - part[:, n - k - 2] <= TIE_TOL


def mutual_knn_leave_one_out(X: Any, Y: Any, k: int = 10) -> np.ndarray:
    """``(n,)``: entry r is mutual kNN of the n - 1 rows other than r (exact; see the module docstring).

    Row j's X set loses r (if r is in it) and gains ``e_j``, its (k+1)-th nearest row; likewise in Y with
    ``f_j``. Its overlap count changes by ``a (e_j in N_Y(j)) + b (f_j in N_X(j)) + a b ((e_j == f_j) - 1)``
    with ``a = [r in N_X(j)]``, ``b = [r in N_Y(j)]``; summed over j this is three matrix-vector products.
    nan for every r when the full sample has a tie at the k-th neighbour (the measure itself is nan), and
    for the r whose removal would promote a row tied at the (k+1)-th place. Needs n >= k + 3.
    """
    x, y = check_pair(X, Y, min_n=3, what="mutual kNN")
    n = x.shape[0]
    if k > n - 3:
        raise MeasureInputError(
            f"leave-one-out mutual kNN with k={k} needs at least k + 3 = {k + 3} rows (each leave-out keeps "
            f"k + 2); got n={n}."
        )
    _check_k(n, k)
    sx, sy = _similarities(x, "X"), _similarities(y, "Y")
    (mx, tx), (my, ty) = _sets_and_ties(sx, k), _sets_and_ties(sy, k)
    (ex, tx1), (ey, ty1) = _next_and_tie(sx, k), _next_and_tie(sy, k)
    both = mx & my
    cnt = both.sum(axis=1)
    rows = np.arange(n)
    gx = my[rows, ex].astype(np.int64)  # e_j in N_Y(j)
    gy = mx[rows, ey].astype(np.int64)  # f_j in N_X(j)
    same = (ex == ey).astype(np.int64) - 1
    mxi, myi = mx.astype(np.int64), my.astype(np.int64)
    delta = mxi.T @ gx + myi.T @ gy + both.astype(np.int64).T @ same
    out = (int(cnt.sum()) - cnt + delta) / (k * (n - 1))
    if tx.any() or ty.any():
        out[:] = np.nan
    else:
        out[(mxi.T @ tx1.astype(np.int64) + myi.T @ ty1.astype(np.int64)) > 0] = np.nan
    return out


@dataclass(frozen=True, eq=False)
class KNNSide:
    """One side prepared for :func:`knn_prepared`: its k-NN lists and mask, and whether any row is tied."""

    n: int
    k: int
    x: np.ndarray = field(repr=False)  # float64 input, for the direct fallback on resamples
    idx: np.ndarray = field(repr=False)  # (n, k) int64: the k nearest other rows of each row
    mask: np.ndarray = field(repr=False)  # (n, n) bool: mask[i, j] iff j is among the k nearest rows of i
    tied: bool  # some row's k-th and (k+1)-th neighbours are tied: the measure is nan on every permutation


def knn_prepare(X: Any, *, k: int) -> KNNSide:
    """One side's neighbour sets, computed once (errors as in the direct call)."""
    x = as_matrix(X, "X")
    n = x.shape[0]
    if n < 3:
        raise MeasureInputError(f"mutual kNN needs at least 3 rows; got {n}.")
    _check_k(n, k)
    mask, tied = _sets_and_ties(_similarities(x, "X"), k)
    # the k marked columns of each row, in increasing order (the order does not matter to a count)
    idx = np.nonzero(mask)[1].reshape(n, k).astype(np.int64)
    return KNNSide(n, k, x, idx, mask, bool(tied.any()))


def knn_prepared(
    sx: KNNSide, sy: KNNSide, rows_x: np.ndarray | None, rows_y: np.ndarray | None, *, k: int
) -> np.ndarray:
    """Mutual kNN of ``X[rows_x[i]], Y[rows_y[i]]`` from prepared sides (see the module docstring).

    For permutations ``px``, ``py``: row r pairs X row ``a = px[r]`` with Y row ``q[a] = py[r]``, and its
    overlap is ``#{c in N_X(a) : q[c] in N_Y(q[a])}`` (a gather of ``mask_Y`` at ``(q[a], q[N_X(a)])``).
    """
    from interlingua.analysis.measures._prepared import chunks, is_permutation

    n = sx.n
    given = rows_x if rows_x is not None else rows_y
    b = 1 if given is None else given.shape[0]
    px = np.ones(b, dtype=bool) if rows_x is None else is_permutation(rows_x, n)
    py = np.ones(b, dtype=bool) if rows_y is None else is_permutation(rows_y, n)
    perm = px & py
    out = np.empty(b)
    ident = np.arange(n)
    todo = np.flatnonzero(perm)
    if sx.tied or sy.tied:
        out[todo] = np.nan
        todo = todo[:0]
    for sl in chunks(todo.size, n * k * 9):
        sel = todo[sl]
        rx = np.broadcast_to(ident, (sel.size, n)) if rows_x is None else rows_x[sel]
        ry = np.broadcast_to(ident, (sel.size, n)) if rows_y is None else rows_y[sel]
        q = np.empty((sel.size, n), dtype=np.int64)
        np.put_along_axis(q, rx, ry, axis=1)  # q[rx[r]] = ry[r]
        hits = sy.mask[q[:, :, None], q[:, sx.idx]]  # (b, n, k): a's X-neighbour c is a Y-neighbour of q[a]
        counts = np.take_along_axis(hits.sum(axis=2), rx, axis=1)  # back to the order of the rows r
        for j, i in enumerate(sel):
            out[i] = float((counts[j] / k).mean())  # the direct call's arithmetic, in its order
    for i in np.flatnonzero(~perm):  # a resample: the direct call (see the module docstring)
        ix = None if rows_x is None else rows_x[i]
        iy = None if rows_y is None else rows_y[i]
        out[i] = _quiet_direct(sx.x if ix is None else sx.x[ix], sy.x if iy is None else sy.x[iy], k)
    return out


def _quiet_direct(x: np.ndarray, y: np.ndarray, k: int) -> float:
    import warnings

    from interlingua.analysis.measures.validation import MeasureWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MeasureWarning)
        return mutual_knn_result(x, y, k).value


def _fn(X: Any, Y: Any, *, k: int, **kw: Any) -> MeasureResult:
    return mutual_knn_result(X, Y, k, **kw)


def _leave_one_out(X: Any, Y: Any, *, k: int) -> np.ndarray:
    return mutual_knn_leave_one_out(X, Y, k)


def _measure(k: int) -> Measure:
    if k < 1:
        raise MeasureInputError(f"k must be a positive integer; got {k}.")
    return Measure(
        id=f"mknn_k{k}",
        metadata=MeasureMetadata(
            cost_model="knn",
            larger_is_more_similar=True,
            symmetric=True,
            # cosine similarity: rotations and positive scaling keep every angle; shifts do not
            invariances=frozenset({"orthogonal", "isotropic_scale", "permutation"}),
            min_n=k + 2,
            bounds=(0.0, 1.0),
            resample_distinct=True,
            estimator=f"mutual {k}-NN overlap, cosine, self excluded",
            reference="Huh et al. 2024",
            prepared=True,
        ),
        fn=_fn,
        params={"k": k},
        prepare_fn=knn_prepare,
        prepared_fn=knn_prepared,
        leave_one_out_fn=_leave_one_out,
    )


register(_measure(10))
register_family(r"mknn_k(\d+)", lambda m: _measure(int(m.group(1))), "mknn_k<k>")
