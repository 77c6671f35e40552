"""Ray executor: overhead per task against the local executor, scheduling of a synthetic 10,000-task plan,
one realistic comparison task, and a cost model of a Goldfish-wide sweep built on those numbers.

Sections (each prints a Markdown table; ``--out FILE`` also writes them, ``--json FILE`` the raw numbers):

1. ``tiny``: the tiny two-model config of tests/test_ray_executor.py (3 languages, 2 poolings, CKA with 19
   permutations, layer grid) through the local and the Ray executor, each on a fresh store ("cold") and
   again on the filled store ("warm"); Ray's start-up is timed apart. Ray no-op round trips are timed too.
2. ``synthetic``: a plan of ~10,000 tasks (70 models x 10 languages x 3 poolings, within-model pairs) built
   with :func:`interlingua.pipeline.plan.build_plan` from fake fingerprints (no model files), dispatched with no-op
   runners: the local loop, Ray with one task per comparison, Ray with side blocks; then the store filled
   with tiny entries and the Ray driver's pass over a plan that is entirely stored (probe only). A separate
   small plan times fresh one-model worker processes (``max_calls=1``).
3. ``compare``: one comparison task at the Goldfish shape (13 hidden states, n = 1012, d = 768, float32;
   sgpt, biased linear CKA, 1,000 permutations at every layer; and the analytic ``moments`` null), on one
   thread, i.e. what one Ray CPU slot spends on it.
4. ``goldfish``: the cost model of docs text (tasks, bytes, GPU-hours) with the measured constants.

Rerun (about 10 minutes on 2 busy cores):

    pip install "ray>=2.9"
    PYTHONPATH=src:tests python benchmarks/bench_ray.py --out benchmarks/results/ray.md \\
        --json benchmarks/results/ray.json
    PYTHONPATH=src:tests python benchmarks/bench_ray.py --sections synthetic --models 20   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402

LANGS = [
    "eng_Latn",
    "deu_Latn",
    "fra_Latn",
    "spa_Latn",
    "rus_Cyrl",
    "cmn_Hans",
    "arb_Arab",
    "hin_Deva",
    "swh_Latn",
    "jpn_Jpan",
]


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    import ray

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, ray {ray.__version__}, numpy {np.__version__}; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min)"
    )


# -- 1. tiny config -----------------------------------------------------------------------------------------


def tiny_section(work: Path, num_cpus: int) -> tuple[str, dict[str, Any]]:
    import pandas as pd
    import ray

    from fixtures import tiny_models
    from fixtures.tiny_models import parallel_sentences
    from interlingua.pipeline.executors import RayExecutor
    from interlingua.pipeline.runs import run

    gpt2 = tiny_models.build_tiny_gpt2(work / "gpt2")
    llama = tiny_models.build_tiny_llama(work / "llama")
    codes = {"eng": "eng_Latn", "deu": "deu_Latn", "rus": "rus_Cyrl"}
    sents = parallel_sentences(40, seed=3)
    corpus = work / "parallel.tsv"
    pd.DataFrame({"id": [f"s{i}" for i in range(40)], **{codes[k]: sents[k] for k in codes}}).to_csv(
        corpus, sep="\t", index=False
    )

    def spec(tag: str) -> dict[str, Any]:
        return {
            "output": str(work / f"out-{tag}"),
            "cache_dir": str(work / f"cache-{tag.split('-')[0]}"),
            "progress": False,
            "overwrite": True,
            "corpus": {"source": "local", "path": str(corpus), "languages": list(codes.values()), "n": 32},
            "models": [{"name": "gpt2", "path": str(gpt2)}, {"name": "llama", "path": str(llama)}],
            "pooling": ["mean", "last"],
            "measures": ["cka_linear_biased"],
            "inference": {"permutations": 19, "jackknife_groups": 4},
            "layer_grid": True,
            "special_tokens": "include",
        }

    times: dict[str, float] = {}
    t = time.perf_counter()
    res = run(spec("local-cold"))
    times["local cold"] = time.perf_counter() - t
    t = time.perf_counter()
    run(spec("local-warm"))
    times["local warm"] = time.perf_counter() - t
    n_tasks = sum(res.info["plan"].values())

    t = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="warning", log_to_driver=False)
    times["ray.init (local instance)"] = time.perf_counter() - t
    try:
        ex = RayExecutor()
        t = time.perf_counter()
        run(spec("ray-cold"), executor=ex)
        times["ray cold"] = time.perf_counter() - t
        cold_timings = dict(ex.timings)
        t = time.perf_counter()
        run(spec("ray-warm"), executor=ex)
        times["ray warm"] = time.perf_counter() - t
        warm_timings = dict(ex.timings)
        same = (work / "out-local-cold" / "results.csv").read_bytes() == (
            work / "out-ray-cold" / "results.csv"
        ).read_bytes()

        @ray.remote
        def noop(*_: Any) -> None:
            return None

        ray.get([noop.remote() for _ in range(50)])  # warm the workers
        t = time.perf_counter()
        for _ in range(200):
            ray.get(noop.remote())
        times["no-op round trip (sequential, per task)"] = (time.perf_counter() - t) / 200
        t = time.perf_counter()
        ray.get([noop.remote() for _ in range(2000)])
        times["no-op throughput (2,000 in flight, per task)"] = (time.perf_counter() - t) / 2000
    finally:
        ray.shutdown()

    per_task = (times["ray cold"] - times["local cold"]) / n_tasks
    rows = [[k, f"{v:.3f}" if v >= 0.01 else f"{v * 1e3:.2f} ms"] for k, v in times.items()]
    rows.append([f"Ray - local, cold, per task ({n_tasks} tasks)", f"{per_task:.3f}"])
    rows.append(["results.csv identical (bytes)", str(same)])
    text = (
        f"Tiny config: 2 tiny models x 3 languages, 2 poolings, {n_tasks} tasks ({res.info['plan']}); "
        f"Ray with {num_cpus} CPUs, one worker process per model group (max_calls=1). Seconds.\n\n"
        + md_table(["what", "seconds"], rows)
        + f"\n\nRay driver, cold run: {fmt_timings(cold_timings)}; warm run: {fmt_timings(warm_timings)}."
    )
    return text, {
        "times": times,
        "n_tasks": n_tasks,
        "per_task_overhead_s": per_task,
        "identical": same,
        "cold_timings": cold_timings,
        "warm_timings": warm_timings,
    }


def fmt_timings(t: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f} s" for k, v in t.items())


# -- 2. synthetic plan ------------------------------------------------------------------------------------------


def synthetic_plan(n_models: int, n_langs: int, poolings: list[str], n_sentences: int = 8) -> Any:
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.config import parse_spec
    from interlingua.pipeline.plan import build_plan

    langs = LANGS[:n_langs]
    spec = parse_spec(
        {
            "output": "/tmp/unused",
            "corpus": {"source": "local", "path": "/synthetic.tsv", "languages": langs},
            "models": [{"name": f"m{i}", "path": f"/synthetic/m{i}"} for i in range(n_models)],
            "pooling": poolings,
            "pairs": {"within_model": True, "cross_model": "none"},
            "progress": False,
        }
    )
    corpus = ParallelCorpus(
        "synthetic",
        tuple(f"s{i}" for i in range(n_sentences)),
        {lang: tuple(f"{lang} sentence {i}" for i in range(n_sentences)) for lang in langs},
    )
    fingerprints = {f"m{i}": f"{i:064x}" for i in range(n_models)}
    t = time.perf_counter()
    plan = build_plan(spec, corpus, fingerprints)
    return plan, time.perf_counter() - t


def noop_runners(write: bool) -> dict[str, Any]:
    """Runners that do no model work; with ``write`` they store a tiny entry, so a rerun finds everything."""
    from interlingua.pipeline.execute import ExtractOutput, output_paths

    def extract(rt: Any, task: Any, done: Any) -> Any:
        if write:
            for (pooling, key), path in zip(task.entries, output_paths(rt, task)):
                rt.store.put_arrays(
                    path,
                    key,
                    {"representations": np.zeros((1, 1, 1), np.float32)},
                    {**dict(task.entry_inputs), "pooling": pooling, "truncated": "[]", "effective_max_length": "0"},
                )
        return ExtractOutput({}, [], 0)

    def compare(rt: Any, task: Any, done: Any) -> Any:
        if write:
            rt.store.put_json("comparisons", task.key, [])
        return []

    return {"extract": extract, "compare": compare}


def synthetic_section(work: Path, num_cpus: int, n_models: int, write_rerun: bool) -> tuple[str, dict[str, Any]]:
    import ray

    from interlingua.core.store import Store
    from interlingua.pipeline import execute
    from interlingua.pipeline.execute import LocalExecutor, Runtime
    from interlingua.pipeline.executors import RayExecutor

    plan, t_plan = synthetic_plan(n_models, 10, ["mean", "sgpt", "last"])
    n = len(plan.tasks)
    out: dict[str, Any] = {"tasks": n, "summary": plan.summary(), "plan_s": t_plan}
    rows = [["build_plan (keys of every task)", f"{t_plan:.2f}", f"{t_plan / n * 1e6:.0f} us"]]

    saved = dict(execute.RUNNER_OVERRIDES)
    execute.RUNNER_OVERRIDES.update(noop_runners(False))
    try:
        t = time.perf_counter()
        LocalExecutor().execute(plan, Runtime(plan, Store(work / "local"), progress=False))
        t_local = time.perf_counter() - t
    finally:
        execute.RUNNER_OVERRIDES.clear()
        execute.RUNNER_OVERRIDES.update(saved)
    rows.append(["local executor, no-op runners", f"{t_local:.2f}", f"{t_local / n * 1e6:.0f} us"])
    out["local_s"] = t_local

    ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="warning", log_to_driver=False)
    try:
        for label, kwargs in (("Ray, one task per comparison", {}), ("Ray, side_block=10", {"side_block": 10})):
            ex = RayExecutor(runners=noop_runners(False), max_calls=0, **kwargs)
            root = work / f"ray-{len(out)}"
            t = time.perf_counter()
            ex.execute(plan, Runtime(plan, Store(root), progress=False))
            total = time.perf_counter() - t
            rows.append([f"{label}: {len(ex.groups)} Ray tasks, total", f"{total:.2f}", f"{total / n * 1e6:.0f} us"])
            rows.append([f"  driver: {fmt_timings(ex.timings)}", "", ""])
            out[label] = {"ray_tasks": len(ex.groups), "total_s": total, "timings": dict(ex.timings)}

        if write_rerun:
            root = work / "filled"
            ex = RayExecutor(runners=noop_runners(True), max_calls=0, side_block=10)
            t = time.perf_counter()
            ex.execute(plan, Runtime(plan, Store(root), progress=False))
            t_fill = time.perf_counter() - t
            rows.append(
                [
                    "Ray, writing no-ops (tiny entries, fsynced), side_block=10",
                    f"{t_fill:.2f}",
                    f"{t_fill / n * 1e6:.0f} us",
                ]
            )
            ex = RayExecutor(runners=noop_runners(True), max_calls=0)
            t = time.perf_counter()
            ex.execute(plan, Runtime(plan, Store(root), progress=False))
            t_rerun = time.perf_counter() - t
            assert ex.submitted == [], "a stored plan must submit nothing"
            rows.append(
                [
                    f"Ray rerun, everything stored: 0 submitted; {fmt_timings(ex.timings)}",
                    f"{t_rerun:.2f}",
                    f"{t_rerun / n * 1e6:.0f} us",
                ]
            )
            out["fill_s"], out["rerun_s"], out["rerun_timings"] = t_fill, t_rerun, dict(ex.timings)

        # fresh worker processes: one model group each (max_calls=1), no comparisons
        small, _ = synthetic_plan(8, 2, ["mean"])
        small.tasks = [t for t in small.tasks if t.kind == "extract"]  # 8 models x 2 languages
        ex = RayExecutor(runners=noop_runners(False), max_calls=1)
        t = time.perf_counter()
        ex.execute(small, Runtime(small, Store(work / "fresh"), progress=False))
        t_fresh = time.perf_counter() - t
        per = t_fresh * num_cpus / len(ex.groups)
        rows.append(
            [
                f"8 model groups on fresh worker processes (max_calls=1), per group x {num_cpus} slots",
                f"{t_fresh:.2f}",
                f"{per:.2f} s",
            ]
        )
        out["fresh_worker_s"] = per
    finally:
        ray.shutdown()
    text = (
        f"Synthetic plan: {n} tasks {plan.summary()} ({n_models} models x 10 languages x 3 poolings, within-model "
        f"pairs; fake fingerprints, 8-sentence corpus), no-op runners, Ray with {num_cpus} CPUs, reused "
        "workers (max_calls=0) unless said. Seconds, and per plan task.\n\n"
        + md_table(["what", "seconds", "per task"], rows)
    )
    return text, out


# -- 3. one realistic comparison ---------------------------------------------------------------------------------


def compare_section() -> tuple[str, dict[str, Any]]:
    from threadpoolctl import threadpool_limits

    from interlingua.analysis.inference.config import InferenceSpec
    from interlingua.comparison import compare_pair
    from interlingua.contract.pairs import Pair, Side, SideData, pair_permutation

    rng = np.random.default_rng(0)
    n, d, states = 1012, 768, 13
    latent = rng.standard_normal((n, 32))

    def side() -> SideData:
        reps = np.stack(
            [(latent @ rng.standard_normal((32, d)) + 2 * rng.standard_normal((n, d))) for _ in range(states)]
        )
        return SideData(reps.astype(np.float32), np.ones((n, 2)), np.zeros(states))

    a, b = side(), side()
    pair = Pair(Side("a", "eng_Latn"), Side("b", "deu_Latn"))
    perm, seed = pair_permutation(pair, n, 42)
    rows, out = [], {}
    for label, inference in (
        ("1,000 permutations (monte_carlo), every layer", InferenceSpec()),
        ("analytic null (moments), every layer", InferenceSpec(null_method="moments")),
    ):
        with threadpool_limits(limits=1):
            t = time.perf_counter()
            got = compare_pair(
                pair,
                a,
                b,
                pooling="sgpt",
                measures=["cka_linear_biased"],
                permutation=perm,
                control_seed=seed,
                inference=inference,
                test_seed=0,
            )
            dt = time.perf_counter() - t
        rows.append([label, len(got), f"{dt:.2f}"])
        out[label] = dt
    text = (
        "One comparison task at the Goldfish shape: 13 hidden states x 1012 sentences x 768, float32, "
        "biased linear CKA at every layer pair (13), one BLAS thread (one Ray CPU slot).\n\n"
        + md_table(["inference", "rows", "seconds"], rows)
    )
    return text, out


# -- 4. Goldfish cost model ---------------------------------------------------------------------------------------

#: Goldfish (Chang et al., 2024): models per training-data tier; the 5 MB cards give 39.1 M parameters
#: (GPT-2, 4 layers x 512: 6 x 12.6 M non-embedding parameters matches their training FLOPs per token),
#: the others 124.8 M (GPT-2 small, 12 x 768). 10 MB are counted as 125 M here (not checked: an upper bound).
GOLDFISH = {
    "5mb": (350, 4, 512, 12.6e6),
    "10mb": (288, 12, 768, 85e6),
    "100mb": (166, 12, 768, 85e6),
    "1000mb": (83, 12, 768, 85e6),
    "full": (267, 12, 768, 85e6),
}
#: Measured on an H200 by bench_extraction (benchmarks/results/extraction_h200_synthetic.md): 31,668 tokens/s on
#: a 100.3 M non-embedding, 18-layer model at batch 32. Smaller models are scaled by the lesser of the FLOP
#: ratio and the layer ratio (small models are launch-bound, not FLOP-bound): conservative.
H200_TOKENS_PER_S = 31668.0
H200_REF = (100.3e6, 18)


def goldfish_section(
    measured: dict[str, Any], tokens_per_sentence: float = 40.0, n: int = 1012, poolings: int = 1, load_s: float = 5.0
) -> tuple[str, dict[str, Any]]:
    compare_s = measured.get("compare", {}).get("1,000 permutations (monte_carlo), every layer", float("nan"))
    moments_s = measured.get("compare", {}).get("analytic null (moments), every layer", float("nan"))
    fresh_s = measured.get("synthetic", {}).get("fresh_worker_s", float("nan"))
    dispatch = measured.get("synthetic", {}).get("Ray, one task per comparison", {})
    per_task_dispatch = dispatch.get("total_s", float("nan")) / max(measured.get("synthetic", {}).get("tasks", 1), 1)
    rows, gpu_s, bytes_total, models = [], 0.0, 0.0, 0
    for tier, (count, layers, width, nonemb) in GOLDFISH.items():
        rate = H200_TOKENS_PER_S * min(H200_REF[0] / nonemb, H200_REF[1] / layers)
        tokens = n * tokens_per_sentence
        seconds = tokens / rate
        entry = (layers + 1) * n * width * 4 * poolings
        rows.append(
            [
                tier,
                count,
                f"{layers} x {width}",
                f"{rate / 1e3:.0f}k",
                f"{seconds:.2f}",
                f"{entry / 1e6:.1f}",
                f"{count * entry / 1e9:.1f}",
            ]
        )
        gpu_s += count * seconds
        bytes_total += count * entry
        models += count
    tiers = [c for c, *_ in GOLDFISH.values()]
    within_tier = sum(c * (c - 1) // 2 for c in tiers)
    all_pairs = models * (models - 1) // 2
    overhead_h = models * (fresh_s + load_s) / 3600
    text = (
        f"Goldfish-wide sweep, on paper: {models} models, each reading FLORES+ devtest (n = {n}) in its own "
        f"language at ~{tokens_per_sentence:.0f} tokens per sentence, {poolings} pooling(s) stored.\n\n"
        + md_table(
            ["tier", "models", "layers x d", "H200 tokens/s", "GPU s per model", "MB per model", "GB in the store"],
            rows,
        )
        + f"\n\nExtraction: {models} tasks, {gpu_s / 3600:.2f} GPU-hours of forward passes; the per-model fixed "
        f"cost (a fresh worker process {fresh_s:.1f} s measured here + ~{load_s:.0f} s to load a model from "
        f"a local disk, assumed) is {overhead_h:.2f} hours of a GPU slot in all: fractional GPUs "
        f"(gpus_per_model=0.1) and max_calls > 1 hide it. Store: {bytes_total / 1e9:.0f} GB of representations "
        "per pooling.\n\n"
        f"Comparisons (one pooling): within each tier {within_tier:,} pairs, all pairs {all_pairs:,}. At "
        f"{compare_s:.1f} CPU s per comparison (1,000 permutations at every layer, measured above) that is "
        f"{within_tier * compare_s / 3600:,.0f} / {all_pairs * compare_s / 3600:,.0f} CPU-hours; with the "
        f"analytic null ({moments_s:.2f} s) {within_tier * moments_s / 3600:,.0f} / "
        f"{all_pairs * moments_s / 3600:,.0f} CPU-hours. Dispatch at the measured {per_task_dispatch * 1e3:.1f} ms "
        f"per task (one driver, 2 cores) adds {all_pairs * per_task_dispatch / 3600:.1f} driver-hours for one "
        "task per pair, and side blocks of 32 cut the Ray tasks ~1000-fold."
    )
    return text, {
        "gpu_hours": gpu_s / 3600,
        "store_gb": bytes_total / 1e9,
        "models": models,
        "pairs_within_tier": within_tier,
        "pairs_all": all_pairs,
        "overhead_hours": overhead_h,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", nargs="+", default=["tiny", "synthetic", "compare", "goldfish"])
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--models", type=int, default=70, help="models of the synthetic plan (x 10 languages x 3 poolings)")
    p.add_argument("--no-rerun", action="store_true", help="skip filling the store for the all-stored rerun")
    p.add_argument("--out", help="write the Markdown here")
    p.add_argument("--json", help="write the numbers here")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    texts, numbers = [], {}
    try:
        for section in args.sections:
            t = time.perf_counter()
            if section == "tiny":
                text, numbers[section] = tiny_section(work / "tiny", args.num_cpus)
            elif section == "synthetic":
                text, numbers[section] = synthetic_section(
                    work / "synthetic", args.num_cpus, args.models, not args.no_rerun
                )
            elif section == "compare":
                text, numbers[section] = compare_section()
            elif section == "goldfish":
                text, numbers[section] = goldfish_section(numbers)
            else:
                raise SystemExit(f"unknown section {section}")
            texts.append(f"### {section}\n\n{text}\n")
            print(texts[-1], flush=True)
            print(f"({section}: {time.perf_counter() - t:.0f} s)\n", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    header = f"Machine: {machine()}.\n\n"
    if args.out:
        Path(args.out).write_text(header + "\n".join(texts), encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1, default=str), encoding="utf-8")
    print(header)


if __name__ == "__main__":
    main()
