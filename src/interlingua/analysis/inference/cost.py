"""What a measure costs: the float64 arithmetic of its call and of the path its inference takes.

The cost model (:mod:`interlingua.pipeline.cost`) prices a comparison from these FLOPs and a measured matmul
rate. Each measure declares its path (``MeasureMetadata.cost_model``, one of
:data:`~interlingua.analysis.measures.base.COST_MODELS`); this module holds the arithmetic of each path.
"""

from __future__ import annotations

import math

from interlingua.analysis.inference._gram import GATHER_COST

__all__ = ["GATHER_COST", "SVD_PENALTY", "measure_flops"]

#: LAPACK's SVD reaches a fraction of the matmul rate: its FLOPs are weighted by this factor.
SVD_PENALTY = 4.0


def measure_flops(measure_id: str, n: int, p: int, q: int) -> tuple[float, float, float]:
    """Float64 work (SVD FLOPs weighted by :data:`SVD_PENALTY`) of ``measure_id`` at n rows, widths p and q:
    (one direct call, preparing both sides once, one permutation or resample on the path inference takes)."""
    from interlingua.analysis.measures.base import get_measure

    fam = get_measure(measure_id).metadata.cost_model
    r, s = min(n, p), min(n, q)
    if fam == "gram":  # the null gathers unit Grams, or recomputes in feature form where that is cheaper
        from interlingua.analysis.inference._gram import feature_null_is_cheaper, gram_path_is_cheaper

        if feature_null_is_cheaper(n, [p], [q]):  # the permutation null's feature form ||X^T Y[p]||^2
            per = 2.0 * n * p * q
        else:
            per = GATHER_COST * n * n if gram_path_is_cheaper(n, p, q) else 2.0 * n * (p * q + p * p + q * q)
        return 2.0 * n * n * (p + q), 2.0 * n * n * (p + q), per
    if fam == "rbf":
        direct = 2.0 * n * n * (p + q) + 40.0 * n * n
        return direct, 0.0, direct
    if fam == "svd":  # direct: the p x q cross-product and its SVD; prepared: each side's thin SVD, then r x s
        lo, hi = min(p, q), max(p, q)
        direct = 2.0 * n * p * q + SVD_PENALTY * 4.0 * hi * lo * lo
        prepare = SVD_PENALTY * 4.0 * n * (p * r + q * s)
        per = 2.0 * n * r * s + SVD_PENALTY * 4.0 * max(r, s) * min(r, s) ** 2
        return direct, prepare, per
    if fam == "rsa":
        direct = 2.0 * n * n * (p + q) + 2.0 * 20.0 * n * n * math.log2(max(n, 2))
        return direct, direct, 4.0 * n * n
    if fam == "anc":
        direct = 4.0 * n * (p + q)
        return direct, 0.0, direct
    if fam == "knn":  # prepared: each side's similarities and neighbour lists once, then an n k gather
        direct = 2.0 * n * n * (p + q) + 2.0 * 10.0 * n * n
        k = int(measure_id[len("mknn_k") :]) if measure_id[len("mknn_k") :].isdigit() else 10
        return direct, direct, GATHER_COST * n * k
    direct = 2.0 * n * n * (p + q) + 2.0 * 20.0 * n * n * math.log2(max(n, 2))  # others: recompute
    return direct, 0.0, direct
