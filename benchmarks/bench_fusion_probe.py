"""Probe-size sensitivity of the transport fusion's correspondence controls on the packaged pair.

Gemma 3 270M (reads German, ``deu_Latn``) and SmolLM2-135M (reads English, ``eng_Latn``), the
pair of ``src/interlingua/configs/demo_transport.yaml``, loaded from their pip packages
(``package:``, GGUFs dequantised to float32). The probe sets are nested: ``--n-total`` verses are
drawn without replacement (seed ``--seed``) from the whole Bible (eng_Latn / deu_Latn default
versions, every verse both have); the probe of size N is the first N of them, the last
``--eval-n`` are held out for the NLL. Probe activations are computed once, chunk by chunk (each
chunk's sentence means are independent of the others), so a size reuses the smaller ones.

Per probe size and direction: ``transport_plans`` (auto epsilon, m = 3, seed 0, the fusion's
defaults) and ``transport_controls`` (the self-plan control on the middle target block and the
half-split stability of that block with its heaviest kept donor block, ``stability_k`` 1; see
``interlingua.transport.controls``). At the sizes in ``--nll-sizes`` the fusion's NLL deltas too
(``fuse_pair`` at ``--alphas``, OT vs shuffled, top_k 128, on the held-out verses of both
languages, read by the target). Results are rewritten after every step (``--out`` + .json / .md),
so a run stopped by its timeout keeps what it finished.

Rerun (2 shared cores, ~31 min at a load average of 2-8; the activations of 2,000 verses are most of the time):

    nice -n 19 timeout 5400 env PYTHONPATH=src python benchmarks/bench_fusion_probe.py \\
        --sizes 128 512 1024 2000 --full-sizes 128 --nll-sizes 128 --out benchmarks/results/fusion_probe
    PYTHONPATH=src python benchmarks/bench_fusion_probe.py --sizes 128 --n-total 192 --quick  # smoke
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = Path(__file__).resolve().parent
PAIR = (("gemma3-270m", "deu_Latn"), ("smollm2-135m", "eng_Latn"))


def _machine() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg_at_start": os.getloadavg(),
        "platform": platform.platform(),
    }


def _concat(parts: list, sentences: list[str]):
    """One ProbeActivations from chunks computed on consecutive slices of ``sentences``."""
    import numpy as np

    from interlingua.transport.correspond import ProbeActivations, sentences_sha256

    first = parts[0]
    offset, truncated = 0, []
    for p in parts:
        truncated += [offset + t for t in p.truncated]
        offset += p.n_sentences
    return ProbeActivations(
        first.model_type,
        offset,
        sentences_sha256(sentences[:offset]),
        {f: [np.concatenate([p.layers[f][i] for p in parts]) for i in range(first.n_layers)] for f in first.layers},
        np.concatenate([p.n_tokens for p in parts]),
        tuple(truncated),
        first.pooling,
        first.special_tokens,
        dict(first.widths),
    )


def _sample(n_total: int, seed: int) -> dict[str, list[str]]:
    import numpy as np

    from interlingua.data.corpora.bible import load_bible

    corpus = load_bible([lang for _, lang in PAIR])
    idx = np.random.default_rng(seed).choice(len(corpus), size=n_total, replace=False)
    sides = {lang: corpus.sentences(lang) for _, lang in PAIR}
    return {lang: [sides[lang][i] for i in idx] for _, lang in PAIR} | {
        "_ids": [corpus.ids[i] for i in idx],
        "_corpus_size": [str(len(corpus))],
    }


class _BlockPair:
    """What ``transport_controls`` reads of a plan set, for one block pair only (no layer plan, no neuron plans).

    Target block ``i = L_T // 2``; donor block ``j`` given (the heaviest kept one of a full plan set) or, without
    one, the proportional block; epsilon per interface calibrated as ``transport_plans`` does (its calibration
    pair is ``i`` and the proportional donor block).
    """

    def __init__(self, target, donor, interfaces, j: int | None) -> None:
        from interlingua.transport.correspond import correlation_cost
        from interlingua.transport.plans import calibrate_epsilon

        i, lt, ld = target.n_layers // 2, target.n_layers, donor.n_layers
        cj = int(round(i * (ld - 1) / (lt - 1))) if lt > 1 else ld // 2
        self.interfaces = tuple(interfaces)
        self.epsilon = {
            f: calibrate_epsilon(correlation_cost(target.layers[f][i], donor.layers[f][cj])[0]).epsilon
            for f in self.interfaces
        }
        self._j = cj if j is None else int(j)

    def kept(self, target_layer: int) -> list[tuple[int, float]]:
        return [(self._j, 1.0)]


def run(args) -> dict:
    from interlingua.audit.quality import load_causal_lm
    from interlingua.data.models.spec import ModelSpec
    from interlingua.transport import FusionOptions, ParallelProbe, SweepOptions, fuse_pair
    from interlingua.transport.controls import transport_controls
    from interlingua.transport.correspond import probe_activations, sentences_sha256
    from interlingua.transport.fuse import SUBLAYER_CHOICES, TransportModel, interfaces_for
    from interlingua.transport.plans import PlanOptions, transport_plans

    result: dict = {"machine": _machine(), "args": vars(args) | {"out": str(args.out)}, "sizes": {}, "log": []}
    t_all = time.perf_counter()

    def save() -> None:
        result["seconds_total"] = time.perf_counter() - t_all
        Path(f"{args.out}.json").write_text(json.dumps(result, indent=1, default=str))
        Path(f"{args.out}.md").write_text(markdown(result))

    text = _sample(args.n_total, args.seed)
    result["corpus_size"] = int(text["_corpus_size"][0])
    result["first_ids"] = text["_ids"][:5]
    evals = {lang: text[lang][-args.eval_n :] for _, lang in PAIR}
    interfaces = interfaces_for(SUBLAYER_CHOICES)
    models, parts, done_upto = {}, {}, 0
    kept_j: dict[str, int] = {}  # per direction: the heaviest kept donor block of the middle target block
    for name, _lang in PAIR:
        t = time.perf_counter()
        lm, tok = load_causal_lm(ModelSpec(package=name))
        models[name] = TransportModel(name, lm, tok, {"package": name})
        parts[name] = []
        result[f"load_seconds_{name}"] = time.perf_counter() - t
    result["activations_seconds"] = {name: 0.0 for name, _ in PAIR}
    for size in sorted(args.sizes):
        if size > args.n_total - args.eval_n:
            raise SystemExit(f"probe size {size} needs n_total >= {size + args.eval_n}")
        for name, lang in PAIR:  # this size's new chunk of activations
            t = time.perf_counter()
            parts[name].append(
                probe_activations(
                    models[name].lm,
                    models[name].tokenizer,
                    text[lang][done_upto:size],
                    interfaces=interfaces,
                    batch_size=args.batch_size,
                    max_length=args.max_length,
                )
            )
            result["activations_seconds"][name] += time.perf_counter() - t
        done_upto = size
        acts = {name: _concat(parts[name], text[lang]) for name, lang in PAIR}
        for name, lang in PAIR:  # fuse_pair finds them on the model (its cache key)
            key = (sentences_sha256(text[lang][:size]), tuple(interfaces), int(args.max_length))
            models[name].activations[key] = acts[name]
        entry: dict = {"activations_seconds_so_far": dict(result["activations_seconds"]), "directions": {}}
        result["sizes"][str(size)] = entry
        save()
        for (tname, tlang), (dname, dlang) in (PAIR, PAIR[::-1])[: args.directions]:
            where = f"{tname} <- {dname}"
            at, ad = acts[tname], acts[dname]
            full = size in args.full_sizes
            t = time.perf_counter()
            if full:  # the whole plan set, as the pipeline computes it
                plans = transport_plans(
                    at, ad, PlanOptions(epsilon="auto", m=3, seed=0, interfaces=interfaces), cache=args.plans_cache
                )
                summary = plans.summary()
                eps = {f: summary[f]["epsilon"] for f in summary}
                kept_j[where] = plans.kept(at.n_layers // 2)[0][0]
            else:  # the controls' block pair only: j fixed by a full plan set, epsilon calibrated as the plans do
                plans = _BlockPair(at, ad, interfaces, kept_j.get(where))
                eps = dict(plans.epsilon)
            plans_s = time.perf_counter() - t
            controls = transport_controls(at, ad, plans, stability_k=args.stability_k)
            d = {
                "mode": "full plans" if full else "block pair",
                "seconds_plans": plans_s,
                "seconds_controls": controls.seconds,
                "epsilon": eps,
                "note": controls.note(),
                **controls.columns(),
            }
            entry["directions"][where] = d
            result["log"].append(
                f"{size} {where} ({d['mode']}): plans {plans_s:.0f} s, controls {controls.seconds:.0f} s"
            )
            save()
            if full and size in args.nll_sizes:
                t = time.perf_counter()
                sweep = SweepOptions(
                    alphas=tuple(args.alphas),
                    controls=False,  # computed above
                    fusion=FusionOptions(
                        top_k=128, m=3, seed=0, batch_size=args.batch_size, max_length=args.max_length
                    ),
                )
                table = fuse_pair(
                    models[tname],
                    models[dname],
                    ParallelProbe(text[tlang][:size], text[dlang][:size], tlang, dlang),
                    evals,
                    sweep,
                    plans_cache=args.plans_cache,
                )
                d["seconds_fuse_pair"] = time.perf_counter() - t
                cols = ("alpha", "language", "nll_target", "delta_ot", "delta_shuffled", "ot_minus_rand")
                d["nll"] = [{k: row[k] for k in cols} for row in json.loads(table.to_json(orient="records"))]
                result["log"].append(f"{size} {where}: fuse_pair {d['seconds_fuse_pair']:.0f} s")
                save()
    save()
    return result


def _f(x: object, fmt: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def markdown(result: dict) -> str:
    """The result as the tables benchmarks/README.md and docs/results/transport.md quote."""
    m = result["machine"]
    lines = [
        "# Probe size and the correspondence controls, Gemma 3 270M <-> SmolLM2-135M",
        "",
        f"Machine: {m['cpus']} CPUs (torch threads {m['torch_threads']}), load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['load_avg_at_start'])}; {m['platform']}. "
        f"Probe: the first N of {result['args']['n_total']} verses drawn from the whole Bible "
        f"({result.get('corpus_size', '?')} eng/deu verses, seed {result['args']['seed']}); Gemma reads deu, "
        f"SmolLM2 eng. Wall {result.get('seconds_total', 0) / 60:.1f} min so far.",
        "",
        "| N | target <- donor | blocks (t, d) | eps mlp/attn/res | self_match mlp/attn/res | self_diag mlp/attn/res "
        "| stability mlp/attn/res | chance mlp/attn/res | verdict | mode | plans s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ifs = ("mlp", "attn", "residual")
    for size, entry in result["sizes"].items():
        for where, d in entry["directions"].items():
            lines.append(
                f"| {size} | {where} | {d['controls_target_block']}, {d['controls_donor_block']} | "
                + "/".join(_f(d["epsilon"].get(f), "g") for f in ifs)
                + " | "
                + " | ".join(
                    "/".join(_f(d.get(f"{col}_{f}")) for f in ifs)
                    for col in ("self_match", "self_diag", "stability", "stability_chance")
                )
                + f" | {d['self_control']} | {d['mode']} | {d['seconds_plans']:.0f} |"
            )
    nll = [
        (size, where, r)
        for size, entry in result["sizes"].items()
        for where, d in entry["directions"].items()
        for r in d.get("nll", [])
        if r["alpha"] > 0
    ]
    if nll:
        lines += [
            "",
            "NLL (nats/token) on the held-out verses, read by the target, top_k 128:",
            "",
            "| N | target <- donor | alpha | language | nll_target | delta_ot | delta_shuffled | ot_minus_rand |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for size, where, r in nll:
            lines.append(
                f"| {size} | {where} | {r['alpha']} | {r['language']} | {r['nll_target']:.3f} | "
                f"{r['delta_ot']:+.3f} | {r['delta_shuffled']:+.3f} | {r['ot_minus_rand']:+.3f} |"
            )
    acts = result.get("activations_seconds", {})
    lines += ["", "Activations (s, cumulative): " + ", ".join(f"{k} {v:.0f}" for k, v in acts.items()) + "."]
    lines += ["", "Log: " + "; ".join(result["log"]) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 2000])
    p.add_argument("--full-sizes", type=int, nargs="*", default=[128], help="sizes with the whole plan set")
    p.add_argument("--nll-sizes", type=int, nargs="*", default=[128], help="full sizes with fuse_pair's NLL")
    p.add_argument("--directions", type=int, choices=(1, 2), default=2, help="1: Gemma <- SmolLM2 only")
    p.add_argument("--alphas", type=float, nargs="+", default=[0.25])
    p.add_argument("--n-total", type=int, default=2064)
    p.add_argument("--eval-n", type=int, default=64)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--stability-k", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--plans-cache", default="/tmp/fusion_probe_plans")
    p.add_argument("--quick", action="store_true", help="smoke run: no NLL")
    p.add_argument("--out", type=Path, default=HERE / "results" / "fusion_probe")
    args = p.parse_args()
    if args.quick:
        args.nll_sizes = []
    run(args)


if __name__ == "__main__":
    main()
