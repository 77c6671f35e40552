"""Seeded, reproducible inference for every similarity measure.

- :func:`shuffle_permutation` / :func:`pair_seed`: the ONE fixed shuffled
  control per pair (docs/protocol.md, "Controls"), reused at every layer and measure;
- :func:`permutation_test`: p-value of a measure against K row permutations
  (linear CKA: an O(n^2) Gram gather per permutation);
- :func:`grid_permutation_test`: p-value of the maximum of a layer x layer
  CKA grid, with the same maximum applied to every permuted grid;
- :func:`rv_moments_pvalue` / :func:`rv_moments_grid`: analytic permutation
  p-values of biased linear CKA (the RV coefficient) from the exact permutation
  mean, variance and skewness and a Pearson type III fit, no draws
  (also ``permutation_test(..., null_method="moments")``);
- :func:`calibrate` / :func:`calibrate_result` / :func:`calibrate_grid`: calibrated
  scores, the excess of a score over its null's (1 - alpha) order statistic
  ``tau`` (:mod:`interlingua.analysis.inference.calibration`), for one value and,
  aggregation-aware, for a grid's maximum, mean and per-layer best matches;
- :func:`jackknife_interval` (delete-a-group, t interval) and
  :func:`bootstrap_interval` (percentile, recentred for the CCA family; paired rows).

Example::

    from interlingua.analysis.inference import permutation_test
    res = permutation_test("cka_linear_debiased", X, Y, n_permutations=1000, seed=0)
    res.observed, res.p_value, res.null_quantiles[0.95]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlingua.core.lazy import lazy_loader

if TYPE_CHECKING:
    from interlingua.analysis.inference.calibration import (
        DEFAULT_ALPHA,
        Calibration,
        GridCalibration,
        calibrate,
        calibrate_grid,
        calibrate_grid_result,
        calibrate_result,
        calibrated_score,
        critical_value,
    )
    from interlingua.analysis.inference.intervals import (
        BootstrapInterval,
        JackknifeInterval,
        bootstrap_interval,
        jackknife_interval,
    )
    from interlingua.analysis.inference.moments import (
        MOMENTS_MEASURES,
        MomentsGridResult,
        MomentsResult,
        RVSide,
        rv_moments_grid,
        rv_moments_pvalue,
        rv_permutation_moments,
        rv_side,
    )
    from interlingua.analysis.inference.permutation import (
        DEFAULT_QUANTILES,
        GridPermutationResult,
        PermutationResult,
        grid_permutation_test,
        pair_seed,
        permutation_test,
        shuffle_permutation,
    )

# name -> submodule, imported on first use: importing a submodule (``inference.config``, as the run config does)
# or the package loads none of the others (``intervals`` imports scipy.stats, seconds of a command's start)
_LAZY = {
    "DEFAULT_ALPHA": "calibration",
    "Calibration": "calibration",
    "GridCalibration": "calibration",
    "calibrate": "calibration",
    "calibrate_grid": "calibration",
    "calibrate_grid_result": "calibration",
    "calibrate_result": "calibration",
    "calibrated_score": "calibration",
    "critical_value": "calibration",
    "BootstrapInterval": "intervals",
    "JackknifeInterval": "intervals",
    "bootstrap_interval": "intervals",
    "jackknife_interval": "intervals",
    "MOMENTS_MEASURES": "moments",
    "MomentsGridResult": "moments",
    "MomentsResult": "moments",
    "RVSide": "moments",
    "rv_moments_grid": "moments",
    "rv_moments_pvalue": "moments",
    "rv_permutation_moments": "moments",
    "rv_side": "moments",
    "DEFAULT_QUANTILES": "permutation",
    "GridPermutationResult": "permutation",
    "PermutationResult": "permutation",
    "grid_permutation_test": "permutation",
    "pair_seed": "permutation",
    "permutation_test": "permutation",
    "shuffle_permutation": "permutation",
}


_load = lazy_loader(__name__, _LAZY)


def __getattr__(name: str) -> Any:
    return _load(name)


__all__ = [
    "DEFAULT_ALPHA",
    "Calibration",
    "GridCalibration",
    "calibrate",
    "calibrate_result",
    "calibrate_grid",
    "calibrate_grid_result",
    "calibrated_score",
    "critical_value",
    "DEFAULT_QUANTILES",
    "PermutationResult",
    "GridPermutationResult",
    "JackknifeInterval",
    "BootstrapInterval",
    "shuffle_permutation",
    "pair_seed",
    "permutation_test",
    "grid_permutation_test",
    "jackknife_interval",
    "bootstrap_interval",
    "MOMENTS_MEASURES",
    "MomentsResult",
    "MomentsGridResult",
    "RVSide",
    "rv_side",
    "rv_permutation_moments",
    "rv_moments_pvalue",
    "rv_moments_grid",
]
