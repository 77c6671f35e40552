"""The plan's price of a patch task counts its passes.

relations x (start layers x patched conditions + clean) x trials.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from interlingua.patching.config import PatchingSpec
from interlingua.patching.cost import patch_seconds
from interlingua.pipeline.cost import LOAD_FIXED_SECONDS, ModelShape


def _task(pt: PatchingSpec, control: str = "", layers: tuple[int, ...] = ()) -> SimpleNamespace:
    return SimpleNamespace(
        target="t", donor="d", experiment=pt.resolved()[0], control=control, layers=layers, options=pt
    )


def test_patch_cost_counts_passes():
    shape = ModelShape(layers=4, hidden=16, params=1000, vocab=50, weight_bytes=0, source="facts")
    shapes = {"t": shape, "d": shape}
    per_pass = 6 * shape.flops_per_token(8) + 3 * 2.0 * shape.hidden * shape.vocab
    countries = ["FR", "DE", "IT", "ES", "JP", "PE"]

    def seconds(**over) -> float:
        pt = PatchingSpec(**{"target": "t", "donor": "d", "layers": [1, 2], "countries": countries, **over})
        return patch_seconds(_task(pt), shapes, 1.0, LOAD_FIXED_SECONDS) - 2 * LOAD_FIXED_SECONDS

    six = ["none", "within", "mapped", "unprojected", "shuffled", "noise"]
    # one relation, 2 starts, 5 patched conditions, 6 trials (derangement: one per B): (2 x 5 + 1) x 6 passes
    assert seconds(conditions=six) == pytest.approx(11 * 6 * per_pass)
    assert seconds(conditions=six, relations=["capital", "currency"], pairs=4) == pytest.approx(2 * 11 * 4 * per_pass)
    assert seconds(conditions=six, pairs="all") == pytest.approx(11 * 30 * per_pass)
    # an identity control patches within and mapped at its own start layers
    pt = PatchingSpec(target="t", donor="d", layers=[1, 2], countries=countries)
    control = patch_seconds(_task(pt, "identity", (0, 1, 2)), shapes, 1.0, LOAD_FIXED_SECONDS)
    assert control - 2 * LOAD_FIXED_SECONDS == pytest.approx((3 * 2 + 1) * 6 * per_pass)
