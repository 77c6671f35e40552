"""The cost model prices an aligner's forward up to its layer: the blocks after it never run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from interlingua.alignment.config import AlignmentSpec
from interlingua.alignment.cost import align_cost
from interlingua.pipeline.cost import BLOCK_OVERHEAD, SENTENCE_OVERHEAD, CostContext, ModelShape

SHAPE = ModelShape(layers=12, hidden=64, params=1_000_000, vocab=1000, weight_bytes=4_000_000, source="config.json")


def _ctx(layer: int | None) -> SimpleNamespace:
    spec = SimpleNamespace(batch_size=8, section=lambda name, cls: AlignmentSpec(layer=layer))
    ctx = SimpleNamespace(spec=spec, shapes={"enc": SHAPE}, fwd_rate=1e9, mean_tokens=lambda model, lang: 9.0)
    ctx.forward_seconds = lambda *a, **k: CostContext.forward_seconds(ctx, *a, **k)  # type: ignore[arg-type]
    return ctx


def test_a_forward_through_k_blocks_costs_k_over_l_of_the_blocks() -> None:
    ctx = _ctx(None)
    full = ctx.forward_seconds("enc", "eng_Latn", 40)
    assert ctx.forward_seconds("enc", "eng_Latn", 40, blocks=12) == full
    fixed = 40 * SENTENCE_OVERHEAD
    part = ctx.forward_seconds("enc", "eng_Latn", 40, blocks=3)
    assert part - fixed == pytest.approx((full - fixed) * 3 / 12, rel=1e-12)
    assert ctx.forward_seconds("enc", "eng_Latn", 40, blocks=0) == pytest.approx(fixed, rel=1e-12)
    assert BLOCK_OVERHEAD > 0


@pytest.mark.parametrize(("layer", "blocks"), [(None, 6), (2, 2), (12, 12), (40, 12)])
def test_the_aligner_is_priced_up_to_its_layer(layer: int | None, blocks: int) -> None:
    ctx = _ctx(layer)
    task = SimpleNamespace(model="enc", languages=("eng_Latn", "deu_Latn"), n=30)
    seconds = align_cost(task, ctx).seconds  # type: ignore[arg-type]
    expected = 1.5 * sum(ctx.forward_seconds("enc", lang, 30, blocks=blocks) for lang in task.languages)
    assert seconds == (pytest.approx(expected, rel=1e-12),)
    if blocks < 12:
        full = 1.5 * sum(ctx.forward_seconds("enc", lang, 30) for lang in task.languages)
        assert seconds[0] < full
