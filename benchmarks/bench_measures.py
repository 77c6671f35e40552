"""Benchmark: linear CKA over a layer x layer grid and a permutation test, interlingua vs peer libraries.

Default sizes follow the paper's setting: n = 1012 FLORES+ devtest sentences,
width 2048, 25 layers per side (random float64 layers that share a low-rank
latent, so CKA values are non-trivial), and a 10,000-permutation test for one
layer pair. Every library gets the same float64 arrays; values are checked
against interlingua (max abs difference) before any timing is reported.

The grid is also compared with a competent baseline: ten lines of numpy
(centre the columns, ``x @ x.T``, scale to unit Frobenius norm, stack, one
matrix product), timed interleaved with ``cka_grid`` (``--repeats`` rounds)
so that both see the same load. Rates are reported in the arithmetic actually
done: a symmetric Gram ``X X^T`` of an (n, p) layer is n(n+1)/2 * p
multiply-adds = n(n+1)p flops (BLAS syrk computes one triangle); the grid
product is a general (La, n^2) x (n^2, Lb) product, 2 La Lb n^2 flops. The
machine's own GEMM rate (2048^3) and syrk rate (one Gram of the benchmark's
shape) are measured in the same run, and the "BLAS bound" is the time of those
BLAS calls alone: 2L syrks plus the grid product.

Peers (benchmark-only dependencies, installed when present): repsim, ckatorch,
torch-cka; rsatoolbox is probed (it has no CKA). A peer whose full run would
take longer than ``--peer-budget`` seconds is timed on a subset and
extrapolated linearly ONLY where the cost is linear in the subset (independent
pairs of a loop, independent permutation calls); the "how" column says so.
repsim's grid call compares all pairs of the M matrices it is given, so its
time grows ~M^2: it is timed on the whole grid (``--repsim-full``) or not at all.

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

from interlingua.analysis.inference import permutation_test
from interlingua.analysis.inference._gram import permutation_batches
from interlingua.analysis.measures import cka_grid


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
    except ImportError:  # numpy's build record instead (no thread count); BLAS threads from the environment
        try:
            blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            threads = (
                os.environ.get("OPENBLAS_NUM_THREADS")
                or os.environ.get("OMP_NUM_THREADS")
                or "unset (default: all cores)"
            )
            info["blas"] = (
                f"{blas.get('name')} {blas.get('version')} (numpy build; threadpoolctl not installed; "
                f"OPENBLAS_NUM_THREADS {threads})"
            )
        except Exception:  # noqa: BLE001 - informational only
            info["blas"] = "unknown (threadpoolctl not installed)"
    return info


def matmul_gflops(size: int = 2048, repeats: int = 5) -> float:
    """Best-of-``repeats`` float64 GEMM rate: 2 size^3 flops per product."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((size, size)), rng.standard_normal((size, size))
    best = min(_timed(lambda: a @ b)[1] for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def blas_bound(a: np.ndarray, b: np.ndarray, repeats: int = 5) -> dict[str, float]:
    """Times of the BLAS calls a Gram-stack grid cannot avoid, best of ``repeats`` each.

    ``syrk_s``: one centred Gram ``xc @ xc.T`` of a layer of the benchmark's
    shape, written into a reused (n, n) buffer (numpy calls BLAS syrk for
    ``x @ x.T``); ``product_s``: the (La, n^2) x (n^2, Lb) grid product.
    ``bound_s = (La + Lb) syrk_s + product_s``.
    """
    La, n, _ = a.shape
    Lb = b.shape[0]
    xc = a[0] - a[0].mean(0)
    out = np.empty((n, n))
    syrk = min(_timed(lambda: np.matmul(xc, xc.T, out=out))[1] for _ in range(repeats))
    ga, gb = np.full((La, n * n), 0.5), np.full((Lb, n * n), 0.25)
    product = min(_timed(lambda: ga @ gb.T)[1] for _ in range(max(2, repeats // 2)))
    return {"syrk_s": syrk, "product_s": product, "bound_s": (La + Lb) * syrk + product}


def numpy_baseline_grid(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Biased linear-CKA grid in ten lines of numpy: the competent version a user writes first."""

    def unit_grams(stack: np.ndarray) -> np.ndarray:
        rows = []
        for x in stack:
            xc = x - x.mean(0)
            k = xc @ xc.T  # numpy uses BLAS syrk for x @ x.T
            rows.append((k / np.linalg.norm(k)).ravel())
        return np.stack(rows)

    return unit_grams(a) @ unit_grams(b).T


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


def peer_repsim(a: np.ndarray, b: np.ndarray, ref: dict[str, Any], budget: float, full: bool = False) -> Row:
    import repsim

    L = a.shape[0]
    k = ref["pair"]
    # natural API: one call on a list of M matrices returns the M x M matrix (all pairs, both sides).
    # Its cost grows ~M^2 (every pair), so a subset cannot be extrapolated linearly: whole grid or nothing.
    if full:
        grid, t = _timed(lambda: repsim.cka([*a, *b], kernel_type="linear", estimator="gretton"))
        diff = float(np.abs(grid[:L, L:] - ref["grid_biased"]).max())
        grid_s, how = t, f"whole grid: one call on all {2 * L} matrices"
    else:
        s = 2
        grid, t = _timed(lambda: repsim.cka([*a[:s], *b[:s]], kernel_type="linear", estimator="gretton"))
        diff = float(np.abs(grid[:s, s:] - ref["grid_biased"][:s, :s]).max())
        grid_s = float("nan")
        how = (
            f"not timed: {2 * s} of {2 * L} matrices took {t:.1f} s, but the call compares all pairs, so time grows "
            "~M^2 and cannot be extrapolated linearly; --repsim-full times the whole call"
        )
    perm_s, perm_how, perm_diff = _loop_perms(
        lambda x, y: float(repsim.cka([x, y], kernel_type="linear", estimator="gretton")[0, 1]),
        a[k],
        b[k],
        ref,
        "biased",
        budget,
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
    perm_s, perm_how, perm_diff = _loop_perms(
        lambda x, y: one(torch.from_numpy(x), torch.from_numpy(y)), a[k], b[k], ref, "biased", budget
    )
    return Row(
        "ckatorch",
        _version("ckatorch"),
        "biased (cka_base, loop over pairs)",
        t * L / rows,
        how,
        diff,
        perm_s,
        perm_how,
        perm_diff,
    )


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
            Replay(sa),
            Replay(sb),
            model1_name="A",
            model2_name="B",
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
        "torch-cka",
        _version("torch-cka"),
        "debiased (unbiased HSIC, one batch of n)",
        t * L / rows,
        how,
        diff,
        perm_s,
        perm_how,
        perm_diff,
    )


def _loop_perms(
    one: Callable[[np.ndarray, np.ndarray], float],
    x: np.ndarray,
    y: np.ndarray,
    ref: dict[str, Any],
    est: str,
    budget: float,
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
    return f"rsatoolbox {_version('rsatoolbox')}: " + (
        "has CKA"
        if has
        else f"no CKA (RDM comparisons only: {', '.join(m[8:] for m in methods)}); not comparable, not timed"
    )


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1012)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=25)
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--peer-budget", type=float, default=60.0, help="seconds per peer measurement before extrapolating")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds of numpy baseline / cka_grid timings")
    ap.add_argument("--repsim-full", action="store_true", help="time repsim's whole-grid call (minutes at full size)")
    ap.add_argument("--grid-only", action="store_true", help="only the grid timings (no permutation tests, no peers)")
    ap.add_argument("--quick", action="store_true", help="n=200, width=256, 4 layers, 500 permutations")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "measures.md"))
    args = ap.parse_args()
    if args.quick:
        args.n, args.width, args.layers, args.permutations, args.peer_budget = 200, 256, 4, 500, 10.0
    n, w, L, K = args.n, args.width, args.layers, args.permutations

    load_start = os.getloadavg()
    info = machine_info()
    rate = matmul_gflops()
    a, b = make_layers(n, w, L)
    pair = L // 2
    bound = blas_bound(a, b)
    syrk_rate = n * (n + 1) * w / bound["syrk_s"] / 1e9

    # interleaved rounds of numpy baseline, cka_grid biased and debiased (same inputs, same load), the order
    # reversed every other round so that neither side always runs first
    times: dict[str, list[float]] = {"numpy": [], "biased": [], "debiased": []}
    ref: dict[str, Any] = {"pair": pair, "K": K, "seed": 0}
    grids: dict[str, Any] = {}
    calls = {
        "numpy": lambda: numpy_baseline_grid(a, b),
        "biased": lambda: cka_grid(a, b, debiased=False),
        "debiased": lambda: cka_grid(a, b, debiased=True),
    }
    for r in range(max(1, args.repeats)):
        for key in list(calls)[:: 1 if r % 2 == 0 else -1]:
            grids[key], t = _timed(calls[key])
            times[key].append(t)
    base_grid, ref["grid_biased"], ref["grid_debiased"] = grids["numpy"], grids["biased"], grids["debiased"]
    base_diff = float(np.abs(base_grid - ref["grid_biased"]).max())
    if not base_diff < 1e-12:
        raise SystemExit(f"numpy baseline and cka_grid disagree: max abs diff {base_diff:.1e}")
    t_base, t_grid_b, t_grid_d = (min(times[k]) for k in ("numpy", "biased", "debiased"))
    flops_useful = 2 * L * n * (n + 1) * w + 2 * L * L * n * n  # syrk arithmetic + the grid product
    flops_gemm = 2 * L * 2 * n * n * w + 2 * L * L * n * n  # each Gram counted as a general product (2 n^2 p)
    t_perm_b = t_perm_d = float("nan")
    if not args.grid_only:
        res_b, t_perm_b = _timed(lambda: permutation_test("cka_linear_biased", a[pair], b[pair], K, seed=0))
        res_d, t_perm_d = _timed(lambda: permutation_test("cka_linear_debiased", a[pair], b[pair], K, seed=0))
        ref["null_biased"], ref["null_debiased"] = res_b.null, res_d.null

    best = f"best of {len(times['biased'])} interleaved"
    rows = [
        Row(
            "interlingua",
            _version("interlingua") if _version("interlingua") != "not installed" else "0.1.0 (src)",
            "biased",
            t_grid_b,
            f"whole grid (cka_grid), {best}",
            0.0,
            t_perm_b,
            f"permutation_test, {K} (Gram gather)",
            0.0,
        ),
        Row(
            "interlingua",
            "",
            "debiased",
            t_grid_d,
            f"whole grid (cka_grid), {best}",
            0.0,
            t_perm_d,
            f"permutation_test, {K} (Gram gather)",
            0.0,
        ),
        Row(
            "numpy (10 lines)",
            np.__version__,
            "biased",
            t_base,
            f"whole grid, {best}",
            base_diff,
            float("nan"),
            "no permutation test",
            float("nan"),
        ),
    ]
    notes = []
    peers: list[tuple[str, Callable[..., Row]]] = [
        ("repsim", lambda *p: peer_repsim(*p, full=args.repsim_full)),
        ("ckatorch", peer_ckatorch),
        ("torch-cka", peer_torch_cka),
    ]
    for name, fn in [] if args.grid_only else peers:
        try:
            rows.append(fn(a, b, ref, args.peer_budget))
            print(f"done: {name}", flush=True)
        except Exception as exc:  # a missing or broken peer is reported, not fatal
            notes.append(f"{name}: not run ({type(exc).__name__}: {exc})")
    if args.grid_only:
        notes.append("--grid-only: no permutation tests, no peers")
    else:
        notes.append(probe_rsatoolbox())
        notes.append(
            "anatome, netrep: not on the package index this machine reaches (pip: no matching distribution); not run"
        )

    load_end = os.getloadavg()

    def gf(t: float, flops: float = flops_useful) -> float:
        return flops / t / 1e9

    def secs(v: list[float]) -> str:
        return ", ".join(f"{x:.2f}" for x in v)

    md_lines = [
        f"Linear CKA, n = {n}, width {w}, {L} x {L} layer grid (float64), and a {K:,}-permutation test of layer pair "
        f"({pair}, {pair}).",
        "",
        f"Machine: {info['nproc']} CPUs, {info['cpu']}; Python {info['python']}, numpy {info['numpy']}, torch "
        f"{info['torch']}; BLAS: {info['blas']}; OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']}. Load average (1/5/15 "
        f"min) {'/'.join(f'{v:.1f}' for v in load_start)} at the start, {'/'.join(f'{v:.1f}' for v in load_end)} at "
        "the end (the machine is shared: timings carry that noise).",
        "",
        "Machine rates, this run: float64 GEMM (2048 x 2048, best of 5) "
        f"{rate:.1f} GFLOP/s; one syrk Gram of a {n} x {w} layer (best of 5) {bound['syrk_s'] * 1e3:.1f} ms = "
        f"{syrk_rate:.1f} GFLOP/s (n(n+1)p flops); grid product ({L} x {n * n:,}) x ({n * n:,} x {L}) "
        f"{bound['product_s'] * 1e3:.0f} ms. BLAS bound for the whole grid: {2 * L} syrks + the product = "
        f"{bound['bound_s']:.2f} s.",
        "",
        f"Grid arithmetic: {flops_useful / 1e9:.1f} GFLOP actually done ({2 * L} symmetric Grams at n(n+1)p flops + "
        f"the grid product at 2 L^2 n^2); {flops_gemm / 1e9:.1f} GFLOP if each Gram were counted as a general product "
        "(2 n^2 p), which syrk does not perform.",
        "",
        "| grid | times, interleaved rounds (s) | best (s) | GFLOP/s (done) | % of GEMM rate | BLAS bound / time |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, key, flops in (
        ("numpy, 10 lines (biased)", "numpy", flops_useful),
        ("interlingua cka_grid, biased", "biased", flops_useful),
        ("interlingua cka_grid, debiased", "debiased", flops_useful),
    ):
        t = min(times[key])
        md_lines.append(
            f"| {label} | {secs(times[key])} | {t:.2f} | {gf(t, flops):.1f} | {gf(t, flops) / rate:.0%} | "
            f"{bound['bound_s'] / t:.0%} |"
        )
    md_lines += [
        "",
        f"cka_grid (biased) / numpy baseline, best times: {t_grid_b / t_base:.2f}; per interleaved round: "
        + ", ".join(f"{g / nb:.2f}" for g, nb in zip(times["biased"], times["numpy"]))
        + f" (median {float(np.median(np.array(times['biased']) / np.array(times['numpy']))):.2f})"
        + f". Max abs difference of the two grids: {base_diff:.1e}.",
        "",
        "| library | version | estimator | grid (s) | grid: how | grid max abs diff | permutation test (s) | "
        "permutations: how | null max abs diff |",
        "|---|---|---|---:|---|---:|---:|---|---:|",
    ]

    def cell(v: float, fmt: str) -> str:
        return "-" if not np.isfinite(v) else format(v, fmt)

    for r in rows:
        md_lines.append(
            f"| {r.library} | {r.version} | {r.estimator} | {cell(r.grid_s, '.1f')} | {r.grid_how} | "
            f"{cell(r.grid_diff, '.1e')} | {cell(r.perm_s, '.1f')} | {r.perm_how} | {cell(r.perm_diff, '.1e')} |"
        )
    md_lines.append("")
    base = {"biased": t_grid_b, "debiased": t_grid_d}
    pbase = {"biased": t_perm_b, "debiased": t_perm_d}
    for r in rows[3:]:
        est = "debiased" if r.estimator.startswith("debiased") else "biased"
        grid_part = f"grid {r.grid_s / base[est]:.1f}x the time" if np.isfinite(r.grid_s) else "grid not timed"
        md_lines.append(
            f"- {r.library} ({est}) vs interlingua: {grid_part}, permutation test {r.perm_s / pbase[est]:.0f}x the "
            "time."
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
