"""The plan / execute / store split leaves every result as it was.

``tests/data/golden_small_run.csv`` was written by the single-function pipeline
of commit 9650f3f (before the split) for exactly the run below: tiny GPT-2 and
Llama checkpoints, 32 sentences in three languages, two poolings with special
tokens included (that pipeline's only behaviour), five measures, permutation
tests, jackknife intervals and the cross-model layer grid with its max-null.
The new pipeline must reproduce every value. Tolerances: representations are
float32 from a forward pass whose last bits may differ between BLAS kernels,
so values agree to 1e-6 absolute (DELTA); a permutation p-value may move by at most
one null draw (1 / (K + 1)) when a draw ties the observed value to rounding.

Jackknife columns are derived from G = 8 leave-a-group-out values, each within DELTA:
se = sqrt((G-1)/G * sum (v_i - mean v)^2) moves by at most 2 DELTA sqrt(G-1) (the deviations move by
at most 2 DELTA each, over G terms), and low / high = estimate -/+ t(0.975, G-1) se by at most
DELTA + t * 2 DELTA sqrt(G-1) (13.5 DELTA for G = 8).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fixtures.tiny_models import parallel_sentences
from interlingua.pipeline.runs import run

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

GOLDEN = Path(__file__).parent / "data" / "golden_small_run.csv"
CODES = {"eng": "eng_Latn", "deu": "deu_Latn", "rus": "rus_Cyrl"}
KEYS = ["pair", "pooling", "measure", "grid", "layer_a", "layer_b"]
DELTA = 1e-6
GROUPS = 8
T = float(stats.t.ppf(0.975, df=GROUPS - 1))
TOLERANCE = {
    "jackknife_se": 2 * DELTA * np.sqrt(GROUPS - 1),
    "jackknife_low": DELTA + T * 2 * DELTA * np.sqrt(GROUPS - 1),
    "jackknife_high": DELTA + T * 2 * DELTA * np.sqrt(GROUPS - 1),
}


@pytest.fixture(scope="module")
def golden_run(tmp_path_factory, tiny_gpt2_path, tiny_llama_path) -> pd.DataFrame:
    root = tmp_path_factory.mktemp("golden")
    sents = parallel_sentences(40, seed=3)
    tsv = root / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(40)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        tsv, sep="\t", index=False
    )
    spec = {
        "output": str(root / "out"),
        "cache_dir": str(root / "cache"),
        "progress": False,
        "corpus": {"source": "local", "path": str(tsv), "languages": ["eng_latn", "deu_Latn", "rus_Cyrl"], "n": 32},
        "seeds": {"sample": 42, "control": 1042, "test": 0},
        "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}, {"name": "llama", "path": str(tiny_llama_path)}],
        "pooling": ["sgpt", "mean"],
        "special_tokens": "include",
        "measures": [
            "cka_linear_biased",
            "cka_linear_debiased",
            "svcca_var0.99",
            "procrustes_resid2_centered_unitnorm",
            "rsa_spearman_corr",
        ],
        "inference": {"permutations": 49, "jackknife_groups": GROUPS, "grid_permutations": 19},
        "layer_grid": True,
    }
    with pytest.warns(Warning):
        return run(spec).table


def test_every_row_of_the_old_pipeline_is_reproduced(golden_run):
    old = pd.read_csv(GOLDEN).rename(columns={"permutation_seed": "control_seed"})
    new = golden_run
    assert len(new) == len(old)
    merged = old.merge(new, on=KEYS, suffixes=("_old", "_new"), validate="one_to_one")
    assert len(merged) == len(old)
    # One change on purpose since the golden file: the CCA family's wide='reduce' cap counts DISTINCT rows (the
    # sample holds one sentence twice, so 32 rows span 30 centred dimensions, not 31). The old pipeline kept one
    # dimension too many there, forcing a canonical correlation of exactly 1; without it SVCCA's mean correlation
    # can only fall, and its jackknife and null move with it. SVCCA rows are checked for that; every other
    # measure's values are unchanged.
    svcca = (merged["measure"] == "svcca_var0.99").to_numpy()
    for col in (
        "matched",
        "shuffled",
        "jackknife_low",
        "jackknife_high",
        "jackknife_se",
        "null_q95",
        "depth_a",
        "depth_b",
    ):
        a, b = merged[f"{col}_old"].to_numpy(float), merged[f"{col}_new"].to_numpy(float)
        assert np.array_equal(np.isnan(a), np.isnan(b)), col
        if col == "matched":
            moved = np.abs(b - a) > DELTA
            assert not (moved & ~svcca).any(), merged.loc[moved & ~svcca, KEYS]
            assert (b[moved] < a[moved]).all(), merged.loc[moved, KEYS]
        a, b = a[~svcca], b[~svcca]
        np.testing.assert_allclose(b, a, atol=TOLERANCE.get(col, DELTA), rtol=0, equal_nan=True, err_msg=col)
    for col, k in (("p_value", 49), ("p_grid_max", 19)):
        a, b = merged[f"{col}_old"].to_numpy(float), merged[f"{col}_new"].to_numpy(float)
        assert np.array_equal(np.isnan(a), np.isnan(b)), col
        a, b = a[~svcca], b[~svcca]
        np.testing.assert_allclose(b, a, atol=1 / (k + 1) + 1e-12, rtol=0, equal_nan=True, err_msg=col)
    for col in ("n", "control_seed", "estimator", "kind", "grid_max"):
        assert (merged[f"{col}_old"] == merged[f"{col}_new"]).all(), col


def test_new_columns_are_filled(golden_run):
    rows = golden_run[~golden_run["grid"]]
    assert rows["length_control"].notna().all()
    assert rows[["top1_share_a", "top3_share_a", "top1_share_b", "top3_share_b"]].notna().all().all()
    assert (rows["top1_share_a"] <= rows["top3_share_a"] + 1e-12).all()
    # neither tiny tokenizer adds special tokens to a sentence, so none are pooled
    assert (rows["special_share_a"] == 0).all() and (rows["special_share_b"] == 0).all()
