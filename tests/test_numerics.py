"""The numeric settings every task runs at (interlingua.core.numerics)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from threadpoolctl import threadpool_info

from interlingua.core.numerics import ANALYSIS_BLAS_THREADS, numeric_settings, pinned, resolve_threads


def test_the_default_thread_count_is_omp_num_threads_else_one(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_threads(None) == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert resolve_threads(None) == 1  # whatever the machine's CPU count: the same bits everywhere
    assert resolve_threads(5) == 5 and resolve_threads("auto") == "auto"


def test_pinned_sets_torch_and_blas_threads_and_restores_them():
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    blas_before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with pinned(target):
        assert torch.get_num_threads() == target
        assert all(i["num_threads"] == ANALYSIS_BLAS_THREADS for i in threadpool_info() if i["user_api"] == "blas")
    assert torch.get_num_threads() == before
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == blas_before
    with pinned("auto"):  # extraction chooses: torch's count is left alone
        assert torch.get_num_threads() == before


def test_pinned_restores_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), pinned(1 if before != 1 else 2):
        raise RuntimeError("a task failed")
    assert torch.get_num_threads() == before


def test_importing_interlingua_sets_mkl_reproducible_mode_unless_the_user_chose_one():
    code = "import os, interlingua; print(os.environ.get('MKL_CBWR'))"
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "AUTO,STRICT"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**env, "MKL_CBWR": "COMPATIBLE"}
    )
    assert out.stdout.strip() == "COMPATIBLE"


def test_run_json_settings_name_what_was_fixed():
    s = numeric_settings(4)
    assert s["extraction_threads"] == 4 and s["analysis_blas_threads"] == 1 and s["bit_reproducible"]
    assert s["torch"] == torch.__version__ and s["blas"] and s["processor"]
    assert numeric_settings("auto")["bit_reproducible"] is False


def test_the_thread_count_is_part_of_every_forward_pass_key(tiny_gpt2_path, tmp_path):
    """Entries computed at another thread count are never mixed in: the plan's keys differ."""
    import pandas as pd

    from fixtures.tiny_models import parallel_sentences
    from interlingua.data.corpora import load_corpus
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.plan import build_plan

    sents = parallel_sentences(12, seed=1)
    tsv = tmp_path / "c.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(12)], "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        tsv, sep="\t", index=False
    )

    def keys(threads):
        spec = RunSpec.model_validate(
            {
                "output": str(tmp_path / "out"),
                "threads": threads,
                "corpus": {"source": "local", "path": str(tsv), "languages": ["eng_Latn", "deu_Latn"]},
                "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}],
                "measures": ["cka_linear_biased"],
            }
        )
        corpus = load_corpus("local", ["eng_Latn", "deu_Latn"], path=str(tsv))
        plan = build_plan(spec, corpus, {"gpt2": "f" * 64})
        assert plan.threads == threads
        return {t.key for t in plan.of_kind("extract")}

    assert keys(1).isdisjoint(keys(2))
    assert keys(2) == keys(2)


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_the_array_level_entry_points_run_the_analysis_on_one_blas_thread_and_restore_the_callers_count():
    """A notebook's permutation test sums in the pipeline's order (one BLAS thread), whatever the caller set."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from interlingua import compare_arrays
    from interlingua.analysis.inference import bootstrap_interval, jackknife_interval, permutation_test

    seen: list[list[int]] = []

    def measure(x, y):
        seen.append(_blas_threads())
        return float(np.corrcoef(x[:, 0], y[:, 0])[0, 1])

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 3)), rng.normal(size=(12, 3))
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        permutation_test(measure, x, y, n_permutations=3, seed=0, fast=False)
        jackknife_interval(measure, x, y, n_groups=4)
        bootstrap_interval(measure, x, y, n_boot=3, seed=0)
        compare_arrays(x, y, measures="cka_linear_biased", inference={"permutations": 3})
        assert _blas_threads() == before
    assert seen and all(t == [ANALYSIS_BLAS_THREADS] * len(t) for t in seen)


def test_analysis_blas_nests_and_restores_after_an_error():
    from interlingua.core.numerics import analysis_blas

    before = _blas_threads()
    with pytest.raises(RuntimeError), analysis_blas():
        with analysis_blas():
            assert all(t == ANALYSIS_BLAS_THREADS for t in _blas_threads())
        assert all(t == ANALYSIS_BLAS_THREADS for t in _blas_threads())
        raise RuntimeError("a measure failed")
    assert _blas_threads() == before
