"""Benchmark: peak memory of the layer grid (`cka_grid`) and its null (`grid_permutation_test`) against n.

Each measurement runs in a fresh child process: it builds the two sides (float32, like extracted
activations: ``--layers-a`` layers of width ``--width-a`` and ``--layers-b`` of width ``--width-b``,
sharing an 8-dimensional latent), reads its resident set (``VmRSS``), runs ONE call and reads its
high-water mark (``VmHWM``). The call's own peak is ``VmHWM - VmRSS before``; it is compared with the
package's estimate (``cka_grid_peak_bytes``, ``grid_null_peak_bytes``) and, for the grid, with what the
whole-Gram form held before (``(La + Lb) n^2`` float64 unit Grams; run as ``--old`` at the sizes that fit).

Values are checked in the parent: the grid of every method equals the whole-Gram reference
(``unit_centred_gram`` stacks, one product) to 1e-12 relative where the reference ran.

``--null-forms`` compares the grid null's two forms instead (``null_gram``: the Gram gather, forced;
``null_feature``: ``||X_a^T Y_b[p]||^2``, forced) on narrow layers, where the cost model picks the feature
form: peak, estimate, wall and the largest difference between the two nulls (same permutations).

Run (one BLAS thread; ~5 min on 2 shared cores)::

    PYTHONPATH=src python benchmarks/bench_grid_memory.py                      # n = 1000, 2000, 6000
    PYTHONPATH=src python benchmarks/bench_grid_memory.py --ns 500 --null-ns 500 --quick
    PYTHONPATH=src python benchmarks/bench_grid_memory.py --null-forms --ns 1000,2000,6000 --old-ns 1000,2000 \
        --width-a 16 --width-b 16 --out benchmarks/results/grid_null_forms.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"


def sides(n: int, la: int, pa: int, lb: int, pb: int, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 8), dtype=np.float32)
    a = [
        z @ rng.standard_normal((8, pa), dtype=np.float32) + rng.standard_normal((n, pa), dtype=np.float32)
        for _ in range(la)
    ]
    b = [
        z @ rng.standard_normal((8, pb), dtype=np.float32) + 2 * rng.standard_normal((n, pb), dtype=np.float32)
        for _ in range(lb)
    ]
    return a, b


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(field)


def old_grid(a: list[np.ndarray], b: list[np.ndarray], debiased: bool) -> np.ndarray:
    """The whole-Gram form cka_grid had before: (La + Lb) n^2 float64 unit Grams, one product."""
    from interlingua.analysis.measures import unit_centred_gram

    ga = np.stack([unit_centred_gram(x, debiased).reshape(-1) for x in a])
    gb = np.stack([unit_centred_gram(x, debiased).reshape(-1) for x in b])
    return ga @ gb.T


def child(args: argparse.Namespace) -> None:
    from threadpoolctl import threadpool_limits

    from interlingua.analysis.inference import grid_permutation_test
    from interlingua.analysis.inference._gram import grid_null_peak_bytes
    from interlingua.analysis.measures import cka_grid
    from interlingua.analysis.measures.cka import cka_grid_peak_bytes

    a, b = sides(args.n, args.layers_a, args.width_a, args.layers_b, args.width_b)
    with threadpool_limits(1):
        before = _kib("VmRSS")
        t0 = time.perf_counter()
        if args.what in ("null_gram", "null_feature"):
            from interlingua.analysis.inference import permutation as perm_module
            from interlingua.analysis.inference._gram import feature_null_peak_bytes

            feature = args.what == "null_feature"
            perm_module.feature_null_is_cheaper = lambda *_: feature  # type: ignore[assignment]
            res = grid_permutation_test(a, b, n_permutations=args.permutations, seed=0)
            value: Any = {"grid": res.grid.tolist(), "cell_null": res.cell_null.tolist(), "p": res.p_value}
            wa, wb = [x.shape[1] for x in a], [x.shape[1] for x in b]
            est = (
                feature_null_peak_bytes(args.n, wa, wb)
                if feature
                else grid_null_peak_bytes(args.n, len(a), len(b), width_a=args.width_a, width_b=args.width_b)
            )
        elif args.what == "null":
            res = grid_permutation_test(a, b, n_permutations=args.permutations, seed=0)
            value = {"grid": res.grid.tolist(), "null": res.null.tolist(), "p": res.p_value}
            est = grid_null_peak_bytes(args.n, len(a), len(b), width_a=args.width_a, width_b=args.width_b)
        elif args.what == "old":
            value = {"grid": old_grid(a, b, args.debiased).tolist()}
            est = 8 * (len(a) + len(b)) * args.n**2
        else:
            value = {"grid": cka_grid(a, b, args.debiased, method=args.what).tolist()}
            est = cka_grid_peak_bytes(args.n, [x.shape[1] for x in a], [x.shape[1] for x in b], method=args.what)
        wall = time.perf_counter() - t0
        peak = _kib("VmHWM")
    print(
        json.dumps(
            {"before": before, "peak": peak, "call_peak": peak - before, "estimate": est, "wall": wall, "value": value}
        )
    )


def run_child(what: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        what,
        "--n",
        str(n),
        "--layers-a",
        str(args.layers_a),
        "--width-a",
        str(args.width_a),
        "--layers-b",
        str(args.layers_b),
        "--width-b",
        str(args.width_b),
        "--permutations",
        str(args.permutations),
    ] + (["--debiased"] if args.debiased else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ.copy())
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    rec.update(what=what, n=n, load=os.getloadavg())
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ns", default="1000,2000,6000", help="grid sizes (rows)")
    ap.add_argument("--old-ns", default="1000,2000", help="sizes at which the whole-Gram form also runs")
    ap.add_argument("--null-ns", default="1000,2000", help="sizes at which the grid null runs")
    ap.add_argument("--layers-a", type=int, default=13)
    ap.add_argument("--width-a", type=int, default=640)
    ap.add_argument("--layers-b", type=int, default=13)
    ap.add_argument("--width-b", type=int, default=576)
    ap.add_argument("--permutations", type=int, default=20)
    ap.add_argument("--debiased", action="store_true")
    ap.add_argument("--quick", action="store_true", help="4 + 4 layers of width 64")
    ap.add_argument("--null-forms", action="store_true", help="the grid null's Gram and feature forms (see above)")
    ap.add_argument("--out", default=str(RESULTS / "grid_memory.json"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        args.what = args.child
        child(args)
        return
    if args.quick:
        args.layers_a = args.layers_b = 4
        args.width_a = args.width_b = 64
    ints = lambda s: [int(v) for v in s.split(",") if v]  # noqa: E731
    rows: list[dict[str, Any]] = []
    print(f"uptime: {os.getloadavg()}", flush=True)
    for n in ints(args.ns) if args.null_forms else []:
        recs = {"null_feature": run_child("null_feature", n, args)}
        if n in ints(args.old_ns):  # the Gram form where its n^2 stack fits
            recs["null_gram"] = run_child("null_gram", n, args)
            f, g = (np.array(recs[w]["value"]["cell_null"]) for w in ("null_feature", "null_gram"))
            recs["null_feature"]["max_abs_diff_to_gram"] = float(np.max(np.abs(f - g)))
            recs["null_feature"]["same_p"] = recs["null_feature"]["value"]["p"] == recs["null_gram"]["value"]["p"]
        for w, r in recs.items():
            r["p"] = r["value"].pop("p")
            r.pop("value")
            rows.append(r)
            print(
                f"n={n:5d} {w:12s} call peak {r['call_peak'] / 2**20:8.1f} MiB  estimate {r['estimate'] / 2**20:8.1f}"
                f" MiB  wall {r['wall']:6.2f} s  load {r['load'][0]:.1f}  p {r['p']:.4f}"
                + (f"  max abs diff to gram {r['max_abs_diff_to_gram']:.1e}" if "max_abs_diff_to_gram" in r else ""),
                flush=True,
            )
    for n in [] if args.null_forms else ints(args.ns):
        recs = {w: run_child(w, n, args) for w in ("gram", "feature")}
        if n in ints(args.old_ns):
            recs["old"] = run_child("old", n, args)
            ref = np.array(recs["old"]["value"]["grid"])
            for w in ("gram", "feature"):
                rel = float(np.max(np.abs(np.array(recs[w]["value"]["grid"]) - ref) / np.abs(ref)))
                recs[w]["max_rel_diff_to_old"] = rel
                assert rel <= 1e-12, (w, n, rel)
        else:
            g, f = (np.array(recs[w]["value"]["grid"]) for w in ("gram", "feature"))
            recs["gram"]["max_rel_diff_to_feature"] = float(np.max(np.abs(g - f) / np.abs(f)))
        if n in ints(args.null_ns):
            recs["null"] = run_child("null", n, args)
        for w, r in recs.items():
            r.pop("value")
            rows.append(r)
            print(
                f"n={n:5d} {w:8s} call peak {r['call_peak'] / 2**20:8.0f} MiB  estimate {r['estimate'] / 2**20:8.0f}"
                f" MiB  wall {r['wall']:6.1f} s  load {r['load'][0]:.1f}"
                + "".join(f"  {k} {r[k]:.1e}" for k in ("max_rel_diff_to_old", "max_rel_diff_to_feature") if k in r),
                flush=True,
            )
    meta = {
        "layers": [args.layers_a, args.width_a, args.layers_b, args.width_b],
        "debiased": args.debiased,
        "permutations": args.permutations,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": os.cpu_count(),
        "end_load": os.getloadavg(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"uptime: {os.getloadavg()}; wrote {args.out}")


if __name__ == "__main__":
    main()
