"""Held-out protocol: sentence-level k-fold or a single train/test split, seeded and storable.

Rows are sentences. A fold assignment is a pure function of ``(n, k or
test_fraction, seed)``:

- ``kfold(n, k, seed)``: ``numpy.random.default_rng(seed).permutation(n)``
  split into k contiguous parts with ``numpy.array_split`` (sizes differ by
  at most one); part i, sorted, is the test set of fold i and every other row
  is its training set. Every row is held out exactly once.
- ``train_test_split(n, test_fraction, seed)``: one fold whose test set is the
  first ``round(test_fraction * n)`` rows of the same permutation (sorted).

:meth:`Folds.to_dict` gives a JSON-ready record (scheme, seed, n, the test
rows of every fold, and :attr:`Folds.key`, a sha256 of the assignment) to store
next to the results; :meth:`Folds.from_dict` reads it back and checks the key.
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.maps.errors import MapInputError

__all__ = ["Folds", "kfold", "train_test_split", "make_folds", "restricted_permutation"]


def _seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise MapInputError(f"seed must be a non-negative integer; got {seed!r}.")
    return int(seed)


@dataclass(frozen=True, eq=False)
class Folds:
    """Test rows of each fold over ``n`` sentences; training rows are the complement.

    ``scheme``: ``"kfold"`` or ``"split"``; ``tests[i]``: sorted int64 row
    indices held out in fold i. Iterating yields ``(train, test)`` index arrays.
    """

    scheme: str
    n: int
    seed: int
    tests: tuple[np.ndarray, ...] = field(repr=False)
    test_fraction: float | None = None

    def __post_init__(self) -> None:
        tests = tuple(np.sort(np.asarray(t, dtype=np.int64)) for t in self.tests)
        object.__setattr__(self, "tests", tests)
        seen = np.zeros(self.n, dtype=np.int64)
        for t in tests:
            if t.size == 0 or t.min() < 0 or t.max() >= self.n:
                raise MapInputError(f"a fold's test rows must be non-empty indices in [0, {self.n}).")
            np.add.at(seen, t, 1)
        if seen.max() > 1:
            raise MapInputError("a row is held out by more than one fold; folds must have disjoint test sets.")
        if self.scheme == "kfold" and seen.min() < 1:
            raise MapInputError("k-fold test sets must cover every row exactly once.")
        for t in tests:
            if self.n - t.size < 2:
                raise MapInputError(f"a fold keeps {self.n - t.size} training row(s); at least 2 are needed.")

    @property
    def k(self) -> int:
        """Number of folds (1 for a train/test split)."""
        return len(self.tests)

    def train(self, i: int) -> np.ndarray:
        """Sorted training rows of fold i (every row not in ``tests[i]``)."""
        mask = np.ones(self.n, dtype=bool)
        mask[self.tests[i]] = False
        return np.flatnonzero(mask)

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for i in range(self.k):
            yield self.train(i), self.tests[i]

    def __len__(self) -> int:
        return self.k

    @property
    def key(self) -> str:
        """sha256 (hex, 16 characters) of the scheme, n and every fold's test rows."""
        body = json.dumps([self.scheme, self.n, [t.tolist() for t in self.tests]], separators=(",", ":"))
        return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record of the assignment (store it with the results)."""
        return {
            "scheme": self.scheme,
            "n": self.n,
            "seed": self.seed,
            "k": self.k,
            "test_fraction": self.test_fraction,
            "key": self.key,
            "tests": [t.tolist() for t in self.tests],
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Folds:
        """Inverse of :meth:`to_dict`; the stored key must match the test rows."""
        folds = cls(
            scheme=str(record["scheme"]),
            n=int(record["n"]),
            seed=int(record["seed"]),
            tests=tuple(np.asarray(t, dtype=np.int64) for t in record["tests"]),
            test_fraction=record.get("test_fraction"),
        )
        if "key" in record and record["key"] != folds.key:
            raise MapInputError(
                "stored folds do not match their key (edited or damaged); recompute them with make_folds."
            )
        return folds


def kfold(n: int, k: int = 5, seed: int = 0) -> Folds:
    """Sentence-level k-fold: ``default_rng(seed).permutation(n)`` cut into k near-equal parts."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 4:
        raise MapInputError(f"held-out evaluation needs at least 4 sentences; got n={n!r}.")
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 2 <= int(k) <= int(n) // 2:
        raise MapInputError(
            f"folds must be an integer in [2, n/2] (each fold needs 2 or more test rows); got {k!r} for n={n}. "
            "For a single split pass a test fraction such as 0.2."
        )
    perm = np.random.default_rng(_seed(seed)).permutation(int(n))
    return Folds("kfold", int(n), _seed(seed), tuple(np.array_split(perm, int(k))))


def train_test_split(n: int, test_fraction: float = 0.2, seed: int = 0) -> Folds:
    """One fold: ``round(test_fraction * n)`` rows (at least 2) held out.

    The held-out rows are drawn by ``default_rng(seed).permutation(n)``.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 4:
        raise MapInputError(f"held-out evaluation needs at least 4 sentences; got n={n!r}.")
    frac = float(test_fraction)
    if not 0.0 < frac < 1.0:
        raise MapInputError(f"test_fraction must lie in (0, 1), e.g. 0.2; got {test_fraction!r}.")
    m = min(max(2, int(round(frac * n))), int(n) - 2)
    perm = np.random.default_rng(_seed(seed)).permutation(int(n))
    return Folds("split", int(n), _seed(seed), (perm[:m],), test_fraction=frac)


def make_folds(n: int, folds: Any = 5, seed: int = 0) -> Folds:
    """Folds of ``n`` rows from a folds setting.

    ``folds``: an int k (k-fold), a float in (0, 1) (train/test split with that test fraction), or a :class:`Folds`.
    """
    if isinstance(folds, Folds):
        if folds.n != n:
            raise MapInputError(f"the folds were made for n={folds.n} sentences, but the pair has n={n}.")
        return folds
    if isinstance(folds, numbers.Integral) and not isinstance(folds, bool):
        return kfold(n, int(folds), seed)
    if isinstance(folds, numbers.Real) and not isinstance(folds, bool):
        return train_test_split(n, float(folds), seed)
    raise MapInputError(f"folds must be an int (k-fold), a float test fraction or a Folds object; got {folds!r}.")


def restricted_permutation(permutation: np.ndarray, train: np.ndarray) -> np.ndarray:
    """The pair's permutation restricted to the training rows, as positions into ``train``.

    ``sigma[k]`` is the position (in ``train``) of the k-th training row, in the
    order the training rows appear in ``permutation``: training row ``train[k]``
    of side A is paired with row ``train[sigma[k]]`` of side B. A uniform
    permutation restricts to a uniform permutation of the training rows, and no
    held-out row ever enters a fit.
    """
    pos = np.full(permutation.shape[0], -1, dtype=np.int64)
    pos[train] = np.arange(train.size)
    order = pos[permutation]
    return order[order >= 0]
