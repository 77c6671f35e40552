"""Benchmark for a CUDA machine: extraction throughput and model-FLOPs utilisation, the CKA grid and the
permutation nulls on the device. Writes one JSON file.

What it measures, per model (the packaged models by default, or ``--model-path`` folders):

- extraction: ``interlingua.data.representations.extract(..., "mean")`` over ``--n`` sentences at each batch
  size x dtype (one warm-up batch first, CUDA synchronised before and after); throughput in the
  sentences' own tokens per second, and model-FLOPs utilisation
  ``MFU = tokens/s x FLOPs per token / peak FLOP/s``, with the forward FLOPs per token of Kaplan et al.
  (2020): ``2 N + 2 n_layer n_ctx d_model`` (N: parameters without the embedding table; n_ctx: the mean
  padded length of a batch). The peak is the spec-sheet dense peak of the device for that dtype (a small
  table by device name; float32 counts the non-tensor-core peak unless TF32 matmuls are on), or
  ``--peak-tflops``; unknown devices (and the CPU) get ``mfu: null``.
- the layer x layer linear-CKA grid (biased and debiased) between two languages' pooled layers, on the
  device (``backend="torch"``) and with numpy, values compared;
- the permutation null of one cell (``permutation_test``) and of the grid maximum
  (``grid_permutation_test``), on the device and on the CPU, with the same seeded permutations (nulls
  compared draw by draw);
- the grid at larger n on synthetic layers (``--grid-n``), device vs numpy.

Every step records its wall time and, on CUDA, the peak device memory. ``--device cpu --smoke`` runs all
of it at tiny sizes on the CPU (tests/test_gpu_script.py runs that on a tiny offline model, so the script
cannot rot). Run it through ``benchmarks/gpu.sh``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"
PACKAGED = ("smollm2-135m", "gemma3-270m")

# Spec-sheet dense peaks, TFLOP/s (no sparsity). "float32" is the CUDA-core peak; "tf32" the tensor-core one.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4},
    "H100": {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4},
    "A100": {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0},
    "L40S": {"float32": 91.6, "tf32": 183.0, "bfloat16": 362.0, "float16": 362.0},
    "L4": {"float32": 30.3, "tf32": 60.0, "bfloat16": 121.0, "float16": 121.0},
}


def sentences(n: int, text: str) -> tuple[list[str], list[str]]:
    """Two aligned lists: Bible verses (English, German) or invented pseudo-sentences (offline tests)."""
    if text == "bible":
        from interlingua.data.corpora.bible import load_bible

        c = load_bible(["eng_Latn", "deu_Latn"], books=["PRO", "ECC"])
        if len(c.ids) < n:
            raise SystemExit(f"--n {n} exceeds the {len(c.ids)} verses available")
        return list(c.texts["eng_Latn"][:n]), list(c.texts["deu_Latn"][:n])
    rng = np.random.default_rng(0)
    words_a = ["river", "stone", "bread", "market", "letter", "morning", "boat", "child", "clock", "bridge"]
    words_b = ["Fluss", "Stein", "Brot", "Markt", "Brief", "Morgen", "Boot", "Kind", "Uhr", "Brücke"]
    picks = [rng.integers(0, 10, size=int(rng.integers(3, 12))) for _ in range(n)]
    return [" ".join(words_a[i] for i in p) + "." for p in picks], [
        " ".join(words_b[i] for i in p) + "." for p in picks
    ]


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def peak_mem_mb(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None


def timed(device: str, fn: Any) -> tuple[float, Any]:
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def device_info(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_gb=round(props.total_memory / 1e9, 1),
            tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
        )
    else:
        info["name"] = platform.processor() or "cpu"
    return info


def peak_flops(info: dict[str, Any], dtype: str, override: float | None) -> float | None:
    if override:
        return override * 1e12
    if not info["device"].startswith("cuda"):
        return None
    key = "tf32" if dtype == "float32" and info.get("tf32_matmul") else dtype
    for name, table in PEAK_TFLOPS.items():
        if name in info.get("name", ""):
            return table[key] * 1e12
    return None


def flops_per_token(model: Any, n_ctx: float) -> float:
    """Kaplan et al. (2020) forward FLOPs per token: 2 N + 2 n_layer n_ctx d_model (N without embeddings)."""
    emb = model.arch.embedding.weight
    n_params = sum(p.numel() for p in model.model.parameters()) - emb.numel()
    cfg = model.model.config
    cfg = getattr(cfg, "text_config", None) or cfg
    return 2.0 * n_params + 2.0 * model.num_layers * n_ctx * int(cfg.hidden_size)


def extraction_cell(
    spec_kw: dict[str, Any],
    texts: list[str],
    device: str,
    dtype: str,
    batch: int,
    info: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[dict[str, Any], Any]:
    from interlingua.data.models import load_model
    from interlingua.data.models.spec import ModelSpec
    from interlingua.data.representations.extract import extract

    spec = ModelSpec(**spec_kw, dtype=dtype, device=device)
    t_load, lm = timed(device, lambda: load_model(spec, cache_dir=args.cache_dir))
    extract(lm, texts[:batch], "mean", batch_size=batch, progress=False)  # warm-up: kernels, allocator
    reset_peak(device)
    secs, ex = timed(device, lambda: extract(lm, texts, "mean", batch_size=batch, progress=False))
    tokens = int(ex.n_tokens.sum())
    # the mean padded length a batch ran at: batches are length-sorted, each padded to its longest
    lengths = np.sort(ex.n_tokens)[::-1]
    padded = sum(int(lengths[i]) * len(lengths[i : i + batch]) for i in range(0, len(lengths), batch))
    n_ctx = padded / len(lengths)
    fpt = flops_per_token(lm, n_ctx)
    peak = peak_flops(info, dtype, args.peak_tflops)
    row = {
        "dtype": dtype,
        "batch_size": batch,
        "load_s": t_load,
        "extract_s": secs,
        "sentences": len(texts),
        "tokens": tokens,
        "padded_tokens": padded,
        "tokens_per_s": tokens / secs,
        "flops_per_token": fpt,
        "achieved_tflops": tokens * fpt / secs / 1e12,
        "peak_tflops": None if peak is None else peak / 1e12,
        "mfu": None if peak is None else tokens * fpt / secs / peak,
        "peak_mem_mb": peak_mem_mb(device),
    }
    return row, (lm, ex)


def cka_cells(A: np.ndarray, B: np.ndarray, device: str, k: int, label: str) -> list[dict[str, Any]]:
    from interlingua.analysis.inference import grid_permutation_test, permutation_test
    from interlingua.analysis.measures import get_measure

    rows = []
    for mid in ("cka_linear_biased", "cka_linear_debiased"):
        m = get_measure(mid)
        t_np, g_np = timed(device, lambda m=m: m.grid(A, B))
        reset_peak(device)
        t_dev, g_dev = timed(device, lambda m=m: m.grid(A, B, backend="torch", device=device))
        rows.append(
            {
                "what": "grid",
                "data": label,
                "measure": mid,
                "n": A.shape[1],
                "layers": [len(A), len(B)],
                "numpy_s": t_np,
                "device_s": t_dev,
                "max_abs_diff": float(np.max(np.abs(g_np - g_dev))),
                "peak_mem_mb": peak_mem_mb(device),
            }
        )
    la, lb = len(A) - 1, len(B) - 1
    t_cpu, cpu = timed(device, lambda: permutation_test("cka_linear_biased", A[la], B[lb], n_permutations=k, seed=0))
    reset_peak(device)
    t_dev, dev = timed(
        device, lambda: permutation_test("cka_linear_biased", A[la], B[lb], n_permutations=k, seed=0, device=device)
    )
    rows.append(
        {
            "what": "permutation_test",
            "data": label,
            "measure": "cka_linear_biased",
            "n": A.shape[1],
            "permutations": k,
            "cpu_s": t_cpu,
            "device_s": t_dev,
            "cpu_method": cpu.method,
            "device_method": dev.method,
            "null_max_abs_diff": float(np.max(np.abs(cpu.null - dev.null))),
            "p_value_cpu": cpu.p_value,
            "p_value_device": dev.p_value,
            "peak_mem_mb": peak_mem_mb(device),
        }
    )
    t_cpu, cpu = timed(device, lambda: grid_permutation_test(A, B, n_permutations=k, seed=0))
    reset_peak(device)
    t_dev, dev = timed(device, lambda: grid_permutation_test(A, B, n_permutations=k, seed=0, device=device))
    rows.append(
        {
            "what": "grid_permutation_test",
            "data": label,
            "n": A.shape[1],
            "layers": [len(A), len(B)],
            "permutations": k,
            "cpu_s": t_cpu,
            "device_s": t_dev,
            "null_max_abs_diff": float(np.max(np.abs(cpu.null - dev.null))),
            "p_value_cpu": cpu.p_value,
            "p_value_device": dev.p_value,
            "peak_mem_mb": peak_mem_mb(device),
        }
    )
    return rows


def synthetic_layers(n_layers: int, n: int, width: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 8)).astype(np.float32)
    A = np.stack(
        [
            z @ rng.standard_normal((8, width), dtype=np.float32) + rng.standard_normal((n, width), dtype=np.float32)
            for _ in range(n_layers)
        ]
    )
    B = np.stack(
        [
            z @ rng.standard_normal((8, width), dtype=np.float32) + rng.standard_normal((n, width), dtype=np.float32)
            for _ in range(n_layers)
        ]
    )
    return A, B


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CPU test of the script)")
    ap.add_argument("--models", default=",".join(PACKAGED), help="packaged model names, comma-separated")
    ap.add_argument("--model-path", action="append", default=[], help="a local model folder (repeatable)")
    ap.add_argument("--dtypes", default=None, help="default: float32,bfloat16,float16 (smoke: float32)")
    ap.add_argument("--batch-sizes", default=None, help="default: 8,32,128 (smoke: 2,4)")
    ap.add_argument("--n", type=int, default=None, help="sentences per language (default 1000; smoke 8)")
    ap.add_argument("--permutations", type=int, default=None, help="default 1000 (smoke 5)")
    ap.add_argument("--grid-n", default=None, help="synthetic grid sizes n (default 1000,4000; smoke 12)")
    ap.add_argument("--text", choices=["bible", "synthetic"], default="bible")
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the device's peak (TFLOP/s)")
    ap.add_argument("--cache-dir", default=None, help="model cache (default: interlingua's)")
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu.json")
    args = ap.parse_args(argv)
    smoke = args.smoke
    dtypes = (args.dtypes or ("float32" if smoke else "float32,bfloat16,float16")).split(",")
    batches = [int(b) for b in (args.batch_sizes or ("2,4" if smoke else "8,32,128")).split(",")]
    n = args.n or (8 if smoke else 1000)
    k = args.permutations or (5 if smoke else 1000)
    grid_ns = [int(v) for v in (args.grid_n or ("12" if smoke else "1000,4000")).split(",")]
    device = args.device
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(
                "--device cuda but torch sees no CUDA device; run with --device cpu --smoke to test the "
                "script on the CPU"
            )
    info = device_info(device)
    specs = [{"path": p, "name": Path(p).name} for p in args.model_path]
    if not args.model_path:
        specs = [{"package": m, "name": m} for m in args.models.split(",") if m]
    text_a, text_b = sentences(n, args.text)
    t_all = time.perf_counter()
    result: dict[str, Any] = {
        "machine": info,
        "smoke": smoke,
        "settings": {
            "dtypes": dtypes,
            "batch_sizes": batches,
            "n": n,
            "permutations": k,
            "grid_n": grid_ns,
            "text": args.text,
        },
        "extraction": [],
        "cka": [],
    }
    for spec_kw in specs:
        last = None
        for dtype in dtypes:
            for b in batches:
                row, (lm, ex) = extraction_cell(spec_kw, text_a, device, dtype, b, info, args)
                row["model"] = spec_kw["name"]
                print(json.dumps(row), flush=True)
                result["extraction"].append(row)
                if dtype == "float32":
                    last = (lm, ex)
        if last is None:
            continue
        from interlingua.data.representations.extract import extract

        lm, ex_a = last
        ex_b = extract(lm, text_b, "mean", batch_size=batches[-1], progress=False)
        for row in cka_cells(ex_a.pooled["mean"], ex_b.pooled["mean"], device, k, f"{spec_kw['name']} eng-deu"):
            row["model"] = spec_kw["name"]
            print(json.dumps(row), flush=True)
            result["cka"].append(row)
    for gn in grid_ns:
        A, B = synthetic_layers(4 if smoke else 31, gn, 16 if smoke else 576, seed=gn)
        for row in cka_cells(A, B, device, k, "synthetic"):
            print(json.dumps(row), flush=True)
            result["cka"].append(row)
    result["seconds"] = time.perf_counter() - t_all
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
