"""Mutual k-nearest-neighbour overlap (Huh et al. 2024, "The Platonic Representation Hypothesis").

For each example i, take its k nearest neighbours among the OTHER examples by
cosine similarity in X and in Y; the score is the mean over i of
``|N_X(i) & N_Y(i)| / k``. Rows are not centred (cosine of the raw vectors, as
in the reference implementation).

Ties: when a row's k-th and (k+1)-th most similar other rows are equally similar
(to ``TIE_TOL``; duplicated rows, or a constant side where every row is alike),
its neighbour set is not defined and any tie-break would decide the overlap
(a constant side scores 1.0 against itself by argpartition's index order). The
measure is then nan, with a :class:`~interlingua.measures.MeasureWarning` and the
``reason`` in the details that say which side and how many rows.

Chance level: if the two neighbour sets were independent uniform k-subsets
of the n - 1 other examples, the expected overlap is ``k / (n - 1)``
(:func:`mutual_knn_chance`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interlingua.errors import MeasureInputError
from interlingua.measures.base import Measure, MeasureMetadata, MeasureResult, register, register_family
from interlingua.measures.validation import check_pair, warn

__all__ = ["mutual_knn", "mutual_knn_result", "mutual_knn_chance", "knn_sets", "tied_rows", "TIE_TOL"]

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


def _fn(X: Any, Y: Any, *, k: int, **kw: Any) -> MeasureResult:
    return mutual_knn_result(X, Y, k, **kw)


def _measure(k: int) -> Measure:
    if k < 1:
        raise MeasureInputError(f"k must be a positive integer; got {k}.")
    return Measure(
        id=f"mknn_k{k}",
        metadata=MeasureMetadata(
            larger_is_more_similar=True,
            symmetric=True,
            # cosine similarity: rotations and positive scaling keep every angle; shifts do not
            invariances=frozenset({"orthogonal", "isotropic_scale", "permutation"}),
            min_n=k + 2,
            bounds=(0.0, 1.0),
            estimator=f"mutual {k}-NN overlap, cosine, self excluded",
            reference="Huh et al. 2024",
        ),
        fn=_fn,
        params={"k": k},
    )


register(_measure(10))
register_family(r"mknn_k(\d+)", lambda m: _measure(int(m.group(1))), "mknn_k<k>")
