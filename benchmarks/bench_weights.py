"""Streamed weight diagnostics vs the full-memory torch computation a user would write.

Three GPT-2-shaped checkpoints (default: GPT-2 small's width and vocabulary, 8 blocks:
~96M parameters, float32, ~385 MB each) are written to a scratch folder: a random "base",
and A = base + noise_a, B = base + 0.5 * noise_a + noise_b (correlated task vectors).
Each approach runs in a fresh Python process (so its peak RSS is its own), in
interleaved rounds, and reports the time of the computation (imports excluded) and the
process's peak RSS (``ru_maxrss``) together with the RSS after imports:

* ``streamed``: ``interlingua.mergeability.diagnostics.weight_diagnostics(a, b, base=...)``
  (one tensor of each checkpoint at a time, float64);
* ``full``: ``safetensors.torch.load_file`` of the three checkpoints, every tensor
  concatenated into one float64 vector per model for cosine / relative L2 / norm
  ratio / task-vector cosine, and the TIES counts tensor by tensor with a stable
  descending sort (the same tie rule: lower index first; ``torch.topk`` breaks ties at
  the threshold arbitrarily and then differs by a few positions on ~100M entries).

The global values of both are checked equal (relative 1e-9; TIES counts exactly) before
any number is printed. Rerun:

    PYTHONPATH=src python benchmarks/bench_weights.py              # ~96M params, 2 rounds
    PYTHONPATH=src python benchmarks/bench_weights.py --quick      # small smoke run
    PYTHONPATH=src python benchmarks/bench_weights.py --layers 12  # GPT-2 small (124M)

``--merge``: a linear merge (weights 0.5 / 0.5) of A and B, written as a model folder, by
``interlingua.mergeability.merge.build_merge`` (streamed: one tensor of each input at a time,
written straight into ``model.safetensors``) against mergekit's Python API
(``mergekit.merge.run_merge`` with a ``MergeConfiguration`` for ``linear``, CPU, lazy
unpickling, no tokenizer copy, no model card), each in its own process, interleaved rounds;
the two outputs are checked equal tensor by tensor (float32, max abs diff <= 1e-6) before
any number is printed. interlingua runs twice per round: ``cold`` (an empty hash cache: the
content key reads and hashes both inputs) and ``warm`` (the inputs' sha256 already in the
store's ``hashes/``, as on any later build from the same checkpoints); both hash the output
while writing it and fsync it. The machine's limits are measured alongside: writing one
model's bytes with an fsync, and sha256 of them.

    PYTHONPATH=src python benchmarks/bench_weights.py --merge --layers 12 --rounds 3 \
        --json benchmarks/results/weights_merge.json     # 124M, ~2 min
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

VALUES = ("dot", "sq_a", "sq_b", "sq_diff", "cosine", "rel_l2", "norm_ratio", "tv_cosine", "tv_norm_a", "tv_norm_b")
COUNTS = ("ties_kept_a", "ties_both", "ties_agree")


def _rss_mb() -> float:
    """Peak RSS of this process image: VmHWM (reset at exec). ``ru_maxrss`` is not: Linux carries the
    parent's high-water mark across fork + exec, so a worker spawned by a driver that built the
    checkpoints would report the driver's peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux


def _current_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return math.nan


# ---------------------------------------------------------------- the checkpoints
def build(folder: Path, n_embd: int, n_layer: int, vocab: int, seed: int = 0) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=max(1, n_embd // 64),
        vocab_size=vocab,
        n_positions=1024,
        bos_token_id=vocab - 1,
        eos_token_id=vocab - 1,
        architectures=["GPT2LMHeadModel"],
    )
    with torch.device("meta"):
        shapes = {
            k: tuple(v.shape)
            for k, v in GPT2LMHeadModel(cfg).state_dict().items()
            if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))
        }
    names = sorted(shapes)
    n_params = sum(math.prod(s) for s in shapes.values())
    gen = torch.Generator().manual_seed(seed)
    paths = {r: folder / r for r in ("base", "a", "b")}
    done = all((p / "model.safetensors").is_file() for p in paths.values())
    if not done:
        for role in paths.values():
            shutil.rmtree(role, ignore_errors=True)
            role.mkdir(parents=True)
            cfg.save_pretrained(role)
        base, a, b = {}, {}, {}
        for name in names:
            shape = shapes[name]
            w = (
                torch.ones(shape)
                if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight"))
                else torch.zeros(shape)
            )
            w += 0.02 * torch.randn(shape, generator=gen)
            na, nb = 1e-3 * torch.randn(shape, generator=gen), 1e-3 * torch.randn(shape, generator=gen)
            base[name], a[name], b[name] = w, w + na, w + 0.5 * na + nb
        for role, sd in (("base", base), ("a", a), ("b", b)):
            save_file(sd, str(paths[role] / "model.safetensors"), metadata={"format": "pt"})
        del base, a, b
    return {
        "params": n_params,
        "tensors": len(names),
        "paths": {k: str(v) for k, v in paths.items()},
        "largest": max(math.prod(s) for s in shapes.values()),
        "bytes_per_model": (paths["a"] / "model.safetensors").stat().st_size,
    }


# ---------------------------------------------------------------- the two approaches (worker side)
def run_streamed(a: str, b: str, base: str, density: float) -> dict:
    from interlingua.mergeability.diagnostics import weight_diagnostics

    g = weight_diagnostics(a, b, base=base, density=density).global_
    return {k: g[k] for k in (*VALUES, *COUNTS)}


def run_full(a: str, b: str, base: str, density: float) -> dict:
    import torch
    from safetensors.torch import load_file

    sa, sb, s0 = (load_file(str(Path(p) / "model.safetensors")) for p in (a, b, base))
    names = sorted(sa)
    va, vb, v0 = (torch.cat([sd[n].double().reshape(-1) for n in names]) for sd in (sa, sb, s0))
    ta, tb = va - v0, vb - v0
    out = {
        "dot": float(va @ vb),
        "sq_a": float(va @ va),
        "sq_b": float(vb @ vb),
        "sq_diff": float((va - vb) @ (va - vb)),
        "cosine": float(torch.nn.functional.cosine_similarity(va, vb, dim=0)),
        "rel_l2": float(torch.linalg.norm(va - vb) / torch.linalg.norm(vb)),
        "norm_ratio": float(torch.linalg.norm(va) / torch.linalg.norm(vb)),
        "tv_cosine": float(torch.nn.functional.cosine_similarity(ta, tb, dim=0)),
        "tv_norm_a": float(torch.linalg.norm(ta)),
        "tv_norm_b": float(torch.linalg.norm(tb)),
    }
    kept = both = agree = 0
    for n in names:
        xa, xb = sa[n].double() - s0[n].double(), sb[n].double() - s0[n].double()
        k = max(1, int(density * xa.numel())) if density < 1 else xa.numel()
        ka = torch.zeros(xa.numel(), dtype=torch.bool)
        kb = torch.zeros(xa.numel(), dtype=torch.bool)
        # the k largest |x|, ties by lower index (a stable sort; torch.topk breaks ties arbitrarily)
        ka[torch.argsort(xa.abs().reshape(-1), descending=True, stable=True)[:k]] = True
        kb[torch.argsort(xb.abs().reshape(-1), descending=True, stable=True)[:k]] = True
        ka &= xa.reshape(-1) != 0
        kb &= xb.reshape(-1) != 0
        kept += int(ka.sum())
        both += int((ka & kb).sum())
        agree += int((ka & kb & (xa.reshape(-1).sign() == xb.reshape(-1).sign())).sum())
    out.update(ties_kept_a=kept, ties_both=both, ties_agree=agree)
    return out


def run_merge_interlingua(a: str, b: str, out: str) -> dict:
    from interlingua.mergeability.merge import build_merge

    build_merge([a, b], out, method="linear", weights=[0.5, 0.5])
    return {"out": out}


def run_merge_mergekit(a: str, b: str, out: str) -> dict:
    from mergekit.config import MergeConfiguration
    from mergekit.merge import MergeOptions, run_merge

    config = MergeConfiguration.model_validate(
        {
            "merge_method": "linear",
            "dtype": "float32",
            "models": [{"model": a, "parameters": {"weight": 0.5}}, {"model": b, "parameters": {"weight": 0.5}}],
        }
    )
    run_merge(
        config,
        out,
        options=MergeOptions(cuda=False, copy_tokenizer=False, lazy_unpickle=True, write_model_card=False, quiet=True),
    )
    return {"out": out}


MERGE_WORKERS = {
    "merge_interlingua_cold": run_merge_interlingua,
    "merge_interlingua_warm": run_merge_interlingua,
    "merge_mergekit": run_merge_mergekit,
}


def machine_limits(folder: Path, nbytes: int) -> dict:
    """Seconds to write ``nbytes`` to a file and fsync it, and to sha256 them (what a build cannot go below)."""
    import hashlib

    data = os.urandom(1 << 20) * max(1, nbytes >> 20)
    path = folder / "write-probe.bin"
    start = time.perf_counter()
    with path.open("wb") as fh:
        fh.write(data)
        written = time.perf_counter() - start
        fh.flush()
        os.fsync(fh.fileno())
    total = time.perf_counter() - start
    path.unlink()
    start = time.perf_counter()
    hashlib.sha256(data).hexdigest()
    sha = time.perf_counter() - start
    mb = len(data) / 1e6
    return {
        "bytes": len(data),
        "write_s": written,
        "write_fsync_s": total,
        "write_fsync_mb_s": mb / total,
        "sha256_s": sha,
        "sha256_mb_s": mb / sha,
    }


def warm_hash_cache(folder: Path, paths: list[str]) -> None:
    """Hash the inputs once into ``folder`` (a store's hashes/), as a first build or run would have."""
    from interlingua.data.models import hashing

    hashing.use_hash_cache(folder)
    files = [f for p in paths for f in sorted(Path(p).iterdir()) if f.is_file()]
    wait = max(f.stat().st_ctime for f in files) + hashing.SETTLED_SECONDS + 0.1 - time.time()
    if wait > 0:
        time.sleep(wait)  # entries are kept on disk only for settled files
    for f in files:
        hashing.file_sha256(f)


def merged_tensors_equal(x: str, y: str) -> float:
    """Max abs difference of the two merged folders, tensor by tensor (names as stored; tied head skipped)."""
    from safetensors import safe_open

    def index(folder: str) -> dict:
        out = {}
        for f in sorted(Path(folder).glob("*.safetensors")):
            with safe_open(str(f), "pt") as h:
                out.update({k: f for k in h.keys()})  # noqa: SIM118 (a safe_open handle is not iterable)
        return out

    ix, iy = index(x), index(y)
    common = sorted(set(ix) & set(iy))
    missing = sorted(set(ix) ^ set(iy) - {"lm_head.weight"})
    if missing or not common:
        raise SystemExit(f"the merged folders hold different tensors: {missing[:5]}")
    worst = 0.0
    for name in common:
        with safe_open(str(ix[name]), "pt") as hx, safe_open(str(iy[name]), "pt") as hy:
            worst = max(worst, float((hx.get_tensor(name) - hy.get_tensor(name)).abs().max()))
    if worst > 1e-6:
        raise SystemExit(f"interlingua and mergekit linear merges differ by up to {worst}")
    return worst


def worker(args: argparse.Namespace) -> None:
    import torch  # noqa: F401  (imported before the baseline RSS, as both approaches need it)

    if args.worker in MERGE_WORKERS:
        if args.worker != "merge_mergekit":  # the store (and its hashes/) the driver chose for this mode
            from interlingua.core.hashing import use_hash_cache

            use_hash_cache(args.hash_cache)
        if args.worker == "merge_mergekit":
            import mergekit.merge  # noqa: F401
        else:
            import interlingua.mergeability.merge  # noqa: F401
        after_imports = _current_rss_mb()
        start, cpu = time.perf_counter(), time.process_time()
        values = MERGE_WORKERS[args.worker](args.a, args.b, args.out)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(
            json.dumps(
                {
                    "seconds": seconds,
                    "cpu_seconds": cpu,
                    "peak_rss_mb": _rss_mb(),
                    "rss_after_imports_mb": after_imports,
                    "values": values,
                }
            )
        )
        return

    import interlingua.mergeability.diagnostics  # noqa: F401

    after_imports = _current_rss_mb()
    start = time.perf_counter()
    fn = run_streamed if args.worker == "streamed" else run_full
    values = fn(args.a, args.b, args.base, args.density)
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {"seconds": seconds, "peak_rss_mb": _rss_mb(), "rss_after_imports_mb": after_imports, "values": values}
        )
    )


# ---------------------------------------------------------------- the driver
def spawn(which: str, paths: dict, density: float) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        which,
        "--a",
        paths["a"],
        "--b",
        paths["b"],
        "--base",
        paths["base"],
        "--density",
        str(density),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{which} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_equal(s: dict, f: dict) -> float:
    worst = 0.0
    for k in VALUES:
        rel = abs(s[k] - f[k]) / max(abs(f[k]), 1e-300)
        worst = max(worst, rel)
        if rel > 1e-9:
            raise SystemExit(f"streamed and full disagree on {k}: {s[k]!r} vs {f[k]!r}")
    for k in COUNTS:
        if s[k] != f[k]:
            raise SystemExit(f"streamed and full disagree on {k}: {s[k]} vs {f[k]}")
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", choices=("streamed", "full", *MERGE_WORKERS))
    p.add_argument("--out")
    p.add_argument("--hash-cache", help="(worker) the hash cache folder of interlingua's merge")
    p.add_argument("--json", help="--merge: write every round, the medians and the machine's limits here")
    p.add_argument("--merge", action="store_true", help="linear merge of A and B: interlingua vs mergekit")
    p.add_argument("--a"), p.add_argument("--b"), p.add_argument("--base")
    p.add_argument("--density", type=float, default=0.2)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="a small model (width 256, 2 blocks, vocab 8000), 1 round")
    p.add_argument("--dir", default="/tmp/interlingua-bench-weights")
    p.add_argument("--keep", action="store_true", help="keep the checkpoints for the next run")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    if args.quick:
        args.width, args.layers, args.vocab, args.rounds = 256, 2, 8000, 1
    folder = Path(args.dir) / f"w{args.width}-l{args.layers}-v{args.vocab}"
    t0 = time.perf_counter()
    info = build(folder, args.width, args.layers, args.vocab)
    print(
        f"checkpoints: {info['params'] / 1e6:.1f}M params, {info['tensors']} tensors, largest "
        f"{info['largest'] / 1e6:.1f}M elements, {info['bytes_per_model'] / 2**20:.0f} MiB per model "
        f"(built or found in {time.perf_counter() - t0:.0f} s under {folder})"
    )
    if args.merge:
        return merge_main(args, folder, info)
    results: dict[str, list[dict]] = {"streamed": [], "full": []}
    for r in range(args.rounds):
        order = ("streamed", "full") if r % 2 == 0 else ("full", "streamed")
        for which in order:
            results[which].append(spawn(which, info["paths"], args.density))
        worst = check_equal(results["streamed"][-1]["values"], results["full"][-1]["values"])
        print(
            f"round {r + 1}: "
            + ", ".join(
                f"{w} {results[w][-1]['seconds']:.1f} s / {results[w][-1]['peak_rss_mb']:.0f} MB" for w in order
            )
            + f"; values equal (max rel diff {worst:.1e})"
        )
    load = os.getloadavg()
    print(
        f"\nmachine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, load {load[0]:.1f} / "
        f"{load[1]:.1f} / {load[2]:.1f}; python {platform.python_version()}"
    )
    print(f"{'approach':10s} {'median s':>9s} {'peak RSS MB':>12s} {'RSS after imports MB':>21s}")
    for which, runs in results.items():
        print(
            f"{which:10s} {statistics.median(x['seconds'] for x in runs):9.1f} "
            f"{statistics.median(x['peak_rss_mb'] for x in runs):12.0f} "
            f"{statistics.median(x['rss_after_imports_mb'] for x in runs):21.0f}"
        )
    v = results["streamed"][-1]["values"]
    print(
        f"\nglobal: cosine {v['cosine']:.6f}, rel_l2 {v['rel_l2']:.3e}, task-vector cosine {v['tv_cosine']:.4f}, "
        f"TIES sign agreement {v['ties_agree'] / v['ties_both']:.4f} ({v['ties_both']} positions)"
    )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


def merge_main(args: argparse.Namespace, folder: Path, info: dict) -> None:
    import tempfile

    results: dict[str, list[dict]] = {w: [] for w in MERGE_WORKERS}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    warm = folder / "warm-hashes"
    shutil.rmtree(warm, ignore_errors=True)
    warm_hash_cache(warm, [info["paths"]["a"], info["paths"]["b"]])
    load_before = os.getloadavg()
    for r in range(args.rounds):
        order = tuple(MERGE_WORKERS) if r % 2 == 0 else tuple(reversed(MERGE_WORKERS))
        outs = {}
        for which in order:
            out = folder / f"out-{which}"
            shutil.rmtree(out, ignore_errors=True)
            cold = Path(tempfile.mkdtemp(prefix="cold-hashes-", dir=folder))  # empty: nothing hashed yet
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                which,
                "--a",
                info["paths"]["a"],
                "--b",
                info["paths"]["b"],
                "--out",
                str(out),
                "--hash-cache",
                str(warm if which.endswith("warm") else cold),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            shutil.rmtree(cold, ignore_errors=True)
            if proc.returncode != 0:
                raise SystemExit(f"{which} failed:\n{proc.stderr[-3000:]}")
            results[which].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            outs[which] = str(out)
        worst = max(merged_tensors_equal(outs[w], outs["merge_mergekit"]) for w in outs if w != "merge_mergekit")
        print(
            f"round {r + 1}: "
            + ", ".join(
                f"{w} {results[w][-1]['seconds']:.1f} s / {results[w][-1]['peak_rss_mb']:.0f} MB" for w in order
            )
            + f"; outputs equal (max abs diff {worst:.1e})"
        )
        for out in outs.values():
            shutil.rmtree(out, ignore_errors=True)
    load = os.getloadavg()
    limits = machine_limits(folder, info["bytes_per_model"])
    print(
        f"\nmachine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, load {load[0]:.1f} / "
        f"{load[1]:.1f} / {load[2]:.1f}; python {platform.python_version()}; one model "
        f"{info['bytes_per_model'] / 2**20:.0f} MiB; writing it + fsync {limits['write_fsync_s']:.2f} s "
        f"({limits['write_fsync_mb_s']:.0f} MB/s), sha256 of it {limits['sha256_s']:.2f} s"
    )
    print(f"{'approach':24s} {'median s':>9s} {'CPU s':>7s} {'peak RSS MB':>12s} {'RSS after imports MB':>21s}")
    medians = {}
    for which, runs in results.items():
        medians[which] = {
            k: statistics.median(x[k] for x in runs)
            for k in ("seconds", "cpu_seconds", "peak_rss_mb", "rss_after_imports_mb")
        }
        print(
            f"{which:24s} {medians[which]['seconds']:9.2f} {medians[which]['cpu_seconds']:7.2f} "
            f"{medians[which]['peak_rss_mb']:12.0f} {medians[which]['rss_after_imports_mb']:21.0f}"
        )
    mk = medians["merge_mergekit"]
    for which in ("merge_interlingua_cold", "merge_interlingua_warm"):
        print(
            f"{which} / mergekit: time {medians[which]['seconds'] / mk['seconds']:.2f}, "
            f"CPU {medians[which]['cpu_seconds'] / mk['cpu_seconds']:.2f}"
        )
    if args.json:
        import torch

        payload = {
            "command": " ".join(["PYTHONPATH=src python benchmarks/bench_weights.py", *sys.argv[1:]]),
            "run_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "checkpoints": {k: v for k, v in info.items() if k != "paths"},
            "machine": {
                "nproc": os.cpu_count(),
                "cpu": platform.processor() or platform.machine(),
                "python": platform.python_version(),
                "torch": torch.__version__,
                "load_before": load_before,
                "load_after": load,
                "limits": limits,
            },
            "rounds": results,
            "medians": medians,
            "ratio_to_mergekit": {
                w: {
                    "seconds": medians[w]["seconds"] / mk["seconds"],
                    "cpu_seconds": medians[w]["cpu_seconds"] / mk["cpu_seconds"],
                }
                for w in medians
            },
        }
        Path(args.json).write_text(json.dumps(payload, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
