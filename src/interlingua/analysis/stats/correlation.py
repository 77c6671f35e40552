"""Correlations with permutation p-values, bootstrap intervals and what the sample size allows.

- :func:`correlation`: Spearman or Pearson rho of two columns, a two-sided
  permutation p (exact enumeration for small n), a percentile bootstrap
  interval, and the smallest p this n can ever give;
- :func:`within_group_correlation`: rho inside each group (repeated measures:
  rows nest in groups) and their mean, tested by permuting within groups;
- :func:`correlation_table`: every (column, predictor) cell of a DataFrame,
  all cells on the same seeded permutations, with Benjamini-Hochberg q's.

Conventions (one engine serves all three, so a table cell equals the single call):

- p-value: two-sided, ``|rho_perm| >= |rho_obs|`` (ties within 1e-12 count).
  Exact (``p_method="exact"``) when the number of distinct permutations
  (n!, or the product of the group sizes' factorials) is at most
  ``permutations``: p = count / n!, the identity included. Otherwise Monte
  Carlo: p = (1 + count) / (1 + permutations).
- Permutations shuffle y against x. The Monte-Carlo stream is
  :func:`permutation_indices`: permutation k orders the rows (within each
  group) by the k-th row of ``default_rng(SeedSequence(seed).spawn(2)[0]).random((permutations, n))``.
  The bootstrap draws ``default_rng(SeedSequence(seed).spawn(2)[1]).integers(0, n, (bootstrap, n))``.
- Spearman rho is Pearson's r of average ranks (= ``scipy.stats.spearmanr``), ranked
  once; all permutations of a batch are scored with one (stacked) matrix product.
- Smallest attainable p: 2/n! for Spearman (the reversed order gives -rho, so
  at least two permutations reach any |rho|), 1/n! for Pearson (no such
  symmetry); with ties the true floor is larger, so these are lower bounds.
  Monte Carlo cannot go below 1/(1 + permutations). ``reachable`` is whether
  the larger of the two is <= ``alpha``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast

import numpy as np
import pandas as pd
from scipy import stats as sps

from interlingua.analysis.stats.errors import StatsError, StatsWarning, as_vector, check_level, nan_positions
from interlingua.analysis.stats.multiple import benjamini_hochberg

__all__ = [
    "Correlation",
    "GroupRow",
    "WithinGroup",
    "correlation",
    "within_group_correlation",
    "correlation_table",
    "permutation_indices",
    "smallest_attainable_p",
]

Method = Literal["spearman", "pearson"]
NanPolicy = Literal["raise", "omit"]
TIE_TOLERANCE = 1e-12  # |rho_perm| >= |rho_obs| - TIE_TOLERANCE counts as reaching the observed value
MEMORY_BYTES = 64 * 2**20  # working memory per batch of permutations / bootstrap resamples
MIN_ROWS = 3


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Correlation:
    """Result of :func:`correlation` (see the module docstring for the conventions)."""

    method: str
    labels: tuple[str, str]
    n: int
    n_dropped: int
    rho: float
    p: float
    p_method: str  # "exact", "monte carlo", or "none" (rho undefined)
    permutations: int  # permutations scored: n! when exact, the requested count when Monte Carlo
    ci_low: float
    ci_high: float
    level: float
    bootstrap: int
    bootstrap_dropped: int  # resamples where rho was undefined (a constant resample)
    min_attainable_p: float
    alpha: float
    reachable: bool
    seed: int
    note: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (labels as a list)."""
        out = asdict(self)
        out["labels"] = list(self.labels)
        return out


@dataclass(frozen=True)
class GroupRow:
    """One group of :func:`within_group_correlation`: its rho, or why it is excluded."""

    group: Any
    n: int
    rho: float
    min_attainable_p: float
    included: bool
    reason: str  # "" when included


@dataclass(frozen=True)
class WithinGroup:
    """Result of :func:`within_group_correlation`.

    ``mean_rho`` averages the rhos of the included groups; ``p`` tests it by
    permuting y within groups; ``ci_low``/``ci_high`` resample the included
    groups with replacement (percentile bootstrap of the mean).
    """

    method: str
    labels: tuple[str, str]
    n: int
    n_dropped: int
    n_groups: int
    n_groups_defined: int
    mean_rho: float
    p: float
    p_method: str
    permutations: int
    ci_low: float
    ci_high: float
    level: float
    bootstrap: int
    min_attainable_p: float
    alpha: float
    reachable: bool
    seed: int
    note: str
    groups: tuple[GroupRow, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """Plain dict; ``groups`` as a list of dicts."""
        out = asdict(self)
        out["labels"] = list(self.labels)
        out["groups"] = [asdict(g) for g in self.groups]
        return out

    def to_frame(self) -> pd.DataFrame:
        """The per-group rows as a DataFrame (group, n, rho, min_attainable_p, included, reason)."""
        return pd.DataFrame(
            [asdict(g) for g in self.groups], columns=[f.name for f in GroupRow.__dataclass_fields__.values()]
        )


# --------------------------------------------------------------------------- streams and counts


def _streams(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    perm, boot = np.random.SeedSequence(seed).spawn(2)
    return perm, boot


def _strata(codes: np.ndarray | None, n: int) -> list[np.ndarray]:
    if codes is None:
        return [np.arange(n)]
    return [np.flatnonzero(codes == g) for g in range(int(codes.max()) + 1)]


def permutation_indices(
    n: int, permutations: int, seed: int, *, groups: Any = None, batch: int = 4096
) -> Iterator[np.ndarray]:
    """The seeded Monte-Carlo permutations, ``batch`` at a time, as ``(b, n)`` index arrays.

    Permutation k sorts the rows by the k-th row of uniform keys
    ``default_rng(SeedSequence(seed).spawn(2)[0]).random((permutations, n))``
    (within each group when ``groups`` gives integer codes 0..G-1), so the
    sequence does not depend on ``batch``. Row ``i`` of the permuted data is
    row ``P[i]`` of the original.
    """
    rng = np.random.default_rng(_streams(seed)[0])
    codes = None if groups is None else np.asarray(groups, dtype=np.int64)
    offset = None if codes is None else codes.astype(np.float64)[None, :]
    order = None if codes is None else np.argsort(codes, kind="stable")
    done = 0
    while done < permutations:
        b = min(batch, permutations - done)
        keys = rng.random((b, n))
        if offset is None or order is None:  # no groups
            yield np.argsort(keys, axis=1, kind="stable")
        else:  # group code + key/2 < code + 1: sorting keeps groups apart and shuffles inside each
            sorted_positions = np.argsort(offset + 0.5 * keys, axis=1, kind="stable")
            perm = np.empty_like(sorted_positions)
            perm[:, order] = sorted_positions
            yield perm
        done += b


def _enumerate_permutations(strata: list[np.ndarray], n: int, batch: int) -> Iterator[np.ndarray]:
    """Every within-strata permutation once (the identity first), ``batch`` rows at a time."""
    combos = itertools.product(*(itertools.permutations(idx.tolist()) for idx in strata))
    while True:
        chunk = list(itertools.islice(combos, batch))
        if not chunk:
            return
        out = np.empty((len(chunk), n), dtype=np.int64)
        for g, idx in enumerate(strata):
            out[:, idx] = np.array([combo[g] for combo in chunk], dtype=np.int64)
        yield out


def _count_permutations(sizes: Sequence[int], limit: int) -> int | None:
    """prod(size!) if it is at most ``limit``, else None (stops multiplying early)."""
    total = 1
    for size in sizes:
        for k in range(2, size + 1):
            total *= k
            if total > limit:
                return None
    return total


def smallest_attainable_p(sizes: int | Sequence[int], method: str = "spearman") -> float:
    """Smallest two-sided permutation p for ``n`` rows (or groups of these sizes), exact enumeration.

    ``c / prod(n_g!)`` with c = 2 for Spearman (reversing every group's order
    negates rho, so two permutations reach any |rho|) and c = 1 for Pearson,
    capped at 1. Exact for distinct values; with ties the true floor is larger.
    """
    sizes = [int(cast(int, sizes))] if np.isscalar(sizes) else [int(s) for s in cast(Sequence[int], sizes)]
    c = 2 if method == "spearman" else 1
    if sum(math.lgamma(s + 1) for s in sizes) > 700:  # beyond float range: 0.0
        return 0.0
    return min(1.0, c / math.prod(math.factorial(s) for s in sizes))


# --------------------------------------------------------------------------- the engine


def _standardise(values: np.ndarray, strata: list[np.ndarray], method: str) -> np.ndarray:
    """Columns of ``values`` (m, J) ranked (Spearman) and centred to unit norm inside each stratum.

    Columns constant in a stratum become 0 there (callers never score them).
    """
    out = np.empty_like(values)
    for idx in strata:
        block = values[idx]
        if method == "spearman":
            block = sps.rankdata(block, axis=0)
        centred = block - block.mean(axis=0)
        norm = np.sqrt((centred * centred).sum(axis=0))
        constant = block.max(axis=0) == block.min(axis=0)
        out[idx] = np.where(constant, 0.0, centred / np.where(constant, 1.0, norm))
    return out


def _batch_rows(per_row_bytes: int, memory_bytes: int) -> int:
    return max(1, memory_bytes // max(1, per_row_bytes))


@dataclass
class _BlockResult:
    obs: np.ndarray  # (C, K) the statistic (rho, or the mean within-group rho)
    per_group: np.ndarray  # (G, C, K) rho in each stratum
    p: np.ndarray  # (C, K)
    p_method: str
    permutations: int
    ci_low: np.ndarray
    ci_high: np.ndarray
    boot_dropped: np.ndarray  # (C, K) ints


def _block(
    x: np.ndarray,
    y: np.ndarray,
    codes: np.ndarray | None,
    *,
    method: str,
    permutations: int,
    seed: int,
    bootstrap: int,
    level: float,
    memory_bytes: int = MEMORY_BYTES,
) -> _BlockResult:
    """All statistics for predictors ``x`` (m, K) against columns ``y`` (m, C) on the same m rows."""
    m, K = x.shape
    C = y.shape[1]
    strata = _strata(codes, m)
    G = len(strata)
    xs = _standardise(x, strata, method)
    ys = _standardise(y, strata, method)
    per_group = np.clip(np.stack([ys[idx].T @ xs[idx] for idx in strata]), -1.0, 1.0)  # (G, C, K)
    stat = (ys.T @ xs) / G  # the tested statistic, computed as the null is
    threshold = (np.abs(stat) - TIE_TOLERANCE).T  # (K, C)
    xt = np.ascontiguousarray(xs.T)  # (K, m)
    batch = _batch_rows(8 * (m * C + C * K + 3 * m), memory_bytes)
    total = _count_permutations([len(idx) for idx in strata], permutations)
    if total is not None:
        p_method, scored = "exact", total
        batches = _enumerate_permutations(strata, m, batch)
    else:
        p_method, scored = "monte carlo", permutations
        batches = permutation_indices(m, permutations, seed, groups=codes, batch=batch)
    count = np.zeros((K, C), dtype=np.int64)
    for perm in batches:  # (b, m): row i of permuted y is row perm[i]
        null = np.matmul(xt, ys[perm]) / G  # (b, K, C): one stacked product for the batch
        count += (np.abs(null) >= threshold).sum(axis=0)
    count = count.T
    p = count / total if total is not None else (1.0 + count) / (1.0 + permutations)
    ci_low, ci_high, dropped = _bootstrap(
        x, y, per_group, codes, method=method, seed=seed, bootstrap=bootstrap, level=level, memory_bytes=memory_bytes
    )
    return _BlockResult(stat, per_group, np.minimum(p, 1.0), p_method, scored, ci_low, ci_high, dropped)


def _bootstrap(
    x: np.ndarray,
    y: np.ndarray,
    per_group: np.ndarray,
    codes: np.ndarray | None,
    *,
    method: str,
    seed: int,
    bootstrap: int,
    level: float,
    memory_bytes: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of each cell's statistic, and the resamples dropped per cell.

    Ungrouped: rows resampled with replacement (pairs kept), rho recomputed (re-ranked);
    resamples where rho is undefined are dropped. Grouped: groups resampled with
    replacement and their rhos averaged (nothing is dropped).
    """
    m, K = x.shape
    C = y.shape[1]
    nan = np.full((C, K), np.nan)
    if bootstrap <= 0:
        return nan, nan.copy(), np.zeros((C, K), dtype=np.int64)
    rng = np.random.default_rng(_streams(seed)[1])
    if codes is not None:
        G = per_group.shape[0]
        if G < 2:
            return nan, nan.copy(), np.zeros((C, K), dtype=np.int64)
        draws = rng.integers(0, G, size=(bootstrap, G))
        offsets = draws + G * np.arange(bootstrap)[:, None]  # times each group is drawn, per resample
        weights = np.bincount(offsets.ravel(), minlength=bootstrap * G).reshape(bootstrap, G).astype(np.float64)
        boots = (weights @ per_group.reshape(G, C * K)).reshape(bootstrap, C, K) / G
    else:
        draws = rng.integers(0, m, size=(bootstrap, m))
        boots = np.empty((bootstrap, C, K))
        batch = _batch_rows(8 * m * (K + C) * 6, memory_bytes)
        for start in range(0, bootstrap, batch):
            idx = draws[start : start + batch]
            boots[start : start + len(idx)] = np.matmul(
                _standardise_rows(y[idx], method).transpose(0, 2, 1), _standardise_rows(x[idx], method)
            )
        boots = np.clip(boots, -1.0, 1.0)
    finite = np.isfinite(boots)
    dropped = bootstrap - finite.sum(axis=0)
    tail = (1.0 - level) / 2
    with warnings.catch_warnings():  # all-NaN cells give NaN, which is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanquantile(boots, [tail, 1.0 - tail], axis=0)
    return low, high, dropped.astype(np.int64)


def _standardise_rows(values: np.ndarray, method: str) -> np.ndarray:
    """(b, m, J) resamples ranked (Spearman) and unit-normed along axis 1; constant resamples -> NaN."""
    if method == "spearman":
        values = sps.rankdata(values, axis=1)
    centred = values - values.mean(axis=1, keepdims=True)
    norm = np.sqrt((centred * centred).sum(axis=1, keepdims=True))
    constant = values.max(axis=1, keepdims=True) == values.min(axis=1, keepdims=True)
    return np.where(constant, np.nan, centred / np.where(constant, 1.0, norm))


# --------------------------------------------------------------------------- cells


@dataclass
class _Cell:
    """One (column, predictor) pair before and after scoring."""

    y: str
    x: str
    rows: np.ndarray  # rows used (indices into the input)
    n_dropped: int
    codes: np.ndarray | None  # group codes of ``rows`` (0..G-1), None when ungrouped
    groups: list[GroupRow]
    notes: list[str]
    defined: bool
    sizes: list[int]  # rows per tested stratum
    ties: bool = False  # tied values inside a tested stratum (the 2/n! floor is then a lower bound)
    result: dict[str, Any] = field(default_factory=dict)


def _check_options(
    method: str, permutations: int, seed: int, bootstrap: int, level: float, alpha: float, nan_policy: str
) -> None:
    if method not in ("spearman", "pearson"):
        raise StatsError(f"method must be 'spearman' or 'pearson'; got {method!r}.")
    if nan_policy not in ("raise", "omit"):
        raise StatsError(f"nan_policy must be 'raise' or 'omit'; got {nan_policy!r}.")
    for name, value, low in (("permutations", permutations, 1), ("bootstrap", bootstrap, 0), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise StatsError(f"{name} must be an integer >= {low}; got {value!r}.")
    check_level(level)
    check_level(alpha, "alpha")


def _is_constant(values: np.ndarray) -> bool:
    return bool(values.max() == values.min())


def _constant_note(xc: bool, yc: bool, x_name: str, y_name: str, where: str = "") -> str:
    names = " and ".join(name for name, c in ((x_name, xc), (y_name, yc)) if c)
    verb = "are" if xc and yc else "is"
    return f"{names} {verb} constant{where}: rho is undefined"


def _ties(xv: np.ndarray, yv: np.ndarray, strata: Sequence[np.ndarray]) -> bool:
    return any(np.unique(v[idx]).size < idx.size for v in (xv, yv) for idx in strata)


def _prepare(
    xv: np.ndarray,
    yv: np.ndarray,
    x_name: str,
    y_name: str,
    codes: np.ndarray | None,
    group_labels: Sequence[Any],
    method: str,
) -> _Cell:
    """Rows, strata and reasons for one cell (NaN pairs dropped; nan_policy is checked before)."""
    valid = ~(np.isnan(xv) | np.isnan(yv))
    n_dropped = int((~valid).sum())
    notes = [f"{n_dropped} pairs with NaN dropped"] if n_dropped else []
    if codes is None:
        rows = np.flatnonzero(valid)
        if rows.size < MIN_ROWS:
            notes.append(f"n = {rows.size}: rho needs at least {MIN_ROWS} pairs")
            return _Cell(y_name, x_name, rows, n_dropped, None, [], notes, False, [int(rows.size)])
        xc, yc = _is_constant(xv[rows]), _is_constant(yv[rows])
        if xc or yc:
            notes.append(_constant_note(xc, yc, x_name, y_name))
        defined = not (xc or yc)
        ties = defined and _ties(xv, yv, [rows])
        return _Cell(y_name, x_name, rows, n_dropped, None, [], notes, defined, [int(rows.size)], ties)
    groups: list[GroupRow] = []
    kept: list[np.ndarray] = []
    for g, label in enumerate(group_labels):
        idx = np.flatnonzero(valid & (codes == g))
        reason = ""
        if idx.size < MIN_ROWS:
            reason = f"n = {idx.size} < {MIN_ROWS}"
        else:
            xc, yc = _is_constant(xv[idx]), _is_constant(yv[idx])
            if xc or yc:
                reason = _constant_note(xc, yc, x_name, y_name)
        rho = float("nan")
        if not reason:
            kept.append(idx)
        groups.append(
            GroupRow(label, int(idx.size), rho, smallest_attainable_p(int(idx.size), method), not reason, reason)
        )
    excluded = [g for g in groups if not g.included]
    if excluded:
        notes.append(f"{len(excluded)} of {len(groups)} groups excluded (n < {MIN_ROWS} or constant)")
    if not kept:
        notes.append("no group has a defined rho: the within-group mean is undefined")
        return _Cell(y_name, x_name, np.array([], dtype=np.int64), n_dropped, None, groups, notes, False, [])
    rows = np.concatenate(kept)
    local = np.concatenate([np.full(idx.size, g) for g, idx in enumerate(kept)])
    sizes = [int(idx.size) for idx in kept]
    return _Cell(y_name, x_name, rows, n_dropped, local, groups, notes, True, sizes, _ties(xv, yv, kept))


def _score(cells: list[_Cell], xdata: dict[str, np.ndarray], ydata: dict[str, np.ndarray], **opts: Any) -> None:
    """Score all defined cells: cells with the same rows (and groups) share one block of permutations."""
    blocks: dict[bytes, list[_Cell]] = {}
    for cell in cells:
        if cell.defined:
            key = cell.rows.tobytes() + b"|" + (b"" if cell.codes is None else cell.codes.tobytes())
            blocks.setdefault(key, []).append(cell)
    for members in blocks.values():
        rows, codes = members[0].rows, members[0].codes
        xs = sorted({c.x for c in members})
        ys = sorted({c.y for c in members})
        x = np.column_stack([xdata[name][rows] for name in xs])
        y = np.column_stack([ydata[name][rows] for name in ys])
        res = _block(x, y, codes, **opts)
        for cell in members:
            i, j = ys.index(cell.y), xs.index(cell.x)
            cell.result = {
                "rho": float(np.clip(res.per_group[:, i, j].mean(), -1.0, 1.0)),
                "p": float(res.p[i, j]),
                "p_method": res.p_method,
                "permutations": int(res.permutations),
                "ci_low": float(res.ci_low[i, j]),
                "ci_high": float(res.ci_high[i, j]),
                "bootstrap_dropped": int(res.boot_dropped[i, j]),
                "per_group": res.per_group[:, i, j],
            }


def _finish(cell: _Cell, method: str, permutations: int, alpha: float, bootstrap: int) -> tuple[dict[str, Any], str]:
    """The reported fields of one cell, and the reachability note ("" when p can reach ``alpha``)."""
    nan = float("nan")
    out: dict[str, Any] = {
        "rho": nan,
        "p": nan,
        "p_method": "none",
        "permutations": 0,
        "ci_low": nan,
        "ci_high": nan,
        "bootstrap_dropped": 0,
    }
    out.update({k: v for k, v in cell.result.items() if k != "per_group"})
    notes = list(cell.notes)
    sizes = cell.sizes or [int(cell.rows.size)]
    min_p = smallest_attainable_p(sizes, method)
    exact = _count_permutations(sizes, permutations) is not None
    floor = min_p if exact else max(min_p, 1.0 / (1.0 + permutations))
    reachable = floor <= alpha
    reach_note = ""
    if cell.defined and not reachable:
        what = f"n = {sizes[0]}" if not cell.groups else f"groups of sizes {sizes}"
        if min_p > alpha:
            reach_note = f"{what}: the smallest attainable p is {min_p:.4f}; nothing can be significant at {alpha:g}"
        else:
            reach_note = (
                f"permutations = {permutations}: the smallest Monte-Carlo p is {floor:.4f}; nothing can be "
                f"significant at {alpha:g}; raise permutations"
            )
        notes.append(reach_note)
    if cell.defined and exact and method == "spearman" and cell.ties:
        notes.append("ties: the smallest attainable p is above the 2/n! shown")
    if cell.defined and bootstrap and out["bootstrap_dropped"]:
        notes.append(
            f"{out['bootstrap_dropped']} of {bootstrap} bootstrap resamples had undefined rho and were dropped"
        )
    out.update({"min_attainable_p": min_p, "reachable": bool(reachable), "note": "; ".join(notes)})
    return out, reach_note


# --------------------------------------------------------------------------- public API


def _two_columns(x: Any, y: Any, labels: tuple[str, str], nan_policy: str) -> tuple[np.ndarray, np.ndarray]:
    x_name, y_name = labels
    xv = as_vector(x, x_name, allow_nan=True)
    yv = as_vector(y, y_name, allow_nan=True)
    if xv.size != yv.size:
        raise StatsError(
            f"{x_name} and {y_name} must pair row by row; got {xv.size} and {yv.size} values. Align them first."
        )
    if nan_policy == "raise":
        for name, v in ((x_name, xv), (y_name, yv)):
            if np.isnan(v).any():
                raise StatsError(
                    f"{name} has NaN at positions {nan_positions(v)}; remove those pairs or pass nan_policy='omit'."
                )
    return xv, yv


def correlation(
    x: Any,
    y: Any,
    *,
    method: Method = "spearman",
    permutations: int = 20000,
    seed: int = 0,
    bootstrap: int = 2000,
    level: float = 0.95,
    alpha: float = 0.05,
    nan_policy: NanPolicy = "raise",
    labels: tuple[str, str] = ("x", "y"),
) -> Correlation:
    """Rho of ``x`` and ``y`` with a two-sided permutation p and a percentile bootstrap interval.

    rho equals ``scipy.stats.spearmanr`` (``method="spearman"``) or
    ``scipy.stats.pearsonr``. p counts permutations of y with
    ``|rho_perm| >= |rho|``: all n! of them when n! <= ``permutations``
    (``p_method="exact"``, p = count / n!), else ``permutations`` seeded draws
    (p = (1 + count) / (1 + permutations)). The bootstrap resamples pairs;
    resamples with undefined rho are dropped and counted.

    ``min_attainable_p`` is the smallest p this n allows (2/n! Spearman, 1/n!
    Pearson); when it (or the Monte-Carlo floor) exceeds ``alpha``,
    ``reachable`` is False, the note says so and a :class:`StatsWarning` is issued.
    A constant column gives rho = p = NaN with a note (no exception).
    StatsError: n < 3, unequal lengths, inf, NaN (positions named) unless
    ``nan_policy="omit"``, which drops NaN pairs and reports how many (``n_dropped``).
    """
    _check_options(method, permutations, seed, bootstrap, level, alpha, nan_policy)
    x_name, y_name = (str(s) for s in labels)
    xv, yv = _two_columns(x, y, (x_name, y_name), nan_policy)
    cell = _prepare(xv, yv, x_name, y_name, None, [], method)
    if cell.rows.size < MIN_ROWS:
        dropped = f" after dropping {cell.n_dropped} NaN pairs" if cell.n_dropped else ""
        raise StatsError(
            f"a correlation needs at least {MIN_ROWS} pairs; got {cell.rows.size}{dropped}. Add observations."
        )
    _score(
        [cell],
        {x_name: xv},
        {y_name: yv},
        method=method,
        permutations=permutations,
        seed=seed,
        bootstrap=bootstrap,
        level=level,
    )
    out, reach_note = _finish(cell, method, permutations, alpha, bootstrap)
    if reach_note:
        warnings.warn(reach_note, StatsWarning, stacklevel=2)
    return Correlation(
        method=method,
        labels=(x_name, y_name),
        n=int(cell.rows.size),
        n_dropped=cell.n_dropped,
        level=level,
        bootstrap=bootstrap,
        alpha=alpha,
        seed=seed,
        **out,
    )


def _group_codes(groups: Any, n: int) -> tuple[np.ndarray, list[Any]]:
    labels = pd.Series(
        np.asarray(groups, dtype=object) if not isinstance(groups, pd.Series) else groups.to_numpy(dtype=object)
    )
    if labels.size != n:
        raise StatsError(f"groups must give one label per row; got {labels.size} labels for {n} rows.")
    missing = labels.isna().to_numpy()
    if missing.any():
        raise StatsError(
            f"groups has missing labels at positions {np.flatnonzero(missing)[:10].tolist()}; label every row."
        )
    codes, uniques = pd.factorize(labels, sort=False)
    return codes.astype(np.int64), list(uniques)


def _with_group_rhos(cell: _Cell) -> list[GroupRow]:
    per_group = iter(cell.result.get("per_group", []))
    return [
        GroupRow(
            g.group,
            g.n,
            float(next(per_group)) if g.included else float("nan"),
            g.min_attainable_p,
            g.included,
            g.reason,
        )
        for g in cell.groups
    ]


def within_group_correlation(
    x: Any,
    y: Any,
    groups: Any,
    *,
    method: Method = "spearman",
    permutations: int = 20000,
    seed: int = 0,
    bootstrap: int = 2000,
    level: float = 0.95,
    alpha: float = 0.05,
    nan_policy: NanPolicy = "raise",
    labels: tuple[str, str] = ("x", "y"),
) -> WithinGroup:
    """Rho inside each group and their mean: the summary that is safe when rows repeat within groups.

    Pooling repeated measures (e.g. several layers per model) into one rho
    mixes between-group and within-group association; the mean of
    within-group rhos does not. Groups with fewer than 3 rows or a constant
    column are listed with the reason and left out of the mean. ``p`` tests the
    mean against permutations of y within groups (exact when the product of
    the group sizes' factorials is at most ``permutations``); the interval
    resamples the included groups. Group labels keep their order of first appearance.
    """
    _check_options(method, permutations, seed, bootstrap, level, alpha, nan_policy)
    x_name, y_name = (str(s) for s in labels)
    xv, yv = _two_columns(x, y, (x_name, y_name), nan_policy)
    codes, group_labels = _group_codes(groups, xv.size)
    cell = _prepare(xv, yv, x_name, y_name, codes, group_labels, method)
    _score(
        [cell],
        {x_name: xv},
        {y_name: yv},
        method=method,
        permutations=permutations,
        seed=seed,
        bootstrap=bootstrap,
        level=level,
    )
    out, reach_note = _finish(cell, method, permutations, alpha, bootstrap)
    if reach_note:
        warnings.warn(reach_note, StatsWarning, stacklevel=2)
    out.pop("bootstrap_dropped")
    return WithinGroup(
        method=method,
        labels=(x_name, y_name),
        n=int(cell.rows.size),
        n_dropped=cell.n_dropped,
        n_groups=len(group_labels),
        n_groups_defined=len(cell.sizes),
        mean_rho=out.pop("rho"),
        level=level,
        bootstrap=bootstrap,
        alpha=alpha,
        seed=seed,
        groups=tuple(_with_group_rhos(cell)),
        **out,
    )


def _frame_columns(
    frame: pd.DataFrame, names: str | Sequence[str], what: str, nan_policy: str
) -> dict[str, np.ndarray]:
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise StatsError(f"{what} is empty; name at least one column of the frame.")
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise StatsError(f"{what} {missing} not in the frame; its columns are {list(frame.columns)}.")
    out = {}
    for name in names:
        try:
            values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as exc:
            raise StatsError(f"column {name!r} is not numeric ({exc}); convert it or leave it out of {what}.") from exc
        values = as_vector(values, f"column {name!r}", allow_nan=True)
        if nan_policy == "raise" and np.isnan(values).any():
            raise StatsError(
                f"column {name!r} has NaN at rows {nan_positions(values)}; fill or drop them, or pass "
                "nan_policy='omit'."
            )
        out[str(name)] = values
    return out


TABLE_COLUMNS = [
    "column",
    "predictor",
    "method",
    "n",
    "n_dropped",
    "rho",
    "p",
    "q",
    "p_method",
    "permutations",
    "ci_low",
    "ci_high",
    "bootstrap_dropped",
    "min_attainable_p",
    "reachable",
    "note",
]


def correlation_table(
    frame: pd.DataFrame,
    columns: str | Sequence[str],
    predictors: str | Sequence[str],
    *,
    method: Method = "spearman",
    permutations: int = 20000,
    seed: int = 0,
    groups: str | None = None,
    bootstrap: int = 2000,
    level: float = 0.95,
    alpha: float = 0.05,
    nan_policy: NanPolicy = "raise",
) -> pd.DataFrame:
    """One row per (column, predictor): rho, permutation p, BH q, bootstrap interval, n, what n allows.

    Each cell equals :func:`correlation` (or, with ``groups`` naming a column of
    group labels, :func:`within_group_correlation`, rho being the mean
    within-group rho and ``n_groups`` the groups used) with the same options:
    every cell's null comes from the same seeded permutations, and cells with
    the same rows are scored together, one matrix product per batch. ``q`` is
    Benjamini-Hochberg across the whole table (NaN p's excluded). Cells that
    cannot be computed (n < 3, constant column) get NaN and a note; one
    :class:`StatsWarning` lists the cells whose p cannot reach ``alpha``.
    """
    _check_options(method, permutations, seed, bootstrap, level, alpha, nan_policy)
    if not isinstance(frame, pd.DataFrame):
        raise StatsError(f"frame must be a pandas DataFrame; got {type(frame).__name__}.")
    ydata = _frame_columns(frame, columns, "columns", nan_policy)
    xdata = _frame_columns(frame, predictors, "predictors", nan_policy)
    codes: np.ndarray | None = None
    group_labels: list[Any] = []
    if groups is not None:
        if groups not in frame.columns:
            raise StatsError(f"groups {groups!r} is not a column of the frame; its columns are {list(frame.columns)}.")
        codes, group_labels = _group_codes(frame[groups], len(frame))
    cells = [_prepare(xdata[xn], ydata[yn], xn, yn, codes, group_labels, method) for yn in ydata for xn in xdata]
    _score(cells, xdata, ydata, method=method, permutations=permutations, seed=seed, bootstrap=bootstrap, level=level)
    rows = []
    for cell in cells:
        out, _ = _finish(cell, method, permutations, alpha, bootstrap)
        row = {
            "column": cell.y,
            "predictor": cell.x,
            "method": method,
            "n": int(cell.rows.size),
            "n_dropped": cell.n_dropped,
            **out,
        }
        if codes is not None:
            row["n_groups"] = len(cell.sizes)
        rows.append(row)
    table = pd.DataFrame(rows)
    table["q"] = benjamini_hochberg(table["p"].to_numpy(dtype=np.float64))
    order = TABLE_COLUMNS[:5] + (["n_groups"] if codes is not None else []) + TABLE_COLUMNS[5:]
    table = table[order]
    blocked = [(c.y, c.x) for c, r in zip(cells, rows) if c.defined and not r["reachable"]]
    if blocked:
        shown = ", ".join(f"{y} ~ {x}" for y, x in blocked[:5]) + (", ..." if len(blocked) > 5 else "")
        warnings.warn(
            f"{len(blocked)} of {len(cells)} cells cannot reach p <= {alpha:g} ({shown}); see the 'reachable' and "
            "'note' columns",
            StatsWarning,
            stacklevel=2,
        )
    return table
