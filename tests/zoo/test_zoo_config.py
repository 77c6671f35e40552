"""Zoo configuration, held-out selection, seeds and batching: no training here."""

from __future__ import annotations

import numpy as np
import pytest

from interlingua.zoo import PRESETS, ZooError, preset
from interlingua.zoo.data import heldout_ids
from interlingua.zoo.train import derive_seed, length_batches


def test_presets_are_valid_and_differ_in_size() -> None:
    tiny, default = PRESETS["tiny"], PRESETS["default"]
    assert default.languages == ("eng_Latn", "deu_Latn", "spa_Latn", "rus_Cyrl")
    assert default.vocab_size == 8000 and (default.n_layer, default.n_embd) == (4, 128)
    assert tiny.vocab_size < default.vocab_size and tiny.steps < default.steps
    assert default.pairs == (("eng_Latn", "deu_Latn"), ("eng_Latn", "spa_Latn"), ("eng_Latn", "rus_Cyrl"))
    assert all(0 <= s < cfg.steps for cfg in (tiny, default) for s in cfg.checkpoints)


def test_languages_are_normalised_and_any_bible_language_is_accepted() -> None:
    cfg = preset("tiny", languages=["eng", "fra_latn", "cmn_hans"])
    assert cfg.languages == ("eng_Latn", "fra_Latn", "cmn_Hans")
    assert cfg.pairs == (("eng_Latn", "fra_Latn"), ("eng_Latn", "cmn_Hans"))
    assert preset("tiny", languages=["deu", "fra"]).pairs == ()  # no English: no bilingual pieces


def test_key_ignores_name_and_threads_only() -> None:
    base = PRESETS["tiny"]
    assert base.replace(name="other", threads=2).key_dict() == base.key_dict()
    assert base.replace(seed=1).key_dict() != base.key_dict()
    assert base.replace(steps=41).key_dict() != base.key_dict()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"checkpoints": (0, 40)}, "not in 0..steps-1"),
        ({"n_embd": 30, "n_head": 4}, "multiple of n_head"),
        ({"languages": ["eng", "eng_Latn"]}, "twice"),
        ({"languages": ["xx_yyyy_zz"]}, "zoo languages"),
        ({"vocab_size": 0}, "positive integer"),
        ({"name": "a/b"}, "family name"),
        ({"bogus": 1}, "unknown zoo config field"),
    ],
)
def test_bad_configs_say_what_to_change(changes: dict, message: str) -> None:
    with pytest.raises(ZooError, match=message):
        PRESETS["tiny"].replace(**changes)


def test_unknown_preset() -> None:
    with pytest.raises(ZooError, match="tiny, default|default, tiny"):
        preset("huge")


def test_heldout_ids_are_seeded_and_independent_of_the_language_set() -> None:
    ids = [f"GEN.1.{v}" for v in range(1, 200)]
    first = heldout_ids(ids, 20, seed=0)
    assert first == heldout_ids(ids, 20, seed=0)
    assert len(first) == 20 and list(first) == [i for i in ids if i in set(first)]  # corpus order
    assert first != heldout_ids(ids, 20, seed=1)
    # Dropping a verse that is not held out (as another language set may) keeps the selection.
    kept = [i for i in ids if i != next(i for i in ids if i not in first)]
    assert heldout_ids(kept, 20, seed=0) == first
    with pytest.raises(ZooError, match="no training verse"):
        heldout_ids(ids[:5], 5, seed=0)


def test_seeds_differ_per_language_and_are_stable() -> None:
    seeds = {lang: derive_seed(0, "model", lang) for lang in ("eng_Latn", "deu_Latn", "spa_Latn", "rus_Cyrl")}
    assert len(set(seeds.values())) == 4
    assert derive_seed(0, "model", "eng_Latn") == seeds["eng_Latn"]
    assert all(0 <= s < 2**31 for s in seeds.values())


def test_length_batches_cover_every_verse_once_per_epoch_and_repeat_exactly() -> None:
    lengths = list(np.random.default_rng(0).integers(3, 60, size=103))
    gen = length_batches(lengths, batch_size=8, seed=5, group=4)
    epoch = []
    while sum(map(len, epoch)) < 103:
        epoch.append(next(gen))
    assert sorted(i for b in epoch for i in b) == list(range(103))
    again = length_batches(lengths, batch_size=8, seed=5, group=4)
    assert [next(again) for _ in range(len(epoch))] == epoch
    # within a batch the lengths are close: each batch comes from one length-sorted group
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in epoch])
    assert spread < np.ptp(lengths) / 2


def test_train_schedules_come_from_the_config_and_reject_bad_values() -> None:
    from interlingua.zoo.config import TrainSchedule

    cfg = preset("tiny")
    assert cfg.model_schedule() == TrainSchedule(
        steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr, warmup=cfg.warmup, weight_decay=cfg.weight_decay
    )
    lora = cfg.lora_schedule()
    assert (lora.steps, lora.batch_size, lora.lr, lora.warmup, lora.weight_decay, lora.clip) == (
        cfg.lora_steps,
        cfg.lora_batch_size,
        cfg.lora_lr,
        0,
        0.0,
        1.0,
    )
    for bad, message in [
        (dict(steps=0), "steps must be a positive integer"),
        (dict(batch_size=True), "batch_size must be a positive integer"),
        (dict(lr=0.0), "learning rate must be positive"),
        (dict(warmup=-1), ">= 0"),
    ]:
        with pytest.raises(ZooError, match=message):
            TrainSchedule(**{"steps": 4, "batch_size": 2, "lr": 1e-3, **bad})
