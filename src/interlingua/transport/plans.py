"""Entropic optimal-transport plans over neurons and over layers, with their epsilon calibrated and reported.

Neuron plans
------------
For a target block ``i`` and a donor block ``j`` and an interface (``mlp``,
``attn``, ``residual``; see :mod:`.correspond`), with ``C`` the ``n x m``
cost ``1 - rho`` between the target's ``n`` units and the donor's ``m``, the
plan ``Q`` solves the entropic OT problem with uniform marginals
``a = 1/n``, ``b = 1/m`` by Sinkhorn's iterations (POT, float64; see
"Solver" for the two ways they are run). ``Q`` is rectangular by construction: nothing is padded or truncated. Sinkhorn
stops when the root-mean-square relative violation of the column marginals
is below ``marginal_tol`` (default 1e-6; POT's ``stopThr = marginal_tol /
sqrt(m)``) or after ``max_iter`` iterations (then ``converged`` is False);
its rows meet ``a`` to rounding after every iteration. Near-permutation optima
(two copies of one model) converge slowly: thousands of iterations at
epsilon 0.02.

Rescaling (the seed's load-bearing deviation). ``Q``'s rows sum to ``1/n``;
used as it is, the transported weight is ~``1/(n_out n_in)`` of the donor's
and fusion degenerates to a ``(1 - alpha)`` shrinkage. The plan is used as

* ``phi = Q / rowsum(Q)`` (``n x m``, = ``n Q`` up to Sinkhorn's marginal
  error; every row sums to 1): target unit ``a`` reads the ``phi[a]``-weighted
  mean of donor units. It carries a donor weight's OUTPUT side (rows) into the
  target's units.
* ``psi = (Q / colsum(Q))^T`` (``m x n``, = ``m Q^T``; every row sums to 1):
  donor unit ``b`` is fed the ``psi[b]``-weighted mean of the target units
  matched to it. It carries a donor weight's INPUT side (columns). For a square
  plan ``psi = phi^T``; for a rectangular one ``phi^T`` would scale the input
  by ``n/m`` (a target twice as wide would double every pre-activation), so
  the input side uses ``psi``.

Epsilon
-------
``epsilon="auto"`` calibrates one epsilon per interface and model pair on the
full cost matrix of one representative layer pair (target block
``i = L_T // 2``, donor block ``round(i (L_D - 1) / (L_T - 1))``): the values
of :data:`EPSILON_GRID` are tried from the largest down and the first whose
plan meets both

* ``<Q, C> <= (1 + tolerance) * emd`` with ``emd = ot.emd2(a, b, C)`` the
  unregularised optimum (default tolerance 0.01, the seed's "within 1% of the
  unregularised optimum"), and
* ``excess = (<Q, C> - emd) / (mean(C) - emd) <= excess_tolerance`` (default
  0.05: the plan has closed 95% of the gap between the uniform coupling and
  the optimum). The first criterion alone is met by a near-uniform plan when
  the costs have little contrast (a layer cost matrix whose entries differ by
  1%); the second is scale-free.

When ``emd`` is below 1e-9 (a zero-cost matching exists, as between identical
models) the first criterion is replaced by ``<Q, C> <= tolerance * mean(C)``.
When no grid value qualifies the smallest is used and ``calibrated`` is False.
The layer cost matrix has much less contrast than a neuron cost (its entries
differ by a few percent), so its grid continues below the neuron grid with
:data:`LAYER_EPSILON_EXTRA` (5e-4, 2e-4, 1e-4); it is ``L_T x L_D``, so the
small values cost nothing. The layer-level epsilon is calibrated by
the same rule on the layer cost matrix. A number (or a mapping interface ->
number / "auto", key ``"layer"`` for the layer OT) fixes it instead.

Reported per plan (:func:`plan_diagnostics`): epsilon, the transport cost
``<Q, C>``, the optimum ``emd`` and ``cost_ratio = <Q, C> / emd``, ``excess =
(<Q, C> - emd) / (mean(C) - emd)`` (0 at the optimum, 1 at the uniform
coupling), ``row_max_over_uniform`` = mean over target units of ``max_b
phi[a, b]`` divided by the uniform ``1/m`` (1 = uninformative, ``m`` = a hard
assignment), ``entropy`` = mean row entropy of ``phi`` divided by ``ln m`` (1
= uniform, 0 = hard), the marginal error, iterations and convergence. The
calibration also keeps the diagnostics at the published epsilon 0.1
(:data:`PUBLISHED_EPSILON`), where the seed found the plan close to uniform.

Layer plan
----------
``G[i, j]`` = the mean over interfaces of ``<C_ij, Q_ij>``, the transport
cost of the neuron plan of target block ``i`` and donor block ``j`` at the
interface's epsilon, computed on a fixed random subsample of at most
``layer_sample`` units per side (seeded by ``(seed, interface, side,
block)``; all units when fewer) and solved to a looser marginal tolerance
(:data:`LAYER_MARGINAL_TOL` = 1e-3, at most :data:`LAYER_MAX_ITER` = 1000
iterations): the outer OT needs only the scalar ``<C, Q>``, which moves by
~1e-5 (relative) between that tolerance and 1e-6, while small square
subsamples can take 10^4 iterations to reach 1e-6. The layer plan ``P`` is the entropic OT plan
of ``G`` with uniform marginals; each target block keeps its ``m`` donor
blocks of largest ``P[i, j]`` (ties: lower ``j``) with weights
``P[i, j]`` renormalised over the kept ones (``P_eff``, rows sum to 1). Full
neuron plans are computed for the kept pairs only.

The shuffled control
--------------------
:meth:`TransportPlans.shuffled` permutes the rows of every kept neuron plan
``Q`` with a permutation drawn from ``numpy.random.default_rng(SeedSequence(
[seed, interface index + 1, i, j]))``: the rows are the same multiset, each
marginal and the scale are preserved, the correspondence is destroyed. The
layer plan, ``P_eff`` and the neuron masks (computed from the OT plans) are
kept, so the control differs from the OT fusion in the neuron
correspondence alone.

Solver
------
Sinkhorn's iterations alternate ``v = b / (K^T u)``, ``u = a / (K v)`` with
``K = exp(-C / epsilon)``; POT runs them in the log domain
(``ot.sinkhorn(..., method="sinkhorn_log")``: two log-sum-exps over the
``n x m`` matrix per iteration) or as matrix-vector products
(``method="sinkhorn"``, ``sinkhorn_knopp``), checking the same column-marginal
error every 10 iterations. The plain (scaling) form is exact in float64
when no kernel entry underflows, and it is made so by solving the cost minus
its column minima, ``C - min_a C[a, :]``: the shift multiplies ``K`` by a
positive diagonal on the right, which the next ``v`` update divides out,
so every iterate's plan ``diag(u) K diag(v)`` -- and with it the stopping
iteration and the result -- is the one of the unshifted problem; afterwards
every column of ``K`` holds a 1. :func:`sinkhorn_plan` (``method="auto"``)
takes the plain form when ``max(C - column minima) / epsilon <=``
:data:`PLAIN_DOMAIN_LIMIT` (200: kernel entries >= exp(-200) ~ 1e-87, far
from float64's 1e-308) and the log domain otherwise, or when POT reports a
numerical problem. The 1 - rho costs lie in [0, 2], so every neuron and
layer-pass plan at epsilon >= 0.01 is solved in the plain form; the two
agree to ~1e-13 relative in every entry with the same iteration count
(tests; benchmarks/results/transport_plans_cpu.md), at ~20x less time for a
2048 x 1536 plan. The products run on one BLAS thread
(:func:`interlingua.core.numerics.analysis_blas`): they are memory-bound, and two threads were 7x
slower on a busy 2-core machine. ``method="log"`` forces the log domain (the
solver before this change). ``EntropicPlan.method`` and the diagnostics' ``method``
say which ran.

The layer pass on a subsample (size rule). For each interface, a side's
units are subsampled for the layer-cost pass when its width exceeds
``layer_sample`` (default 256; Gemma 3 270M's MLP has 2048 units, its
attention output 1024, its residual 640): ``layer_sample`` units, drawn
once per (seed, interface, side, block) and the same for every pairing of
that block. ``TransportPlans.layer_pass`` records the rule, the widths and
the unit indices used for every block. The epsilon of each interface is
still calibrated on the FULL cost of one block pair, the kept pairs' plans
are full, and the reported diagnostics are those of the full plans.

Cache
-----
With ``cache=`` (an :class:`interlingua.core.store.Store` or its folder),
:func:`transport_plans` stores its result under ``transport/plans/`` keyed
by :func:`plans_key`: the sha256 of the activations' float64 bytes (both
sides, the interfaces used), every parameter, :data:`PLANS_FORMAT` and the
solver constants. The entry (safetensors, checksummed like every store
entry) holds the layer costs, the layer plan, ``P_eff``, the calibration and
diagnostics (JSON in the header) and, per kept pair and interface, the
solver's final scalings -- not the plans, which would be ~1.7 GB for the
demo pair. A rerun recomputes the pairs' cost matrices (one matrix product
each) and rebuilds each plan from its scalings with the expression POT ends
with (:func:`plan_from_scalings`): bit-identical, no Sinkhorn or emd solve. A
damaged entry is warned about and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from interlingua.core.numerics import analysis_blas
from interlingua.core.store import canonical_json, sha256_hex
from interlingua.transport.correspond import INTERFACES, CostInfo, ProbeActivations, correlation_cost
from interlingua.transport.errors import TransportError

__all__ = [
    "COST_TOLERANCE",
    "EXCESS_TOLERANCE",
    "DEFAULT_MAX_ITER",
    "EPSILON_GRID",
    "LAYER_EPSILON_EXTRA",
    "LAYER_MARGINAL_TOL",
    "LAYER_MAX_ITER",
    "MARGINAL_TOL",
    "PLAIN_DOMAIN_LIMIT",
    "PLANS_FORMAT",
    "PUBLISHED_EPSILON",
    "Calibration",
    "PairPlans",
    "PlanOptions",
    "EntropicPlan",
    "TransportPlans",
    "batched_transport_costs",
    "calibrate_epsilon",
    "exact_cost",
    "plain_domain_ok",
    "plan_diagnostics",
    "plan_from_scalings",
    "plans_key",
    "row_stochastic",
    "sinkhorn_plan",
    "top_m",
    "transport_plans",
]

EPSILON_GRID: tuple[float, ...] = (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)
PUBLISHED_EPSILON = 0.1
LAYER_EPSILON_EXTRA: tuple[float, ...] = (5e-4, 2e-4, 1e-4)
COST_TOLERANCE = 0.01
EXCESS_TOLERANCE = 0.05
DEFAULT_MAX_ITER = 20_000
MARGINAL_TOL = 1e-6
LAYER_MARGINAL_TOL = 1e-3
LAYER_MAX_ITER = 1000
#: The plain-domain Sinkhorn is used when max(C - column minima) / epsilon is at most this (module docs).
PLAIN_DOMAIN_LIMIT = 200.0
#: Part of every plans cache key: bump it with any change of a rule that changes the plans.
PLANS_FORMAT = "interlingua.transport.plans/1"
_EMD_ZERO = 1e-9
_EMD_MAX_ITER = 50_000_000


# ====================================================================== one plan
@dataclass(frozen=True)
class EntropicPlan:
    """An entropic OT coupling ``Q`` (``n x m``, rows ~ 1/n, columns ~ 1/m) and how it was solved (one layer or
    interface; named apart from the pipeline's :class:`~interlingua.pipeline.plan.Plan` of tasks)."""

    coupling: np.ndarray
    epsilon: float
    iterations: int = 0
    converged: bool = True
    method: str = "log"  # "plain" (scaling Sinkhorn on the column-shifted cost) or "log" (module docs, "Solver")
    scalings: tuple[np.ndarray, np.ndarray] | None = None  # the solver's final (u, v) / (log u, log v)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.coupling.shape)

    def phi(self) -> np.ndarray:
        """Row-stochastic ``n x m``: ``Q / rowsum(Q)`` (= ``n Q`` at exact marginals)."""
        return row_stochastic(self.coupling)

    def psi(self) -> np.ndarray:
        """``m x n``, rows sum to 1: ``(Q / colsum(Q))^T`` (= ``m Q^T``), the input-side map."""
        return row_stochastic(self.coupling.T)

    def phi_rows(self, rows: np.ndarray) -> np.ndarray:
        """``phi[rows]`` without forming the whole of ``phi``."""
        return row_stochastic(self.coupling[np.asarray(rows)])

    def psi_cols(self, cols: np.ndarray) -> np.ndarray:
        """``psi[:, cols]`` (the columns of target units ``cols``) without forming the whole of ``psi``."""
        sums = self.coupling.sum(axis=0)
        if not (np.isfinite(sums).all() and (sums > 0).all()):
            raise TransportError("a transport plan has a column with no mass; it cannot be rescaled")
        return (self.coupling[np.asarray(cols)] / sums).T

    def marginal_error(self) -> float:
        """Largest relative deviation of a row sum from 1/n or a column sum from 1/m."""
        n, m = self.coupling.shape
        rows = np.abs(self.coupling.sum(axis=1) * n - 1).max()
        cols = np.abs(self.coupling.sum(axis=0) * m - 1).max()
        return float(max(rows, cols))

    def permuted(self, perm: np.ndarray) -> EntropicPlan:
        """The plan with its rows reordered: row ``a`` of the result is row ``perm[a]``."""
        return replace(self, coupling=self.coupling[np.asarray(perm)], scalings=None)


def row_stochastic(q: np.ndarray) -> np.ndarray:
    """``q`` with every row divided by its sum (rows sum to 1); a zero row raises :class:`TransportError`."""
    q = np.asarray(q, dtype=np.float64)
    sums = q.sum(axis=1, keepdims=True)
    if not (np.isfinite(sums).all() and (sums > 0).all()):
        raise TransportError("a transport plan has a row with no mass; it cannot be made row-stochastic")
    return q / sums


def _check_epsilon(epsilon: Any, what: str = "epsilon") -> float:
    if (
        isinstance(epsilon, bool)
        or not isinstance(epsilon, numbers.Real)
        or not math.isfinite(float(epsilon))
        or float(epsilon) <= 0
    ):
        raise TransportError(f"{what} must be a finite number > 0 or 'auto', got {epsilon!r}")
    return float(epsilon)


def _check_cost(cost: Any) -> np.ndarray:
    c = np.asarray(cost, dtype=np.float64)
    if c.ndim != 2 or min(c.shape) < 1:
        raise TransportError(f"a cost matrix must be 2-D and non-empty, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise TransportError("the cost matrix contains NaN or inf")
    return c


def plain_domain_ok(cost: np.ndarray, epsilon: float) -> bool:
    """Whether the plain-domain (scaling) Sinkhorn is exact in float64 for ``cost`` at ``epsilon``.

    True when ``max(C - column minima) / epsilon <= PLAIN_DOMAIN_LIMIT``: after
    the column shift every kernel entry ``exp(-(C - min_col) / epsilon)`` is at
    least ``exp(-200)`` ~ 1e-87 (float64 keeps full precision down to 1e-308),
    every column of the kernel holds a 1, and the scalings stay within
    ``exp(+-200)``-ish factors, far from overflow (1e308).
    """
    c = np.asarray(cost, dtype=np.float64)
    spread = float((c - c.min(axis=0, keepdims=True)).max())
    return spread / float(epsilon) <= PLAIN_DOMAIN_LIMIT


def _pot_sinkhorn(c: np.ndarray, eps: float, method: str, max_iter: int, stop: float, device: str | None):
    """One POT solve of the uniform-marginal problem; returns (plan, log, numerical_trouble)."""
    import ot

    n, m = c.shape
    a, b = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
    if device is not None:
        import torch

        # on a device POT takes float64 torch tensors in the arrays' place
        a, b, c = (torch.as_tensor(x, dtype=torch.float64, device=device) for x in (a, b, c))  # type: ignore[assignment]
    with warnings.catch_warnings(record=True) as caught, analysis_blas():
        warnings.simplefilter("always")
        q, log = ot.sinkhorn(a, b, c, eps, method=method, numItermax=int(max_iter), stopThr=stop, log=True, warn=False)
    trouble = any("numerical errors" in str(w.message) for w in caught)
    if device is not None:
        q = q.detach().cpu().numpy()
        log = {k: (v.detach().cpu().numpy() if hasattr(v, "detach") else v) for k, v in log.items()}
        log["err"] = [float(e) for e in log.get("err", [])]
    return np.asarray(q, dtype=np.float64), log, trouble


def sinkhorn_plan(
    cost: np.ndarray,
    epsilon: float,
    *,
    max_iter: int = DEFAULT_MAX_ITER,
    marginal_tol: float = MARGINAL_TOL,
    device: str | None = None,
    method: str = "auto",
) -> EntropicPlan:
    """The entropic OT plan of ``cost`` with uniform marginals (Sinkhorn, POT).

    ``method``: ``"log"`` is POT's log-domain Sinkhorn (``sinkhorn_log``);
    ``"plain"`` is POT's scaling Sinkhorn (``sinkhorn_knopp``) on the cost
    minus its column minima, which runs the same iterations (module docs,
    "Solver") with matrix-vector products instead of log-sum-exps; ``"auto"``
    (default) takes ``"plain"`` when :func:`plain_domain_ok` and falls back to
    ``"log"`` if the scaling solve reports a numerical problem.
    ``device``: None solves with numpy; a torch device (``"cuda"``) hands
    POT float64 torch tensors on it (POT's torch backend: the same
    iterations), and the plan comes back as a numpy array.
    """
    c = _check_cost(cost)
    eps = _check_epsilon(epsilon)
    if method not in ("auto", "plain", "log"):
        raise TransportError(f"method must be 'auto', 'plain' or 'log', got {method!r}")
    n, m = c.shape
    stop = marginal_tol / math.sqrt(m)
    use = method
    if method == "auto":
        use = "plain" if plain_domain_ok(c, eps) else "log"
    q = log = None
    if use == "plain":
        shift = c.min(axis=0, keepdims=True)  # a column shift leaves the iterates' plans unchanged (module docs)
        q, log, trouble = _pot_sinkhorn(c - shift, eps, "sinkhorn", max_iter, stop, device)
        if (trouble or not np.isfinite(q).all()) and method == "auto":
            use, q = "log", None
        if q is not None:
            scalings = (np.asarray(log["u"], dtype=np.float64), np.asarray(log["v"], dtype=np.float64))
    if q is None:
        q, log, _ = _pot_sinkhorn(c, eps, "sinkhorn_log", max_iter, stop, device)
        scalings = (np.asarray(log["log_u"], dtype=np.float64), np.asarray(log["log_v"], dtype=np.float64))
    if not np.isfinite(q).all():
        raise TransportError(f"Sinkhorn returned a non-finite plan at epsilon {eps:g}")
    assert log is not None  # every solve above returns its log
    errors = log.get("err")
    last = float(errors[-1]) if errors is not None and len(errors) else math.inf
    return EntropicPlan(q, eps, int(log.get("niter", 0)) + 1, bool(last < stop), use, scalings)


def batched_transport_costs(
    costs: np.ndarray,
    epsilon: float,
    *,
    max_iter: int = DEFAULT_MAX_ITER,
    marginal_tol: float = MARGINAL_TOL,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``<C_b, Q_b>`` for a stack of same-shape costs ``(B, n, m)``: plain-domain Sinkhorn, all ``B`` at once.

    The iterations, the every-10-iterations stopping test and the column shift
    are POT's ``sinkhorn_knopp`` as :func:`sinkhorn_plan` runs it, on batched
    matrix products; each problem keeps its own iterate from the check where
    it met the tolerance (so each stops where its own solve would). For the
    layer-cost pass: 30 small problems per target block, whose single solves
    spend most of their time in per-iteration Python overhead. A problem
    outside :func:`plain_domain_ok`, or with a non-finite scaling, is solved
    by :func:`sinkhorn_plan` instead. Returns (costs ``<C_b, Q_b>``,
    iterations, converged), each of length ``B``.
    """
    c = np.asarray(costs, dtype=np.float64)
    if c.ndim != 3 or min(c.shape) < 1 or not np.isfinite(c).all():
        raise TransportError(f"a cost stack must be a finite (B, n, m) array, got shape {c.shape}")
    eps = _check_epsilon(epsilon)
    nb, n, m = c.shape
    a, b = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
    stop = marginal_tol / math.sqrt(m)
    shifted = c - c.min(axis=1, keepdims=True)
    plain = shifted.reshape(nb, -1).max(axis=1) / eps <= PLAIN_DOMAIN_LIMIT
    k = np.exp(shifted / (-eps))
    kp = (1.0 / a).reshape(1, -1, 1) * k
    u, v = np.full((nb, n), 1.0 / n), np.full((nb, m), 1.0 / m)
    keep_u, keep_v = u.copy(), v.copy()
    iterations = np.full(nb, int(max_iter))
    converged = np.zeros(nb, dtype=bool)
    bad = ~plain
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"), analysis_blas():
        for ii in range(int(max_iter)):
            ktu = np.matmul(u[:, None, :], k)[:, 0, :]
            v = b / ktu
            u = 1.0 / np.matmul(kp, v[:, :, None])[:, :, 0]
            if ii % 10 == 0:
                bad |= ~(np.isfinite(u).all(axis=1) & np.isfinite(v).all(axis=1) & (ktu != 0).all(axis=1))
                column = v * np.matmul(u[:, None, :], k)[:, 0, :]
                err = np.linalg.norm(column - b, axis=1)
                newly = ~converged & ~bad & (err < stop)
                keep_u[newly], keep_v[newly] = u[newly], v[newly]
                iterations[newly] = ii + 1
                converged |= newly
                if (converged | bad).all():
                    break
        last = ~converged & ~bad
        bad |= last & ~(np.isfinite(u).all(axis=1) & np.isfinite(v).all(axis=1))
        last &= ~bad
        keep_u[last], keep_v[last] = u[last], v[last]
        q = keep_u[:, :, None] * k * keep_v[:, None, :]
        out = (q * c).sum(axis=(1, 2))
    for i in np.flatnonzero(bad):
        plan = sinkhorn_plan(c[i], eps, max_iter=max_iter, marginal_tol=marginal_tol)
        out[i], iterations[i], converged[i] = float((plan.coupling * c[i]).sum()), plan.iterations, plan.converged
    return out, iterations, converged


def plan_from_scalings(
    cost: np.ndarray,
    epsilon: float,
    method: str,
    scalings: tuple[np.ndarray, np.ndarray],
    *,
    iterations: int = 0,
    converged: bool = True,
) -> EntropicPlan:
    """The plan a :func:`sinkhorn_plan` solve ended with, rebuilt from its scalings (the plan cache).

    The same expression POT evaluates at the end of the solve: ``u K v`` on
    the column-shifted cost (``"plain"``) or ``exp(-C / eps + log_u + log_v)``
    (``"log"``).
    """
    c = _check_cost(cost)
    eps = _check_epsilon(epsilon)
    u, v = (np.asarray(x, dtype=np.float64) for x in scalings)
    if u.shape != (c.shape[0],) or v.shape != (c.shape[1],):
        raise TransportError(f"scalings of shapes {u.shape}, {v.shape} do not fit a {c.shape} cost")
    if method == "plain":
        k = np.exp((c - c.min(axis=0, keepdims=True)) / (-eps))
        q = u.reshape((-1, 1)) * k * v.reshape((1, -1))
    elif method == "log":
        q = np.exp(-c / eps + u[:, None] + v[None, :])
    else:
        raise TransportError(f"unknown Sinkhorn method {method!r}")
    return EntropicPlan(q, eps, int(iterations), bool(converged), method, (u, v))


def exact_cost(cost: np.ndarray) -> float:
    """The unregularised optimum ``ot.emd2`` of ``cost`` with uniform marginals."""
    import ot

    c = _check_cost(cost)
    n, m = c.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = ot.emd2(np.full(n, 1.0 / n), np.full(m, 1.0 / m), c, numItermax=_EMD_MAX_ITER)
    return float(value)


def plan_diagnostics(plan: EntropicPlan, cost: np.ndarray, emd: float | None = None) -> dict[str, Any]:
    """Epsilon, ``<Q, C>``, emd, cost_ratio, excess, row_max_over_uniform, entropy, marginal error (module docs)."""
    c = _check_cost(cost)
    q = plan.coupling
    n, m = q.shape
    phi = plan.phi()
    transport = float((q * c).sum())
    uniform = float(c.mean())
    emd_value = math.nan if emd is None else float(emd)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(phi > 0, np.log(np.where(phi > 0, phi, 1.0)), 0.0)
    row_entropy = -(phi * logs).sum(axis=1)
    return {
        "epsilon": plan.epsilon,
        "n": n,
        "m": m,
        "cost": transport,
        "uniform_cost": uniform,
        "emd": emd_value,
        "cost_ratio": transport / emd_value if emd_value > _EMD_ZERO else math.nan,
        "excess": (transport - emd_value) / (uniform - emd_value) if uniform - emd_value > _EMD_ZERO else math.nan,
        "row_max_over_uniform": float(phi.max(axis=1).mean() * m),
        "entropy": float(row_entropy.mean() / math.log(m)) if m > 1 else 0.0,
        "marginal_error": plan.marginal_error(),
        "iterations": plan.iterations,
        "converged": plan.converged,
        "method": plan.method,
    }


# ====================================================================== calibration
@dataclass(frozen=True)
class Calibration:
    """The epsilon chosen for one cost matrix and the diagnostics of every epsilon tried (largest first)."""

    epsilon: float
    calibrated: bool  # False: no grid value met the tolerance (the smallest was taken) or epsilon was fixed
    fixed: bool
    tolerance: float
    emd: float
    excess_tolerance: float
    rows: tuple[dict[str, Any], ...]
    where: str = ""

    def at(self, epsilon: float) -> dict[str, Any] | None:
        """The diagnostics at ``epsilon`` if it was tried."""
        return next((r for r in self.rows if math.isclose(r["epsilon"], epsilon)), None)


def _meets(diag: dict[str, Any], tolerance: float, excess_tolerance: float) -> bool:
    emd = diag["emd"]
    if emd > _EMD_ZERO:
        near = diag["cost"] <= (1.0 + tolerance) * emd
    else:
        near = diag["cost"] <= tolerance * diag["uniform_cost"]
    excess = diag["excess"]
    return bool(near and (math.isnan(excess) or excess <= excess_tolerance))


def calibrate_epsilon(
    cost: np.ndarray,
    *,
    grid: Sequence[float] = EPSILON_GRID,
    tolerance: float = COST_TOLERANCE,
    excess_tolerance: float = EXCESS_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITER,
    marginal_tol: float = MARGINAL_TOL,
    where: str = "",
    device: str | None = None,
    method: str = "auto",
) -> Calibration:
    """The largest grid epsilon whose plan is within ``tolerance`` of the optimum (see the module docs)."""
    values = sorted({_check_epsilon(e, "a grid epsilon") for e in grid}, reverse=True)
    if not values:
        raise TransportError("the epsilon grid is empty")
    if not (isinstance(tolerance, numbers.Real) and 0 < float(tolerance) < 1):
        raise TransportError(f"tolerance must be in (0, 1), got {tolerance!r}")
    if not (isinstance(excess_tolerance, numbers.Real) and 0 < float(excess_tolerance) <= 1):
        raise TransportError(f"excess_tolerance must be in (0, 1], got {excess_tolerance!r}")
    c = _check_cost(cost)
    emd = exact_cost(c)
    rows = []
    chosen = None
    for eps in values:
        diag = plan_diagnostics(
            sinkhorn_plan(c, eps, max_iter=max_iter, marginal_tol=marginal_tol, device=device, method=method), c, emd
        )
        rows.append(diag)
        if _meets(diag, float(tolerance), float(excess_tolerance)):
            chosen = eps
            break
    if not any(math.isclose(r["epsilon"], PUBLISHED_EPSILON) for r in rows):
        rows.append(
            plan_diagnostics(
                sinkhorn_plan(
                    c, PUBLISHED_EPSILON, max_iter=max_iter, marginal_tol=marginal_tol, device=device, method=method
                ),
                c,
                emd,
            )
        )
    return Calibration(
        epsilon=values[-1] if chosen is None else chosen,
        calibrated=chosen is not None,
        fixed=False,
        tolerance=float(tolerance),
        emd=emd,
        excess_tolerance=float(excess_tolerance),
        rows=tuple(rows),
        where=where,
    )


# ====================================================================== layer plan
def top_m(coupling: np.ndarray, m: int) -> np.ndarray:
    """``P_eff``: each row keeps its ``m`` largest entries (ties: lower column), renormalised to sum to 1."""
    p = np.asarray(coupling, dtype=np.float64)
    keep = min(int(m), p.shape[1])
    out = np.zeros_like(p)
    for i, row in enumerate(p):
        cols = np.argsort(-row, kind="stable")[:keep]
        total = row[cols].sum()
        if not total > 0:
            raise TransportError(f"the layer plan's row {i} has no mass on its top {keep} donor blocks")
        out[i, cols] = row[cols] / total
    return out


# ====================================================================== all plans of a model pair
@dataclass
class PairPlans:
    """The neuron plans of one kept (target block, donor block) pair."""

    target_layer: int
    donor_layer: int
    weight: float  # P_eff[i, j]
    plans: dict[str, EntropicPlan]
    row_cost: dict[str, np.ndarray]  # expected cost of each target unit under phi: sum_b phi[a, b] C[a, b]
    diagnostics: dict[str, dict[str, Any]]
    cost_info: dict[str, CostInfo]


@dataclass
class TransportPlans:
    """Everything the fusion of one (target, donor) pair needs, with its diagnostics (see the module docs)."""

    interfaces: tuple[str, ...]
    target_layers: int
    donor_layers: int
    n_probe: int
    epsilon: dict[str, float]  # per interface and "layer"
    calibration: dict[str, Calibration]
    layer_cost: np.ndarray  # G (L_T x L_D)
    layer_cost_by_interface: dict[str, np.ndarray]
    layer_plan: EntropicPlan
    layer_weights: np.ndarray  # P_eff
    m: int
    seed: int
    layer_sample: int
    pairs: dict[tuple[int, int], PairPlans]
    layer_diagnostics: dict[str, Any] = field(default_factory=dict)
    control: str = "ot"  # "ot" or "shuffled"
    device: str | None = None  # where Sinkhorn ran (None: numpy)
    layer_pass: dict[str, Any] = field(default_factory=dict)  # the layer-cost subsample per interface (module docs)
    cache_key: str | None = None  # plans_key when a cache was given
    from_cache: bool = False  # read from the cache instead of solved

    def kept(self, target_layer: int) -> list[tuple[int, float]]:
        """The donor blocks kept for ``target_layer`` with their ``P_eff`` weights (largest first)."""
        row = self.layer_weights[target_layer]
        cols = [int(j) for j in np.argsort(-row, kind="stable") if row[j] > 0]
        return [(j, float(row[j])) for j in cols]

    def shuffled_pair(self, key: tuple[int, int], seed: int | None = None) -> PairPlans:
        """The control of one kept pair: each of its neuron plans with the rows permuted (module docs)."""
        seed = self.seed if seed is None else int(seed)
        pp = self.pairs[key]
        plans = {}
        for iface, plan in pp.plans.items():
            rng = np.random.default_rng(np.random.SeedSequence([seed, INTERFACES.index(iface) + 1, *key]))
            plans[iface] = plan.permuted(rng.permutation(plan.shape[0]))
        return replace(pp, plans=plans)

    def shuffled(self, seed: int | None = None) -> TransportPlans:
        """The control: every kept neuron plan with its rows permuted (seeded; see the module docs)."""
        pairs = {key: self.shuffled_pair(key, seed) for key in self.pairs}
        return replace(self, pairs=pairs, control="shuffled")

    def diagnostics_table(self):
        """One row per kept pair and interface (plus one row for the layer plan, layer -1)."""
        import pandas as pd

        rows = []
        for (i, j), pp in sorted(self.pairs.items()):
            for iface in self.interfaces:
                rows.append(
                    {
                        "target_layer": i,
                        "donor_layer": j,
                        "weight": pp.weight,
                        "interface": iface,
                        **pp.diagnostics[iface],
                        "constant_target": pp.cost_info[iface].constant_target,
                        "constant_donor": pp.cost_info[iface].constant_donor,
                    }
                )
        rows.append(
            {
                "target_layer": -1,
                "donor_layer": -1,
                "weight": math.nan,
                "interface": "layer",
                **self.layer_diagnostics,
                "constant_target": 0,
                "constant_donor": 0,
            }
        )
        return pd.DataFrame(rows)

    def summary(self) -> dict[str, Any]:
        """Per interface (and the layer plan): epsilon, calibration, mean diagnostics over the kept pairs."""
        out: dict[str, Any] = {}
        for iface in (*self.interfaces, "layer"):
            cal = self.calibration[iface]
            if iface == "layer":
                diags = [self.layer_diagnostics]
            else:
                diags = [pp.diagnostics[iface] for pp in self.pairs.values()]
            published = cal.at(PUBLISHED_EPSILON) or {}
            out[iface] = {
                "epsilon": self.epsilon[iface],
                "calibrated": cal.calibrated,
                "fixed": cal.fixed,
                "cost_ratio": float(np.nanmean([d["cost_ratio"] for d in diags])) if diags else math.nan,
                "excess": float(np.nanmean([d["excess"] for d in diags])) if diags else math.nan,
                "row_max_over_uniform": float(np.mean([d["row_max_over_uniform"] for d in diags])),
                "entropy": float(np.mean([d["entropy"] for d in diags])),
                "converged": bool(all(d["converged"] for d in diags)),
                "published_row_max_over_uniform": published.get("row_max_over_uniform", math.nan),
                "published_cost_ratio": published.get("cost_ratio", math.nan),
            }
        return out


def _epsilon_request(epsilon: Any, interfaces: Sequence[str]) -> dict[str, float | str]:
    keys = (*interfaces, "layer")
    if isinstance(epsilon, Mapping):
        unknown = sorted(set(epsilon) - set(keys))
        if unknown:
            raise TransportError(f"epsilon has keys {unknown}; give some of {list(keys)}")
        spec = {k: epsilon.get(k, "auto") for k in keys}
    else:
        spec = {k: epsilon for k in keys}
    return {k: "auto" if v == "auto" else _check_epsilon(v, f"epsilon[{k!r}]") for k, v in spec.items()}


def _check_int(value: Any, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < minimum:
        raise TransportError(f"{what} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _subsample(width: int, sample: int, seed: int, iface: str, side: int, layer: int) -> np.ndarray:
    if width <= sample:
        return np.arange(width)
    rng = np.random.default_rng(np.random.SeedSequence([seed, INTERFACES.index(iface) + 1, side, layer]))
    return np.sort(rng.choice(width, size=sample, replace=False))


def _fixed(epsilon: float, where: str) -> Calibration:
    return Calibration(epsilon, False, True, math.nan, math.nan, math.nan, (), where)


def _activations_digest(acts: ProbeActivations, interfaces: Sequence[str]) -> str:
    """sha256 over the float64 bytes and shapes of every block's activations at ``interfaces``."""
    h = hashlib.sha256()
    for iface in interfaces:
        for a in acts.layers[iface]:
            a = np.ascontiguousarray(a, dtype=np.float64)
            h.update(f"{iface}:{a.shape}".encode())
            h.update(a.tobytes())
    return h.hexdigest()


def plans_key(target: ProbeActivations, donor: ProbeActivations, params: Mapping[str, Any]) -> str:
    """The content key of a :func:`transport_plans` result: its inputs' bytes, its parameters, the rules' format."""
    interfaces = params["interfaces"]
    return sha256_hex(
        canonical_json(
            {
                "format": PLANS_FORMAT,
                "target": _activations_digest(target, interfaces),
                "donor": _activations_digest(donor, interfaces),
                "params": dict(params),
                "rules": {
                    "plain_domain_limit": PLAIN_DOMAIN_LIMIT,
                    "layer_marginal_tol": LAYER_MARGINAL_TOL,
                    "layer_max_iter": LAYER_MAX_ITER,
                    "layer_epsilon_extra": list(LAYER_EPSILON_EXTRA),
                },
            }
        )
    )


def _as_store(cache: Any) -> Any:
    from interlingua.core.store import Store

    if cache is None or isinstance(cache, Store):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return Store(cache)
    raise TransportError(f"cache must be None, an interlingua Store or a folder, got {type(cache).__name__}")


def _calibration_json(cal: Calibration) -> dict[str, Any]:
    return {
        "epsilon": cal.epsilon,
        "calibrated": cal.calibrated,
        "fixed": cal.fixed,
        "tolerance": cal.tolerance,
        "emd": cal.emd,
        "excess_tolerance": cal.excess_tolerance,
        "rows": list(cal.rows),
        "where": cal.where,
    }


def _plan_json(plan: EntropicPlan) -> dict[str, Any]:
    return {"epsilon": plan.epsilon, "iterations": plan.iterations, "converged": plan.converged, "method": plan.method}


def _save_plans(store: Any, key: str, plans: TransportPlans) -> None:
    arrays: dict[str, np.ndarray] = {
        "layer_cost": plans.layer_cost,
        "layer_plan": plans.layer_plan.coupling,
        "layer_weights": plans.layer_weights,
    }
    for iface, g in plans.layer_cost_by_interface.items():
        arrays[f"layer_cost/{iface}"] = g
    pairs = {}
    for (i, j), pp in plans.pairs.items():
        for iface, plan in pp.plans.items():
            if plan.scalings is None:
                return  # nothing to rebuild the plan from: not cached
            arrays[f"pair/{i}/{j}/{iface}/u"], arrays[f"pair/{i}/{j}/{iface}/v"] = plan.scalings
        pairs[f"{i},{j}"] = {
            "weight": pp.weight,
            "plans": {f: _plan_json(q) for f, q in pp.plans.items()},
            "diagnostics": pp.diagnostics,
        }
    record = {
        "interfaces": list(plans.interfaces),
        "target_layers": plans.target_layers,
        "donor_layers": plans.donor_layers,
        "n_probe": plans.n_probe,
        "epsilon": plans.epsilon,
        "calibration": {k: _calibration_json(c) for k, c in plans.calibration.items()},
        "layer_plan": _plan_json(plans.layer_plan),
        "layer_diagnostics": plans.layer_diagnostics,
        "m": plans.m,
        "seed": plans.seed,
        "layer_sample": plans.layer_sample,
        "layer_pass": plans.layer_pass,
        "device": plans.device,
        "pairs": pairs,
    }
    path = store.arrays_path("transport", key, folder="plans", stem="plans")
    store.put_arrays(path, key, arrays, {"format": PLANS_FORMAT, "record": json.dumps(record)})


def _load_plans(store: Any, key: str, target: ProbeActivations, donor: ProbeActivations) -> TransportPlans | None:
    path = store.arrays_path("transport", key, folder="plans", stem="plans")
    got = store.get_arrays("transport", path, key, {"format": PLANS_FORMAT})
    if got is None:
        return None
    arrays, meta = got
    record = json.loads(meta["record"])
    interfaces = tuple(record["interfaces"])
    eps = {k: float(v) for k, v in record["epsilon"].items()}
    pairs: dict[tuple[int, int], PairPlans] = {}
    for name, entry in record["pairs"].items():
        i, j = (int(x) for x in name.split(","))
        plans, row_cost, infos = {}, {}, {}
        for iface in interfaces:
            cost, info = correlation_cost(target.layers[iface][i], donor.layers[iface][j])
            how = entry["plans"][iface]
            plan = plan_from_scalings(
                cost,
                how["epsilon"],
                how["method"],
                (arrays[f"pair/{i}/{j}/{iface}/u"], arrays[f"pair/{i}/{j}/{iface}/v"]),
                iterations=how["iterations"],
                converged=how["converged"],
            )
            plans[iface] = plan
            row_cost[iface] = (plan.phi() * cost).sum(axis=1)
            infos[iface] = info
        pairs[(i, j)] = PairPlans(i, j, float(entry["weight"]), plans, row_cost, entry["diagnostics"], infos)
    calibration = {k: Calibration(**{**c, "rows": tuple(c["rows"])}) for k, c in record["calibration"].items()}
    lp = record["layer_plan"]
    return TransportPlans(
        interfaces=interfaces,
        target_layers=int(record["target_layers"]),
        donor_layers=int(record["donor_layers"]),
        n_probe=int(record["n_probe"]),
        epsilon=eps,
        calibration=calibration,
        layer_cost=arrays["layer_cost"],
        layer_cost_by_interface={f: arrays[f"layer_cost/{f}"] for f in interfaces},
        layer_plan=EntropicPlan(
            arrays["layer_plan"], float(lp["epsilon"]), int(lp["iterations"]), bool(lp["converged"]), str(lp["method"])
        ),
        layer_weights=arrays["layer_weights"],
        m=int(record["m"]),
        seed=int(record["seed"]),
        layer_sample=int(record["layer_sample"]),
        pairs=pairs,
        layer_diagnostics=record["layer_diagnostics"],
        device=record["device"],
        layer_pass=record["layer_pass"],
        cache_key=key,
        from_cache=True,
    )


@dataclass(frozen=True)
class PlanOptions:
    """How :func:`transport_plans` solves, validated when made (a :class:`TransportError` for a bad value) and
    passed down whole. A fusion makes it from its :class:`~interlingua.transport.fuse.FusionOptions`
    (:meth:`~interlingua.transport.fuse.FusionOptions.plan_options`)."""

    epsilon: Any = "auto"
    """``"auto"`` (calibrated), a number, or one per interface and ``"layer"`` (the rest ``"auto"``)"""
    m: int = 3
    """donor blocks kept per target block (the top ``m`` of the layer plan's row)"""
    seed: int = 0
    """seed of the layer pass's unit subsample"""
    interfaces: tuple[str, ...] = INTERFACES
    """the interfaces planned (a non-empty subset of ``INTERFACES``; duplicates dropped)"""
    layer_sample: int = 256
    """units per side of a layer pair's cost in the layer pass (a wider side is subsampled)"""
    tolerance: float = COST_TOLERANCE
    """an auto epsilon's plan costs at most ``1 + tolerance`` times the optimum"""
    excess_tolerance: float = EXCESS_TOLERANCE
    """and its cost above the optimum is at most this share of the optimum's distance to independence"""
    grid: tuple[float, ...] = EPSILON_GRID
    """the epsilons an auto calibration tries (largest first)"""
    max_iter: int = DEFAULT_MAX_ITER
    """Sinkhorn iterations at most"""
    marginal_tol: float = MARGINAL_TOL
    """Sinkhorn stops when the marginals are this close"""
    device: str | None = None
    """where Sinkhorn runs (None: numpy; ``"cuda"``: POT's torch backend; ``ot.emd2`` stays on the CPU)"""
    method: str = "auto"
    """the Sinkhorn of :func:`sinkhorn_plan`: ``"auto"``, ``"plain"`` or ``"log"``"""

    def __post_init__(self) -> None:
        interfaces = tuple(dict.fromkeys(self.interfaces))
        if not interfaces or set(interfaces) - set(INTERFACES):
            raise TransportError(f"interfaces must be a non-empty subset of {INTERFACES}, got {list(interfaces)}")
        object.__setattr__(self, "interfaces", interfaces)
        object.__setattr__(self, "m", _check_int(self.m, "m (donor blocks per target block)", 1))
        object.__setattr__(self, "seed", _check_int(self.seed, "seed", 0))
        object.__setattr__(self, "layer_sample", _check_int(self.layer_sample, "layer_sample", 2))
        if self.method not in ("auto", "plain", "log"):
            raise TransportError(f"method must be 'auto', 'plain' or 'log', got {self.method!r}")
        object.__setattr__(self, "grid", tuple(self.grid))
        self.epsilon_request()

    def epsilon_request(self) -> dict[str, float | str]:
        """``epsilon`` per interface and ``"layer"``: ``"auto"`` or a checked number."""
        return _epsilon_request(self.epsilon, self.interfaces)

    def solver(self) -> dict[str, Any]:
        """The Sinkhorn keywords of :func:`sinkhorn_plan` and :func:`calibrate_epsilon` these options set."""
        return {
            "max_iter": self.max_iter,
            "marginal_tol": self.marginal_tol,
            "device": self.device,
            "method": self.method,
        }


def transport_plans(
    target: ProbeActivations,
    donor: ProbeActivations,
    options: PlanOptions | None = None,
    *,
    cache: Any = None,
) -> TransportPlans:
    """Neuron plans per kept layer pair, the layer plan and ``P_eff`` from two models' probe activations.

    ``target`` / ``donor``: :func:`~interlingua.transport.correspond.probe_activations`
    of the two models on the two sides of the same parallel probe set. See
    the module docstring for every rule. ``options``: epsilon and its
    calibration, the kept donor blocks, the layer pass's subsample and the
    Sinkhorn solver (:class:`PlanOptions`; default: its defaults), e.g.
    ``transport_plans(t, d, PlanOptions(epsilon=0.05, m=1))``. ``cache``: an
    :class:`interlingua.core.store.Store` or a folder: the result is stored
    under :func:`plans_key` (``transport/plans/``) and a rerun on the same
    inputs reads it instead of solving (module docs, "Cache"). Raises
    :class:`TransportError` for mismatched probe sets, missing interfaces and
    bad parameters.
    """
    o = PlanOptions() if options is None else options
    if not isinstance(o, PlanOptions):
        raise TransportError(f"options must be a PlanOptions, got {type(o).__name__}")
    interfaces = o.interfaces
    missing = [f for f in interfaces if f not in target.layers or f not in donor.layers]
    if missing:
        raise TransportError(f"no shared interface: {missing} were not captured on both models")
    if target.n_sentences != donor.n_sentences:
        raise TransportError(
            f"the target saw {target.n_sentences} probe sentences and the donor {donor.n_sentences}; give the two "
            "sides of the same parallel set"
        )
    request = o.epsilon_request()
    store = _as_store(cache)
    key = None
    if store is not None:
        key = plans_key(
            target,
            donor,
            {
                "interfaces": list(interfaces),
                "epsilon": request,
                "m": o.m,
                "seed": o.seed,
                "layer_sample": o.layer_sample,
                "tolerance": float(o.tolerance),
                "excess_tolerance": float(o.excess_tolerance),
                "grid": [float(g) for g in o.grid],
                "max_iter": int(o.max_iter),
                "marginal_tol": float(o.marginal_tol),
                "method": o.method,
            },
        )
        cached = _load_plans(store, key, target, donor)
        if cached is not None:
            return cached
    with analysis_blas():
        plans = _solve_plans(target, donor, request, o)
    if store is not None:
        assert key is not None  # set with the store above
        plans.cache_key = key
        _save_plans(store, key, plans)
    return plans


def _solve_plans(
    target: ProbeActivations, donor: ProbeActivations, request: dict[str, float | str], o: PlanOptions
) -> TransportPlans:
    """The computation of :func:`transport_plans` (arguments checked there)."""
    m, seed, interfaces, layer_sample = o.m, o.seed, o.interfaces, o.layer_sample
    tolerance, excess_tolerance, grid = o.tolerance, o.excess_tolerance, o.grid
    max_iter, marginal_tol, device, method = o.max_iter, o.marginal_tol, o.device, o.method
    lt, ld = target.n_layers, donor.n_layers
    ci = lt // 2
    cj = int(round(ci * (ld - 1) / (lt - 1))) if lt > 1 else ld // 2
    opts = o.solver()

    eps: dict[str, float] = {}
    calibration: dict[str, Calibration] = {}
    emds: dict[tuple[str, int, int], float] = {}  # the calibration pair's emd, reused if that pair is kept
    for iface in interfaces:
        where = f"target block {ci}, donor block {cj}"
        if request[iface] == "auto":
            cost, _ = correlation_cost(target.layers[iface][ci], donor.layers[iface][cj])
            calibration[iface] = calibrate_epsilon(
                cost, grid=grid, tolerance=tolerance, excess_tolerance=excess_tolerance, where=where, **opts
            )
            emds[(iface, ci, cj)] = calibration[iface].emd
        else:
            calibration[iface] = _fixed(float(request[iface]), where)
        eps[iface] = calibration[iface].epsilon

    by_iface: dict[str, np.ndarray] = {}
    layer_pass: dict[str, Any] = {
        "layer_sample": layer_sample,
        "rule": "a side's units are subsampled when its width exceeds layer_sample",
        "marginal_tol": max(marginal_tol, LAYER_MARGINAL_TOL),
        "max_iter": min(max_iter, LAYER_MAX_ITER),
    }
    for iface in interfaces:
        g = np.empty((lt, ld))
        subs_t = [_subsample(a.shape[1], layer_sample, seed, iface, 0, i) for i, a in enumerate(target.layers[iface])]
        subs_d = [_subsample(a.shape[1], layer_sample, seed, iface, 1, j) for j, a in enumerate(donor.layers[iface])]
        layer_pass[iface] = {
            "target_widths": [int(a.shape[1]) for a in target.layers[iface]],
            "donor_widths": [int(a.shape[1]) for a in donor.layers[iface]],
            "target_units": [s.tolist() for s in subs_t],
            "donor_units": [s.tolist() for s in subs_d],
        }
        layer_opts: dict[str, Any] = {
            "max_iter": min(max_iter, LAYER_MAX_ITER),
            "marginal_tol": max(marginal_tol, LAYER_MARGINAL_TOL),
        }
        for i, xt in enumerate(target.layers[iface]):
            row = [correlation_cost(xt[:, subs_t[i]], xd[:, subs_d[j]])[0] for j, xd in enumerate(donor.layers[iface])]
            if device is None and method != "log":  # all donor blocks at once (same shape: one batch per shape)
                for shape in dict.fromkeys(r.shape for r in row):
                    js = [j for j, r in enumerate(row) if r.shape == shape]
                    g[i, js] = batched_transport_costs(np.stack([row[j] for j in js]), eps[iface], **layer_opts)[0]
            else:
                for j, cost in enumerate(row):
                    plan = sinkhorn_plan(cost, eps[iface], device=device, method=method, **layer_opts)
                    g[i, j] = float((plan.coupling * cost).sum())
        by_iface[iface] = g
    layer_cost = np.mean([by_iface[f] for f in interfaces], axis=0)
    if request["layer"] == "auto":
        layer_grid = (*grid, *(e for e in LAYER_EPSILON_EXTRA if e < min(grid)))
        calibration["layer"] = calibrate_epsilon(
            layer_cost,
            grid=layer_grid,
            tolerance=tolerance,
            excess_tolerance=excess_tolerance,
            where="layer cost matrix",
            **opts,
        )
        layer_emd = calibration["layer"].emd
    else:
        calibration["layer"] = _fixed(float(request["layer"]), "layer cost matrix")
        layer_emd = exact_cost(layer_cost)
    eps["layer"] = calibration["layer"].epsilon
    layer_plan = sinkhorn_plan(layer_cost, eps["layer"], **opts)
    layer_diag = plan_diagnostics(layer_plan, layer_cost, layer_emd)
    weights = top_m(layer_plan.coupling, m)

    pairs: dict[tuple[int, int], PairPlans] = {}
    for i in range(lt):
        for j in map(int, np.flatnonzero(weights[i] > 0)):
            plans, row_cost, diags, infos = {}, {}, {}, {}
            for iface in interfaces:
                cost, info = correlation_cost(target.layers[iface][i], donor.layers[iface][j])
                plan = sinkhorn_plan(cost, eps[iface], **opts)
                plans[iface] = plan
                row_cost[iface] = (plan.phi() * cost).sum(axis=1)
                emd = emds[(iface, i, j)] if (iface, i, j) in emds else exact_cost(cost)
                diags[iface] = plan_diagnostics(plan, cost, emd)
                infos[iface] = info
            pairs[(i, j)] = PairPlans(i, j, float(weights[i, j]), plans, row_cost, diags, infos)
    return TransportPlans(
        interfaces=interfaces,
        target_layers=lt,
        donor_layers=ld,
        n_probe=target.n_sentences,
        epsilon=eps,
        calibration=calibration,
        layer_cost=layer_cost,
        layer_cost_by_interface=by_iface,
        layer_plan=layer_plan,
        layer_weights=weights,
        m=m,
        seed=seed,
        layer_sample=layer_sample,
        pairs=pairs,
        layer_diagnostics=layer_diag,
        device=None if device is None else str(device),
        layer_pass=layer_pass,
    )
