"""benchmarks/gpu.sh and bench_gpu.py run end to end on the CPU (``--device cpu --smoke``) on a tiny offline
model, so the GPU benchmark cannot rot while no GPU is at hand. Facts checked: the device and numpy grids
and nulls agree, the token counts are the tokenizer's, and the FLOPs per token follow the stated formula
from the checkpoint's own parameter count."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu.sh"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHON=sys.executable, HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@pytest.mark.slow
def test_gpu_script_smoke_runs_on_the_cpu(tiny_llama_path: Path, tmp_path: Path) -> None:
    from safetensors import safe_open
    from transformers import AutoConfig, AutoTokenizer

    out = tmp_path / "gpu.json"
    cmd = [
        "bash",
        str(SCRIPT),
        "--device",
        "cpu",
        "--smoke",
        "--model-path",
        str(tiny_llama_path),
        "--text",
        "synthetic",
        "--peak-tflops",
        "2.0",
    ]
    done = subprocess.run(cmd, env={**_env(), "OUT": str(out)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["smoke"] and res["machine"]["device"] == "cpu"

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_gpu import sentences

    texts, _ = sentences(res["settings"]["n"], "synthetic")
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    want_tokens = sum(len(ids) for ids in tok(texts, add_special_tokens=True)["input_ids"])
    cfg = AutoConfig.from_pretrained(tiny_llama_path)
    with safe_open(str(tiny_llama_path / "model.safetensors"), "pt") as f:
        shapes = {k: f.get_slice(k).get_shape() for k in f.keys()}  # noqa: SIM118 (a safe_open handle is not iterable)
    n_params = sum(math.prod(s) for k, s in shapes.items() if not k.startswith("lm_head") and "embed_tokens" not in k)
    cells = {(r["dtype"], r["batch_size"]) for r in res["extraction"]}
    assert cells == {("float32", b) for b in res["settings"]["batch_sizes"]}
    for r in res["extraction"]:
        assert r["tokens"] == want_tokens
        n_ctx = r["padded_tokens"] / r["sentences"]
        want = 2.0 * n_params + 2.0 * cfg.num_hidden_layers * n_ctx * cfg.hidden_size
        assert r["flops_per_token"] == pytest.approx(want, rel=1e-12)
        assert r["mfu"] == pytest.approx(r["achieved_tflops"] / 2.0, rel=1e-12)
    kinds = [(r["what"], r["data"]) for r in res["cka"]]
    assert kinds.count(("grid", "synthetic")) == 2 and ("grid_permutation_test", "synthetic") in kinds
    assert any(d.endswith("eng-deu") for _, d in kinds)
    for r in res["cka"]:
        if r["what"] == "grid":
            assert r["max_abs_diff"] <= 1e-10
        else:
            assert r["null_max_abs_diff"] <= 1e-10 and r["p_value_cpu"] == r["p_value_device"]


def test_gpu_script_refuses_cuda_without_a_device(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**_env(), "OUT": str(tmp_path / "g.json")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "no CUDA device" in done.stderr
    assert not (tmp_path / "g.json").exists()
