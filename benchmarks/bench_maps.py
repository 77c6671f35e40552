"""Benchmark: held-out maps over every layer of a demo-sized pair, interlingua vs what a user would write.

Setting (defaults): side A has 19 hidden states of width 640, side B 31 of
width 576 (the depths and widths of the demo's two models), n = 1000
sentences. The data are SYNTHETIC with planted structure: a shared latent
(rank 96, decaying spectrum) embedded into every layer of both sides by random
isometries, with per-layer noise whose level makes middle layers align best,
an offset mean and two outlier coordinates per layer (large mean and
variance, as real residual streams have), stored as float32 like pooled
representations.

Work, identical on both sides (one 80/20 train/test split, seed 0):

- the 19 layer pairs matched by relative depth, both directions (A->B, B->A):
  Procrustes and ridge (lambda by 5-fold inner CV over the 9-point relative
  grid, the same absolute values on both sides), each also fitted on the
  pair's shuffled training pairs (the control); held-out retrieval (P@1, P@5,
  MRR by cosine and by CSLS, k = 10), MSE and relative MSE;
- the full 19 x 31 Procrustes grid, both directions, the same retrieval.

interlingua: ``evaluate_pair(..., MapOptions(layers="grid", bootstrap=0, residual=False))``
(the bootstrap and residual analysis are off because the baseline has none;
the run with them on is timed separately). The baseline is what a user would
write with the standard libraries: ``scipy.linalg.orthogonal_procrustes``
(which needs equal widths, so the narrower side is zero-padded and the
solution sliced; called once per direction), scikit-learn
``RidgeCV(alphas, cv=<the same inner folds>, scoring="neg_mean_squared_error")``
(per direction, matched and control), and ``cosine_similarity`` + sorting for
the ranks and CSLS, following interlingua's protocol (the same splits, the
same centring before the cosine) so the numbers can be checked equal.

Timing: the machine is shared, so its speed drifts. Both sides are timed on
the same units, interleaved: ``--baseline-layers`` layer pairs (interlingua:
``evaluate_pair(..., MapOptions(layers=[(a, b)]))``) and ``--baseline-cells`` grid cells
(interlingua: ``procrustes_grid`` on the two layers alone, which pays the
per-layer preparation a whole grid shares), each run by interlingua and at
once by the baseline; the whole task is extrapolated linearly from the units
(every layer pair, and every cell, has the same shapes and work). The values
of those units are compared with interlingua's rows. interlingua's whole task
is also run as one call and reported.

Threads: BLAS (threadpoolctl) and torch run on ``--threads`` threads (default
1) for BOTH sides. On a shared, oversubscribed machine two BLAS threads that
wait for each other made one SVD 5-10x slower in wall time; one thread
avoids that, and the comparison is fair either way since both sides use the
same setting. Times are wall and process CPU time.

Run::

    PYTHONPATH=src python benchmarks/bench_maps.py           # defaults above, a few minutes
    PYTHONPATH=src python benchmarks/bench_maps.py --quick   # small smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.maps import (
    DEFAULT_RELATIVE_ALPHAS,
    MapOptions,
    evaluate_pair,
    kfold,
    layer_pairs,
    restricted_permutation,
    retrieval_ranks,
    train_test_split,
)
from interlingua.maps.retrieval import block_rows


def make_pair(n: int, p: int, q: int, la: int, lb: int, rank: int = 96, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two stacks of layers sharing a latent (embedded isometrically, so a rotation relates any two layers up to noise);
    noise lowest at mid depth; an offset and two outlier coordinates per layer."""
    rng = np.random.default_rng(seed)
    rank = min(rank, p, q)
    z = rng.standard_normal((n, rank)) * (1.0 / np.sqrt(1.0 + np.arange(rank) / 8.0))

    def side(width: int, layers: int) -> np.ndarray:
        out = np.empty((layers, n, width), dtype=np.float32)
        for i in range(layers):
            depth = i / (layers - 1)
            noise = 0.6 + 2.0 * (depth - 0.55) ** 2
            mix = np.linalg.qr(rng.standard_normal((width, rank)))[0].T * np.sqrt(width / rank)  # isometric embedding
            layer = z @ mix + noise * rng.standard_normal((n, width)) * (1.0 / np.sqrt(1.0 + np.arange(width) / 64.0))
            layer += rng.standard_normal(width) * 0.5  # offset
            layer[:, :2] = layer[:, :2] * 15.0 + 40.0  # outlier coordinates
            out[i] = layer
        return out

    return side(p, la), side(q, lb)


def machine_info(threads: int) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import scipy
    import sklearn
    import torch
    from threadpoolctl import threadpool_info

    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "torch": torch.__version__,
        "threads": threads,
        "blas": "; ".join(
            f"{p.get('internal_api')} {p.get('version')} {p.get('architecture', '')} "
            f"({Path(p.get('filepath', '')).name})"
            for p in threadpool_info()
            if p.get("user_api") == "blas"
        ),
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, process CPU seconds)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def kernel_rates(p: int, q: int) -> dict[str, float]:
    """The machine's float64 rates in this run: GEMM 2048^3 (GFLOP/s), one SVD (p x q) and one eigh (p) in seconds."""
    import scipy.linalg as sla

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2048, 2048)), rng.standard_normal((2048, 2048))
    m = rng.standard_normal((p, q))
    s = m @ m.T
    best = lambda f: min(timed(f)[1] for _ in range(3))  # noqa: E731
    return {
        "gemm_gflops": 2 * 2048**3 / best(lambda: a @ b) / 1e9,
        "svd_s": best(lambda: sla.svd(m, full_matrices=False, check_finite=False)),
        "eigh_s": best(lambda: sla.eigh(s, check_finite=False, driver="evd")),
    }


# -- the baseline: what a user would write -------------------------------------------------------------------


def user_procrustes(xtr: np.ndarray, ytr: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    from scipy.linalg import orthogonal_procrustes

    p, q = xtr.shape[1], ytr.shape[1]
    mx, my = xtr.mean(0), ytr.mean(0)
    w = max(p, q)
    xp = np.pad(xtr - mx, ((0, 0), (0, w - p)))
    yp = np.pad(ytr - my, ((0, 0), (0, w - q)))
    r, _ = orthogonal_procrustes(xp, yp)
    r = r[:p, :q]
    return lambda x: (x - mx) @ r + my


def user_ridge(xtr: np.ndarray, ytr: np.ndarray, alphas: np.ndarray, inner: list[tuple[np.ndarray, np.ndarray]]):
    from sklearn.linear_model import RidgeCV

    model = RidgeCV(alphas=alphas, cv=inner, scoring="neg_mean_squared_error").fit(xtr, ytr)
    return model.predict, float(model.alpha_)


def user_ranks(queries: np.ndarray, targets: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.metrics.pairwise import cosine_similarity

    s = cosine_similarity(queries, targets)
    n = s.shape[0]
    r_t = np.sort(s, axis=1)[:, -k:].mean(axis=1)
    r_q = np.sort(s, axis=0)[-k:, :].mean(axis=0)
    csls = 2 * s - r_t[:, None] - r_q[None, :]

    def rank(scores: np.ndarray) -> np.ndarray:
        order = np.argsort(-scores, axis=1, kind="stable")
        return np.argmax(order == np.arange(n)[:, None], axis=1)

    return rank(s), rank(csls)


def user_metrics(mapper: Callable, src_tr, src_te, tgt_tr, tgt_te) -> dict[str, float]:
    pred = mapper(src_te)
    q_mean = mapper(src_tr.mean(0)[None])[0]
    rc, rs = user_ranks(pred - q_mean, tgt_te - tgt_tr.mean(0))
    err = ((tgt_te - pred) ** 2).sum()
    return {
        "p1": float(np.mean(rc == 0)),
        "p5": float(np.mean(rc < 5)),
        "mrr": float(np.mean(1 / (rc + 1))),
        "p1_csls": float(np.mean(rs == 0)),
        "p5_csls": float(np.mean(rs < 5)),
        "mrr_csls": float(np.mean(1 / (rs + 1))),
        "mse": float(err / tgt_te.size),
        "rel_mse": float(err / ((tgt_te - tgt_te.mean(0)) ** 2).sum()),
    }


def baseline_layer_pair(x: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray, perm: np.ndarray) -> dict:
    """Procrustes and ridge, both directions, matched and shuffled-fit control, as a user would write them."""
    out: dict[tuple[str, str, str], dict[str, float]] = {}
    sigma = restricted_permutation(perm, tr)
    inv = np.argsort(sigma)
    xtr, xte, ytr, yte = x[tr], x[te], y[tr], y[te]
    inner = list(kfold(tr.size, 5, 0))
    sides = {"a->b": (xtr, xte, ytr, yte, ytr[sigma]), "b->a": (ytr, yte, xtr, xte, None)}
    for d, (s_tr, s_te, t_tr, t_te, t_ctl) in sides.items():
        s_ctl, t_ctl = (s_tr, t_ctl) if d == "a->b" else (s_tr, t_tr[inv])
        xc = s_tr - s_tr.mean(0)
        alphas = np.asarray(DEFAULT_RELATIVE_ALPHAS) * float((xc**2).sum()) / s_tr.shape[1]
        for variant, target in (("matched", t_tr), ("control", t_ctl)):
            f = user_procrustes(s_tr, target)
            out[("procrustes", d, variant)] = user_metrics(f, s_tr, s_te, t_tr, t_te)
            g, alpha = user_ridge(s_tr, target, alphas, inner)
            out[("ridge", d, variant)] = {**user_metrics(g, s_tr, s_te, t_tr, t_te), "alpha": alpha}
    return out


def baseline_cell(x: np.ndarray, y: np.ndarray, tr: np.ndarray, te: np.ndarray) -> dict:
    out = {}
    for d, (s, t) in {"a->b": (x, y), "b->a": (y, x)}.items():
        f = user_procrustes(s[tr], t[tr])
        out[d] = user_metrics(f, s[tr], s[te], t[tr], t[te])
    return out


# -- the run -------------------------------------------------------------------------------------------------------


METRICS = ("p1", "p5", "mrr", "p1_csls", "p5_csls", "mrr_csls")


def compare_values(ours: list[dict], base_pairs: dict, base_cells: dict) -> dict[str, float]:
    """Largest differences between interlingua's rows and the baseline's numbers."""
    rank_diff, mse_rel, alpha_mismatch, checked = 0.0, 0.0, 0, 0
    index = {(r["layer_a"], r["layer_b"], r["estimator"], r["direction"], r["grid"]): r for r in ours}
    for (a, b), res in base_pairs.items():
        for (est, d, variant), m in res.items():
            row = index[(a, b, est, d, False)]
            if variant == "matched":
                rank_diff = max(rank_diff, *(abs(row[k] - m[k]) for k in METRICS))
                mse_rel = max(
                    mse_rel, abs(row["rel_mse"] - m["rel_mse"]) / m["rel_mse"], abs(row["mse"] - m["mse"]) / m["mse"]
                )
                if est == "ridge":
                    alpha_mismatch += int(not np.isclose(row["alpha"], m["alpha"], rtol=1e-12))
            else:
                rank_diff = max(
                    rank_diff,
                    abs(row["shuffled_p1"] - m["p1"]),
                    abs(row["shuffled_p1_csls"] - m["p1_csls"]),
                    abs(row["shuffled_mrr"] - m["mrr"]),
                )
                mse_rel = max(mse_rel, abs(row["shuffled_rel_mse"] - m["rel_mse"]) / m["rel_mse"])
            checked += 1
    for (a, b), res in base_cells.items():
        for d, m in res.items():
            row = index[(a, b, "procrustes", d, True)]
            rank_diff = max(rank_diff, *(abs(row[k] - m[k]) for k in METRICS))
            checked += 1
    return {
        "max_abs_diff_retrieval": rank_diff,
        "max_rel_diff_mse": mse_rel,
        "ridge_alpha_mismatches": alpha_mismatch,
        "values_checked": checked,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small smoke run (n=300, widths 96/80, 5 x 7 layers)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--widths", type=int, nargs=2, default=(640, 576))
    ap.add_argument("--layers", type=int, nargs=2, default=(19, 31))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--baseline-layers", type=int, default=4, help="layer pairs timed on both sides, interleaved")
    ap.add_argument("--baseline-cells", type=int, default=40, help="grid cells timed on both sides, interleaved")
    ap.add_argument(
        "--retrieval-n", type=int, default=10_000, help="n of the blockwise retrieval scaling check (0: skip)"
    )
    ap.add_argument("--skip-full", action="store_true", help="skip the timing with bootstrap and residual analysis on")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "maps.md"))
    args = ap.parse_args()
    if args.quick:
        args.n, args.widths, args.layers, args.retrieval_n = 300, (96, 80), (5, 7), 2000
        args.baseline_layers, args.baseline_cells = 3, 12
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    # imports that either side would otherwise pay inside its first timed call
    import sklearn.linear_model  # noqa: F401
    import sklearn.metrics.pairwise  # noqa: F401

    import interlingua.analysis.measures  # noqa: F401  (evaluate_pair's CKA)
    from interlingua.maps import procrustes_grid

    n, (p, q), (la, lb) = args.n, args.widths, args.layers
    with threadpool_limits(args.threads):
        load0 = os.getloadavg()
        info = machine_info(args.threads)
        rates0 = kernel_rates(p, q)
        a, b = make_pair(n, p, q, la, lb)
        perm = np.random.default_rng(12345).permutation(n)
        split = train_test_split(n, 0.2, seed=0)
        tr, te = split.train(0), split.tests[0]
        kw = dict(
            estimators=["procrustes", "ridge"],
            folds=split,
            csls_k=10,
            bootstrap=0,
            residual=False,
        )

        # 1. interleaved units: the same layer pair (or grid cell) by interlingua, then by the baseline
        pairs = layer_pairs(la, lb)
        pick = [pairs[int(i)] for i in np.linspace(0, len(pairs) - 1, min(args.baseline_layers, len(pairs)))]
        rng = np.random.default_rng(7)
        cells = [
            (int(i) // lb, int(i) % lb)
            for i in rng.choice(la * lb, size=min(args.baseline_cells, la * lb), replace=False)
        ]
        unit = {"ours_pair": [0.0, 0.0], "base_pair": [0.0, 0.0], "ours_cell": [0.0, 0.0], "base_cell": [0.0, 0.0]}
        base_pairs, base_cells = {}, {}

        def add(key: str, w: float, c: float) -> None:
            unit[key][0] += w
            unit[key][1] += c

        for ka, kb in pick:
            _, w_, c_ = timed(
                lambda ka=ka, kb=kb: evaluate_pair(a, b, MapOptions(layers=[(ka, kb)], **kw), control_permutation=perm)
            )
            add("ours_pair", w_, c_)
            x, y = a[ka].astype(np.float64), b[kb].astype(np.float64)
            base_pairs[(ka, kb)], w_, c_ = timed(lambda x=x, y=y: baseline_layer_pair(x, y, tr, te, perm))
            add("base_pair", w_, c_)
        for ka, kb in cells:
            _, w_, c_ = timed(
                lambda ka=ka, kb=kb: procrustes_grid([a[ka]], [b[kb]], MapOptions(folds=split, csls_k=10))
            )
            add("ours_cell", w_, c_)
            x, y = a[ka].astype(np.float64), b[kb].astype(np.float64)
            base_cells[(ka, kb)], w_, c_ = timed(lambda x=x, y=y: baseline_cell(x, y, tr, te))
            add("base_cell", w_, c_)

        # 2. interlingua's whole run: one call, every layer pair and the grid; then the layer pairs alone
        ours, wall, cpu = timed(lambda: evaluate_pair(a, b, MapOptions(layers="grid", **kw), control_permutation=perm))
        auto_rows = [r for r in ours if not r["grid"]]
        _, wall_auto, cpu_auto = timed(
            lambda: evaluate_pair(a, b, MapOptions(layers="auto", **kw), control_permutation=perm)
        )
        check = compare_values(ours, base_pairs, base_cells)

        full = None
        if not args.skip_full:
            _, fw, fc = timed(
                lambda: evaluate_pair(
                    a, b, MapOptions(**{**kw, "bootstrap": 1000, "residual": True}), control_permutation=perm
                )
            )
            full = {"wall_s": fw, "cpu_s": fc}

        retr = None
        if args.retrieval_n:
            import tracemalloc

            rn = args.retrieval_n
            g = np.random.default_rng(3)
            tq = g.standard_normal((rn, q))
            qq = tq + 1.5 * g.standard_normal((rn, q))
            tracemalloc.start()
            rr, rw, rc = timed(lambda: retrieval_ranks(qq, tq, csls_k=10))
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            retr = {
                "n": rn,
                "d": q,
                "wall_s": rw,
                "cpu_s": rc,
                "peak_mib": peak / 2**20,
                "block_rows": block_rows(rn),
                "inputs_mib": 2 * rn * q * 8 / 2**20,
                "dense_two_matrices_mib": 2 * rn * rn * 8 / 2**20,
                "p1": float(np.mean(rr.cosine == 0)),
                "p1_csls": float(np.mean(rr.csls == 0)),
            }
        rates1 = kernel_rates(p, q)
        load1 = os.getloadavg()

    n_pairs, n_cells = len(pairs), la * lb
    per = {
        k: (v[0] / (len(pick) if "pair" in k else len(cells)), v[1] / (len(pick) if "pair" in k else len(cells)))
        for k, v in unit.items()
    }
    interleaved = {
        "ours_wall_s": per["ours_pair"][0] * n_pairs + per["ours_cell"][0] * n_cells,
        "ours_cpu_s": per["ours_pair"][1] * n_pairs + per["ours_cell"][1] * n_cells,
        "base_wall_s": per["base_pair"][0] * n_pairs + per["base_cell"][0] * n_cells,
        "base_cpu_s": per["base_pair"][1] * n_pairs + per["base_cell"][1] * n_cells,
        "per_unit": per,
        "layer_pairs_timed": len(pick),
        "cells_timed": len(cells),
    }
    svd_s = min(rates0["svd_s"], rates1["svd_s"])
    eigh_s = min(rates0["eigh_s"], rates1["eigh_s"])
    n_svd = n_pairs * 2 + n_cells  # per layer pair: matched and control (both directions from one SVD); one per cell
    n_eigh = n_pairs * 2 * (1 + 5)  # per layer pair and direction: the full Gram and five inner folds
    result = {
        "setting": {
            "n": n,
            "widths": [p, q],
            "layers": [la, lb],
            "layer_pairs": n_pairs,
            "grid_cells": n_cells,
            "split": "80/20, seed 0",
            "ridge_grid": list(DEFAULT_RELATIVE_ALPHAS),
            "inner_cv": 5,
            "csls_k": 10,
        },
        "machine": info,
        "load_before": load0,
        "load_after": load1,
        "rates_start": rates0,
        "rates_end": rates1,
        "interleaved": interleaved,
        "interlingua": {
            "total_wall_s": wall,
            "total_cpu_s": cpu,
            "auto_wall_s": wall_auto,
            "auto_cpu_s": cpu_auto,
            "grid_wall_s": wall - wall_auto,
            "grid_cpu_s": cpu - cpu_auto,
            "rows": len(ours),
            "kernel_floor_s": n_svd * svd_s + n_eigh * eigh_s,
            "svds": n_svd,
            "eighs": n_eigh,
        },
        "check": check,
        "full_options": full,
        "retrieval_scaling": retr,
        "headline": {
            "procrustes_p1_best_auto": max(r["p1"] for r in auto_rows if r["estimator"] == "procrustes"),
            "ridge_p1_best_auto": max(r["p1"] for r in auto_rows if r["estimator"] == "ridge"),
            "shuffled_p1_max": max(r["shuffled_p1"] for r in auto_rows),
            "chance_p1": auto_rows[0]["chance_p1"],
        },
    }
    write_report(result, Path(args.out))


def write_report(r: dict[str, Any], path: Path) -> None:
    s, m, o, i, c = r["setting"], r["machine"], r["interlingua"], r["interleaved"], r["check"]
    u = i["per_unit"]
    x = lambda ours, base: f"{base / ours:.1f}x" if ours > 0 else "n/a"  # noqa: E731
    lines = [
        "# Maps benchmark (benchmarks/bench_maps.py)",
        "",
        f"Setting: n = {s['n']}, widths {s['widths'][0]} vs {s['widths'][1]}, {s['layers'][0]} x {s['layers'][1]} "
        f"layers ({s['layer_pairs']} layer pairs by relative depth + {s['grid_cells']} grid cells), split "
        f"{s['split']}, synthetic data with planted structure; threads {m['threads']} (BLAS and torch, both sides).",
        f"Machine: {m['nproc']} CPUs, {m['cpu']}; Python {m['python']}, numpy {m['numpy']}, scipy {m['scipy']}, "
        f"scikit-learn {m['scikit-learn']}, torch {m['torch']}; BLAS {m['blas']}.",
        f"Load average (1/5/15 min) {tuple(round(v, 2) for v in r['load_before'])} at the start, "
        f"{tuple(round(v, 2) for v in r['load_after'])} at the end.",
        f"Same-run kernel rates (start / end): float64 GEMM 2048^3 {r['rates_start']['gemm_gflops']:.1f} / "
        f"{r['rates_end']['gemm_gflops']:.1f} GFLOP/s; one SVD {s['widths'][0]}x{s['widths'][1]} "
        f"{r['rates_start']['svd_s']:.3f} / {r['rates_end']['svd_s']:.3f} s; one eigh {s['widths'][0]} "
        f"{r['rates_start']['eigh_s']:.3f} / {r['rates_end']['eigh_s']:.3f} s.",
        "",
        f"Interleaved timing (each unit run by interlingua, then at once by the baseline; {i['layer_pairs_timed']} "
        f"layer pairs and {i['cells_timed']} grid cells; seconds per unit, wall / CPU):",
        "",
        "| unit | interlingua | baseline | ratio wall | ratio CPU |",
        "|---|---:|---:|---:|---:|",
        f"| one layer pair: Procrustes + ridge, 2 directions, shuffled-fit controls, retrieval, MSE | "
        f"{u['ours_pair'][0]:.2f} / {u['ours_pair'][1]:.2f} | {u['base_pair'][0]:.2f} / {u['base_pair'][1]:.2f} | "
        f"{x(u['ours_pair'][0], u['base_pair'][0])} | {x(u['ours_pair'][1], u['base_pair'][1])} |",
        f"| one grid cell: Procrustes, 2 directions, retrieval | {u['ours_cell'][0]:.3f} / {u['ours_cell'][1]:.3f} | "
        f"{u['base_cell'][0]:.3f} / {u['base_cell'][1]:.3f} | {x(u['ours_cell'][0], u['base_cell'][0])} | "
        f"{x(u['ours_cell'][1], u['base_cell'][1])} |",
        f"| **whole task** ({s['layer_pairs']} pairs + {s['grid_cells']} cells, from the units) | "
        f"**{i['ours_wall_s']:.1f} / {i['ours_cpu_s']:.1f}** | **{i['base_wall_s']:.1f} / {i['base_cpu_s']:.1f}** | "
        f"**{x(i['ours_wall_s'], i['base_wall_s'])}** | **{x(i['ours_cpu_s'], i['base_cpu_s'])}** |",
        "",
        f'interlingua\'s whole task in one call (`evaluate_pair(..., layers="grid")`, {o["rows"]} rows): '
        f"{o['total_wall_s']:.1f} s wall / {o['total_cpu_s']:.1f} s CPU (layer pairs {o['auto_wall_s']:.1f} / "
        f"{o['auto_cpu_s']:.1f}, grid {o['grid_wall_s']:.1f} / {o['grid_cpu_s']:.1f}); against the baseline's units "
        f"extrapolated: {x(o['total_wall_s'], i['base_wall_s'])} wall, {x(o['total_cpu_s'], i['base_cpu_s'])} CPU.",
        f"Kernel floor of that call: {o['svds']} SVDs and {o['eighs']} eigendecompositions at this run's best unit "
        f"times = {o['kernel_floor_s']:.1f} s of its {o['total_cpu_s']:.1f} s CPU.",
        f"Values: {c['values_checked']} baseline results checked against interlingua's rows: retrieval metrics max abs "
        f"difference {c['max_abs_diff_retrieval']:.1e}, MSE / relative MSE max relative difference "
        f"{c['max_rel_diff_mse']:.1e}, ridge alphas chosen differently: {c['ridge_alpha_mismatches']}.",
        f"Planted structure, held out: best Procrustes P@1 {r['headline']['procrustes_p1_best_auto']:.3f}, best ridge "
        f"P@1 {r['headline']['ridge_p1_best_auto']:.3f}; shuffled-fit control at most "
        f"{r['headline']['shuffled_p1_max']:.3f} (chance {r['headline']['chance_p1']:.3f}).",
    ]
    if r["full_options"]:
        f = r["full_options"]
        lines.append(
            f"The layer pairs with every option on (bootstrap 1000, residual analysis): {f['wall_s']:.1f} s wall, "
            f"{f['cpu_s']:.1f} s CPU."
        )
    if r["retrieval_scaling"]:
        t = r["retrieval_scaling"]
        lines.append(
            f"Blockwise retrieval at n = {t['n']} (d = {t['d']}, cosine + CSLS k = 10): {t['wall_s']:.1f} s wall, "
            f"{t['cpu_s']:.1f} s CPU, peak traced memory {t['peak_mib']:.0f} MiB (inputs {t['inputs_mib']:.0f} MiB; "
            f"blocks of {t['block_rows']} rows); the dense similarity and CSLS matrices alone would take "
            f"{t['dense_two_matrices_mib']:.0f} MiB."
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    path.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
