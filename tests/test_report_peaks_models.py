"""Two report tables read what they show: peak layers with their calibrated score, one weights hash per model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from interlingua.comparison.report import _peak_columns
from interlingua.pipeline.report import models_table


def _peaks(calibrated: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"pair": ["a|b", "a|c"], "matched": [0.6, 0.5], "shuffled": [0.1, 0.1], "calibrated": calibrated}
    )


def test_a_peak_table_shows_the_calibrated_score_beside_matched_where_the_run_has_a_null() -> None:
    cols, note = _peak_columns(_peaks([0.4, np.nan]))
    assert cols == ["calibrated", "matched", "shuffled"]
    assert "largest raw `matched`" in note and "not against the search over layers" in note
    cols, note = _peak_columns(_peaks([np.nan, np.nan]))  # no permutation null at these layers
    assert cols == ["matched", "shuffled"] and "no permutation null" in note
    cols, _ = _peak_columns(_peaks([0.4, 0.2]).drop(columns="calibrated"))  # a table from before calibration
    assert cols == ["matched", "shuffled"]


def test_the_models_table_shows_an_applied_adapter_s_own_hash_and_a_merged_model_s_weights() -> None:
    base, adapter, merged = "b" * 64, "a" * 64, "m" * 64
    info = {
        "models": {
            "base": {"weights_sha256": base},
            "lora": {"weights_sha256": base, "adapter_sha256": adapter, "adapter_base": "/b", "loaded_from": "/b"},
            "merged": {"weights_sha256": merged, "adapter_sha256": adapter, "adapter_base": "/b", "loaded_from": "/m"},
            "hub": {"revision": "0123456789abcdef"},
        }
    }
    weights = dict(zip(models_table(info)["name"], models_table(info)["weights"]))
    assert (
        weights
        == {
            "base": base[:12],
            "lora": "adapter:" + adapter[:12],  # not the base's hash, which every adapter of the base would repeat
            "merged": merged[:12],
            "hub": "0123456789ab",
        }
    )
