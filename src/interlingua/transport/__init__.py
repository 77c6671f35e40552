"""Cross-architecture fusion by optimal transport (after Cui et al., "Transport and Merge", arXiv 2602.05495).

When two models share no parameter space (other widths, depths, tokenizers),
the naive merges are undefined. This subpackage carries a donor's weights into
a target's coordinates through entropic OT plans over neurons and over layers
(seed 003, section 7, with its deviations: row-stochastic plans, a calibrated
epsilon, the MLP and attention-output sublayers only, a shuffled-plan control):

* :mod:`.correspond`: neuron correspondences from sentence-mean activations on
  a parallel probe set (``probe_activations``, ``correlation_cost``: 1 - Pearson).
* :mod:`.plans`: Sinkhorn plans (POT; plain domain on the column-shifted cost
  where float64 allows, else log domain: the same iterations), epsilon
  calibration against ``ot.emd2``, the layer-level OT on a seeded unit
  subsample and ``P_eff`` (``transport_plans``, cached by content with
  ``cache=``).
* :mod:`.fuse`: the fusion ``(1 - alpha) W + alpha T`` on a top-k unit mask,
  its shuffled control, and content-keyed atomic model folders
  (``build_fused_model``).
* :mod:`.controls`: the self-plan control (a model's plan with itself must be
  the identity) and the stability of the plans between two probe halves
  against its chance level (``transport_controls``).
* :mod:`.evaluate`: ``fuse_pair`` (NLL per language, OT vs shuffled, over an
  alpha grid, with the plan diagnostics) and ``fuse_models`` (every directed
  pair: one table, one figure).

POT is an optional dependency (``pip install pot``); importing this package is
cheap (no torch, no POT), the heavy modules load on first use.
"""

from __future__ import annotations

from typing import Any

from interlingua.core.lazy import lazy_loader
from interlingua.transport.errors import TransportError, TransportWarning  # noqa: F401 (exported)

_LAZY = {
    "INTERFACES": "correspond",
    "MIN_PROBE_SENTENCES": "correspond",
    "Sublayers": "correspond",
    "ParallelProbe": "correspond",
    "ProbeActivations": "correspond",
    "probe_activations": "correspond",
    "correlation_cost": "correspond",
    "EPSILON_GRID": "plans",
    "PUBLISHED_EPSILON": "plans",
    "EntropicPlan": "plans",
    "PlanOptions": "plans",
    "TransportPlans": "plans",
    "calibrate_epsilon": "plans",
    "plans_key": "plans",
    "plan_diagnostics": "plans",
    "row_stochastic": "plans",
    "sinkhorn_plan": "plans",
    "transport_plans": "plans",
    "Fusion": "fuse",
    "TransportModel": "fuse",
    "FusionOptions": "fuse",
    "build_fused_model": "fuse",
    "fusion_key": "fuse",
    "fusion_recipe": "fuse",
    "load_transport_model": "fuse",
    "prepare_fusion": "fuse",
    "SELF_MATCH_THRESHOLD": "controls",
    "Controls": "controls",
    "plan_stability": "controls",
    "self_plan_control": "controls",
    "transport_controls": "controls",
    "FUSION_COLUMNS": "columns",
    "fuse_models": "evaluate",
    "SweepOptions": "evaluate",
    "fuse_pair": "evaluate",
    "plot_fusion": "evaluate",
}

__all__ = sorted(["TransportError", "TransportWarning", *_LAZY])


_load = lazy_loader(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    return _load(name)
