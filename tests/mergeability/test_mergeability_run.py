"""Mergeability in a run: a `merge:` model built into the store and compared like any model; the
`mergeability:` section's coverage, diagnostics, barriers and checkpoint arm; refusals before extraction."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

from interlingua.core.errors import ConfigError
from interlingua.pipeline.config import parse_spec
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

ARM = ["tiny/eng@step4", "tiny/eng@step8", "tiny/eng@step16", "tiny/eng"]


def _spec(tiny_zoo, tmp_path, models, **over):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tiny_zoo.root),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 12},
        "models": models,
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": False, "cross_model": "same_language"},
    }
    spec.update(over)
    return spec


def test_merge_model_and_mergeability_section(tiny_zoo, tmp_path):
    from interlingua.zoo import resolve_zoo

    copy = tmp_path / "eng-copy"
    shutil.copytree(resolve_zoo("tiny:eng", tiny_zoo.root), copy)
    models = [
        {"zoo": "zoo:tiny:eng@step4"},
        {"zoo": "zoo:tiny:eng@step8"},
        {"zoo": "zoo:tiny:eng@step16"},
        {"zoo": "zoo:tiny:eng"},
        {"name": "copy", "path": str(copy)},
        {
            "name": "lerp",
            "merge": {"method": "linear", "models": ["zoo:tiny:eng@step16", "zoo:tiny:eng"], "weights": [0.5, 0.5]},
        },
    ]
    mergeability = {
        "pairs": [
            {"a": "tiny/eng", "b": "copy"},
            {"a": "lerp", "b": "tiny/eng"},
            {"a": "tiny/eng@step16", "b": "tiny/eng", "base": "tiny/eng@step4"},
        ],
        "barriers": {"grid": [0.5], "languages": ["eng_Latn"], "n": 6},
        "checkpoints": {"models": ARM, "steps": [4, 8, 16, 40]},
        "permutations": 2000,
    }
    res = run(_spec(tiny_zoo, tmp_path, models, mergeability=mergeability))
    built = sorted((tiny_zoo.root / "models" / "merges").iterdir())
    assert len(built) == 1 and (built[0] / "merge.json").is_file()
    # the merged model is extracted and compared like any model
    assert "lerp" in set(res.table["model_a"]) | set(res.table["model_b"])
    table = pd.read_csv(res.output / "mergeability.csv", keep_default_na=False, na_values=[""])
    rows = table.set_index("pair")
    assert len(table) == 3 + 6  # the explicit pairs and every pair of the 4 checkpoints
    same = rows.loc["tiny/eng|copy"]
    assert same["route"] == "native" and same["cosine"] == pytest.approx(1.0, abs=1e-12)
    assert same["rel_l2"] == pytest.approx(0.0, abs=1e-12)
    assert same["barrier"] == pytest.approx(0.0, abs=1e-6)
    tv = rows.loc["tiny/eng@step16|tiny/eng"]
    tv = tv[tv["base"] == "tiny/eng@step4"].iloc[0] if isinstance(tv, pd.DataFrame) else tv
    assert np.isfinite(tv["tv_cosine"]) and 0 <= tv["ties_sign_agreement"] <= 1
    arm = table[table["checkpoint_arm"]]
    assert len(arm) == 6 and arm["log10_step_ratio"].gt(0).all()
    assert np.isclose(rows.loc["tiny/eng@step4|tiny/eng@step8", "log10_step_ratio"], np.log10(2))
    assert arm["cka_last"].notna().all() and arm["barrier"].notna().all()
    corr = pd.read_csv(res.output / "checkpoint_correlations.csv", keep_default_na=False, na_values=[""])
    assert {"rho", "p", "q", "redundant"} <= set(corr.columns) and len(corr) >= 3
    assert (corr["q"].dropna() >= corr["p"].dropna() - 1e-12).all()
    assert (res.output / "coverage.csv").is_file() and (res.output / "barrier_curves.csv").is_file()
    report = (res.output / "report.md").read_text()
    for heading in ("## Mergeability", "### Loss barriers", "### Checkpoint arm"):
        assert heading in report
    assert (res.output / "figures" / "checkpoint_correlations.png").is_file()
    # a rerun builds nothing and computes no weights task again
    stamp = (built[0] / "model.safetensors").stat().st_mtime_ns
    again = run(_spec(tiny_zoo, tmp_path, models, mergeability=mergeability, overwrite=True))
    assert (built[0] / "model.safetensors").stat().st_mtime_ns == stamp
    assert "weights" not in again.info["computed"] and "barrier" not in again.info["computed"]


def test_merge_of_models_sharing_nothing_is_refused_before_extraction(tiny_zoo, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    other = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=50, n_positions=32)).save_pretrained(other)
    models = [
        {"zoo": "zoo:tiny:eng"},
        {"name": "bad", "merge": {"method": "linear", "models": ["zoo:tiny:eng", str(other)]}},
    ]
    with pytest.raises(ConfigError, match="merge cannot be built"):
        run(_spec(tiny_zoo, tmp_path, models))
    assert not (tmp_path / "out").exists()
    # `interlingua validate` (nothing built) refuses it the same way, and accepts a good merge
    from interlingua.pipeline.preflight import preflight

    with pytest.raises(ConfigError, match="merge cannot be built"):
        preflight(parse_spec(_spec(tiny_zoo, tmp_path, models)), fingerprints=False)
    good = [
        {"zoo": "zoo:tiny:eng"},
        {"name": "ok", "merge": {"method": "slerp", "t": 0.3, "models": ["zoo:tiny:eng@step4", "zoo:tiny:eng"]}},
    ]
    checked = preflight(parse_spec(_spec(tiny_zoo, tmp_path, good)), fingerprints=False)
    assert checked.models["ok"]["kind"] == "merge"
    assert not (tiny_zoo.root / "models" / "merges").exists() or not any(
        "slerp" in (f / "merge.json").read_text() for f in (tiny_zoo.root / "models" / "merges").iterdir()
    )


def test_merge_spec_validation():
    base = {"output": "x", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]}}
    with pytest.raises(ConfigError, match="`merge` builds the model"):
        parse_spec({**base, "models": [{"path": "/x", "merge": {"method": "linear", "models": ["/a"]}}]})
    with pytest.raises(ConfigError, match="not among models"):
        parse_spec(
            {**base, "models": [{"path": "/x"}, {"path": "/y"}], "mergeability": {"pairs": [{"a": "x", "b": "nope"}]}}
        )
    with pytest.raises(ConfigError, match="increasing"):
        parse_spec(
            {
                **base,
                "models": [{"path": "/a"}, {"path": "/b"}, {"path": "/c"}],
                "mergeability": {"checkpoints": {"models": ["a", "b", "c"], "steps": [4, 2, 8]}},
            }
        )
    spec = parse_spec(
        {
            **base,
            "models": [
                {"merge": {"method": "ties", "models": ["/a", "/b"], "base": "/c", "lambda": 0.7, "density": 0.5}}
            ],
        }
    )
    assert spec.models[0].merge.lambda_ == 0.7 and spec.models[0].name == "merge-ties"


def test_packaged_gemma_vs_smollm2_coverage_says_why_from_the_gguf_headers(tmp_path):
    """No converted copy in a fresh store: the GGUF headers alone give route none and the numbers."""
    pytest.importorskip("gguf")
    from interlingua.core.errors import InterlinguaError
    from interlingua.core.store import Store
    from interlingua.data.models.spec import ModelSpec
    from interlingua.mergeability.pairs import run_weights_pair

    specs = {"gemma": ModelSpec(package="gemma3-270m"), "smol": ModelSpec(package="smollm2-135m")}
    try:
        out = run_weights_pair(
            "gemma", "smol", None, specs, Store(str(tmp_path / "store")), diagnostics=True, density=0.2
        )
    except InterlinguaError as err:  # the packaged models are not installed here
        pytest.skip(str(err))
    row = out["row"]
    assert row["source_a"] == row["source_b"] == "gguf-header"
    assert row["route"] == "none"
    for fact in ("hidden width A 640, B 576", "blocks A 18, B 30", "vocabulary rows A 262144, B 49152"):
        assert fact in row["reason"]
    reasons = {r["key"]: r["reason"] for r in out["coverage"]}
    assert reasons["facts.hidden"] == "width_differs" and reasons["facts.layers"] == "depth_differs"
