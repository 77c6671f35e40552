"""Benchmark: permutation tests of the non-Gram measures, old path vs prepared path vs a hand-written numpy loop.

For each measure, n in (40, 300, 1012) and width in (576, 2048) (random data:
X and Y share a 3-dimensional latent plus noise, seed 0), a permutation test
with K = 20 permutations (seed 3) is run three ways:

- old: ``permutation_test(..., fast=False)``: the measure recomputed on every
  permuted ``Y[p]`` (what every non-Gram measure did before the prepared path;
  Procrustes with ``method="width"``, its p x q SVD, as before the score-space fit);
- new: ``permutation_test(...)``: each side prepared once (``measure.prepare``),
  the permutations evaluated in batches from the prepared sides; the observed
  value is the direct call (Procrustes: fitted in score space when n < width);
- hand: the loop a competent numpy user writes, with the per-side work hoisted
  out of the loop wherever it commutes with a row permutation:
  Procrustes: centre and normalise once, then ``svdvals(Xn^T Yn[p]).sum()`` per
  permutation (the width x width cross-product, singular values only);
  SVCCA / CCA: per-side SVD truncation once, then ``svdvals(Ux^T Uy[p])``;
  PWCCA: as CCA plus Morcos's weights ``|(Qx A)^T Xc|`` per permutation (n x p);
  RSA: ``pdist`` once per side, then ``scipy.stats.spearmanr`` of the permuted
  square RDM's upper triangle;
  mutual kNN: each side's (n, n) neighbour mask once, then
  ``(Mx & My[p][:, p]).sum(1) / k`` per permutation (O(n^2); the prepared path gathers n k entries);
  ANC (same model): columns centred and normalised once, then one column-wise dot product per
  permutation (O(n p)). ANC has no prepared path: its direct call is already O(n p) per draw, so
  "new" is the recompute path there.

Each timing includes the observed value (the hand loop: the identity
permutation) and any per-side preparation. Values
are checked in the same run: the new null equals the old null and the hand
null to 1e-10 relative, and the new p-value equals the old one exactly. A path
whose single evaluation, times K + 1, would exceed ``--max-seconds`` is not
run: its time is ONE measured evaluation times K + 1 (the hand loop: its
measured preparation plus one measured permutation step times K + 1), marked
"est." in the table, and its values are not compared.

BLAS threads are pinned with threadpoolctl (``--threads``, default 1: on the
shared 2-core development machine, under a load average above the core count,
two OpenBLAS threads made a batch of twenty 149 x 149 SVDs 48x slower than one
thread, 11.7 s against 0.24 s; see "BLAS threads under load" in
benchmarks/README.md); the machine's cores and load average are written with
the results.

Run::

    PYTHONPATH=src python benchmarks/bench_nulls.py              # ~3-5 min on 2 shared cores
    PYTHONPATH=src python benchmarks/bench_nulls.py --quick      # n = 40 only, width 576
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.linalg import svdvals
from scipy.spatial.distance import pdist, squareform
from scipy.stats import spearmanr
from threadpoolctl import threadpool_info, threadpool_limits

from interlingua.analysis.inference import permutation_test
from interlingua.analysis.inference._gram import permutation_batches
from interlingua.analysis.measures import MeasureWarning, get_measure

MEASURES = [
    "procrustes_resid2_centered_unitnorm",
    "svcca_var0.99",
    "cca_mean",
    "pwcca_x",
    "rsa_spearman_corr",
    "mknn_k10",
    "anc_abs",
]
KWARGS = {"anc_abs": {"same_model": True}}  # ANC compares neuron j with neuron j: one model's two inputs
RESULTS = Path(__file__).parent / "results"
# (n, width). Not (300, 2048) nor (1012, >576): on the 2 shared cores of the development machine one
# width-2048 SVD takes ~70 s, and at n = 1012, width 2048 even the prepared Procrustes null is an SVD of
# 1012 x 1012 per permutation (~4 s there); pass --cells to run them where cores allow.
CELLS = [(40, 576), (40, 1024), (40, 2048), (300, 576), (300, 1024), (1012, 576)]


def data(n: int, width: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3))
    x = z @ rng.standard_normal((3, width)) + rng.standard_normal((n, width))
    y = z @ rng.standard_normal((3, width)) + rng.standard_normal((n, width))
    return x, y


# ----------------------------------------------------------------------------- hand-written loops


def _kept(s: np.ndarray, threshold: float) -> int:
    var = s**2
    return min(int(np.searchsorted(np.cumsum(var) / var.sum(), threshold - 1e-12)) + 1, s.size)


def _bases(x: np.ndarray, y: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Centred sides' top singular directions, capped at (n - 1) // 2 when kx + ky > n - 1 (as interlingua)."""
    n = x.shape[0]
    out = []
    for a in (x, y):
        ac = a - a.mean(0)
        U, s, Vt = np.linalg.svd(ac, full_matrices=False)
        s_kept = s[s > s[0] * max(ac.shape) * np.finfo(float).eps]
        out.append((ac, U, s_kept, _kept(s_kept, threshold)))
    kx, ky = out[0][3], out[1][3]
    if kx + ky > n - 1:
        kx, ky = min(kx, (n - 1) // 2), min(ky, (n - 1) // 2)
    return out[0][1][:, :kx], out[1][1][:, :ky], out[0][0], out[1][0]


def hand_loop(measure_id: str, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], float]:
    """The per-side work done once; returns the per-permutation step ``f(p) -> value``."""
    if measure_id.startswith("procrustes"):
        xn, yn = x - x.mean(0), y - y.mean(0)
        xn, yn = xn / np.linalg.norm(xn), yn / np.linalg.norm(yn)
        return lambda p: float(svdvals(xn.T @ yn[p]).sum())
    if measure_id.startswith(("svcca", "cca")):
        qx, qy, _, _ = _bases(x, y, 0.99 if measure_id.startswith("svcca") else 1.0)
        return lambda p: float(np.clip(svdvals(qx.T @ qy[p]), 0, 1).mean())
    if measure_id.startswith("pwcca"):
        qx, qy, xc, _ = _bases(x, y, 1.0)

        def pw(p: np.ndarray) -> float:
            A, rho, _ = np.linalg.svd(qx.T @ qy[p], full_matrices=False)
            alpha = np.abs((qx @ A).T @ xc).sum(1)
            return float(np.dot(alpha / alpha.sum(), np.clip(rho, 0, 1)))

        return pw
    if measure_id.startswith("rsa"):
        dx, Dy = pdist(x, "correlation"), squareform(pdist(y, "correlation"))
        iu = np.triu_indices(x.shape[0], 1)
        return lambda p: float(spearmanr(dx, Dy[np.ix_(p, p)][iu])[0])
    if measure_id.startswith("mknn"):
        k = int(measure_id[len("mknn_k") :])

        def mask(a: np.ndarray) -> np.ndarray:
            u = a / np.linalg.norm(a, axis=1, keepdims=True)
            s = u @ u.T
            np.fill_diagonal(s, -np.inf)
            out = np.zeros(s.shape, dtype=bool)
            np.put_along_axis(out, np.argpartition(s, -k, axis=1)[:, -k:], True, axis=1)
            return out

        mx, my = mask(x), mask(y)
        return lambda p: float(((mx & my[np.ix_(p, p)]).sum(1) / k).mean())
    if measure_id.startswith("anc"):
        xc, yc = x - x.mean(0), y - y.mean(0)
        xc, yc = xc / np.linalg.norm(xc, axis=0), yc / np.linalg.norm(yc, axis=0)
        return lambda p: float(np.abs(np.einsum("ij,ij->j", xc, yc[p])).mean())
    raise ValueError(measure_id)


def rel_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest relative difference (absolute where the reference is 0)."""
    return float(np.max(np.abs(a - b) / np.where(b == 0, 1.0, np.abs(b))))


# ----------------------------------------------------------------------------- timing


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_cell(measure_id: str, n: int, width: int, k: int, max_seconds: float) -> dict[str, Any]:
    m = get_measure(measure_id)
    x, y = data(n, width)
    perms = np.concatenate(list(permutation_batches(n, k, 3, 64)))
    row: dict[str, Any] = {"measure": measure_id, "n": n, "width": width, "k": k}
    mkw = KWARGS.get(measure_id, {})
    t_new, new = timed(lambda: permutation_test(m, x, y, n_permutations=k, seed=3, **mkw))
    row.update(new_s=t_new, new_method=new.method, p_value=new.p_value)
    # old path: one evaluation first; the whole test only when it fits the budget
    kw = {"method": "width"} if measure_id.startswith("procrustes") else dict(mkw)
    t_one, _ = timed(lambda: m(x, y[perms[0]], **kw))
    if t_one * (k + 1) > max_seconds:
        row.update(old_s=t_one * (k + 1), old_estimated=True)
    else:
        t_old, old = timed(lambda: permutation_test(m, x, y, n_permutations=k, seed=3, fast=False, **kw))
        row.update(old_s=t_old, old_estimated=False)
        row["max_rel_diff_old"] = rel_diff(new.null, old.null)
        row["p_equal_old"] = bool(new.p_value == old.p_value)
        assert row["max_rel_diff_old"] <= 1e-10 and row["p_equal_old"], row
    # hand loop: per-side preparation, then the observed pairing and one permutation first
    t_prep, f = timed(lambda: hand_loop(measure_id, x, y))
    t_obs, _ = timed(lambda: f(np.arange(n)))
    if t_prep + t_obs * (k + 1) > max_seconds:
        row.update(hand_s=t_prep + t_obs * (k + 1), hand_estimated=True)
    else:
        t_rest, hand = timed(lambda: np.array([f(p) for p in perms]))
        row.update(hand_s=t_prep + t_obs + t_rest, hand_estimated=False)
        row["max_rel_diff_hand"] = rel_diff(new.null, hand)
        assert row["max_rel_diff_hand"] <= 1e-10, row
    return row


def machine(threads: int) -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "blas_threads": threads,
        "blas": sorted({f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info()}),
        "loadavg_start": os.getloadavg(),
    }


def fmt(s: float, est: bool) -> str:
    return f"{s:.2f}{' est.' if est else ''}"


def write_md(rows: list[dict[str, Any]], info: dict[str, Any], total: float, path: Path) -> None:
    lines = [
        "# Permutation tests: old path vs prepared path vs a hand-written numpy loop",
        "",
        f"`PYTHONPATH=src python benchmarks/bench_nulls.py` ({total:.0f} s in all). K = {rows[0]['k']} permutations, "
        "times in seconds, each including the observed value and any per-side preparation. "
        "'est.': not run; one measured evaluation times K + 1 (see the script's docstring). "
        "Cells (300, 2048) and (1012, > 576) are left out to keep the run short (see CELLS in the script).",
        "",
        f"Machine: {info['platform']}, Python {info['python']}, numpy {info['numpy']}, "
        f"{info['cpu_count']} CPUs ({info['usable_cpus']} usable), BLAS threads pinned to {info['blas_threads']} "
        f"({', '.join(info['blas'])}); load average {tuple(round(v, 2) for v in info['loadavg_start'])} at the start, "
        f"{tuple(round(v, 2) for v in info['loadavg_end'])} at the end "
        "(a shared machine: ratios hold better than times).",
        "",
        "| measure | n | width | old | new (prepared) | hand loop | old / new | hand / new | max rel diff new-old | "
        "p equal old | max rel diff new-hand |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        d_old = f"{r['max_rel_diff_old']:.1e}" if "max_rel_diff_old" in r else "-"
        d_hand = f"{r['max_rel_diff_hand']:.1e}" if "max_rel_diff_hand" in r else "-"
        p_eq = str(r["p_equal_old"]) if "p_equal_old" in r else "-"
        lines.append(
            f"| {r['measure']} | {r['n']} | {r['width']} | {fmt(r['old_s'], r['old_estimated'])} | {r['new_s']:.2f} | "
            f"{fmt(r['hand_s'], r['hand_estimated'])} | {r['old_s'] / r['new_s']:.1f} | "
            f"{r['hand_s'] / r['new_s']:.1f} | {d_old} | {p_eq} | {d_hand} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--permutations", type=int, default=20)
    ap.add_argument("--max-seconds", type=float, default=20.0, help="budget of one old or hand test before estimating")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cells", type=str, default=None, help="e.g. '40x576,1012x2048' (n x width)")
    ap.add_argument("--measures", type=str, default=None, help="comma-separated subset of MEASURES")
    ap.add_argument("--out", type=Path, default=RESULTS / "nulls.md")
    args = ap.parse_args()
    threads = args.threads
    cells = [(40, 576)] if args.quick else CELLS
    if args.cells:
        cells = [tuple(int(v) for v in c.split("x")) for c in args.cells.split(",")]
    warnings.simplefilter("ignore", MeasureWarning)  # the wide='reduce' notes of CCA at n < width
    t0 = time.perf_counter()
    rows = []
    with threadpool_limits(limits=threads):
        info = machine(threads)
        for n, w in cells:
            for mid in args.measures.split(",") if args.measures else MEASURES:
                r = run_cell(mid, n, w, args.permutations, args.max_seconds)
                print(json.dumps(r), flush=True)
                rows.append(r)
    info["loadavg_end"] = os.getloadavg()
    total = time.perf_counter() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_md(rows, info, total, args.out)
    args.out.with_suffix(".json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    print(f"wrote {args.out} ({total:.0f} s)")


if __name__ == "__main__":
    main()
