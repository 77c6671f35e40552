"""Compare's columns: ``results.csv``'s (declared in :mod:`interlingua.core.schema`, which the pipeline and several
capabilities read) and those its report sections derive, each with its glossary text."""

from __future__ import annotations

from interlingua.core.schema import RESULT_COLUMNS, Column

__all__ = ["REPORT_COLUMNS", "RESULT_COLUMNS"]

#: Columns of compare's report sections that are no file's column: layer peaks, the poolings compared and
#: the dominant dimensions.
REPORT_COLUMNS: tuple[Column, ...] = (
    # layer curves and peaks
    Column("peak layer", "int", "the layer (side A's hidden-state index) with the largest matched value"),
    Column("peak depth", "float", "the peak layer over side A's number of blocks (0 = embeddings, 1 = last layer)"),
    Column("last", "float", "matched value at the pair's last layer"),
    Column("peak", "float", "largest matched value over the pair's layers"),
    Column(
        "peak calibrated",
        "float",
        "the calibrated score at the peak layer (against that layer's own permutation null, not the search over "
        "layers)",
    ),
    # diagnostics
    Column("model", "str", "model name"),
    Column("language", "str", "the corpus side (language)"),
    Column("layer", "int", "hidden-state index (0 = embeddings)"),
    Column(
        "top-1 share",
        "float",
        "share of the layer's variance in its largest-variance coordinate (largest over the model's languages)",
    ),
    Column("top-3 share", "float", "share of the layer's variance in its three largest-variance coordinates"),
    Column("special-token share", "float", "share of centred variance carried by pooled special tokens"),
)
