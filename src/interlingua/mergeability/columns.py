"""The columns of the mergeability tables (``coverage.csv``, ``mergeability.csv``, ``barriers.csv``,
``barrier_curves.csv``, ``checkpoint_correlations.csv``), each with its glossary text.
"""

from __future__ import annotations

from interlingua.core.schema import Column

__all__ = [
    "BARRIER_COLUMNS",
    "BARRIER_CURVE_COLUMNS",
    "CHECKPOINT_CORRELATION_COLUMNS",
    "COVERAGE_COLUMNS",
    "MERGEABILITY_COLUMNS",
]

_PAIR = (
    Column("pair", "str", "model A | model B"),
    Column("model_a", "str", "model A's name"),
    Column("model_b", "str", "model B's name"),
)

COVERAGE_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("source", "str", "tensors (safetensors headers) or header (GGUF metadata facts only)"),
    Column("key", "str", "canonical tensor key (facts.<name> for a header-only row)"),
    Column("part", "str", "embedding, attention, mlp, norm, head, ... (facts for header rows)"),
    Column("layer", "int", "block index (-1 outside the blocks)"),
    Column("status", "str", "shared or excluded"),
    Column("reason", "str", "why excluded (interlingua.mergeability.comparability.REASONS)"),
    Column("detail", "str", "the reason with the numbers"),
    Column("name_a", "str", "A's tensor name"),
    Column("shape_a", "str", "A's stored shape"),
    Column("dtype_a", "str", "A's stored dtype"),
    Column("numel_a", "int", "elements of A's tensor (-1: none)"),
    Column("name_b", "str", "B's tensor name"),
    Column("shape_b", "str", "B's stored shape"),
    Column("dtype_b", "str", "B's stored dtype"),
    Column("numel_b", "int", "elements of B's tensor (-1: none)"),
)

MERGEABILITY_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("base", "str", "the shared ancestor of the pair (task vectors), empty when none"),
    Column(
        "source_a",
        "str",
        "where A's weights were read: folder, folder+adapter, converted (GGUF's float32 copy), gguf-header",
    ),
    Column("source_b", "str", "where B's weights were read"),
    Column("route", "str", "native, transport or none (interlingua.mergeability.comparability)"),
    Column("reason", "str", "why this route (widths, depths, vocabularies, families)"),
    Column("shared_tensors", "int", "coverage rows shared"),
    Column("excluded_tensors", "int", "coverage rows excluded (-1: header-only)"),
    Column("shared_share", "float", "share of both models' elements in shared tensors"),
    Column("diag_numel", "int", "elements compared by the diagnostics"),
    Column("cosine", "float", "global cosine of the shared weights (float64, streamed)"),
    Column("rel_l2", "float", "||A - B|| / ||B|| over the shared weights"),
    Column("rel_l2_sym", "float", "2 ||A - B|| / (||A|| + ||B||)"),
    Column("norm_ratio", "float", "||A|| / ||B||"),
    Column("tv_cosine", "float", "task-vector cosine over the base (NaN without one)"),
    Column("ties_sign_agreement", "float", "TIES sign agreement of the trimmed task vectors (NaN without a base)"),
    Column("barrier", "float", "loss barrier, mean over the scored languages (barriers.csv per language)"),
    Column("best_gain", "float", "largest NLL gain of an interpolation over the better endpoint"),
    Column(
        "cka_last",
        "float",
        "last-layer matched value of the run's same-language cross-model pairs of A and B "
        "(first pooling and measure; NaN when the run compares none)",
    ),
    Column("checkpoint_arm", "bool", "both models are checkpoints of the arm"),
    Column("step_a", "int", "A's training step (checkpoint arm; -1 otherwise)"),
    Column("step_b", "int", "B's training step"),
    Column("log10_step_ratio", "float", "trajectory distance log10(step_b / step_a) (NaN when step_a is 0)"),
    Column("note", "str", "what could not be computed and why"),
)

BARRIER_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("language", "str", "corpus side scored"),
    Column("tokenizer", "str", "the tokenizer used (A's)"),
    Column("n_sentences", "int", "sentences scored"),
    Column("n_tokens", "int", "scored tokens"),
    Column("nll_a", "float", "NLL at t = 0 (A)"),
    Column("nll_b", "float", "NLL at t = 1 (B)"),
    Column("barrier", "float", "max over the grid of NLL minus the straight line (>= 0)"),
    Column("t_barrier", "float", "first t reaching the barrier"),
    Column("best_t", "float", "first t of least NLL"),
    Column("best_nll", "float", "least NLL over the grid"),
    Column("best_gain", "float", "min(nll_a, nll_b) - best_nll (>= 0)"),
    Column("points", "int", "grid points"),
    Column("note", "str", "why the pair could not be interpolated (empty when scored)"),
)

BARRIER_CURVE_COLUMNS: tuple[Column, ...] = _PAIR + (
    Column("language", "str", "corpus side scored"),
    Column("t", "float", "interpolation weight of B"),
    Column("nll", "float", "mean NLL of (1 - t) A + t B"),
    Column("n_tokens", "int", "scored tokens"),
    Column("line", "float", "(1 - t) nll_a + t nll_b"),
    Column("excess", "float", "nll - line"),
)

CHECKPOINT_CORRELATION_COLUMNS: tuple[Column, ...] = (
    Column("column", "str", "diagnostic (mergeability.csv column) of the row"),
    Column("predictor", "str", "diagnostic of the column (each unordered pair of diagnostics once)"),
    Column("method", "str", "spearman"),
    Column("n", "int", "checkpoint pairs with both values"),
    Column("n_dropped", "int", "pairs without a value"),
    Column("rho", "float", "Spearman rho"),
    Column("p", "float", "two-sided permutation p (exact enumeration when n! is small)"),
    Column("q", "float", "Benjamini-Hochberg q across the table"),
    Column("p_method", "str", "exact, monte carlo, or none"),
    Column("permutations", "int", "label shuffles scored"),
    Column("min_attainable_p", "float", "smallest p this n can give"),
    Column("reachable", "bool", "min_attainable_p <= 0.05"),
    Column("redundant", "bool", "|rho| above mergeability.redundant (one of the two says what the other does)"),
    Column("note", "str", "undefined rho, unreachable level"),
)
