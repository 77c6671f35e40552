"""Maps between two sides' sentence representations, scored on held-out sentences.

Does a map learned on some translations carry the rest across? For one pair
of sides (two models, or one model in two languages) and each layer pair,
this package fits maps from A to B and from B to A on training sentences and
scores the held-out ones: retrieval (P@1, P@5, MRR; cosine and CSLS),
reconstruction (MSE, relative MSE, linear CKA), next to chance, the identity
and a shuffled-fit control, with bootstrap intervals and an analysis of where
the residual lives.

Example::

    from interlingua.maps import MapOptions, evaluate_pair, get_map, fit_and_save, load_map
    from interlingua.core.schema import result_table
    from interlingua.maps.columns import MAP_COLUMNS

    options = MapOptions(estimators=["procrustes", "ridge"], folds=5, seed=0, layers="auto", bootstrap=1000,
                         csls_k=10, permutations=100, permutation_seed=0, alpha=0.05)
    rows = evaluate_pair(reps_a, reps_b, options, control_permutation=perm)
    table = result_table(rows, MAP_COLUMNS)

    m = get_map("procrustes").fit(X_train, Y_train)   # scikit-learn style
    m.transform(X_test); m.score(X_test, Y_test); m.save("map.safetensors"); load_map("map.safetensors")

Modules: :mod:`.estimators` (identity, procrustes, procrustes_scaled, procrustes_span, affine,
ridge) and :mod:`.mlp` (mlp), :mod:`.folds`, :mod:`.retrieval`,
:mod:`.residual`, :mod:`.layers`, :mod:`.evaluate`, :mod:`.null` (the permutation null and calibrated
score of ``p1``), :mod:`.fit`, :mod:`.plot`.
"""

from __future__ import annotations

from interlingua.maps.errors import MapFileError, MapInputError, MapNonFiniteError, MapWarning  # isort: skip
from interlingua.maps.estimators import (  # isort: skip
    DEFAULT_RELATIVE_ALPHAS,
    Affine,
    Identity,
    Map,
    Procrustes,
    ProcrustesSpan,
    Ridge,
    get_map,
    list_maps,
    load_map,
    register_map,
)
from interlingua.maps.mlp import MLP  # isort: skip  (registers "mlp"; torch is imported only when it fits)
from interlingua.maps.columns import MAP_COLUMNS, NULL_COLUMNS
from interlingua.maps.evaluate import DIRECTIONS, LABEL_COLUMNS, MapOptions, evaluate_pair, procrustes_grid
from interlingua.maps.fit import fit_and_save, fit_layer_maps
from interlingua.maps.folds import Folds, kfold, make_folds, restricted_permutation, train_test_split
from interlingua.maps.layers import layer_pairs, relative_depth_partner
from interlingua.maps.plot import plot_map_clouds
from interlingua.maps.residual import (
    effective_rank,
    energy_count,
    fraction_outside,
    residual_analysis,
    spectrum,
    target_spectrum,
)
from interlingua.maps.retrieval import DEFAULT_MEMORY_BYTES, RetrievalRanks, rank_metrics, retrieval_ranks

__all__ = [
    "MapInputError",
    "MapNonFiniteError",
    "MapFileError",
    "MapWarning",
    "Map",
    "Identity",
    "Procrustes",
    "ProcrustesSpan",
    "Affine",
    "Ridge",
    "MLP",
    "DEFAULT_RELATIVE_ALPHAS",
    "get_map",
    "list_maps",
    "register_map",
    "load_map",
    "Folds",
    "kfold",
    "train_test_split",
    "make_folds",
    "restricted_permutation",
    "layer_pairs",
    "relative_depth_partner",
    "DEFAULT_MEMORY_BYTES",
    "RetrievalRanks",
    "retrieval_ranks",
    "rank_metrics",
    "effective_rank",
    "energy_count",
    "fraction_outside",
    "spectrum",
    "target_spectrum",
    "residual_analysis",
    "DIRECTIONS",
    "LABEL_COLUMNS",
    "MapOptions",
    "evaluate_pair",
    "procrustes_grid",
    "fit_and_save",
    "fit_layer_maps",
    "plot_map_clouds",
    "MAP_COLUMNS",
    "NULL_COLUMNS",
]
