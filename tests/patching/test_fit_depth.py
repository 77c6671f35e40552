"""``fit_patch_maps`` stops each forward pass at the deepest layer a map reads: the same maps, fewer blocks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from interlingua.data.representations import extract
from interlingua.patching import fit_patch_maps, maps_from_representations
from interlingua.patching.patch import _extraction_view


@pytest.fixture(scope="module")
def parallel():  # noqa: ANN201
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fixtures import tiny_models

    return tiny_models.parallel_sentences(48)


def test_maps_at_a_middle_layer_are_the_full_extractions_and_skip_the_deeper_blocks(
    llama_patch, gpt2_patch, parallel
) -> None:  # noqa: ANN001
    eng, deu = parallel["eng"], parallel["deu"]
    full_d = extract(_extraction_view(llama_patch), list(eng), "mean", batch_size=16, progress=False)
    full_t = extract(_extraction_view(gpt2_patch), list(deu), "mean", batch_size=16, progress=False)
    ran: dict[str, set[int]] = {"donor": set(), "target": set()}  # blocks that completed a forward
    handles = [
        b.register_forward_hook(lambda *_a, j=j, side=side: ran[side].add(j))
        for side, model in (("donor", llama_patch), ("target", gpt2_patch))
        for j, b in enumerate(model.arch.blocks)
    ]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rank-deficient Procrustes on 48 invented sentences
            got = fit_patch_maps(llama_patch, gpt2_patch, eng, deu, layers=[1])
            want = maps_from_representations(full_d.pooled["mean"], full_t.pooled["mean"], layers=[1])
    finally:
        for h in handles:
            h.remove()
    assert got.maps.keys() == want.maps.keys() == {1}
    assert got.donor_layer(1) == want.donor_layer(1)
    np.testing.assert_array_equal(got.maps[1][1].coef_, want.maps[1][1].coef_)
    assert dict(got.facts) == dict(want.facts)
    # state k is block k-1's output: GPT-2's layer 1 needs block 0 only, Llama's donor layer 2 blocks 0 and 1
    assert ran["target"] == {0} and len(gpt2_patch.arch.blocks) == 2
    assert got.donor_layer(1) == 2 and ran["donor"] == {0, 1} and len(llama_patch.arch.blocks) == 3
