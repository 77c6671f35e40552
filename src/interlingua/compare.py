"""Which sides are compared, at which layers, and the matched-vs-shuffled rows.

A *side* is one model reading one language; a *pair* is two sides over the
same sentence ids. Every pair gets ONE seeded permutation (the shuffled
control), reused at every layer, for every pooling and every measure, and
stored with the results (docs/protocol.md, "Controls").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from interlingua.errors import ConfigError, MeasureInputError
from interlingua.inference import (
    bootstrap_interval,
    grid_permutation_test,
    jackknife_interval,
    pair_seed,
    permutation_test,
    shuffle_permutation,
)
from interlingua.inference._gram import unit_centred_gram
from interlingua.measures import cka_grid, get_measure

# Linear CKA ids -> debiased flag: these use the Gram path (and have a layer grid).
_LINEAR_CKA = {"cka_linear_biased": False, "cka_linear_debiased": True}


@dataclass(frozen=True, order=True)
class Side:
    """One model reading one language."""

    model: str
    language: str

    @property
    def label(self) -> str:
        return f"{self.model}:{self.language}"


@dataclass(frozen=True)
class Pair:
    """Two sides compared over the same sentence ids."""

    a: Side
    b: Side

    @property
    def kind(self) -> str:
        if self.a.model == self.b.model:
            return "within_model"
        return "cross_model"

    @property
    def label(self) -> str:
        return f"{self.a.label}|{self.b.label}"


def enumerate_pairs(
    models: Sequence[str],
    languages: Sequence[str],
    *,
    within_model: bool = True,
    cross_model: str = "same_language",
    explicit: Iterable[tuple[Side, Side]] = (),
) -> list[Pair]:
    """All pairs the run compares, without duplicates, in a stable order."""
    pairs: list[Pair] = []
    seen: set[frozenset[Side]] = set()

    def add(a: Side, b: Side) -> None:
        if a == b:
            raise ConfigError(f"pair compares {a.label} with itself; remove it from pairs.explicit")
        key = frozenset((a, b))
        if key not in seen:
            seen.add(key)
            pairs.append(Pair(a, b))

    if within_model:
        for m in models:
            for la, lb in itertools.combinations(languages, 2):
                add(Side(m, la), Side(m, lb))
    if cross_model not in ("same_language", "all", "none"):
        raise ConfigError(f"cross_model must be same_language, all or none, not {cross_model!r}")
    if cross_model != "none":
        for ma, mb in itertools.combinations(models, 2):
            for la in languages:
                for lb in languages:
                    if cross_model == "same_language" and la != lb:
                        continue
                    add(Side(ma, la), Side(mb, lb))
    for a, b in explicit:
        add(a, b)
    return pairs


def layer_pairs(n_states_a: int, n_states_b: int, kind: str) -> list[tuple[int, int]]:
    """Layers compared one-to-one: every layer when depths agree, else the last.

    Index 0 is the embedding output, index k the output of block k. Models of
    different depth have no layer-by-layer correspondence, so only their last
    hidden states are paired (the full grid is :func:`compare_grid`).
    """
    if n_states_a == n_states_b:
        return [(k, k) for k in range(n_states_a)]
    return [(n_states_a - 1, n_states_b - 1)]


@dataclass(frozen=True)
class InferenceOptions:
    permutations: int = 1000
    jackknife_groups: int = 0
    bootstrap: int = 0
    level: float = 0.95
    seed: int = 0
    layers: str = "all"
    grid_permutations: int | None = None

    @property
    def grid_draws(self) -> int:
        """Draws for the grid maximum's null (each costs a gather of every layer of side B)."""
        return self.permutations if self.grid_permutations is None else self.grid_permutations


def pair_permutation(pair: Pair, n: int, base_seed: int) -> tuple[np.ndarray, int]:
    """The pair's one shuffled-control permutation and the seed that drew it."""
    seed = pair_seed(base_seed, pair.a.label, pair.b.label)
    return shuffle_permutation(n, seed), seed


def compare_pair(
    pair: Pair,
    reps_a: np.ndarray,
    reps_b: np.ndarray,
    *,
    pooling: str,
    measures: Sequence[str],
    permutation: np.ndarray,
    permutation_seed: int,
    inference: InferenceOptions,
) -> list[dict[str, Any]]:
    """Matched and shuffled values (with inference) at the pair's layers.

    ``reps_a`` and ``reps_b`` are ``(n_states, n, width)`` arrays over the same
    sentence ids. Returns tidy rows, one per layer pair and measure.
    """
    if reps_a.shape[1] != reps_b.shape[1]:
        raise MeasureInputError(
            f"{pair.label}: sides have {reps_a.shape[1]} and {reps_b.shape[1]} sentences; "
            "both sides must be computed over the same sentence ids"
        )
    n = reps_a.shape[1]
    if permutation.shape != (n,):
        raise MeasureInputError(f"{pair.label}: permutation has length {permutation.shape[0]}, expected {n}")
    same_model = pair.kind == "within_model"
    rows: list[dict[str, Any]] = []
    la_n, lb_n = reps_a.shape[0], reps_b.shape[0]
    for mid in measures:
        measure = get_measure(mid)
        meta = measure.metadata
        if meta.requires_same_model and not same_model:
            continue  # e.g. ANC: undefined across models; recorded in run.json as skipped
        if meta.requires_equal_width and reps_a.shape[2] != reps_b.shape[2]:
            continue
        pairs_of_layers = layer_pairs(la_n, lb_n, pair.kind)
        debiased = _LINEAR_CKA.get(mid)
        for ka, kb in pairs_of_layers:
            x = reps_a[ka].astype(np.float64, copy=False)
            y = reps_b[kb].astype(np.float64, copy=False)
            kw = {"same_model": True} if meta.requires_same_model else {}
            if debiased is None:
                matched = float(measure(x, y, **kw))
                shuffled = float(measure(x, y[permutation], **kw))
            else:  # one unit centred Gram per side serves matched and shuffled (an O(n^2) gather)
                gx, gy = unit_centred_gram(x, debiased), unit_centred_gram(y, debiased)
                matched = float(np.vdot(gx, gy))
                shuffled = float(np.vdot(gx, gy[np.ix_(permutation, permutation)]))
            row: dict[str, Any] = {
                **_pair_columns(pair),
                "pooling": pooling,
                "measure": mid,
                "estimator": meta.estimator,
                "layer_a": ka,
                "layer_b": kb,
                "depth_a": ka / max(la_n - 1, 1),
                "depth_b": kb / max(lb_n - 1, 1),
                "grid": False,
                "grid_max": False,
                "p_grid_max": np.nan,
                "matched": matched,
                "shuffled": shuffled,
                "n": n,
                "permutation_seed": permutation_seed,
            }
            if inference.layers == "all" or (ka, kb) == pairs_of_layers[-1]:
                row.update(_inference_columns(measure, x, y, inference, kw))
            rows.append(row)
    return rows


def compare_grid(
    pair: Pair,
    reps_a: np.ndarray,
    reps_b: np.ndarray,
    *,
    pooling: str,
    measures: Sequence[str],
    permutation: np.ndarray,
    permutation_seed: int,
    inference: InferenceOptions,
) -> list[dict[str, Any]]:
    """The full layer x layer CKA grid of a pair, matched and shuffled.

    Only linear-CKA measures have a grid (one centred Gram per layer and one
    matrix product). The grid maximum's permutation p-value applies the same
    maximum to every permuted grid, so the search over layers is paid for.
    """
    rows: list[dict[str, Any]] = []
    n = reps_a.shape[1]
    la_n, lb_n = reps_a.shape[0], reps_b.shape[0]
    for mid in measures:
        debiased = _LINEAR_CKA.get(mid)
        if debiased is None:
            continue
        matched = cka_grid(reps_a, reps_b, debiased=debiased)
        shuffled = cka_grid(reps_a, reps_b[:, permutation], debiased=debiased)
        p_max = np.nan
        if inference.grid_draws > 0:
            res = grid_permutation_test(
                reps_a, reps_b, debiased=debiased, n_permutations=inference.grid_draws, seed=inference.seed
            )
            p_max = float(res.p_value)
        best = np.unravel_index(int(np.argmax(matched)), matched.shape)
        for ka in range(la_n):
            for kb in range(lb_n):
                rows.append(
                    {
                        **_pair_columns(pair),
                        "pooling": pooling,
                        "measure": mid,
                        "estimator": get_measure(mid).metadata.estimator,
                        "layer_a": ka,
                        "layer_b": kb,
                        "depth_a": ka / max(la_n - 1, 1),
                        "depth_b": kb / max(lb_n - 1, 1),
                        "grid": True,
                        "matched": float(matched[ka, kb]),
                        "shuffled": float(shuffled[ka, kb]),
                        "n": n,
                        "permutation_seed": permutation_seed,
                        "grid_max": bool((ka, kb) == tuple(best)),
                        "p_grid_max": p_max if (ka, kb) == tuple(best) else np.nan,
                        "n_permutations": inference.grid_draws,
                    }
                )
    return rows


def _pair_columns(pair: Pair) -> dict[str, Any]:
    return {
        "pair": pair.label,
        "kind": pair.kind,
        "model_a": pair.a.model,
        "lang_a": pair.a.language,
        "model_b": pair.b.model,
        "lang_b": pair.b.language,
    }


def _inference_columns(
    measure: Any, x: np.ndarray, y: np.ndarray, opts: InferenceOptions, kw: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {"p_value": np.nan, "n_permutations": opts.permutations}
    if opts.permutations > 0:
        res = permutation_test(measure, x, y, n_permutations=opts.permutations, seed=opts.seed, **kw)
        out["p_value"] = float(res.p_value)
        out["null_q95"] = float(res.null_quantiles.get(0.95, np.nan))
    if opts.jackknife_groups > 0:
        jk = jackknife_interval(measure, x, y, n_groups=opts.jackknife_groups, level=opts.level, seed=opts.seed, **kw)
        out.update(jackknife_low=float(jk.low), jackknife_high=float(jk.high), jackknife_se=float(jk.se))
    if opts.bootstrap > 0:
        bs = bootstrap_interval(measure, x, y, n_boot=opts.bootstrap, level=opts.level, seed=opts.seed, **kw)
        out.update(bootstrap_low=float(bs.low), bootstrap_high=float(bs.high))
    return out
