"""Benchmark: linear CKA over a layer x layer grid and a permutation test, interlingua vs peer libraries.

Default sizes follow the paper's setting: n = 1012 FLORES+ devtest sentences,
width 2048, 25 layers per side (random float64 layers that share a low-rank
latent, so CKA values are non-trivial), and a 10,000-permutation test for one
layer pair. Every library gets the same float64 arrays; values are checked
against interlingua (max abs difference) before any timing is reported.

Peers (benchmark-only dependencies, installed when present): repsim, ckatorch,
torch-cka; rsatoolbox is probed (it has no CKA). A peer whose full run would
take longer than ``--peer-budget`` seconds is timed on a subset (rows of the
grid, or a number of permutations) and extrapolated linearly: the output says
so in the "how" column.

Run::

    PYTHONPATH=src python benchmarks/bench_measures.py            # full, a few minutes on 2 cores
    PYTHONPATH=src python benchmarks/bench_measures.py --quick    # small smoke run
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.inference import permutation_test
from interlingua.inference._gram import permutation_batches
from interlingua.measures import cka_grid


@dataclass
class Row:
    library: str
    version: str
    estimator: str
    grid_s: float
    grid_how: str
    grid_diff: float
    perm_s: float
    perm_how: str
    perm_diff: float


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
    }
    try:
        import torch

        info["torch"] = f"{torch.__version__} ({torch.get_num_threads()} threads)"
    except ImportError:
        info["torch"] = "not installed"
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = "; ".join(
            f"{p.get('internal_api')} {p.get('version')} {p.get('architecture', '')} {p.get('num_threads')} threads"
            for p in threadpool_info()
        )
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    return info


def matmul_gflops(size: int = 2048, repeats: int = 5) -> float:
    """Best-of-``repeats`` float64 GEMM rate: 2 size^3 flops per product."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((size, size)), rng.standard_normal((size, size))
    best = min(_timed(lambda: a @ b)[1] for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def make_layers(n: int, width: int, n_layers: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two (L, n, width) float64 stacks sharing a rank-32 latent whose weight varies with depth."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 32))
    out = []
    for side in range(2):
        stack = np.empty((n_layers, n, width))
        for k in range(n_layers):
            s = (k + 1) / n_layers if side == 0 else (n_layers - k) / n_layers
            stack[k] = 0.3 * s * (z @ rng.standard_normal((32, width))) + rng.standard_normal((n, width))
        out.append(stack)
    return out[0], out[1]


# --------------------------------------------------------------------------- peers


def peer_repsim(a: np.ndarray, b: np.ndarray, ref: dict[str, Any], budget: float) -> Row:
    import repsim

    L = a.shape[0]
    k = ref["pair"]
    # natural API: one call on a list of M matrices returns the M x M matrix (all pairs, both sides)
    s = 2
    grid, t = _timed(lambda: repsim.cka([*a[:s], *b[:s]], kernel_type="linear", estimator="gretton"))
    diff = float(np.abs(grid[:s, s:] - ref["grid_biased"][:s, :s]).max())
    grid_s = t * (2 * L) / (2 * s)
    how = f"{2 * s} of {2 * L} matrices timed ({t:.1f} s), x{L / s:.1f} (per-matrix kernel cost dominates)"
    perm_s, perm_how, perm_diff = _loop_perms(
        lambda x, y: float(repsim.cka([x, y], kernel_type="linear", estimator="gretton")[0, 1]), a[k], b[k], ref, "biased", budget
    )
    return Row("repsim", _version("repsim"), "biased (gretton)", grid_s, how, diff, perm_s, perm_how, perm_diff)


def peer_ckatorch(a: np.ndarray, b: np.ndarray, ref: dict[str, Any], budget: float) -> Row:
    import torch
    from ckatorch import cka_base

    L = a.shape[0]
    k = ref["pair"]
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)

    def one(x: Any, y: Any) -> float:
        return float(cka_base(x, y, kernel="linear", unbiased=False))

    _, t1 = _timed(lambda: one(ta[0], tb[0]))
    rows = int(max(1, min(L, budget // max(t1 * L, 1e-9))))
    vals = np.empty((rows, L))
    _, t = _timed(lambda: [vals.__setitem__((i, j), one(ta[i], tb[j])) for i in range(rows) for j in range(L)])
    diff = float(np.abs(vals - ref["grid_biased"][:rows]).max())
    how = "all pairs timed" if rows == L else f"{rows} of {L} grid rows timed ({t:.1f} s), x{L / rows:.1f}"
    perm_s, perm_how, perm_diff = _loop_perms(lambda x, y: one(torch.from_numpy(x), torch.from_numpy(y)), a[k], b[k], ref, "biased", budget)
    return Row("ckatorch", _version("ckatorch"), "biased (cka_base, loop over pairs)", t * L / rows, how, diff, perm_s, perm_how, perm_diff)


def peer_torch_cka(a: np.ndarray, b: np.ndarray, ref: dict[str, Any], budget: float) -> Row:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    from torch_cka import CKA

    torch.set_default_dtype(torch.float64)  # torch-cka builds float32 accumulators otherwise
    L, n = a.shape[0], a.shape[1]
    k = ref["pair"]

    class Replay(nn.Module):
        """Replays stored layers through identity taps, so torch-cka's forward hooks see them."""

        def __init__(self, stack: np.ndarray) -> None:
            super().__init__()
            self.stack = torch.from_numpy(stack)
            self.taps = nn.ModuleList([nn.Identity() for _ in range(stack.shape[0])])

        def forward(self, idx: torch.Tensor) -> None:
            for j, tap in enumerate(self.taps):
                tap(self.stack[j][idx])

    def run(sa: np.ndarray, sb: np.ndarray, order: np.ndarray) -> np.ndarray:
        cka = CKA(
            Replay(sa), Replay(sb), model1_name="A", model2_name="B",
            model1_layers=[f"taps.{i}" for i in range(sa.shape[0])],
            model2_layers=[f"taps.{j}" for j in range(sb.shape[0])],
        )
        dl1 = DataLoader(TensorDataset(torch.arange(n)), batch_size=n)
        dl2 = DataLoader(TensorDataset(torch.from_numpy(order)), batch_size=n)
        import contextlib
        import io

        with contextlib.redirect_stderr(io.StringIO()):
            cka.compare(dl1, dl2)
        return cka.export()["CKA"].numpy()

    try:
        ident = np.arange(n)
        _, t1 = _timed(lambda: run(a[:1], b[:1], ident))
        rows = int(max(1, min(L, budget // max(t1 * L, 1e-9))))
        vals, t = _timed(lambda: run(a[:rows], b, ident))
        diff = float(np.abs(vals - ref["grid_debiased"][:rows]).max())
        how = "whole grid" if rows == L else f"{rows} of {L} grid rows timed ({t:.1f} s), x{L / rows:.1f}"

        def one(x: np.ndarray, y: np.ndarray) -> float:
            return float(run(x[None], y[None], ident)[0, 0])

        perm_s, perm_how, perm_diff = _loop_perms(one, a[k], b[k], ref, "debiased", budget)
    finally:
        torch.set_default_dtype(torch.float32)
    return Row(
        "torch-cka", _version("torch-cka"), "debiased (unbiased HSIC, one batch of n)", t * L / rows, how, diff, perm_s, perm_how, perm_diff
    )


def _loop_perms(
    one: Callable[[np.ndarray, np.ndarray], float], x: np.ndarray, y: np.ndarray, ref: dict[str, Any], est: str, budget: float
) -> tuple[float, str, float]:
    """Time a loop of ``one(x, y[p])`` over the same permutations interlingua drew; extrapolate to K if needed."""
    K, seed = ref["K"], ref["seed"]
    null = ref[f"null_{est}"]
    done, diffs = 0, []
    t0 = time.perf_counter()
    for perms in permutation_batches(x.shape[0], K, seed, 1):
        diffs.append(abs(one(x, y[perms[0]]) - null[done]))
        done += 1
        if time.perf_counter() - t0 > budget / 2 and done >= 2:
            break
    t = time.perf_counter() - t0
    how = f"loop of {K} calls" if done == K else f"{done} of {K} calls timed ({t:.1f} s), x{K / done:.0f}"
    return t * K / done, how, float(max(diffs))


def probe_rsatoolbox() -> str:
    try:
        import importlib

        cmp = importlib.import_module("rsatoolbox.rdm.compare")  # the package re-exports a function of that name
    except ImportError:
        return "rsatoolbox not installed"
    methods = [m for m in dir(cmp) if m.startswith("compare_")]
    has = any("cka" in m for m in methods)
    return (
        f"rsatoolbox {_version('rsatoolbox')}: "
        + ("has CKA" if has else f"no CKA (RDM comparisons only: {', '.join(m[8:] for m in methods)}); not comparable, not timed")
    )


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1012)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=25)
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--peer-budget", type=float, default=60.0, help="seconds per peer measurement before extrapolating")
    ap.add_argument("--quick", action="store_true", help="n=200, width=256, 4 layers, 500 permutations")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "measures.md"))
    args = ap.parse_args()
    if args.quick:
        args.n, args.width, args.layers, args.permutations, args.peer_budget = 200, 256, 4, 500, 10.0
    n, w, L, K = args.n, args.width, args.layers, args.permutations

    load_start = os.getloadavg()[1]
    info = machine_info()
    rate = matmul_gflops()
    a, b = make_layers(n, w, L)
    pair = L // 2

    ref: dict[str, Any] = {"pair": pair, "K": K, "seed": 0}
    ref["grid_biased"], t_grid_b = _timed(lambda: cka_grid(a, b, debiased=False))
    ref["grid_debiased"], t_grid_d = _timed(lambda: cka_grid(a, b, debiased=True))
    flops_gemm = 2 * L * 2 * n * n * w + 2 * L * L * n * n  # X X^T counted as a GEMM (2 n^2 p) + grid product
    flops_syrk = 2 * L * n * (n + 1) * w + 2 * L * L * n * n  # what symmetric BLAS (syrk) actually performs
    res_b, t_perm_b = _timed(lambda: permutation_test("cka_linear_biased", a[pair], b[pair], K, seed=0))
    res_d, t_perm_d = _timed(lambda: permutation_test("cka_linear_debiased", a[pair], b[pair], K, seed=0))
    ref["null_biased"], ref["null_debiased"] = res_b.null, res_d.null

    rows = [
        Row("interlingua", _version("interlingua") if _version("interlingua") != "not installed" else "0.1.0 (src)",
            "biased", t_grid_b, "whole grid (cka_grid)", 0.0, t_perm_b, f"permutation_test, {K} (Gram gather)", 0.0),
        Row("interlingua", "", "debiased", t_grid_d, "whole grid (cka_grid)", 0.0, t_perm_d, f"permutation_test, {K} (Gram gather)", 0.0),
    ]
    notes = []
    for name, fn in (("repsim", peer_repsim), ("ckatorch", peer_ckatorch), ("torch-cka", peer_torch_cka)):
        try:
            rows.append(fn(a, b, ref, args.peer_budget))
            print(f"done: {name}", flush=True)
        except Exception as exc:  # a missing or broken peer is reported, not fatal
            notes.append(f"{name}: not run ({type(exc).__name__}: {exc})")
    notes.append(probe_rsatoolbox())
    notes.append("anatome, netrep: not on the package index this machine reaches (pip: no matching distribution); not run")

    load_end = os.getloadavg()[1]
    md_lines = [
        f"Linear CKA, n = {n}, width {w}, {L} x {L} layer grid (float64), and a {K:,}-permutation test of layer pair "
        f"({pair}, {pair}).",
        "",
        f"Machine: {info['nproc']} CPUs, {info['cpu']}; Python {info['python']}, numpy {info['numpy']}, torch {info['torch']}; "
        f"BLAS: {info['blas']}; OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']}. 5-minute load average "
        f"{load_start:.1f} at the start, {load_end:.1f} at the end (the machine is shared: timings carry that noise).",
        "",
        f"numpy float64 matmul (2048 x 2048, best of 5): {rate:.1f} GFLOP/s. interlingua biased grid: "
        f"{flops_gemm / t_grid_b / 1e9:.1f} GFLOP/s counting each Gram X X^T as a GEMM (2 n^2 p flops) = "
        f"{flops_gemm / t_grid_b / 1e9 / rate:.0%} of the matmul rate; {flops_syrk / t_grid_b / 1e9:.1f} GFLOP/s in the "
        "arithmetic symmetric BLAS (syrk) actually performs (n (n+1) p per Gram).",
        "",
        "| library | version | estimator | grid (s) | grid: how | grid max abs diff | permutation test (s) | permutations: how | null max abs diff |",
        "|---|---|---|---:|---|---:|---:|---|---:|",
    ]
    for r in rows:
        md_lines.append(
            f"| {r.library} | {r.version} | {r.estimator} | {r.grid_s:.1f} | {r.grid_how} | {r.grid_diff:.1e} | "
            f"{r.perm_s:.1f} | {r.perm_how} | {r.perm_diff:.1e} |"
        )
    md_lines.append("")
    base = {"biased": t_grid_b, "debiased": t_grid_d}
    pbase = {"biased": t_perm_b, "debiased": t_perm_d}
    for r in rows[2:]:
        est = "debiased" if r.estimator.startswith("debiased") else "biased"
        md_lines.append(
            f"- interlingua vs {r.library} ({est}): grid {r.grid_s / base[est]:.1f}x faster, "
            f"permutation test {r.perm_s / pbase[est]:.0f}x faster."
        )
    md_lines += [f"- {note}" for note in notes]
    text = "\n".join(md_lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"written: {out}")


if __name__ == "__main__":
    main()
