"""Benchmark: `interlingua report` on run folders of 6, 36, 90 and 216 cross-model pairs, cold and cached.

Each run folder is synthetic, in the shape `interlingua run` writes it with ``layer_grid: true`` (no model
is loaded): ``results.parquet`` / ``results.csv`` with, per cross-model pair of tiny models (4 to 6 blocks),
the layer-by-layer rows and the full layer x layer grid (the grid maximum marked), ``run.json`` and the
manifest, written through the package's own output writer. Then, in a fresh process each time:

- **cold**: ``interlingua report FOLDER`` on a folder with no figures yet (everything drawn);
- **cached**: ``interlingua report FOLDER`` again, nothing changed (figures whose inputs did not change are
  copied from the previous report, not drawn: ``report.figures.cached``).

Both are wall-clock seconds of the whole command (Python start and imports included; the bare start,
``interlingua --version``, is timed beside them), with the 1-minute load average before each. Times are not
asserted anywhere (they depend on the machine and its load); they go to ``benchmarks/README.md``.

Run (about 4 min on 2 shared cores)::

    PYTHONPATH=src python benchmarks/bench_report_scale.py                    # 6, 36, 90, 216 pairs
    PYTHONPATH=src python benchmarks/bench_report_scale.py --pairs 6 36 --keep /tmp/report-scale
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"


def synthetic_run(n_pairs: int, seed: int = 0) -> tuple[Any, dict[str, Any]]:
    """(results table, run info) of ``n_pairs`` cross-model pairs (same language), each with its layer grid."""
    from interlingua.core.schema import result_table

    rng = np.random.default_rng(seed)
    models = [f"tiny{i:02d}" for i in range(12)]  # 66 cross-model pairs per language
    languages = ["eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn"]
    depth = {m: 4 + i % 3 for i, m in enumerate(models)}
    pairs = [((a, lang), (b, lang)) for lang in languages for a, b in itertools.combinations(models, 2)][:n_pairs]
    if len(pairs) < n_pairs:
        raise SystemExit(f"at most {len(pairs)} pairs; asked for {n_pairs}")
    rows: list[dict[str, Any]] = []
    for (ma, la), (mb, lb) in pairs:
        base = {
            "pair": f"{ma}:{la}|{mb}:{lb}",
            "kind": "cross_model",
            "model_a": ma,
            "lang_a": la,
            "model_b": mb,
            "lang_b": lb,
            "pooling": "mean",
            "measure": "cka_linear_biased",
            "estimator": "cka_linear_biased",
            "n": 200,
            "control_seed": 1,
            "length_control": float(rng.uniform(0.2, 0.4)),
            "n_permutations": 0,
            "top1_share_a": 0.1,
            "top3_share_a": 0.2,
            "top1_share_b": 0.1,
            "top3_share_b": 0.2,
            "special_share_a": 0.0,
            "special_share_b": 0.0,
        }
        da, db = depth[ma], depth[mb]
        for layer in range(min(da, db) + 1):
            rows.append(
                {
                    **base,
                    "layer_a": layer,
                    "layer_b": layer,
                    "depth_a": layer / da,
                    "depth_b": layer / db,
                    "grid": False,
                    "matched": float(rng.uniform(0.3, 0.9)),
                    "shuffled": float(rng.uniform(0.0, 0.1)),
                    "matched_length_removed": float(rng.uniform(0.2, 0.7)),
                }
            )
        cells = [
            {
                **base,
                "layer_a": i,
                "layer_b": j,
                "depth_a": i / da,
                "depth_b": j / db,
                "grid": True,
                "matched": float(rng.uniform(0.2, 0.9)),
                "shuffled": 0.05,
                "matched_length_removed": 0.3,
            }
            for i in range(da + 1)
            for j in range(db + 1)
        ]
        cells[int(np.argmax([c["matched"] for c in cells]))].update(grid_max=True)
        rows += cells
    used = sorted({m for a, b in pairs for m in (a[0], b[0])})
    info = {
        "spec": {
            "output": "report-scale",
            "measures": ["cka_linear_biased"],
            "pooling": ["mean"],
            "layer_grid": True,
            "seeds": {"sample": 42},
            "special_tokens": "exclude",
            "standardize": False,
        },
        "corpus": {"name": "synthetic", "n": 200, "languages": sorted({s[1] for p in pairs for s in p})},
        "models": {m: {"model_type": "gpt2", "hidden_size": 32, "num_layers": depth[m]} for m in used},
        "truncated": {},
        "skipped": [],
    }
    return result_table(rows), info


def write_folder(folder: Path, n_pairs: int) -> int:
    """A run folder of ``n_pairs`` pairs without a report (tables, run.json, manifest); returns its row count."""
    from interlingua.core.outputs import prepare_output, write_outputs

    table, info = synthetic_run(n_pairs)

    def build(tmp: Path) -> None:
        table.to_csv(tmp / "results.csv", index=False)
        table.to_parquet(tmp / "results.parquet", index=False)
        (tmp / "run.json").write_text(json.dumps(info, indent=1), encoding="utf-8")

    write_outputs(prepare_output(folder), build)
    return len(table)


def timed(cmd: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, done.stdout.strip()


def load() -> float:
    return os.getloadavg()[0]


def figure_sizes(folder: Path) -> dict[str, tuple[int, int]]:
    from PIL import Image

    out = {}
    for png in sorted((folder / "figures").glob("*.png")):
        with Image.open(png) as im:
            out[png.name] = im.size
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, nargs="+", default=[6, 36, 90, 216])
    ap.add_argument("--keep", type=Path, default=None, help="write the run folders here (default: a temp folder)")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="report-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "interlingua"]
    start_s, version = timed([*cli, "--version"])
    rows = []
    for n in args.pairs:
        folder = root / f"pairs{n}"
        if folder.exists():
            shutil.rmtree(folder)
        n_rows = write_folder(folder, n)
        load_cold = load()
        cold, _ = timed([*cli, "report", str(folder)])
        load_cached = load()
        cached, said = timed([*cli, "report", str(folder)])
        sizes = figure_sizes(folder)
        tallest = max(sizes.values(), key=lambda s: s[1]) if sizes else (0, 0)
        row = {
            "pairs": n,
            "rows": n_rows,
            "cold_s": round(cold, 2),
            "cached_s": round(cached, 2),
            "cold_per_pair_s": round(cold / n, 3),
            "load_cold": round(load_cold, 2),
            "load_cached": round(load_cached, 2),
            "figures": len(sizes),
            "tallest_png": list(tallest),
            "said": said,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    record = {
        "benchmark": "report_scale",
        "version": version,
        "command_start_s": round(start_s, 2),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "report_scale.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"interlingua --version: {start_s:.2f} s; written {RESULTS / 'report_scale.json'}")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
