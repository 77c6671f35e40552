"""A run's `patching:` section: maps from the run's stored sides, the probe experiment, patching.csv and a section."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from interlingua.config import parse_spec
from interlingua.errors import ConfigError
from interlingua.pipeline import run


def _spec(tmp_path, gpt2, llama, **over):
    spec = {
        "output": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache"), "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["PRO"], "n": 40},
        "models": [{"name": "donor", "path": str(gpt2)}, {"name": "target", "path": str(llama)}],
        "pooling": ["mean"], "measures": ["cka_linear_biased"], "inference": {"permutations": 0},
        "pairs": {"within_model": False, "cross_model": "same_language"},
        "patching": {"donor": "donor", "target": "target", "layers": [0, 1], "countries": None},
    }
    spec.update(over)
    return spec


def test_patching_section_runs_from_stored_sides(tmp_path, tiny_gpt2_path, tiny_llama_path):
    res = run(_spec(tmp_path, tiny_gpt2_path, tiny_llama_path))
    table = pd.read_csv(res.output / "patching.csv", keep_default_na=False)
    assert set(table["condition"]) == {"none", "within", "mapped", "unprojected", "shuffled", "noise"}
    assert set(table["layer"]) == {0, 1}
    assert (table["target"] == "target").all() and (table["donor"] == "donor").all()
    applicable = table[table["applicable"].astype(str) == "True"]
    assert ((applicable["flip_low"] <= applicable["flip_rate"]) & (applicable["flip_rate"] <= applicable["flip_high"])).all()
    report = (res.output / "report.md").read_text()
    assert "## Cross-model patching" in report
    info = json.loads((res.output / "run.json").read_text())
    spec = info["spec"]
    spec["overwrite"] = True
    again = run(spec)
    assert "patch" not in again.info["computed"]  # stored: not rerun
    pd.testing.assert_frame_equal(pd.read_csv(again.output / "patching.csv", keep_default_na=False), table)


def test_patching_names_run_models_and_poolings():
    base = {"output": "x", "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"]},
            "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}]}
    with pytest.raises(ConfigError, match="patching.donor 'c' is not among models"):
        parse_spec({**base, "patching": {"donor": "c", "target": "a"}})
    with pytest.raises(ConfigError, match="patching.pooling"):
        parse_spec({**base, "patching": {"donor": "b", "target": "a", "pooling": "last"}})
