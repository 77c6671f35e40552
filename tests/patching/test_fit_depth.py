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


@pytest.mark.parametrize("name", ["gpt2_patch", "llama_patch", "gemma3_patch"])
def test_capture_at_early_layers_equals_the_full_capture_and_stops_there(name, request) -> None:  # noqa: ANN001
    """The probe fit's capture reads its sites and stops: the same bits as capturing every site, and the blocks
    after the deepest site never complete (its hooks are gone afterwards)."""
    from interlingua.patching.hooks import capture_residuals
    from interlingua.patching.probes import encode_prompt, load_probes

    model = request.getfixturevalue(name)
    probes = load_probes().probes("capital", "eng", None)[:5]
    ids = [encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end).input_ids for p in probes]
    full, _ = capture_residuals(model, ids, list(range(model.n_states)), batch_size=2)
    ran: set[int] = set()
    handles = [b.register_forward_hook(lambda *_a, j=j: ran.add(j)) for j, b in enumerate(model.arch.blocks)]
    hooks_before = _hooks(model)
    try:
        part, _ = capture_residuals(model, ids, [0, 1], batch_size=2)
        hooks_after = _hooks(model)
    finally:
        for h in handles:
            h.remove()
    for i in range(len(ids)):
        for k in (0, 1):
            np.testing.assert_array_equal(part[i][k].numpy(), full[i][k].numpy())
    assert ran == {0} and len(model.arch.blocks) >= 2  # site 1 is block 0's output: nothing deeper ran
    assert hooks_after == hooks_before


def _hooks(model) -> set[tuple[str, str, int]]:  # noqa: ANN001
    return {
        (name, kind, key)
        for name, m in model.lm.named_modules()
        for kind, hooks in (("post", m._forward_hooks), ("pre", m._forward_pre_hooks))
        for key in hooks
    }
