"""A capability's extra models (``Capability.extra_models``): pre-flight checks, resolves and fingerprints them.

The word aligner's encoder given as a model spec is the one the project has; the pipeline knows it only
through the alignment capability's declaration.
"""

from __future__ import annotations

import pytest

from interlingua.alignment.capability import ALIGNMENT, ALIGNMENT_ENCODER
from interlingua.contract.capability import ExtraModel
from interlingua.core.errors import ConfigError
from interlingua.data.models import ModelSpec
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.preflight import check_stages, cuda_device_count, load_run_corpus, preflight


def _spec(tmp_path, encoder, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 12},
        "models": [{"name": "g", "path": over.pop("gpt2")}],
        "pooling": ["mean", "word_aligned"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "alignment": {"encoder": encoder, "layer": 1, "n": 6},
    }
    spec.update(over)
    return parse_spec(spec)


def test_an_encoder_named_by_a_run_model_is_no_extra_model(tmp_path, tiny_gpt2_path) -> None:
    assert ALIGNMENT.extra_models is not None
    assert ALIGNMENT.extra_models(_spec(tmp_path, "g", gpt2=str(tiny_gpt2_path))) == []


def test_an_encoder_given_as_a_model_spec_is_checked_and_fingerprinted(tmp_path, tiny_gpt2_path) -> None:
    spec = _spec(tmp_path, {"path": str(tiny_gpt2_path)}, gpt2=str(tiny_gpt2_path))
    assert ALIGNMENT.extra_models is not None
    (extra,) = ALIGNMENT.extra_models(spec)
    assert isinstance(extra, ExtraModel) and (extra.name, extra.section, extra.field) == (
        ALIGNMENT_ENCODER,
        "alignment",
        "encoder",
    )
    checked = preflight(spec)
    # fingerprinted under the declared name, like the run model (same files, so the same fingerprint)
    assert checked.fingerprints[ALIGNMENT_ENCODER] == checked.fingerprints["g"]
    assert isinstance(checked.spec.alignment.encoder, ModelSpec)  # the resolved spec is written back


def test_an_extra_model_s_device_is_checked_where_the_config_gives_it(tmp_path, tiny_gpt2_path) -> None:
    if cuda_device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    spec = _spec(tmp_path, {"path": str(tiny_gpt2_path), "device": "cuda:7"}, gpt2=str(tiny_gpt2_path))
    with pytest.raises(ConfigError, match=r"^alignment\.encoder\.device: model .* asks for cuda:7"):
        check_stages(spec, load_run_corpus(spec))
