"""Same config, same numbers: one small config run four ways gives byte-identical tables.

The four ways, at the same numeric settings (``interlingua.core.numerics``): a fresh process, a second fresh
process, a fresh process killed with SIGKILL at a random point and then resumed in another fresh
process, and ``--executor ray`` on a new local Ray instance (workers start with ``OMP_NUM_THREADS=1``;
the plan's thread count overrides it). The config has the discrete quantities that flip first when a
last bit moves: held-out retrieval (P@1 of an under-determined Procrustes map), kNN overlap and
permutation p-values.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fixtures.tables import assert_same_table
from fixtures.tiny_models import parallel_sentences

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`

TABLES = ("results.csv", "maps.csv")
CODES = {"eng": "eng_Latn", "deu": "deu_Latn"}


@pytest.fixture(scope="module")
def config(tmp_path_factory, tiny_gpt2_path, tiny_llama_path):
    root = tmp_path_factory.mktemp("determinism")
    sents = parallel_sentences(40, seed=3)
    tsv = root / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(40)], **{CODES[k]: sents[k] for k in CODES}}).to_csv(
        tsv, sep="\t", index=False
    )

    def make(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        spec = {
            "output": str(folder / "out"),
            "cache_dir": str(folder / "cache"),
            "progress": False,
            "corpus": {"source": "local", "path": str(tsv), "languages": ["eng_Latn", "deu_Latn"], "n": 32},
            "models": [{"name": "gpt2", "path": str(tiny_gpt2_path)}, {"name": "llama", "path": str(tiny_llama_path)}],
            "pooling": ["mean", "last"],
            "measures": ["cka_linear_biased", "mknn_k10"],
            "inference": {"permutations": 19, "jackknife_groups": 4},
            "special_tokens": "include",
            "threads": 2,
            "maps": {"estimators": ["procrustes"], "folds": 2, "bootstrap": 0},
        }
        path = folder / "run.yaml"
        path.write_text(yaml.safe_dump(spec))
        return path

    return make


def _cli(cfg: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "interlingua", "run", str(cfg), *extra]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MKL_CBWR", None)  # interlingua sets its own mode in every process
    env.update(PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1")
    return env


def _fresh(cfg: Path, *extra: str) -> Path:
    proc = subprocess.run(_cli(cfg, *extra), capture_output=True, text=True, env=_env(), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cfg.parent / "out"


def _entries(cache: Path) -> int:
    return sum(1 for p in cache.rglob("*") if p.is_file() and not p.name.startswith("."))


def _killed_then_resumed(cfg: Path, kill_at: int) -> Path:
    cache = cfg.parent / "cache"
    proc = subprocess.Popen(_cli(cfg), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    try:
        while proc.poll() is None:
            if cache.is_dir() and _entries(cache) >= kill_at:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"the run ended before its kill point ({kill_at} entries)"
    return _fresh(cfg)


@pytest.fixture(scope="module")
def reference(config, tmp_path_factory):
    return _fresh(config(tmp_path_factory.mktemp("first")))


def test_two_fresh_processes_write_the_same_bytes(config, reference, tmp_path):
    second = _fresh(config(tmp_path / "second"))
    for name in TABLES:
        assert_same_table(second / name, (reference / name).read_bytes())
    numerics = json.loads((second / "run.json").read_text())["numerics"]
    assert numerics["extraction_threads"] == 2 and numerics["analysis_blas_threads"] == 1
    assert numerics["mkl_cbwr"] == "AUTO,STRICT" and numerics["bit_reproducible"] is True
    assert numerics["torch"] and numerics["numpy"] and numerics["analysis_dtype"] == "float64"


def test_a_run_killed_at_a_random_point_resumes_to_the_same_bytes(config, reference, tmp_path):
    total = _entries(reference.parent / "cache")
    kill_at = random.randrange(1, total)  # a random store entry; named in any failure below
    resumed = _killed_then_resumed(config(tmp_path / "killed"), kill_at)
    for name in TABLES:
        try:
            assert_same_table(resumed / name, (reference / name).read_bytes())
        except AssertionError as exc:
            raise AssertionError(f"killed after {kill_at} of {total} entries: {exc}") from None


def test_the_ray_executor_writes_the_same_bytes(config, reference, tmp_path):
    pytest.importorskip("ray")
    remote = _fresh(config(tmp_path / "ray"), "--executor", "ray")
    for name in TABLES:
        assert_same_table(remote / name, (reference / name).read_bytes())
