"""Zoo models are model specs like any other: `zoo: eng@step4` in a run config, no special case."""

from __future__ import annotations

import pytest

from interlingua.core.errors import ConfigError, ModelError
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


def _spec(tiny_zoo, tmp_path, models, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tiny_zoo.root),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 24},
        "models": models,
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": False, "cross_model": "same_language"},
    }
    spec.update(over)
    return spec


def test_zoo_checkpoints_and_adapters_run_like_any_model(tiny_zoo, tmp_path):
    checkpoints = sorted(k for k in tiny_zoo.manifest["models"]["eng_Latn"]["checkpoints"] if k != "final")
    early = checkpoints[0]
    models = [
        {"zoo": "tiny:eng"},
        {"zoo": f"tiny:eng@{early}", "name": "eng-early"},
        {"zoo": "tiny:eng+deu-lora-identity", "name": "eng-identity-lora"},
    ]
    res = run(_spec(tiny_zoo, tmp_path, models))
    t = res.table
    assert set(t["model_a"]) | set(t["model_b"]) == {"tiny/eng", "eng-early", "eng-identity-lora"}
    # an identity adapter leaves every representation unchanged: CKA with its base is 1 at every layer
    same = t[
        ((t["model_a"] == "tiny/eng") & (t["model_b"] == "eng-identity-lora"))
        | ((t["model_a"] == "eng-identity-lora") & (t["model_b"] == "tiny/eng"))
    ]
    assert len(same) > 0 and (same["matched"] > 1 - 1e-6).all()
    early_rows = t[(t["model_a"] == "tiny/eng") & (t["model_b"] == "eng-early")]
    assert (early_rows["matched"] < 1 - 1e-3).any()  # a checkpoint is another model
    facts = res.info["models"]["eng-identity-lora"]
    assert facts["adapter"] and facts["adapter_base_check"] == "matched"


def test_zoo_spec_refuses_a_second_source():
    with pytest.raises(ConfigError, match="zoo"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"zoo": "eng", "path": "/somewhere"}],
            }
        )


def test_unknown_zoo_name_is_a_model_error(tiny_zoo, tmp_path):
    with pytest.raises(ModelError, match="zoo"):
        run(_spec(tiny_zoo, tmp_path, [{"zoo": "tiny:xyz@step4"}, {"zoo": "tiny:eng"}]))


def test_an_adapter_on_a_sibling_checkpoint_of_the_same_folder_name_is_refused(tiny_zoo, tmp_path):
    """eng_Latn/final and deu_Latn/final share their folder name; only the recorded base may carry the adapter."""
    from interlingua.zoo import zoo_model_fields

    adapter = zoo_model_fields("tiny:eng+deu-lora", tiny_zoo.root)["adapter"]
    german = zoo_model_fields("tiny:deu", tiny_zoo.root)["path"]
    models = [{"name": "deu-with-eng-adapter", "path": german, "adapter": adapter}, {"zoo": "tiny:eng"}]
    with pytest.raises(ModelError, match="adapter"):
        run(_spec(tiny_zoo, tmp_path, models))
