"""Benchmark: streaming linear CKA at n = 100,000 token rows x width 576, from a generator.

The rows come from a seeded generator in chunks (``--chunk`` rows, float32 as a
model's activations: two sides sharing an 8-dimensional latent plus noise and
a large common offset, like the massive activation dimensions of a language
model) and are fed to :class:`interlingua.analysis.measures.StreamingLinearCKA`; no more
than one chunk exists at a time. Measured in THIS process: wall time, the
peak of Python-traced allocations (``tracemalloc``; numpy reports its buffers
to it) and the process's peak resident set (``resource.getrusage``, which
includes the interpreter and libraries).

The in-memory reference (``--reference``, default on) runs in a child
process: the same rows materialised as two float32 arrays, then
``linear_cka(..., method="feature")`` (the in-memory measure's cheapest form
at n >> width; the Gram form would need an n x n matrix, 80 GB at n = 1e5).
Its value must equal the streaming one to 1e-10 relative (checked here), and
its peak RSS is reported beside the streaming one.

Run::

    PYTHONPATH=src python benchmarks/bench_streaming.py                # ~1-2 min on 2 shared cores
    PYTHONPATH=src python benchmarks/bench_streaming.py --rows 20000 --no-reference
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

RESULTS = Path(__file__).parent / "results"


def chunks(n: int, width: int, chunk: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Paired float32 rows, ``chunk`` at a time; the same rows for the same (n, width, chunk, seed), so the
    reference child regenerates exactly what the streaming pass saw."""
    rng = np.random.default_rng(seed)
    mix_x = rng.standard_normal((8, width)).astype(np.float32)
    mix_y = rng.standard_normal((8, width)).astype(np.float32)
    offset = np.zeros(width, dtype=np.float32)
    offset[:4] = 300.0  # a few huge, nearly constant dimensions
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        z = rng.standard_normal((m, 8), dtype=np.float32)
        x = z @ mix_x + rng.standard_normal((m, width), dtype=np.float32) + offset
        y = z @ mix_y + 0.5 * rng.standard_normal((m, width), dtype=np.float32) - offset
        yield x, y


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def streaming(n: int, width: int, chunk: int) -> dict[str, Any]:
    from interlingua.analysis.measures import StreamingLinearCKA

    rss0 = peak_rss_mb()
    tracemalloc.start()
    t0 = time.perf_counter()
    acc = StreamingLinearCKA(debiased=True).extend(chunks(n, width, chunk))
    biased, debiased = acc.cka(False), acc.cka(True)
    wall = time.perf_counter() - t0
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "biased": biased,
        "debiased": debiased,
        "seconds": wall,
        "traced_peak_mb": traced_peak / 2**20,
        "state_mb": acc.nbytes / 2**20,
        "peak_rss_mb": peak_rss_mb(),
        "peak_rss_before_mb": rss0,
    }


def reference(n: int, width: int, chunk: int) -> dict[str, Any]:
    from interlingua.analysis.measures import linear_cka

    t0 = time.perf_counter()
    parts = list(chunks(n, width, chunk))
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    del parts
    biased = linear_cka(x, y, method="feature")
    debiased = linear_cka(x, y, debiased=True, method="feature")
    return {"biased": biased, "debiased": debiased, "seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--width", type=int, default=576)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl)")
    ap.add_argument("--no-reference", dest="reference", action="store_false")
    ap.add_argument("--child", choices=["reference"], help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=RESULTS / "streaming.md")
    args = ap.parse_args()
    with threadpool_limits(limits=args.threads):
        if args.child:
            print(json.dumps(reference(args.rows, args.width, args.chunk)))
            return
        load0 = os.getloadavg()
        s = streaming(args.rows, args.width, args.chunk)
    print(json.dumps(s), flush=True)
    ref = None
    if args.reference:
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "reference",
            "--rows",
            str(args.rows),
            "--width",
            str(args.width),
            "--chunk",
            str(args.chunk),
            "--threads",
            str(args.threads),
        ]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ)
        ref = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(ref), flush=True)
        for key in ("biased", "debiased"):
            rel = abs(s[key] - ref[key]) / abs(ref[key])
            s[f"rel_diff_{key}"] = rel
            assert rel <= 1e-10, (key, s[key], ref[key])
    info = {
        "platform": platform.platform(),
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "blas_threads": args.threads,
        "loadavg_start": load0,
        "loadavg_end": os.getloadavg(),
    }
    lines = [
        f"# Streaming linear CKA: n = {args.rows:,} rows x width {args.width} from a generator",
        "",
        f"`PYTHONPATH=src python benchmarks/bench_streaming.py --rows {args.rows} --width {args.width} "
        f"--chunk {args.chunk}`. Two float32 sides, chunks of {args.chunk} rows, float64 sums. Machine: "
        f"{info['platform']}, {info['cpu_count']} CPUs, BLAS threads {args.threads}, load average "
        f"{tuple(round(v, 2) for v in load0)} at the start, {tuple(round(v, 2) for v in info['loadavg_end'])} "
        "at the end (shared machine).",
        "",
        "| path | biased CKA | debiased CKA | seconds | peak traced allocations (MB) | peak RSS (MB) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| streaming (state {s['state_mb']:.1f} MB) | {s['biased']:.15f} | {s['debiased']:.15f} | "
        f"{s['seconds']:.1f} | {s['traced_peak_mb']:.1f} | {s['peak_rss_mb']:.0f} |",
    ]
    if ref is not None:
        lines.append(
            f"| in memory (child process, feature form) | {ref['biased']:.15f} | {ref['debiased']:.15f} | "
            f"{ref['seconds']:.1f} | - | {ref['peak_rss_mb']:.0f} |"
        )
        lines += [
            "",
            f"Relative difference streaming vs in memory: biased {s['rel_diff_biased']:.1e}, "
            f"debiased {s['rel_diff_debiased']:.1e} (checked <= 1e-10).",
        ]
    lines += [
        "",
        f"The streaming process's peak RSS before streaming (interpreter, numpy, interlingua): "
        f"{s['peak_rss_before_mb']:.0f} MB. The in-memory Gram form would need an n x n float64 matrix "
        f"per side: {8 * args.rows**2 / 1e9:.0f} GB.",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps({"machine": info, "streaming": s, "reference": ref}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
