"""A measure that is NaN at every layer of a pair (with its reason) leaves the report's summaries intact."""

from __future__ import annotations

import numpy as np
import pandas as pd

from interlingua.comparison.poolings import poolings_section
from interlingua.predictors.sweeps import _argmax


def _rows(matched_for) -> pd.DataFrame:
    rows = []
    for pooling in ("mean", "last"):
        for layer in range(3):
            rows.append(
                {
                    "pair": "m:eng|m:deu",
                    "kind": "within_model",
                    "model_a": "m",
                    "pooling": pooling,
                    "measure": "mknn_k10",
                    "layer_a": layer,
                    "layer_b": layer,
                    "depth_a": layer / 2,
                    "matched": matched_for(pooling, layer),
                    "shuffled": 0.1,
                    "n": 32,
                }
            )
    return pd.DataFrame(rows)


def test_poolings_section_with_a_pooling_nan_at_every_layer(tmp_path):
    diag = _rows(lambda pooling, layer: np.nan if pooling == "last" else 0.2 + 0.1 * layer)
    md = "\n".join(poolings_section(diag, None, tmp_path))
    assert "## Poolings compared" in md and "0.4" in md  # mean's peak is reported, last's is empty


def test_sweep_argmax_of_an_all_nan_group_is_nan():
    group = pd.DataFrame({"matched": [np.nan, np.nan, 0.3], "alpha": [0.1, 0.2, 0.3], "k": ["a", "a", "b"]})
    out = _argmax(group, "alpha", group["k"])
    assert np.isnan(out["a"]) and out["b"] == 0.3
