"""Fixtures of the weights tests.

``tiny_zoo``: the zoo tests' session fixture (the tiny family, built once), reused the way
tests/audit does. ``trained_zoo``: the tiny preset trained for 300 steps instead of 40
(about 10 s more): the 40-step English model is weaker than a unigram model of its own
tokens (held-out NLL 4.90 nats against ln 400 = 5.99), so ids that merely share a frequency
order already score far from chance; the NLL facts about the rebuilt merge need a model
whose predictions depend on the rows its ids select.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

_spec = importlib.util.spec_from_file_location(
    "_interlingua_zoo_conftest", Path(__file__).resolve().parents[1] / "zoo" / "conftest.py"
)
_zoo_conftest = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _zoo_conftest
_spec.loader.exec_module(_zoo_conftest)

tiny_zoo = _zoo_conftest.tiny_zoo

TRAINED_STEPS = 300


@dataclass
class TrainedZoo:
    folder: Path
    manifest: dict[str, Any]
    config: Any


@pytest.fixture(scope="session")
def trained_zoo(tmp_path_factory: pytest.TempPathFactory) -> TrainedZoo:
    """The tiny preset trained for 300 steps (checkpoint step 0 only), in its own store (read-only)."""
    from interlingua.zoo import build_zoo, preset

    config = preset("tiny", name="tiny-trained", steps=TRAINED_STEPS, checkpoints=(0,))
    manifest = build_zoo(config, root=tmp_path_factory.mktemp("weights_zoo_store"))
    return TrainedZoo(Path(manifest["folder"]), manifest, config)
