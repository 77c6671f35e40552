"""`inference.null_method: moments` in a run: analytic p for biased linear CKA, Monte-Carlo for the rest."""

from __future__ import annotations

import pytest

from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


def test_moments_null_in_a_run(tiny_gpt2_path, tmp_path):
    spec = {
        "output": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
        "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 24},
        "models": [{"name": "g", "path": str(tiny_gpt2_path)}],
        "measures": ["cka_linear_biased", "cka_linear_debiased"],
        "inference": {"permutations": 200, "layers": "last", "null_method": "moments"},
    }
    res = run(spec)
    t = res.table[res.table["p_value"].notna()]
    biased = t[t["measure"] == "cka_linear_biased"].iloc[0]
    debiased = t[t["measure"] == "cka_linear_debiased"].iloc[0]
    assert biased["p_method"] == "moments" and biased["n_permutations"] == 0
    assert debiased["p_method"] == "monte carlo" and debiased["n_permutations"] == 200
    assert 0 < biased["p_value"] <= 1 and 1 / 201 <= debiased["p_value"] <= 1
