"""Entropic optimal-transport plans over neurons and over layers, with their epsilon calibrated and reported.

Neuron plans
------------
For a target block ``i`` and a donor block ``j`` and an interface (``mlp``,
``attn``, ``residual``; see :mod:`.correspond`), with ``C`` the ``n x m``
cost ``1 - rho`` between the target's ``n`` units and the donor's ``m``, the
plan ``Q`` solves the entropic OT problem with uniform marginals
``a = 1/n``, ``b = 1/m`` by log-domain Sinkhorn (POT,
``ot.sinkhorn(a, b, C, epsilon, method="sinkhorn_log")``, float64). ``Q``
is rectangular by construction: nothing is padded or truncated. Sinkhorn
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
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

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
    "PUBLISHED_EPSILON",
    "Calibration",
    "PairPlans",
    "Plan",
    "TransportPlans",
    "calibrate_epsilon",
    "exact_cost",
    "plan_diagnostics",
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
_EMD_ZERO = 1e-9
_EMD_MAX_ITER = 50_000_000


# ====================================================================== one plan
@dataclass(frozen=True)
class Plan:
    """An entropic OT coupling ``Q`` (``n x m``, rows ~ 1/n, columns ~ 1/m) and how it was solved."""

    coupling: np.ndarray
    epsilon: float
    iterations: int = 0
    converged: bool = True

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.coupling.shape)  # type: ignore[return-value]

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

    def permuted(self, perm: np.ndarray) -> "Plan":
        """The plan with its rows reordered: row ``a`` of the result is row ``perm[a]``."""
        return replace(self, coupling=self.coupling[np.asarray(perm)])


def row_stochastic(q: np.ndarray) -> np.ndarray:
    """``q`` with every row divided by its sum (rows sum to 1); a zero row raises :class:`TransportError`."""
    q = np.asarray(q, dtype=np.float64)
    sums = q.sum(axis=1, keepdims=True)
    if not (np.isfinite(sums).all() and (sums > 0).all()):
        raise TransportError("a transport plan has a row with no mass; it cannot be made row-stochastic")
    return q / sums


def _check_epsilon(epsilon: Any, what: str = "epsilon") -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(float(epsilon)) \
            or float(epsilon) <= 0:
        raise TransportError(f"{what} must be a finite number > 0 or 'auto', got {epsilon!r}")
    return float(epsilon)


def _check_cost(cost: Any) -> np.ndarray:
    c = np.asarray(cost, dtype=np.float64)
    if c.ndim != 2 or min(c.shape) < 1:
        raise TransportError(f"a cost matrix must be 2-D and non-empty, got shape {c.shape}")
    if not np.isfinite(c).all():
        raise TransportError("the cost matrix contains NaN or inf")
    return c


def sinkhorn_plan(
    cost: np.ndarray,
    epsilon: float,
    *,
    max_iter: int = DEFAULT_MAX_ITER,
    marginal_tol: float = MARGINAL_TOL,
    device: str | None = None,
) -> Plan:
    """The entropic OT plan of ``cost`` with uniform marginals (log-domain Sinkhorn, POT).

    ``device``: None solves with numpy; a torch device (``"cuda"``) hands
    POT float64 torch tensors on it (POT's torch backend: the same
    iterations), and the plan comes back as a numpy array.
    """
    import ot

    c = _check_cost(cost)
    eps = _check_epsilon(epsilon)
    n, m = c.shape
    a, b = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
    stop = marginal_tol / math.sqrt(m)
    if device is not None:
        import torch

        a, b, c_in = (torch.as_tensor(x, dtype=torch.float64, device=device) for x in (a, b, c))
    else:
        c_in = c
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q, log = ot.sinkhorn(
            a, b, c_in, eps, method="sinkhorn_log", numItermax=int(max_iter), stopThr=stop, log=True, warn=False
        )
    if device is not None:
        q = q.detach().cpu().numpy()
    q = np.asarray(q, dtype=np.float64)
    if not np.isfinite(q).all():
        raise TransportError(f"Sinkhorn returned a non-finite plan at epsilon {eps:g}")
    errors = log.get("err")
    last = float(errors[-1]) if errors is not None and len(errors) else math.inf
    return Plan(q, eps, int(log.get("niter", 0)) + 1, bool(last < stop))


def exact_cost(cost: np.ndarray) -> float:
    """The unregularised optimum ``ot.emd2`` of ``cost`` with uniform marginals."""
    import ot

    c = _check_cost(cost)
    n, m = c.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = ot.emd2(np.full(n, 1.0 / n), np.full(m, 1.0 / m), c, numItermax=_EMD_MAX_ITER)
    return float(value)


def plan_diagnostics(plan: Plan, cost: np.ndarray, emd: float | None = None) -> dict[str, Any]:
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
        diag = plan_diagnostics(sinkhorn_plan(c, eps, max_iter=max_iter, marginal_tol=marginal_tol, device=device),
                                c, emd)
        rows.append(diag)
        if _meets(diag, float(tolerance), float(excess_tolerance)):
            chosen = eps
            break
    if not any(math.isclose(r["epsilon"], PUBLISHED_EPSILON) for r in rows):
        rows.append(plan_diagnostics(sinkhorn_plan(c, PUBLISHED_EPSILON, max_iter=max_iter,
                                                   marginal_tol=marginal_tol, device=device), c, emd))
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
    plans: dict[str, Plan]
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
    layer_plan: Plan
    layer_weights: np.ndarray  # P_eff
    m: int
    seed: int
    layer_sample: int
    pairs: dict[tuple[int, int], PairPlans]
    layer_diagnostics: dict[str, Any] = field(default_factory=dict)
    control: str = "ot"  # "ot" or "shuffled"
    device: str | None = None  # where Sinkhorn ran (None: numpy)

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

    def shuffled(self, seed: int | None = None) -> "TransportPlans":
        """The control: every kept neuron plan with its rows permuted (seeded; see the module docs)."""
        pairs = {key: self.shuffled_pair(key, seed) for key in self.pairs}
        return replace(self, pairs=pairs, control="shuffled")

    def diagnostics_table(self):
        """One row per kept pair and interface (plus one row for the layer plan, layer -1)."""
        import pandas as pd

        rows = []
        for (i, j), pp in sorted(self.pairs.items()):
            for iface in self.interfaces:
                rows.append({"target_layer": i, "donor_layer": j, "weight": pp.weight, "interface": iface,
                             **pp.diagnostics[iface],
                             "constant_target": pp.cost_info[iface].constant_target,
                             "constant_donor": pp.cost_info[iface].constant_donor})
        rows.append({"target_layer": -1, "donor_layer": -1, "weight": math.nan, "interface": "layer",
                     **self.layer_diagnostics, "constant_target": 0, "constant_donor": 0})
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


def transport_plans(
    target: ProbeActivations,
    donor: ProbeActivations,
    *,
    epsilon: Any = "auto",
    m: int = 3,
    seed: int = 0,
    interfaces: Sequence[str] = INTERFACES,
    layer_sample: int = 256,
    tolerance: float = COST_TOLERANCE,
    excess_tolerance: float = EXCESS_TOLERANCE,
    grid: Sequence[float] = EPSILON_GRID,
    max_iter: int = DEFAULT_MAX_ITER,
    marginal_tol: float = MARGINAL_TOL,
    device: str | None = None,
) -> TransportPlans:
    """Neuron plans per kept layer pair, the layer plan and ``P_eff`` from two models' probe activations.

    ``target`` / ``donor``: :func:`~interlingua.transport.correspond.probe_activations`
    of the two models on the two sides of the same parallel probe set. See
    the module docstring for every rule. ``device``: where Sinkhorn runs (None:
    numpy; ``"cuda"``: POT's torch backend on the GPU; ``ot.emd2`` always runs
    on the CPU). Raises :class:`TransportError` for mismatched probe sets,
    missing interfaces and bad parameters.
    """
    interfaces = tuple(dict.fromkeys(interfaces))
    if not interfaces or set(interfaces) - set(INTERFACES):
        raise TransportError(f"interfaces must be a non-empty subset of {INTERFACES}, got {list(interfaces)}")
    missing = [f for f in interfaces if f not in target.layers or f not in donor.layers]
    if missing:
        raise TransportError(f"no shared interface: {missing} were not captured on both models")
    if target.n_sentences != donor.n_sentences:
        raise TransportError(
            f"the target saw {target.n_sentences} probe sentences and the donor {donor.n_sentences}; give the two "
            "sides of the same parallel set"
        )
    m = _check_int(m, "m (donor blocks per target block)", 1)
    seed = _check_int(seed, "seed", 0)
    layer_sample = _check_int(layer_sample, "layer_sample", 2)
    request = _epsilon_request(epsilon, interfaces)
    lt, ld = target.n_layers, donor.n_layers
    ci = lt // 2
    cj = int(round(ci * (ld - 1) / (lt - 1))) if lt > 1 else ld // 2
    opts = {"max_iter": max_iter, "marginal_tol": marginal_tol, "device": device}

    eps: dict[str, float] = {}
    calibration: dict[str, Calibration] = {}
    for iface in interfaces:
        where = f"target block {ci}, donor block {cj}"
        if request[iface] == "auto":
            cost, _ = correlation_cost(target.layers[iface][ci], donor.layers[iface][cj])
            calibration[iface] = calibrate_epsilon(cost, grid=grid, tolerance=tolerance,
                                                  excess_tolerance=excess_tolerance, where=where, **opts)
        else:
            calibration[iface] = _fixed(float(request[iface]), where)
        eps[iface] = calibration[iface].epsilon

    by_iface: dict[str, np.ndarray] = {}
    for iface in interfaces:
        g = np.empty((lt, ld))
        subs_d = [_subsample(a.shape[1], layer_sample, seed, iface, 1, j) for j, a in enumerate(donor.layers[iface])]
        for i, xt in enumerate(target.layers[iface]):
            st = _subsample(xt.shape[1], layer_sample, seed, iface, 0, i)
            for j, xd in enumerate(donor.layers[iface]):
                cost, _ = correlation_cost(xt[:, st], xd[:, subs_d[j]])
                plan = sinkhorn_plan(cost, eps[iface], max_iter=min(max_iter, LAYER_MAX_ITER),
                                     marginal_tol=max(marginal_tol, LAYER_MARGINAL_TOL), device=device)
                g[i, j] = float((plan.coupling * cost).sum())
        by_iface[iface] = g
    layer_cost = np.mean([by_iface[f] for f in interfaces], axis=0)
    if request["layer"] == "auto":
        layer_grid = (*grid, *(e for e in LAYER_EPSILON_EXTRA if e < min(grid)))
        calibration["layer"] = calibrate_epsilon(layer_cost, grid=layer_grid, tolerance=tolerance,
                                                 excess_tolerance=excess_tolerance, where="layer cost matrix", **opts)
    else:
        calibration["layer"] = _fixed(float(request["layer"]), "layer cost matrix")
    eps["layer"] = calibration["layer"].epsilon
    layer_plan = sinkhorn_plan(layer_cost, eps["layer"], **opts)
    layer_diag = plan_diagnostics(layer_plan, layer_cost, exact_cost(layer_cost))
    weights = top_m(layer_plan.coupling, m)

    pairs: dict[tuple[int, int], PairPlans] = {}
    for i in range(lt):
        for j in np.flatnonzero(weights[i] > 0):
            j = int(j)
            plans, row_cost, diags, infos = {}, {}, {}, {}
            for iface in interfaces:
                cost, info = correlation_cost(target.layers[iface][i], donor.layers[iface][j])
                plan = sinkhorn_plan(cost, eps[iface], **opts)
                plans[iface] = plan
                row_cost[iface] = (plan.phi() * cost).sum(axis=1)
                diags[iface] = plan_diagnostics(plan, cost, exact_cost(cost))
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
    )
