"""`maps:` runs with the rotated-twin control: a Llama-family side mapped onto its twin, whose answer is Q."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interlingua.core.errors import ConfigError
from interlingua.maps.planted import EXACT_TOL
from interlingua.pipeline.runs import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fixtures.plugins import parallel_tsv  # noqa: E402

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


@pytest.fixture(scope="module")
def corpus_tsv(tmp_path_factory) -> Path:
    return parallel_tsv(tmp_path_factory.mktemp("corpus"), seed=11, n=60)


def _spec(tmp_path: Path, corpus: Path, gpt2: Path, llama: Path, pairs: list, **maps) -> dict:
    return {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(corpus), "languages": ["eng_Latn", "deu_Latn"]},
        "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
        "pairs": {"within_model": False, "cross_model": "same_language"},
        "pooling": ["mean"],
        "measures": ["cka_linear_biased"],
        "inference": {"permutations": 0},
        "maps": {
            "estimators": ["procrustes", "ridge"],
            "folds": 4,
            "bootstrap": 0,
            "pairs": [{"a": {"model": a, "language": la}, "b": {"model": b, "language": lb}} for a, la, b, lb in pairs],
            **maps,
        },
    }


def test_twin_control_on_a_llama_target_recovers_q(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    """gpt2 -> llama: the llama side (60 rows, width 32) onto its twin, every layer, both directions."""
    args = (tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    pairs = [("gpt2", "eng_Latn", "llama", "deu_Latn")]
    res = run(_spec(*args, pairs))
    maps = pd.read_csv(res.output / "maps.csv", keep_default_na=False)
    assert (maps["twin_model"] == "llama").all() and (maps["twin_seed"] == 0).all()
    proc = maps[maps["estimator"] == "procrustes"]
    # Procrustes from n_fit 60 > width 32 rows onto the same rows times Q: Q (Q^T for b->a) to rounding on the
    # residual stream after a block; the embeddings' mean rows (layer 0) are too ill-conditioned to fix every
    # direction and the control says so with the deviation it found
    blocks = proc[proc["layer_b"].astype(int) >= 1]
    assert len(blocks) and (blocks["twin_control"] == "passed").all(), blocks["twin_control_note"].iloc[0]
    assert (blocks["twin_control_dev"].astype(float) <= EXACT_TOL).all()
    assert (blocks["twin_control_p1"].astype(float) == 1.0).all()
    assert set(blocks["direction"]) == {"a->b", "b->a"}
    failed = proc[proc["twin_control"] == "failed"]
    assert (failed["twin_control_dev"].astype(float) > EXACT_TOL).all()
    assert failed["twin_control_note"].str.contains("sqrt(d) =", regex=False).all()
    # ridge shrinks exactly as its penalty implies on these rows (the control's law), nothing else
    ridge = maps[maps["estimator"] == "ridge"]
    dev, expected = ridge["twin_control_dev"].astype(float), ridge["twin_control_expected_dev"].astype(float)
    assert (np.abs(dev - expected) <= EXACT_TOL).all() and (expected > 0).all()
    # stored apart from the map rows: turned off, the same map rows without the twin's columns, nothing refitted
    spec = _spec(*args, pairs, twin_control=False)
    spec["overwrite"] = True
    off = run(spec)
    assert "maps" not in off.info["computed"]
    plain = pd.read_csv(off.output / "maps.csv", keep_default_na=False)
    assert (plain["twin_control"] == "").all()
    twin_cols = [c for c in maps.columns if c.startswith("twin_")]
    pd.testing.assert_frame_equal(plain.drop(columns=twin_cols), maps.drop(columns=twin_cols))


def test_twin_control_needs_a_llama_family_side(tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path):
    args = (tmp_path, corpus_tsv, tiny_gpt2_path, tiny_llama_path)
    pairs = [("gpt2", "eng_Latn", "gpt2", "deu_Latn")]
    res = run(_spec(*args, pairs, estimators=["procrustes"]))
    maps = pd.read_csv(res.output / "maps.csv", keep_default_na=False)
    assert (maps["twin_control"] == "not applicable (no Llama-family model)").all()
    spec = _spec(*args, pairs, estimators=["procrustes"], twin_control=True)
    spec["overwrite"] = True
    with pytest.raises(ConfigError, match="twin_control is true but neither side"):
        run(spec)
