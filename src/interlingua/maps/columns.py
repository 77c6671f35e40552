"""The columns of ``maps.csv`` (one row per pair, layer pair, estimator, direction and fold), each with its
glossary text, and the columns the maps section of the report derives.
"""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = ["MAP_COLUMNS", "NULL_COLUMNS", "REPORT_COLUMNS"]

#: the columns the permutation null adds to every map row (glossary text: ``doc``)
NULL_COLUMNS: tuple[Column, ...] = (
    Column(
        "n_permutations",
        "int",
        "draws K of the map's permutation null (0: none, see note): the same estimator refitted on the training "
        "rows paired through K seeded permutations (seeds.test, as the similarity null), scored on the same "
        "correctly paired held-out rows",
    ),
    Column("p_value", "float", "permutation p of p1 against that null, (1 + #{null p1 >= p1}) / (K + 1)"),
    Column(
        "tau",
        "float",
        "critical value of p1: the (1 - alpha) order statistic of the null's held-out P@1 values with the "
        "observed p1 included (alpha: inference.alpha, in run.json)",
    ),
    Column(
        "calibrated",
        "float",
        "calibrated held-out retrieval: (p1 - tau) / (1 - tau) clipped to [0, 1]; 0 = not above what maps "
        "fitted on unpaired rows reach at level alpha; comparable across widths, n and estimators. "
        "NaN: no null (see note)",
    ),
)

MAP_COLUMNS: tuple[Column, ...] = (
    Column("pair", "str", "side A label | side B label (model:language), as the caller passes it"),
    Column("model_a", "str", "side A's model name"),
    Column("lang_a", "str", "side A's language"),
    Column("model_b", "str", "side B's model name"),
    Column("lang_b", "str", "side B's language"),
    Column("pooling", "str", "mean, sgpt or last"),
    Column("estimator", "str", "map id: identity, procrustes, procrustes_scaled, procrustes_span, affine, ridge, mlp"),
    Column("estimator_params", "str", "the map's hyper-parameters (JSON)"),
    Column("direction", "str", "a->b: map fitted from side A to side B and queries from A; b->a: the reverse fit"),
    Column("layer_a", "int", "hidden-state index of side A (0 = embeddings)"),
    Column("layer_b", "int", "hidden-state index of side B"),
    Column("depth_a", "float", "layer_a / number of blocks of A"),
    Column("depth_b", "float", "layer_b / number of blocks of B"),
    Column("grid", "bool", "row of the full layer x layer Procrustes retrieval grid"),
    Column("fold", "int", "-1: aggregate over every held-out row; else the fold index"),
    Column("protocol", "str", "kfold or split (one train/test split)"),
    Column("n_folds", "int", "number of folds (1 for a split)"),
    Column("fold_seed", "int", "seed of the fold assignment"),
    Column("folds_key", "str", "sha256 prefix of the fold assignment (Folds.key)"),
    Column("n", "int", "paired sentences of the pair"),
    Column("n_test", "int", "held-out sentences scored in this row"),
    Column("n_train", "int", "training sentences per fit (smallest over folds)"),
    Column("width_source", "int", "width of the side the map reads"),
    Column("width_target", "int", "width of the side the map writes"),
    Column("n_fit", "int", "rows each map was fitted on (the training fold's size; smallest over folds)"),
    Column("rank", "int", "numerical rank of the centred training rows, the smaller of the two sides (smallest fold)"),
    Column(
        "underdetermined",
        "bool",
        "some fold's centred training rows do not span a side's width (rank < width; "
        "always when n_fit - 1 < width): the data do not fix the map on every direction (see note for the remedy)",
    ),
    Column("standardized", "bool", "each side z-scored per column with its training rows' statistics"),
    Column("p1", "float", "held-out retrieval precision@1 by cosine among the fold's held-out targets"),
    Column("p5", "float", "precision@5 by cosine"),
    Column("mrr", "float", "mean reciprocal rank by cosine"),
    Column("p1_csls", "float", "precision@1 by CSLS (hubness-corrected cosine)"),
    Column("p5_csls", "float", "precision@5 by CSLS"),
    Column("mrr_csls", "float", "mean reciprocal rank by CSLS"),
    Column("csls_k", "int", "CSLS neighbourhood size used"),
    Column("mse", "float", "held-out mean squared error per coordinate, ||Y - f(X)||^2 / (n_test * width)"),
    Column(
        "rel_mse",
        "float",
        "held-out relative error ||Y - f(X)||^2 / ||Y - mean(Y)||^2 (means over each fold's "
        "held-out rows): 0 = perfect, 1 = no better than predicting the target mean, above 1 = worse (e.g. sides "
        "of different scale and a map that does not rescale)",
    ),
    Column("cka", "float", "linear CKA (biased) of the mapped held-out rows and their targets"),
    Column("cka_debiased", "float", "linear CKA (debiased HSIC) of the mapped held-out rows and their targets"),
    Column("chance_p1", "float", "precision@1 of a random ranking: mean of 1 / n_test of the row's fold"),
    Column("chance_p5", "float", "precision@5 of a random ranking"),
    Column("chance_mrr", "float", "mean reciprocal rank of a random ranking"),
    Column("identity_p1", "float", "precision@1 with no map (identity; equal widths only)"),
    Column("identity_mrr", "float", "mean reciprocal rank with no map"),
    Column("identity_rel_mse", "float", "relative MSE with no map"),
    Column("shuffled_p1", "float", "precision@1 of the same estimator fitted on the pair's shuffled training pairs"),
    Column("shuffled_p1_csls", "float", "CSLS precision@1 of the shuffled-fit control"),
    Column("shuffled_mrr", "float", "mean reciprocal rank of the shuffled-fit control"),
    Column("shuffled_rel_mse", "float", "relative MSE of the shuffled-fit control"),
    Column(
        "identity_control",
        "str",
        "positive control: the estimator fitted from this row's source side onto itself "
        "on the same folds: passed (held-out cosine >= 0.99, ||R - I||_F / sqrt(d) <= 0.1 and worst-direction "
        "error <= 0.1) or failed (a null "
        "from this map is then not a finding); empty: not run (note says why)",
    ),
    Column(
        "identity_control_dev", "float", "||R - I||_F / sqrt(d) of the self-map's matrix, worst fold (NaN: no matrix)"
    ),
    Column(
        "identity_control_p1", "float", "held-out precision@1 of the self-map (cosine among the fold's held-out rows)"
    ),
    Column(
        "identity_control_cos", "float", "mean cosine of self-mapped and true held-out rows (training-mean centred)"
    ),
    Column(
        "identity_control_dir",
        "float",
        "worst held-out principal direction: the self-map's error along it over the data's spread there "
        "(reflection of one direction ~2, 0.5 scale 0.5, identity 0; passes at <= 0.1), worst fold",
    ),
    Column(
        "twin_control",
        "str",
        "rotated-twin control: passed / failed (the row's estimator, layer and direction fitted from a Llama-family "
        "side's rows onto the same rows times Q must give Q), not applicable (no Llama-family model), or empty (off)",
    ),
    Column("twin_model", "str", "the side whose twin the control maps onto (B preferred)"),
    Column("twin_seed", "int", "seed of the twin's rotation Q"),
    Column("twin_control_dev", "float", "||R - Q||_F / sqrt(d) of the map fitted onto the twin (Q^T for b->a)"),
    Column("twin_control_expected_dev", "float", "what the estimator must give: 0, or ridge's implied shrinkage"),
    Column("twin_control_p1", "float", "held-out precision@1 of the twin map (every 5th row left out of a refit)"),
    Column("twin_control_note", "str", "why the twin control failed"),
    Column("control_seed", "int", "seed of the pair's shuffled permutation, as the caller passes it"),
    Column("bootstrap", "int", "bootstrap resamples of the held-out sentences (0: no intervals)"),
    Column("level", "float", "confidence level of the intervals"),
    Column("p1_low", "float", "percentile bootstrap interval of p1, lower bound"),
    Column("p1_high", "float", "percentile bootstrap interval of p1, upper bound"),
    Column("p1_csls_low", "float", "bootstrap interval of p1_csls, lower bound"),
    Column("p1_csls_high", "float", "bootstrap interval of p1_csls, upper bound"),
    Column("mrr_low", "float", "bootstrap interval of mrr, lower bound"),
    Column("mrr_high", "float", "bootstrap interval of mrr, upper bound"),
    Column("rel_mse_low", "float", "bootstrap interval of rel_mse, lower bound"),
    Column("rel_mse_high", "float", "bootstrap interval of rel_mse, upper bound"),
    Column("alpha", "float", "ridge penalty chosen by inner cross-validation (median over folds)"),
    Column(
        "target_erank", "float", "effective rank of the centred held-out target (entropy of normalised singular values)"
    ),
    Column("resid_erank", "float", "effective rank of the centred held-out residual Y - f(X)"),
    Column("resid_n50", "int", "singular values holding half of the residual's energy"),
    Column("resid_n90", "int", "singular values holding 90% of the residual's energy"),
    Column("resid_out10", "float", "share of residual energy outside the target's top-10 principal directions"),
    Column("resid_out50", "float", "share of residual energy outside the target's top-50 principal directions"),
    Column("resid_rel_norm", "float", "||centred residual||_F / ||centred target||_F"),
    Column("fit_info", "str", "per fold: what each fit decided (chosen alpha, rank, scale, epochs), JSON"),
    Column(
        "note", "str", "why a value is missing (NaN) or what changed, empty otherwise; several are separated by ' | '"
    ),
    *NULL_COLUMNS,
)

#: Columns of the maps section that are no file's column: the controls summary and the best layer pairs.
REPORT_COLUMNS: tuple[Column, ...] = (
    Column("layer pairs", "int", "layer pairs the map was evaluated at"),
    Column("widths", "str", "width of the side the map reads -> width of the side it writes"),
    Column("under-determined", "str", "layer pairs whose training rows do not span a side's width, of all"),
    Column(
        "identity control",
        "str",
        "the estimator fitted from the source side onto itself: passed or FAILED at k of the layer pairs, or not run",
    ),
    Column(
        "worst identity deviation",
        "float",
        "largest ||R - I||_F / sqrt(d) of the self-map's matrix over the layer "
        "pairs: how far it is from the identity (limit 0.1)",
    ),
    Column("worst self cosine", "float", "smallest held-out cosine of self-mapped and true rows (limit 0.99)"),
    Column("worst self P@1", "float", "smallest held-out precision@1 of the self-map"),
    Column("residual eff. rank", "float", "effective rank of the held-out residual Y - f(X) (resid_erank in maps.csv)"),
    Column(
        "residual outside top-50",
        "float",
        "share of residual energy outside the target's top-50 principal directions (resid_out50 in maps.csv)",
    ),
)
