"""How close ``interlingua plan``'s estimate comes to the measured run (issue 36: 56 s estimated, 394 s measured at
load 7-10, with nothing said of the load).

For each config (small variants of the packaged demo: the two packaged models, Bible verses, different n,
poolings, measures, draws), in one shared cache: ``plan CONFIG`` (its total and its load line), then ``run CONFIG``
timed by wall clock in a fresh process (imports included, as the estimate's startup phase assumes). Prints
estimate / measured / ratio and the 1-minute load before each run; ``--out FILE`` writes the table as Markdown.

    python benchmarks/bench_plan_accuracy.py --cache /tmp/bench-cache --out benchmarks/results/plan_accuracy.md

The cache folder is emptied first (``--keep`` keeps it): the first config then pays the packaged GGUF models'
one-time conversion, which its plan also prices.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from interlingua.cli import demo_spec


def configs() -> list[tuple[str, dict]]:
    """Four to six small demo variants (distinct n, so none reuses another's extraction)."""
    base = demo_spec()
    base.pop("alignment", None)
    base["pooling"] = ["sgpt"]
    base["corpus"].update(languages=["eng_Latn", "deu_Latn"], n=16)
    base["inference"] = {"permutations": 0, "layers": "last"}
    base["layer_grid"] = False
    base["measures"] = ["cka_linear_biased"]
    out = []
    out.append(("n16, 1 measure, no draws", base))
    v = yaml.safe_load(yaml.safe_dump(base))
    v["corpus"]["n"] = 24
    v["inference"] = {"permutations": 500, "layers": "last"}
    out.append(("n24, 500 permutations", v))
    v = yaml.safe_load(yaml.safe_dump(base))
    v["corpus"]["n"] = 32
    v["pooling"] = ["sgpt", "mean"]
    v["measures"] = ["cka_linear_biased", "cka_linear_debiased"]
    out.append(("n32, 2 poolings x 2 measures", v))
    v = yaml.safe_load(yaml.safe_dump(base))
    v["corpus"]["n"] = 40
    v["corpus"]["languages"] = ["eng_Latn", "deu_Latn", "rus_Cyrl"]
    v["layer_grid"] = True
    v["inference"] = {"permutations": 100, "layers": "last", "grid_permutations": 20}
    out.append(("n40, 3 languages, layer grid", v))
    return out


def _seconds(text: str) -> float:
    if text == "<1 s":
        return 0.5
    value, unit = text.split()
    return float(value) * {"s": 1.0, "min": 60.0, "h": 3600.0}[unit]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "interlingua", *args], capture_output=True, text=True, check=False, timeout=3600
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=None, help="the shared cache folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep what the cache holds (default: start empty)")
    parser.add_argument("--only", type=int, default=None, help="run the first N configs only")
    parser.add_argument("--out", default=None, help="also write the table as Markdown here")
    args = parser.parse_args()
    cache = Path(args.cache or tempfile.mkdtemp(prefix="bench-plan-"))
    if not args.keep and cache.exists():
        shutil.rmtree(cache)
    work = Path(tempfile.mkdtemp(prefix="bench-plan-out-"))
    rows = [
        "| config | plan's estimate | measured wall | estimate / measured | load before (1 min) | plan's load line |",
        "|---|---|---|---|---|---|",
    ]
    for i, (name, spec) in enumerate(configs()[: args.only]):
        spec.update(output=str(work / f"out{i}"), cache_dir=str(cache), progress=False, overwrite=True)
        cfg = work / f"c{i}.yaml"
        cfg.write_text(yaml.safe_dump(spec), encoding="utf-8")
        planned = _cli("plan", str(cfg))
        if planned.returncode != 0:
            print(planned.stderr, file=sys.stderr)
            return 1
        total = re.search(r"^total\s+(\S+(?: \S+)?)\s+\(", planned.stdout, flags=re.M)
        loadline = next((x for x in planned.stdout.splitlines() if x.startswith("machine ")), "(none)")
        assert total is not None
        estimate = _seconds(total.group(1))
        load = os.getloadavg()[0]
        t = time.perf_counter()
        ran = _cli("run", str(cfg))
        measured = time.perf_counter() - t
        if ran.returncode != 0:
            print(ran.stderr, file=sys.stderr)
            return 1
        row = (
            f"| {name} | {total.group(1)} | {measured:.0f} s | {estimate / measured:.2f} | {load:.1f} | "
            f"{loadline.split(';')[0]} |"
        )
        print(row, flush=True)
        rows.append(row)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rows.append("")
    rows.append(f"{cpus} CPUs; load average at the end {os.getloadavg()[0]:.1f}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(rows) + "\n", encoding="utf-8")
    print(rows[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
