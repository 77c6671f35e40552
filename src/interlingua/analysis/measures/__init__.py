"""Similarity measures on paired representations X (n x p) and Y (n x q).

Rows are paired examples (the same sentence on both sides). Every measure is
a :class:`Measure` with a stable id and declared metadata::

    from interlingua.analysis.measures import get_measure, list_measures
    m = get_measure("cka_linear_debiased")
    m(X, Y)                 # float
    m.compute(X, Y)         # MeasureResult: value, estimator, details
    m.metadata.invariances  # frozenset({"orthogonal", "isotropic_scale", ...})
    if m.metadata.gram:     # Gram form: one (n, n) matrix per side
        gx, gy = m.unit_gram(X), m.unit_gram(Y)
        m.from_grams(gx, gy)                      # == m(X, Y)
        m.from_grams(gx, gy[np.ix_(perm, perm)])  # == m(X, Y[perm]): an O(n^2) gather
    if m.metadata.grid:     # every layer of A against every layer of B in one call
        m.grid(layers_a, layers_b)  # (La, Lb) == [[m(x, y) for y in layers_b] for x in layers_a]

Rows that do not fit in memory (token-level rows, n ~ 1e5): :class:`StreamingLinearCKA`
accumulates feature-space sums chunk by chunk (``update(X_chunk, Y_chunk)``, then
``.cka(debiased=...)``), see :mod:`interlingua.analysis.measures.streaming`.

Parameterised ids are built on demand: ``"mknn_k5"``, ``"svcca_var0.95_max32"``,
``"cka_rbf_median0.5"``. The plain functions (:func:`linear_cka`, :func:`svcca`,
...) return floats. Inputs are cast to float64; NaN/inf, mismatched rows and
too few rows raise :class:`~interlingua.core.errors.MeasureInputError`; dropped
columns, reduced widths and nan results are reported by :class:`MeasureWarning`.
"""

from __future__ import annotations

# Import order = order of list_measures(): CKA, CCA family, Procrustes, ANC, kNN, RSA.
from interlingua.analysis.measures.base import (  # isort: skip
    INVARIANCES,
    Measure,
    MeasureMetadata,
    MeasureResult,
    get_measure,
    list_measures,
)
from interlingua.analysis.measures.cka import (  # isort: skip
    center_gram,
    centred_linear_gram,
    cka_from_grams,
    cka_grid,
    gram_linear,
    gram_rbf,
    linear_cka,
    rbf_cka,
    unit_centred_gram,
)
from interlingua.analysis.measures.cca import canonical_correlations, cca, pwcca, svcca  # isort: skip
from interlingua.analysis.measures.procrustes import procrustes, procrustes_map  # isort: skip
from interlingua.analysis.measures.anc import anc, neuron_correlations  # isort: skip
from interlingua.analysis.measures.knn import mutual_knn, mutual_knn_chance  # isort: skip
from interlingua.analysis.measures.rsa import rdm, rsa  # isort: skip
from interlingua.analysis.measures.validation import MeasureWarning  # isort: skip
from interlingua.analysis.measures.streaming import StreamingLinearCKA, streaming_linear_cka  # isort: skip
from interlingua.analysis.measures import conventions  # isort: skip  # peers' conventions (families)

__all__ = [
    "INVARIANCES",
    "Measure",
    "MeasureMetadata",
    "MeasureResult",
    "MeasureWarning",
    "get_measure",
    "list_measures",
    "gram_linear",
    "gram_rbf",
    "center_gram",
    "centred_linear_gram",
    "unit_centred_gram",
    "cka_from_grams",
    "linear_cka",
    "rbf_cka",
    "cka_grid",
    "canonical_correlations",
    "cca",
    "svcca",
    "pwcca",
    "procrustes",
    "procrustes_map",
    "anc",
    "neuron_correlations",
    "mutual_knn",
    "mutual_knn_chance",
    "rdm",
    "rsa",
    "StreamingLinearCKA",
    "streaming_linear_cka",
]
