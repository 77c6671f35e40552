"""A run's `transport:` section on the tiny zoo: fused targets against their shuffled control, transport.csv."""

from __future__ import annotations

import json

import pandas as pd
import pytest

pytest.importorskip("ot")

from interlingua.core.errors import ConfigError  # noqa: E402
from interlingua.pipeline.config import parse_spec  # noqa: E402
from interlingua.pipeline.runs import run  # noqa: E402

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


def test_transport_section(tiny_zoo, tmp_path):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tiny_zoo.root),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 24},
        "models": [{"name": "eng", "zoo": "tiny:eng"}, {"name": "deu", "zoo": "tiny:deu"}],
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "pairs": {"within_model": False, "cross_model": "all"},
        "transport": {
            "pairs": [{"target": "eng", "donor": "deu", "donor_language": "deu_Latn"}],
            "alphas": [0.0, 0.5],
            "top_k": 8,
            "probe_n": 16,
            "eval_n": 8,
        },
    }
    stored = tiny_zoo.root / "transport" / "plans"
    before = set(stored.rglob("*.safetensors"))  # the zoo fixture's store may be shared
    res = run(spec)
    table = pd.read_csv(res.output / "transport.csv")
    assert set(table["alpha"]) == {0.0, 0.5} and set(table["language"]) == {"eng_Latn", "deu_Latn"}
    zero = table[table["alpha"] == 0.0]
    assert (zero["delta_ot"] == 0).all() and (zero["ot_minus_rand"] == 0).all()  # alpha 0 is the target itself
    half = table[table["alpha"] == 0.5]
    assert (half["ot_minus_rand"] == half["nll_ot"] - half["nll_shuffled"]).all()
    report = (res.output / "report.md").read_text()
    assert "## Fusion by optimal transport" in report
    # the controls are on by default: every row carries the self-plan verdict, the report leads with it
    assert set(table["self_control"]) <= {"passed", "failed"} and table["self_match_mlp"].between(0, 1).all()
    assert report.index("### Correspondence controls") < report.index("The donor's MLP")
    again_spec = json.loads((res.output / "run.json").read_text())["spec"]
    again_spec["overwrite"] = True
    assert "transport" not in run(again_spec).info["computed"]
    plans = sorted(set(stored.rglob("*.safetensors")) - before)
    assert len(plans) == 1  # the pair's plans, stored by content
    stamp = plans[0].stat().st_mtime_ns
    again_spec["transport"]["alphas"] = [0.0, 0.25]  # a new task (rows recomputed), the same plans
    res3 = run(again_spec)
    assert res3.info["computed"]["transport"] == 1
    assert sorted(set(stored.rglob("*.safetensors")) - before) == plans
    assert plans[0].stat().st_mtime_ns == stamp  # read, never rewritten
    third = pd.read_csv(res3.output / "transport.csv")
    quarter = third[third["alpha"] == 0.25]
    assert set(quarter["language"]) == {"eng_Latn", "deu_Latn"} and quarter["nll_ot"].notna().all()


def test_transport_needs_disjoint_probe_and_evaluation_sentences():
    with pytest.raises(ConfigError, match="probe_n \\+ eval_n"):
        parse_spec(
            {
                "output": "x",
                "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "n": 50},
                "models": [{"name": "a", "zoo": "eng"}, {"name": "b", "zoo": "deu"}],
                "transport": {"pairs": [{"target": "a", "donor": "b"}], "probe_n": 40, "eval_n": 20},
            }
        )
