"""Controls of the neuron correspondence: a self-plan that must be the identity, and half-split stability.

Without them a reader meets the NLL deltas first and cannot tell whether a
correspondence was there to be found (for the packaged pair the OT plans do no
better than shuffled ones). Both are cheap: one target block (and its
heaviest kept donor block), every interface the plans have.

Which block. The middle target block ``i = L_T // 2`` (the block the
epsilon is calibrated on) and, for the stability, the donor block ``j`` with
the largest ``P_eff[i, j]`` (the pair the fusion leans on most for that block).
Epsilon: per interface, the epsilon the fusion's neuron plans used
(``TransportPlans.epsilon``: calibrated or fixed), so the controls test the
plans the fusion actually ran with. Sinkhorn: :func:`~.plans.sinkhorn_plan` to
the marginal tolerance :data:`CONTROL_MARGINAL_TOL` in at most
:data:`CONTROL_MAX_ITER` iterations (a self-plan is a near-permutation optimum,
which converges slowly at 1e-6; the statistics below read row-normalised
plans, whose rows are exact after every iteration).

Self-plan control (positive control)
------------------------------------
The plan between the target's probe activations at block ``i`` and
THEMSELVES (cost ``1 - rho`` of every unit with every unit: 0 on the
diagonal) must recover the identity correspondence: the exact (EMD) plan of
that cost is ``I / n``. Per interface:

* ``self_match`` = fraction of units ``a`` with ``argmax_b phi[a, b] = a``
  (``phi`` the row-normalised plan; ties go to the lower index);
* ``self_diag`` = mean over units of ``phi[a, a]`` (the diagonal mass relative
  to the row's mass; 1 = a hard identity, ``1/n`` = uniform). This is the part
  that epsilon blurs: a larger epsilon spreads the diagonal's mass over
  correlated units while the argmax may still be right.

Verdict: ``passed`` when ``self_match >= SELF_MATCH_THRESHOLD`` (0.9) on every
interface, else ``failed``: then the cost and this epsilon cannot single out a
unit even when its exact copy is on the other side (constant units, duplicated
units, too few probe sentences for the width), so a null of the fusion says
nothing about the two models. A failure is warned about
(:class:`~.errors.TransportWarning`) and named in the rows' ``note``.

Plan stability between two probe halves (reliability)
-----------------------------------------------------
The probe sentences are split into two disjoint halves by position (even
indices: half A, odd: half B; each half needs :data:`~.correspond.
MIN_PROBE_SENTENCES`). The neuron plan of the pair ``(i, j)`` is fitted on each
half alone (costs from that half's activations, the same epsilon), and per
interface

* ``stability`` = mean over target units ``a`` of ``|top_k(phi_A[a]) ∩
  top_k(phi_B[a])| / k``: the share of unit ``a``'s ``k`` heaviest donor units
  that the two halves agree on (``k = stability_k``; with ``k = 1``, the
  default, the fraction of target units whose argmax donor unit is the same in
  both halves);
* ``stability_chance`` = the same statistic when half B's target units are
  permuted uniformly at random (its rows shuffled: the correspondence
  destroyed, each half's donor-unit usage kept), in expectation over all
  permutations: ``sum_b c_A(b) c_B(b) / (k n^2)`` with ``c_H(b)`` the number of
  target units whose top-``k`` in half ``H`` holds donor unit ``b``. It is
  ``k / m`` when each half spreads its choices evenly over the ``m`` donor
  units and larger when a few donor units are everybody's choice.

A stability near its chance level says the plan is refitted to noise: the
correspondence of one half is not that of the other.

What the self-plan does and does not show. Its cost is exactly 0 on the
diagonal (a unit against its own copy), so passing it shows only that an
EXACT copy is found at this epsilon and probe size; it says nothing about a
correspondence as weak as two models' units can share.

Planted-correspondence control (graded known answer)
----------------------------------------------------
For each level ``rho`` (:data:`PLANTED_LEVELS`, default 0.3, 0.2, 0.1) a
planted donor is built from the target's own activations at block ``i``: each
unit standardised, mixed with independent Gaussian noise so that its partner
correlates with it at ``rho`` in expectation (``rho z + sqrt(1 - rho^2) e``),
and the units permuted at random (seeded). The plan between the target and
that copy, at the fusion's epsilon and the run's probe size, is read like the
real one: ``planted_recovery`` = fraction of target units whose row-argmax is
their planted partner (chance ``1 / n``). Per interface the rows carry every
level's recovery and ``planted_found_<interface>``, the smallest level at
which at least half of the units were recovered (NaN: none): the weakest
correspondence this run could have found. A real pair whose units correlate
less than that cannot be told from no correspondence at this probe size.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.core.numerics import analysis_blas
from interlingua.transport.correspond import INTERFACES, MIN_PROBE_SENTENCES, ProbeActivations, correlation_cost
from interlingua.transport.errors import TransportError, TransportWarning
from interlingua.transport.plans import row_stochastic, sinkhorn_plan

__all__ = [
    "CONTROL_MARGINAL_TOL",
    "CONTROL_MAX_ITER",
    "SELF_MATCH_THRESHOLD",
    "PLANTED_LEVELS",
    "PLANTED_FOUND",
    "Controls",
    "planted_copy",
    "planted_recovery",
    "half_split",
    "plan_stability",
    "self_plan_control",
    "self_plan_stats",
    "topk_overlap",
    "topk_overlap_chance",
    "transport_controls",
]

#: A self-plan control passes when at least this fraction of units is its own row-argmax on every interface.
SELF_MATCH_THRESHOLD = 0.9
CONTROL_MARGINAL_TOL = 1e-4
CONTROL_MAX_ITER = 3000
#: correlations of the planted partners (the planted-correspondence control)
PLANTED_LEVELS = (0.3, 0.2, 0.1)
#: a planted level counts as found when at least this fraction of the units is recovered
PLANTED_FOUND = 0.5


# ====================================================================== statistics of plans
def self_plan_stats(coupling: np.ndarray) -> tuple[float, float]:
    """(``self_match``, ``self_diag``) of a square plan: rows whose argmax is the diagonal; mean ``phi[a, a]``."""
    q = np.asarray(coupling, dtype=np.float64)
    if q.ndim != 2 or q.shape[0] != q.shape[1] or q.shape[0] < 1:
        raise TransportError(f"a self-plan must be square, got shape {q.shape}")
    phi = row_stochastic(q)
    idx = np.arange(q.shape[0])
    return float((phi.argmax(axis=1) == idx).mean()), float(phi[idx, idx].mean())


def _top_k(phi: np.ndarray, k: int) -> np.ndarray:
    """Each row's ``k`` largest columns (ties: lower column first), as an ``(n, k)`` index array."""
    return np.argsort(-phi, axis=1, kind="stable")[:, :k]


def _check_k(k: Any, m: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 1:
        raise TransportError(f"stability_k must be an int >= 1, got {k!r}")
    if int(k) > m:
        raise TransportError(f"stability_k = {k} exceeds the {m} donor units of the plan; lower transport.stability_k")
    return int(k)


def _check_pair(phi_a: np.ndarray, phi_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(phi_a, dtype=np.float64), np.asarray(phi_b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape or min(a.shape) < 1:
        raise TransportError(f"two plans of one shape are needed, got {a.shape} and {b.shape}")
    return a, b


def topk_overlap(phi_a: np.ndarray, phi_b: np.ndarray, k: int = 1) -> float:
    """Mean over rows of ``|top_k(phi_a[a]) ∩ top_k(phi_b[a])| / k`` (``k = 1``: argmax agreement)."""
    a, b = _check_pair(phi_a, phi_b)
    k = _check_k(k, a.shape[1])
    ta, tb = _top_k(a, k), _top_k(b, k)
    hits = (ta[:, :, None] == tb[:, None, :]).any(axis=2).sum(axis=1)
    return float(hits.mean() / k)


def topk_overlap_chance(phi_a: np.ndarray, phi_b: np.ndarray, k: int = 1) -> float:
    """:func:`topk_overlap` with ``phi_b``'s rows permuted, in expectation over all permutations (module docs)."""
    a, b = _check_pair(phi_a, phi_b)
    k = _check_k(k, a.shape[1])
    n, m = a.shape
    ca = np.bincount(_top_k(a, k).ravel(), minlength=m).astype(np.float64)
    cb = np.bincount(_top_k(b, k).ravel(), minlength=m).astype(np.float64)
    return float((ca * cb).sum() / (k * n * n))


def half_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The two disjoint probe halves: even positions and odd positions of ``range(n)``."""
    idx = np.arange(int(n))
    return idx[0::2], idx[1::2]


# ====================================================================== planted correspondence
def planted_copy(activations: np.ndarray, rho: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(copy, partner)``: a permuted noisy copy of ``(N, n)`` activations whose unit ``partner[a]`` correlates
    with unit ``a`` at ``rho`` in expectation (each unit standardised, ``rho z + sqrt(1 - rho^2) e`` with
    independent standard Gaussian ``e``, columns permuted). Constant units stay constant (no partner to find)."""
    x = np.asarray(activations, dtype=np.float64)
    if x.ndim != 2:
        raise TransportError(f"activations must be (sentences, units), got shape {x.shape}")
    if not 0.0 < float(rho) <= 1.0:
        raise TransportError(f"a planted correlation must lie in (0, 1], got {rho!r}")
    rng = np.random.default_rng([int(seed), int(round(float(rho) * 1e6))])
    sd = x.std(axis=0)
    z = np.where(sd > 0, (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0), 0.0)
    e = rng.standard_normal(x.shape) * (sd > 0)
    mixed = float(rho) * z + math.sqrt(max(0.0, 1.0 - float(rho) ** 2)) * e
    perm = rng.permutation(x.shape[1])  # copy column b is target unit perm[b]
    return mixed[:, perm], np.argsort(perm)


def planted_recovery(
    activations: np.ndarray,
    rho: float,
    epsilon: float,
    *,
    seed: int = 0,
    max_iter: int = CONTROL_MAX_ITER,
    marginal_tol: float = CONTROL_MARGINAL_TOL,
) -> float:
    """Fraction of units whose row-argmax in the plan with :func:`planted_copy` is their planted partner."""
    copy, partner = planted_copy(activations, rho, seed)
    cost, _ = correlation_cost(activations, copy)
    phi = row_stochastic(_plan(cost, epsilon, max_iter, marginal_tol))
    return float((phi.argmax(axis=1) == partner).mean())


# ====================================================================== the two controls
def _plan(cost: np.ndarray, epsilon: float, max_iter: int, marginal_tol: float) -> np.ndarray:
    return sinkhorn_plan(cost, epsilon, max_iter=max_iter, marginal_tol=marginal_tol).coupling


def self_plan_control(
    activations: np.ndarray,
    epsilon: float,
    *,
    max_iter: int = CONTROL_MAX_ITER,
    marginal_tol: float = CONTROL_MARGINAL_TOL,
) -> tuple[float, float]:
    """(``self_match``, ``self_diag``) of the entropic plan between ``(N, n)`` activations and themselves."""
    cost, _ = correlation_cost(activations, activations)
    return self_plan_stats(_plan(cost, epsilon, max_iter, marginal_tol))


def plan_stability(
    target: np.ndarray,
    donor: np.ndarray,
    epsilon: float,
    *,
    k: int = 1,
    max_iter: int = CONTROL_MAX_ITER,
    marginal_tol: float = CONTROL_MARGINAL_TOL,
) -> tuple[float, float]:
    """(``stability``, ``stability_chance``): plans fitted on the even and the odd probe rows (module docs)."""
    target = np.asarray(target, dtype=np.float64)
    donor = np.asarray(donor, dtype=np.float64)
    if target.ndim != 2 or donor.ndim != 2 or target.shape[0] != donor.shape[0]:
        raise TransportError(
            f"the two sides need the same probe sentences (rows), got shapes {target.shape} and {donor.shape}"
        )
    first, second = half_split(target.shape[0])
    if len(second) < MIN_PROBE_SENTENCES:
        raise TransportError(
            f"{target.shape[0]} probe sentences give halves of {len(first)} and {len(second)}; the stability "
            f"control needs {MIN_PROBE_SENTENCES} per half: raise transport.probe_n to {2 * MIN_PROBE_SENTENCES}"
        )
    phis = []
    for half in (first, second):
        cost, _ = correlation_cost(target[half], donor[half])
        phis.append(row_stochastic(_plan(cost, epsilon, max_iter, marginal_tol)))
    return topk_overlap(phis[0], phis[1], k), topk_overlap_chance(phis[0], phis[1], k)


@dataclass(frozen=True)
class Controls:
    """The two controls of one (target, donor) plan set, per interface (see the module docs)."""

    target_block: int
    donor_block: int
    epsilon: dict[str, float]
    self_match: dict[str, float]
    self_diag: dict[str, float]
    stability: dict[str, float] = field(default_factory=dict)
    stability_chance: dict[str, float] = field(default_factory=dict)
    stability_k: int = 1
    threshold: float = SELF_MATCH_THRESHOLD
    seconds: float = 0.0
    skipped: str = ""  # why the stability control did not run (too few probe sentences)
    #: per interface, per planted level: the recovered fraction of units
    planted: dict[str, dict[float, float]] = field(default_factory=dict)

    def planted_found(self, f: str) -> float:
        """The smallest planted level with at least :data:`PLANTED_FOUND` of the units recovered (NaN: none)."""
        found = [rho for rho, rec in self.planted.get(f, {}).items() if rec >= PLANTED_FOUND]
        return float(min(found)) if found else math.nan

    @property
    def failing(self) -> list[str]:
        """The interfaces whose self-match is below the threshold."""
        return [f for f, v in self.self_match.items() if not v >= self.threshold]

    @property
    def verdict(self) -> str:
        return "failed" if self.failing else "passed"

    def note(self) -> str:
        """What a reader of the rows must know: the failed self-plan control, a skipped stability control."""
        parts = []
        if self.failing:
            worst = min(self.self_match, key=lambda f: self.self_match[f])
            parts.append(
                f"self-plan control FAILED (target block {self.target_block}): fewer than "
                f"{self.threshold:.0%} of units are matched to themselves on "
                + ", ".join(
                    f"{f} ({self.self_match[f]:.2f}, diagonal mass {self.self_diag[f]:.2f})" for f in self.failing
                )
                + f"; worst {worst}. The cost and epsilon cannot recover even an exact copy, so the fusion's "
                "NLL deltas say nothing about a correspondence between the two models"
            )
        if self.skipped:
            parts.append(self.skipped)
        return "; ".join(parts)

    def columns(self) -> dict[str, Any]:
        """The controls' entries of a fusion row (:data:`~.evaluate.FUSION_COLUMNS`)."""
        out: dict[str, Any] = {
            "self_control": self.verdict,
            "controls_target_block": self.target_block,
            "controls_donor_block": self.donor_block,
            "stability_k": self.stability_k,
            "seconds_controls": self.seconds,
        }
        for f in INTERFACES:
            out[f"self_match_{f}"] = self.self_match.get(f, math.nan)
            out[f"self_diag_{f}"] = self.self_diag.get(f, math.nan)
            out[f"stability_{f}"] = self.stability.get(f, math.nan)
            out[f"stability_chance_{f}"] = self.stability_chance.get(f, math.nan)
            rec = self.planted.get(f, {})
            out[f"planted_recovery_{f}"] = " / ".join(f"{rho:g}: {v:.2f}" for rho, v in rec.items())
            out[f"planted_found_{f}"] = self.planted_found(f)
        return out

    def warn(self, target: str = "the target", donor: str = "the donor", stacklevel: int = 2) -> None:
        """Warn (:class:`TransportWarning`) when the self-plan control failed."""
        if self.failing:
            warnings.warn(f"transport {target} <- {donor}: {self.note()}", TransportWarning, stacklevel=stacklevel + 1)


def transport_controls(
    target: ProbeActivations,
    donor: ProbeActivations,
    plans: Any,
    *,
    stability_k: int = 1,
    interfaces: Sequence[str] | None = None,
    epsilon: Mapping[str, float] | None = None,
    max_iter: int = CONTROL_MAX_ITER,
    marginal_tol: float = CONTROL_MARGINAL_TOL,
    planted_levels: Sequence[float] = PLANTED_LEVELS,
    planted_seed: int = 0,
) -> Controls:
    """Self-plan and half-split stability controls of ``plans`` (a :class:`~.plans.TransportPlans`).

    ``target`` / ``donor``: the probe activations the plans were fitted on.
    ``epsilon``: per interface (default: ``plans.epsilon``). ``planted_levels``: the planted-correspondence
    control's correlations (empty: not run), its copies drawn from ``planted_seed``. Raises
    :class:`TransportError` for a bad ``stability_k``; too few probe sentences
    for two halves skip the stability control (NaN, said in ``note``).
    """
    t0 = time.perf_counter()
    interfaces = tuple(plans.interfaces if interfaces is None else interfaces)
    eps = {f: float((plans.epsilon if epsilon is None else epsilon)[f]) for f in interfaces}
    if isinstance(stability_k, bool) or not isinstance(stability_k, numbers.Integral) or int(stability_k) < 1:
        raise TransportError(f"stability_k must be an int >= 1, got {stability_k!r}")
    i = target.n_layers // 2
    kept = plans.kept(i)
    j = kept[0][0] if kept else int(round(i * (donor.n_layers - 1) / max(target.n_layers - 1, 1)))
    self_match, self_diag, stability, chance = {}, {}, {}, {}
    planted: dict[str, dict[float, float]] = {}
    skipped = ""
    n = target.n_sentences
    with analysis_blas():
        for f in interfaces:
            self_match[f], self_diag[f] = self_plan_control(
                target.layers[f][i], eps[f], max_iter=max_iter, marginal_tol=marginal_tol
            )
            planted[f] = {
                float(rho): planted_recovery(
                    target.layers[f][i], rho, eps[f], seed=planted_seed, max_iter=max_iter, marginal_tol=marginal_tol
                )
                for rho in planted_levels
            }
        if n // 2 < MIN_PROBE_SENTENCES:
            skipped = (
                f"stability control skipped: {n} probe sentences give halves under {MIN_PROBE_SENTENCES} "
                f"(raise transport.probe_n to {2 * MIN_PROBE_SENTENCES})"
            )
        else:
            for f in interfaces:
                xt, xd = target.layers[f][i], donor.layers[f][j]
                k = min(int(stability_k), xd.shape[1])
                stability[f], chance[f] = plan_stability(
                    xt, xd, eps[f], k=k, max_iter=max_iter, marginal_tol=marginal_tol
                )
    return Controls(
        target_block=i,
        donor_block=j,
        epsilon=eps,
        self_match=self_match,
        self_diag=self_diag,
        stability=stability,
        stability_chance=chance,
        stability_k=int(stability_k),
        seconds=time.perf_counter() - t0,
        skipped=skipped,
        planted=planted,
    )
