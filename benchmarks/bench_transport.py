"""Transport fusion (interlingua.transport): the small zoo in both directions, and the cost of a real pair.

Zoo arm (default). The ``small`` zoo preset (eng_Latn and deu_Latn GPT-2s, width 32, 2
blocks, MLP 128, 400-piece SentencePiece vocabularies, 300 training steps) is built into
``--zoo-root`` (default /tmp/transport_zoo; a no-op when already there). The probe set is
the first ``--probe`` (default 512, the seed's count) TRAINING verses of the family, each
model reading its own language's side; the evaluation sets are the 64 HELD-OUT verses of
each language, read by the target with its own tokenizer. Both directions, alphas
``--alphas`` (default 0 0.1 0.25 0.5), auto epsilon, m = 3, seed 0, and each ``--top-k``
(default 32 and all = None). One table row per (direction, top_k, alpha, language):
delta NLL vs the unfused target, ot_minus_rand, and the plan diagnostics at the auto
epsilon.

Packaged arm (``--packaged``). Gemma 3 270M (target, 18 blocks, width 640, MLP 2048,
attention 4 x 256 = 1024) and SmolLM2-135M (donor, 30 blocks, width 576, MLP 1536,
attention 9 x 64 = 576), loaded through ``interlingua.audit.quality.load_causal_lm``
(packaged GGUFs, dequantised to float32). Measured: load time, probe forward passes on
``--packaged-probe`` sentences (default 128), epsilon calibration of each interface on one
block pair, layer-cost solves (``layer_sample`` units per side) and full neuron plans of 4
block pairs per interface (means), the transported weights of one block pair (both
controls, top_k 128), one NLL pass over 64 held-out verses; the
whole ``fuse_pair`` (one direction, one alpha) is then ESTIMATED as calibration + L_T x
L_D layer-cost solves + L_T x m full plans per interface + fusion + NLL passes. With
``--packaged-run`` the whole ``fuse_pair`` is run too (about half an hour per direction and
alpha on 2 loaded cores).

Plans arm (``--plans-from acts.npz --ot-device cuda``). ``transport_plans`` for Gemma 3 270M
<- SmolLM2-135M from probe activations saved by the packaged arm (``--save-activations``,
float16 npz, ~38 MB for 128 probes): the whole calibration, the 18 x 30 x 3 layer-cost solves
and the 54 kept pairs' full plans with their diagnostics, Sinkhorn on a GPU through POT's
torch backend (``ot.emd2`` stays on the CPU). Results: transport_plans_h200.{json,md}.

CPU plans arm (``--plans-cpu acts.npz``). ``transport_plans`` for the demo pair in BOTH
directions on the CPU with the default solver (plain-domain Sinkhorn where exact, batched
layer-cost pass, one BLAS thread): wall and process CPU seconds, tracemalloc peak and max
RSS, the plan diagnostics; then, on the target blocks ``--check-rows`` (default 0 9 17),
their layer-cost rows and their kept pairs' full plans are solved again with POT's
log-domain Sinkhorn (the previous solver) and compared (max differences, iteration counts),
and the previous solver's time for the whole plan set is estimated from those solves.
``--plans-cache DIR`` stores the plans (a second run reads them). Results:
transport_plans_cpu.{json,md}. The activations come from ``--packaged-only
--save-activations acts.npz --save-float64`` (the committed run's: the probe sets and
defaults of the packaged arm).

Demo fusion arm (``--demo-fusion``). ``fuse_models`` on the demo pair, both directions,
``--demo-alphas`` (default 0.1 0.25), OT and shuffled control, top_k 128, m = 3, 128 probe
verses, 64 held-out verses per language: transport_demo.{json,md,png}.

Rerun:

    PYTHONPATH=src python benchmarks/bench_transport.py --figure benchmarks/results/transport_zoo.png \
        --out benchmarks/results/transport_zoo                            # zoo, ~3 min on 2 loaded cores
    PYTHONPATH=src python benchmarks/bench_transport.py --quick         # smoke: 100 probes, alphas 0 0.5
    PYTHONPATH=src python benchmarks/bench_transport.py --packaged-only --out benchmarks/results/transport_packaged
    PYTHONPATH=src python benchmarks/bench_transport.py --packaged-only --save-activations acts.npz
    PYTHONPATH=src python benchmarks/bench_transport.py --plans-from acts.npz --ot-device cuda  # plans on a GPU
    PYTHONPATH=src python benchmarks/bench_transport.py --packaged-only --save-activations acts.npz --save-float64 \
        --out /tmp/packaged
    PYTHONPATH=src python benchmarks/bench_transport.py --plans-cpu acts.npz --plans-cache /tmp/plans \
        --out benchmarks/results/transport_plans_cpu                     # both directions on the CPU
    PYTHONPATH=src python benchmarks/bench_transport.py --demo-fusion \
        --figure benchmarks/results/transport_demo.png --out benchmarks/results/transport_demo

Results go to ``--out`` + .json / .md (default benchmarks/results/transport); the committed
ones are transport_zoo.*, transport_packaged.*, transport_plans_h200.*, transport_plans_cpu.* and
transport_demo.* (see their headers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = Path(__file__).resolve().parent


def _machine() -> dict:
    import torch

    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_avg": os.getloadavg(),
        "platform": platform.platform(),
    }


def zoo_arm(args) -> dict:
    import pandas as pd

    from interlingua.transport import fuse_models
    from interlingua.transport.evaluate import SweepOptions
    from interlingua.transport.fuse import FusionOptions
    from interlingua.zoo import build_zoo, preset
    from interlingua.zoo.data import load_zoo_data

    t = time.perf_counter()
    manifest = build_zoo("small", root=args.zoo_root)
    build_s = time.perf_counter() - t
    folder = Path(manifest["folder"])
    data = load_zoo_data(preset("small"))
    langs = ("eng_Latn", "deu_Latn")
    probe = {lang: data.train_texts(lang)[: args.probe] for lang in langs}
    evals = {lang: data.heldout_texts(lang) for lang in langs}
    models = {lang.split("_")[0]: str(folder / lang / "final") for lang in langs}
    languages = {"eng": "eng_Latn", "deu": "deu_Latn"}
    tables = []
    timings = {}
    for top_k in args.top_k:
        t = time.perf_counter()
        table, _fig = fuse_models(
            models,
            languages,
            probe,
            evals,
            options=SweepOptions(
                alphas=tuple(args.alphas), fusion=FusionOptions(top_k=top_k, m=3, epsilon="auto", seed=0)
            ),
            figure=args.figure if top_k == args.top_k[0] and args.figure else None,
        )
        timings[str(top_k)] = time.perf_counter() - t
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    return {
        "zoo_key": manifest["key"],
        "zoo_build_seconds": build_s,
        "n_probe": args.probe,
        "n_eval": {k: len(v) for k, v in evals.items()},
        "seconds_by_top_k": timings,
        "rows": json.loads(table.to_json(orient="records")),
    }


def packaged_arm(args) -> dict:
    import numpy as np

    from interlingua.audit.quality import load_causal_lm
    from interlingua.data.models.spec import ModelSpec
    from interlingua.transport.correspond import correlation_cost, resolve_blocks
    from interlingua.transport.evaluate import _nll
    from interlingua.transport.fuse import TransportModel, model_activations
    from interlingua.transport.plans import (
        LAYER_MARGINAL_TOL,
        LAYER_MAX_ITER,
        calibrate_epsilon,
        exact_cost,
        sinkhorn_plan,
    )
    from interlingua.zoo import preset
    from interlingua.zoo.data import load_zoo_data

    out: dict = {"probe": args.packaged_probe, "layer_sample": args.layer_sample, "m": 3}
    data = load_zoo_data(preset("small"))
    probe = {
        "deu": data.train_texts("deu_Latn")[: args.packaged_probe],
        "eng": data.train_texts("eng_Latn")[: args.packaged_probe],
    }
    evals = data.heldout_texts("deu_Latn")
    models = {}
    for name, package in (("gemma3-270m", "gemma3-270m"), ("smollm2-135m", "smollm2-135m")):
        t = time.perf_counter()
        lm, tok = load_causal_lm(ModelSpec(package=package))
        out[f"load_seconds_{name}"] = time.perf_counter() - t
        models[name] = TransportModel(name, lm, tok, {"package": package})
    target, donor = models["gemma3-270m"], models["smollm2-135m"]
    for name, model, side in (("gemma3-270m", target, "deu"), ("smollm2-135m", donor, "eng")):
        t = time.perf_counter()
        acts = model_activations(model, probe[side])
        out[f"activations_seconds_{name}"] = time.perf_counter() - t
        out[f"widths_{name}"] = {k: v[0] for k, v in acts.widths.items()}
        out[f"blocks_{name}"] = acts.n_layers
    at, ad = target.activations, donor.activations
    at, ad = next(iter(at.values())), next(iter(ad.values()))
    if args.save_activations:
        save_activations(
            args.save_activations,
            {"gemma3-270m": at, "smollm2-135m": ad},
            "float64" if args.save_float64 else "float16",
        )
    lt, ld = at.n_layers, ad.n_layers
    ci, cj = lt // 2, int(round((lt // 2) * (ld - 1) / (lt - 1)))
    others = [(0, 0), (lt - 1, ld - 1), (lt // 4, ld // 2)]
    per: dict = {}
    plans_by_iface = {}
    for iface in ("mlp", "attn", "residual"):
        cost, _ = correlation_cost(at.layers[iface][ci], ad.layers[iface][cj])
        t = time.perf_counter()
        exact_cost(cost)
        emd_s = time.perf_counter() - t
        t = time.perf_counter()
        cal = calibrate_epsilon(cost)
        cal_s = time.perf_counter() - t
        plan_s, iters = [], []
        for k, (i, j) in enumerate([(ci, cj), *others]):
            c, _ = correlation_cost(at.layers[iface][i], ad.layers[iface][j])
            t = time.perf_counter()
            plan = sinkhorn_plan(c, cal.epsilon)
            plan_s.append(time.perf_counter() - t)
            iters.append(plan.iterations)
            if k == 0:
                plans_by_iface[iface] = plan
        rng = np.random.default_rng(0)
        sub_s = []
        for i, j in [(ci, cj), *others]:
            si = np.sort(rng.choice(cost.shape[0], min(args.layer_sample, cost.shape[0]), replace=False))
            sj = np.sort(rng.choice(cost.shape[1], min(args.layer_sample, cost.shape[1]), replace=False))
            sub, _ = correlation_cost(at.layers[iface][i][:, si], ad.layers[iface][j][:, sj])
            t = time.perf_counter()
            sinkhorn_plan(sub, cal.epsilon, marginal_tol=LAYER_MARGINAL_TOL, max_iter=LAYER_MAX_ITER)
            sub_s.append(time.perf_counter() - t)
        chosen = next(r for r in cal.rows if r["epsilon"] == cal.epsilon)
        published = cal.at(0.1) or {}
        per[iface] = {
            "shape": list(cost.shape),
            "epsilon": cal.epsilon,
            "calibrated": cal.calibrated,
            "emd_seconds": emd_s,
            "calibration_seconds": cal_s,
            "plan_seconds": float(np.mean(plan_s)),
            "plan_seconds_each": plan_s,
            "plan_iterations": iters,
            "layer_cost_solve_seconds": float(np.mean(sub_s)),
            "cost_ratio": chosen["cost_ratio"],
            "row_max_over_uniform": chosen["row_max_over_uniform"],
            "entropy": chosen["entropy"],
            "published_row_max_over_uniform": published.get("row_max_over_uniform", math.nan),
            "published_cost_ratio": published.get("cost_ratio", math.nan),
            "cost_mean": float(cost.mean()),
            "cost_sd": float(cost.std()),
        }
    out["interfaces"] = per
    # the transported weights of one target block from one donor block, both controls (matrix products only)
    _, bd, _ = resolve_blocks(donor.lm)
    idx = np.arange(128)
    res, mlp, attn = plans_by_iface["residual"], plans_by_iface["mlp"], plans_by_iface["attn"]
    t = time.perf_counter()
    for _control in range(2):
        phi_m, psi_r, phi_r, psi_m = mlp.phi_rows(idx), res.psi(), res.phi(), mlp.psi_cols(idx)
        for role in ("in", "up"):
            _ = phi_m @ bd[cj].mlp_in[role].weight.detach().double().numpy() @ psi_r
        _ = phi_r @ bd[cj].mlp_out.weight.detach().double().numpy() @ psi_m
        _ = phi_r @ bd[cj].attn_out.weight.detach().double().numpy() @ attn.psi_cols(idx)
    out["fusion_pair_seconds"] = time.perf_counter() - t
    t = time.perf_counter()
    nll, n_tok = _nll(target, evals, 16, 512)
    out["nll_pass_seconds"] = time.perf_counter() - t
    out["nll_target_deu"] = nll
    out["nll_tokens"] = n_tok
    m = 3
    calibration = sum(p["calibration_seconds"] for p in per.values())
    layer_costs = lt * ld * sum(p["layer_cost_solve_seconds"] for p in per.values())
    plans = lt * m * sum(p["plan_seconds"] + p["emd_seconds"] for p in per.values())  # + the emd of each diagnostic
    nll_passes = (1 + 2) * 2  # unfused + (OT, shuffled) at one alpha, on two languages
    estimate = {
        "calibration_seconds": calibration,
        "layer_costs_seconds": layer_costs,
        "neuron_plans_seconds": plans,
        "fusion_seconds": lt * m * out["fusion_pair_seconds"],
        "nll_seconds": nll_passes * out["nll_pass_seconds"],
        "activations_seconds": out["activations_seconds_gemma3-270m"] + out["activations_seconds_smollm2-135m"],
    }
    estimate["total_seconds"] = sum(estimate.values())
    out["estimate_one_direction_one_alpha"] = estimate
    if args.packaged_run:
        from interlingua.transport import FusionOptions, ParallelProbe, SweepOptions, fuse_pair

        t = time.perf_counter()
        table = fuse_pair(
            target,
            donor,
            ParallelProbe(probe["deu"], probe["eng"], "deu", "eng"),
            {"deu": evals, "eng": data.heldout_texts("eng_Latn")},
            SweepOptions(alphas=(0.1,), fusion=FusionOptions(top_k=128, m=3)),
        )
        out["run_seconds"] = time.perf_counter() - t
        out["run_rows"] = json.loads(table.to_json(orient="records"))
    return out


def demo_fusion_arm(args) -> dict:
    """The whole fusion of the demo pair, both directions (fuse_models): Gemma 3 270M reads deu, SmolLM2-135M eng."""
    import resource

    from interlingua.audit.quality import load_causal_lm
    from interlingua.data.models.spec import ModelSpec
    from interlingua.transport import fuse_models
    from interlingua.transport.evaluate import SweepOptions
    from interlingua.transport.fuse import FusionOptions, TransportModel
    from interlingua.zoo import preset
    from interlingua.zoo.data import load_zoo_data

    t0 = time.perf_counter()
    data = load_zoo_data(preset("small"))
    probe = {
        "deu": data.train_texts("deu_Latn")[: args.packaged_probe],
        "eng": data.train_texts("eng_Latn")[: args.packaged_probe],
    }
    evals = {"deu": data.heldout_texts("deu_Latn"), "eng": data.heldout_texts("eng_Latn")}
    models = {}
    for name in ("gemma3-270m", "smollm2-135m"):
        lm, tok = load_causal_lm(ModelSpec(package=name))
        models[name] = TransportModel(name, lm, tok, {"package": name})
    table, _fig = fuse_models(
        models,
        {"gemma3-270m": "deu", "smollm2-135m": "eng"},
        probe,
        evals,
        options=SweepOptions(
            alphas=tuple(args.demo_alphas),
            fusion=FusionOptions(top_k=128, m=3, epsilon="auto", seed=0, layer_sample=args.layer_sample),
        ),
        figure=args.figure,
    )
    return {
        "seconds": time.perf_counter() - t0,
        "n_probe": args.packaged_probe,
        "n_eval": {k: len(v) for k, v in evals.items()},
        "alphas": args.demo_alphas,
        "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rows": json.loads(table.to_json(orient="records")),
    }


def demo_markdown(result: dict) -> str:
    dm = result["demo"]
    lines = [
        "# Transport fusion of the demo pair, Gemma 3 270M <-> SmolLM2-135M (both directions)",
        "",
        f"Machine: {result['machine']}.",
        "",
        f"Probe {dm['n_probe']} training verses (Gemma reads deu, SmolLM2 eng), evaluation {dm['n_eval']} "
        f"held-out verses read by the target; top_k 128, m = 3, auto epsilon, seed 0. Wall "
        f"{dm['seconds'] / 60:.1f} min in all (model loads, probe passes, plans, fusion, NLL passes), "
        f"max RSS {dm['maxrss_bytes'] / 2**30:.1f} GiB.",
        "",
        "| target <- donor | alpha | language (role) | nll_target | delta_ot | delta_shuffled | ot_minus_rand |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in dm["rows"]:
        lines.append(
            f"| {r['target']} <- {r['donor']} | {r['alpha']} | {r['language']} ({r['role']}) | "
            f"{_fmt(r['nll_target'])} | {_fmt(r['delta_ot'])} | {_fmt(r['delta_shuffled'])} | "
            f"{_fmt(r['ot_minus_rand'])} |"
        )
    lines += [
        "",
        "| target <- donor | s activations | s plans | s fusion | eps mlp / attn / residual / layer | "
        "cost_ratio mlp | row max / uniform mlp (at 0.1) | calibrated | converged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    seen = set()
    for r in dm["rows"]:
        if (r["target"], r["donor"]) in seen:
            continue
        seen.add((r["target"], r["donor"]))
        lines.append(
            f"| {r['target']} <- {r['donor']} | {r['seconds_activations']:.0f} | {r['seconds_plans']:.0f} | "
            f"{r['seconds_fusion']:.0f} | {r['eps_mlp']} / {r['eps_attn']} / {r['eps_residual']} / "
            f"{r['eps_layer']} | {_fmt(r['cost_ratio_mlp'])} | {_fmt(r['rowmax_uniform_mlp'], 1)} "
            f"({_fmt(r['published_rowmax_uniform_mlp'], 1)}) | {r['calibrated']} | {r['converged']} |"
        )
    return "\n".join(lines) + "\n"


def save_activations(path: str, acts: dict, dtype: str = "float16") -> None:
    """The probe activations as npz (``<model>/<interface>/<block>``; float16 by default), for a run elsewhere."""
    import numpy as np

    arrays = {
        f"{name}/{iface}/{i}": a.astype(dtype)
        for name, pa in acts.items()
        for iface, layers in pa.layers.items()
        for i, a in enumerate(layers)
    }
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)


def load_activations(path: str) -> dict:
    import numpy as np

    from interlingua.transport.correspond import ProbeActivations

    data = np.load(path)
    out: dict = {}
    for key in data.files:
        name, iface, i = key.split("/")
        out.setdefault(name, {}).setdefault(iface, {})[int(i)] = data[key].astype(np.float64)
    acts = {}
    for name, ifaces in out.items():
        layers = {f: [v[i] for i in sorted(v)] for f, v in ifaces.items()}
        n = next(iter(layers.values()))[0].shape[0]
        acts[name] = ProbeActivations(name, n, "saved", layers, np.ones(n, np.int64), ())
    return acts


def plans_arm(args) -> dict:
    """transport_plans for Gemma 3 270M <- SmolLM2-135M from saved activations, timed (``--ot-device``)."""
    import torch

    from interlingua.transport.plans import PlanOptions, transport_plans

    acts = load_activations(args.plans_from)
    at, ad = acts["gemma3-270m"], acts["smollm2-135m"]
    device = args.ot_device
    if device and device.startswith("cuda"):
        torch.ones(1, device=device)  # context start outside the timing
    t = time.perf_counter()
    plans = transport_plans(
        at, ad, PlanOptions(epsilon="auto", m=3, seed=0, layer_sample=args.layer_sample, device=device)
    )
    seconds = time.perf_counter() - t
    summary = plans.summary()
    return {
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "seconds": seconds,
        "n_probe": at.n_sentences,
        "blocks": [at.n_layers, ad.n_layers],
        "kept_pairs": len(plans.pairs),
        "summary": summary,
        "layer_weights_argmax": plans.layer_weights.argmax(axis=1).tolist(),
        "pairs": json.loads(plans.diagnostics_table().to_json(orient="records")),
    }


def _peak(run):
    """(result, wall seconds, process CPU seconds, tracemalloc peak bytes) of ``run()``; numpy allocations are
    traced. CPU seconds are the fairer figure on a shared machine (wall stretches with other users' load)."""
    import tracemalloc

    tracemalloc.start()
    t, c = time.perf_counter(), time.process_time()
    try:
        out = run()
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return out, seconds, cpu, peak


def plans_cpu_arm(args) -> dict:
    """Both directions' transport_plans on the CPU (fast Sinkhorn), timed with peak memory, checked against the
    log-domain solver on ``--check-rows`` target blocks (their layer-cost rows and their kept pairs' full plans)."""
    import resource

    import numpy as np

    from interlingua.core.numerics import analysis_blas
    from interlingua.transport.correspond import correlation_cost
    from interlingua.transport.plans import (
        LAYER_MARGINAL_TOL,
        LAYER_MAX_ITER,
        PlanOptions,
        _subsample,
        sinkhorn_plan,
        transport_plans,
    )

    acts = load_activations(args.plans_cpu)
    out: dict = {
        "activations": args.plans_cpu,
        "method": args.method,
        "layer_sample": args.layer_sample,
        "directions": [],
    }
    names = ("gemma3-270m", "smollm2-135m")
    for tname, dname in (names, names[::-1]):
        at, ad = acts[tname], acts[dname]
        load_before = os.getloadavg()
        plans, seconds, cpu, peak = _peak(
            lambda at=at, ad=ad: transport_plans(
                at,
                ad,
                PlanOptions(epsilon="auto", m=3, seed=0, layer_sample=args.layer_sample, method=args.method),
                cache=args.plans_cache,
            )
        )
        d = {
            "target": tname,
            "donor": dname,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "peak_traced_bytes": peak,
            "load_avg_before": load_before,
            "load_avg_after": os.getloadavg(),
            "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "from_cache": plans.from_cache,
            "n_probe": at.n_sentences,
            "blocks": [at.n_layers, ad.n_layers],
            "kept_pairs": len(plans.pairs),
            "epsilon": plans.epsilon,
            "summary": plans.summary(),
            "layer_weights_argmax": plans.layer_weights.argmax(axis=1).tolist(),
            "methods": sorted({pp.plans[f].method for pp in plans.pairs.values() for f in plans.interfaces}),
            "pairs": json.loads(plans.diagnostics_table().to_json(orient="records")),
        }
        print(f"{tname} <- {dname}: {seconds:.0f} s wall, {cpu:.0f} s CPU, peak {peak / 2**20:.0f} MiB", flush=True)
        check: dict = {
            "rows": args.check_rows,
            "layer_cost_max_abs_diff": 0.0,
            "plan_max_abs_diff_nm": 0.0,
            "plan_max_rel_diff": 0.0,
            "iterations_equal": True,
            "log_seconds": {},
            "fast_seconds": {},
        }
        solves: dict = {"layer": {"log": [], "fast": []}}
        with analysis_blas():
            for i in args.check_rows:
                for f in plans.interfaces:
                    st = _subsample(at.layers[f][i].shape[1], args.layer_sample, 0, f, 0, i)
                    for j in range(ad.n_layers):
                        sd = _subsample(ad.layers[f][j].shape[1], args.layer_sample, 0, f, 1, j)
                        cost, _ = correlation_cost(at.layers[f][i][:, st], ad.layers[f][j][:, sd])
                        t = time.perf_counter()
                        q = sinkhorn_plan(
                            cost,
                            plans.epsilon[f],
                            max_iter=LAYER_MAX_ITER,
                            marginal_tol=LAYER_MARGINAL_TOL,
                            method="log",
                        )
                        solves["layer"]["log"].append(time.perf_counter() - t)
                        g = float((q.coupling * cost).sum())
                        check["layer_cost_max_abs_diff"] = max(
                            check["layer_cost_max_abs_diff"], abs(g - plans.layer_cost_by_interface[f][i, j])
                        )
                for j, _w in plans.kept(i):
                    for f in plans.interfaces:
                        cost, _ = correlation_cost(at.layers[f][i], ad.layers[f][j])
                        t = time.perf_counter()
                        q = sinkhorn_plan(cost, plans.epsilon[f], method="log")
                        solves.setdefault(f, {"log": [], "fast": []})["log"].append(time.perf_counter() - t)
                        t = time.perf_counter()
                        fast = sinkhorn_plan(cost, plans.epsilon[f], method=args.method)
                        solves[f]["fast"].append(time.perf_counter() - t)
                        mine = plans.pairs[(i, j)].plans[f]
                        n, m = cost.shape
                        diff = np.abs(mine.coupling - q.coupling)
                        check["plan_max_abs_diff_nm"] = max(check["plan_max_abs_diff_nm"], float(diff.max() * n * m))
                        check["plan_max_rel_diff"] = max(check["plan_max_rel_diff"], float((diff / q.coupling).max()))
                        check["iterations_equal"] &= mine.iterations == q.iterations == fast.iterations
        check["log_seconds"] = {k: float(np.mean(v["log"])) for k, v in solves.items() if v["log"]}
        check["fast_seconds"] = {k: float(np.mean(v["fast"])) for k, v in solves.items() if v["fast"]}
        lt, ld = at.n_layers, ad.n_layers
        if args.check_rows:
            # the previous solver's plan set on these inputs, from its measured solve times (as transport_packaged)
            check["log_estimate_seconds"] = {
                "layer_costs": lt * ld * len(plans.interfaces) * check["log_seconds"]["layer"],
                "neuron_plans": len(plans.pairs) * sum(check["log_seconds"][f] for f in plans.interfaces),
            }
            d["check"] = check
        out["directions"].append(d)
    return out


def plans_cpu_markdown(result: dict) -> str:
    pc = result["plans_cpu"]
    lines = [
        "# transport_plans on the CPU, Gemma 3 270M <-> SmolLM2-135M (both directions)",
        "",
        f"Machine: {result['machine']}.",
        "",
        f"Inputs: {pc['activations']} (float64 probe activations, 128 sentences: Gemma reads deu, SmolLM2 eng); "
        f"Sinkhorn method {pc['method']!r}, layer_sample {pc['layer_sample']}, m = 3, auto epsilon, seed 0.",
        "",
        "| target <- donor | wall s | CPU s | 1-min load before / after | peak traced MiB | process max RSS MiB "
        "| kept pairs | eps mlp / attn / residual / layer | solver | from cache |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in pc["directions"]:
        e = d["epsilon"]
        lines.append(
            f"| {d['target']} <- {d['donor']} | {d['seconds']:.0f} | {d.get('cpu_seconds', math.nan):.0f} | "
            f"{d.get('load_avg_before', [math.nan])[0]:.1f} / {d.get('load_avg_after', [math.nan])[0]:.1f} | "
            f"{d['peak_traced_bytes'] / 2**20:.0f} "
            f"| {d['maxrss_bytes'] / 2**20:.0f} | {d['kept_pairs']} | {e['mlp']} / {e['attn']} / "
            f"{e['residual']} / {e['layer']} | {', '.join(d['methods'])} | {d['from_cache']} |"
        )
    lines += [
        "",
        "Check against POT's log-domain Sinkhorn (the previous solver) on the target blocks "
        "listed: their layer-cost rows (all donor blocks, every interface) and their kept pairs' full plans.",
        "",
        "| target <- donor | blocks | max abs diff of G | max abs diff of Q x n m | max rel diff of Q | "
        "same iterations | log s per solve (layer, mlp, attn, residual) | fast s per solve | previous solver, "
        "estimated min (layer costs + neuron plans) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for d in pc["directions"]:
        if "check" not in d:
            continue
        c = d["check"]
        ls, fs = c["log_seconds"], c["fast_seconds"]
        est = c["log_estimate_seconds"]
        lines.append(
            f"| {d['target']} <- {d['donor']} | {c['rows']} | {c['layer_cost_max_abs_diff']:.1e} | "
            f"{c['plan_max_abs_diff_nm']:.1e} | {c['plan_max_rel_diff']:.1e} | {c['iterations_equal']} | "
            f"{ls.get('layer', math.nan):.2f}, {ls.get('mlp', math.nan):.1f}, {ls.get('attn', math.nan):.1f}, "
            f"{ls.get('residual', math.nan):.1f} | {fs.get('mlp', math.nan):.2f}, "
            f"{fs.get('attn', math.nan):.2f}, {fs.get('residual', math.nan):.2f} | "
            f"{est['layer_costs'] / 60:.1f} + {est['neuron_plans'] / 60:.1f} |"
        )
    lines += [
        "",
        "| target <- donor | plan | epsilon | calibrated | cost_ratio | row max / uniform | entropy | "
        "row max / uniform at 0.1 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in pc["directions"]:
        for f, s in d["summary"].items():
            lines.append(
                f"| {d['target']} <- {d['donor']} | {f} | {s['epsilon']} | {s['calibrated']} | "
                f"{_fmt(s['cost_ratio'])} | {_fmt(s['row_max_over_uniform'], 1)} | {_fmt(s['entropy'], 3)} | "
                f"{_fmt(s['published_row_max_over_uniform'], 1)} |"
            )
    lines += [""] + [
        f"Best donor block per target block, {d['target']} <- {d['donor']}: {d['layer_weights_argmax']}"
        for d in pc["directions"]
    ]
    return "\n".join(lines) + "\n"


def plans_markdown(result: dict) -> str:
    pl = result["plans"]
    lines = [
        "# transport_plans, Gemma 3 270M (target) <- SmolLM2-135M (donor), from saved activations",
        "",
        f"Machine: {result['machine']}; Sinkhorn on {pl['device']} ({pl['gpu']}); ot.emd2 on the CPU.",
        "",
        f"{pl['n_probe']} probe sentences, blocks {pl['blocks'][0]} x {pl['blocks'][1]}, m = 3: "
        f"{pl['kept_pairs']} kept block pairs; wall {pl['seconds']:.0f} s for calibration, the "
        f"{pl['blocks'][0] * pl['blocks'][1]} x 3 layer-cost solves and the kept pairs' full plans "
        "(with their emd diagnostics).",
        "",
        "| plan | epsilon | calibrated | cost_ratio | row max / uniform | entropy | row max / uniform at 0.1 | "
        "iterations (sum over kept pairs) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f, s in pl["summary"].items():
        iters = sum(r["iterations"] for r in pl["pairs"] if r["interface"] == f)
        lines.append(
            f"| {f} | {s['epsilon']} | {s['calibrated']} | {_fmt(s['cost_ratio'])} | "
            f"{_fmt(s['row_max_over_uniform'], 1)} | {_fmt(s['entropy'], 3)} | "
            f"{_fmt(s['published_row_max_over_uniform'], 1)} | {iters} |"
        )
    lines += ["", f"Best donor block per target block: {pl['layer_weights_argmax']}"]
    return "\n".join(lines) + "\n"


def _fmt(x, nd=4) -> str:
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.{nd}f}"
    return str(x)


def markdown(result: dict) -> str:
    lines = ["# Transport fusion benchmark", "", f"Machine: {result['machine']}", ""]
    zoo = result.get("zoo")
    if zoo:
        lines += [
            f"## Small zoo (eng <-> deu), probe {zoo['n_probe']} training verses, eval {zoo['n_eval']} held-out verses",
            "",
            f"Wall seconds by top_k: {', '.join(f'{k}: {v:.0f}' for k, v in zoo['seconds_by_top_k'].items())}",
            "",
            "| target <- donor | top_k | alpha | language (role) | nll_target | delta_ot | delta_shuffled | "
            "ot_minus_rand |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in zoo["rows"]:
            lines.append(
                f"| {r['target']} <- {r['donor']} | {r['top_k']} | {r['alpha']} | {r['language']} "
                f"({r['role']}) | {_fmt(r['nll_target'])} | {_fmt(r['delta_ot'])} | "
                f"{_fmt(r['delta_shuffled'])} | {_fmt(r['ot_minus_rand'])} |"
            )
        lines += [
            "",
            "Plan diagnostics at the auto epsilon (per direction; mean over kept block pairs):",
            "",
            "| target <- donor | interface | epsilon | cost_ratio | row max / uniform | entropy | "
            "row max / uniform at eps 0.1 |",
            "|---|---|---|---|---|---|---|",
        ]
        seen = set()
        for r in zoo["rows"]:
            key = (r["target"], r["donor"])
            if key in seen:
                continue
            seen.add(key)
            for f in ("mlp", "attn", "residual", "layer"):
                pub = r.get(f"published_rowmax_uniform_{f}", math.nan) if f != "layer" else math.nan
                lines.append(
                    f"| {r['target']} <- {r['donor']} | {f} | {r[f'eps_{f}']} | "
                    f"{_fmt(r[f'cost_ratio_{f}'])} | {_fmt(r[f'rowmax_uniform_{f}'], 2)} | "
                    f"{_fmt(r[f'entropy_{f}'], 3)} | {_fmt(pub if pub is not None else math.nan, 2)} |"
                )
    pk = result.get("packaged")
    if pk:
        lines += [
            "",
            "## Gemma 3 270M (target) <- SmolLM2-135M (donor): cost on this machine",
            "",
            f"Probe {pk['probe']} sentences; load {pk['load_seconds_gemma3-270m']:.0f} s / "
            f"{pk['load_seconds_smollm2-135m']:.0f} s; activations {pk['activations_seconds_gemma3-270m']:.0f} s"
            f" / {pk['activations_seconds_smollm2-135m']:.0f} s; one NLL pass {pk['nll_pass_seconds']:.0f} s.",
            "",
            "| interface | shape | epsilon | emd s | calibration s | one plan s (iterations) | "
            "one layer-cost solve s | cost_ratio | row max / uniform (at eps 0.1) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for f, p in pk["interfaces"].items():
            lines.append(
                f"| {f} | {p['shape'][0]} x {p['shape'][1]} | {p['epsilon']} | {p['emd_seconds']:.1f} | "
                f"{p['calibration_seconds']:.1f} | {p['plan_seconds']:.1f} ({p['plan_iterations']}) | "
                f"{p['layer_cost_solve_seconds']:.2f} | {_fmt(p['cost_ratio'])} | "
                f"{_fmt(p['row_max_over_uniform'], 1)} ({_fmt(p['published_row_max_over_uniform'], 1)}) |"
            )
        est = pk["estimate_one_direction_one_alpha"]
        lines += [
            "",
            "Estimate of one fuse_pair (one direction, one alpha, m = 3): "
            + ", ".join(f"{k.replace('_seconds', '')} {v / 60:.1f} min" for k, v in est.items()),
        ]
        if "run_seconds" in pk:
            lines += ["", f"Measured run: {pk['run_seconds'] / 60:.1f} min"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--zoo-root", default="/tmp/transport_zoo")
    p.add_argument("--probe", type=int, default=512)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.1, 0.25, 0.5])
    p.add_argument(
        "--top-k", type=lambda s: None if s.lower() in ("none", "all") else int(s), nargs="+", default=[32, None]
    )
    p.add_argument("--figure", default=None, help="save the zoo figure (first top_k) here")
    p.add_argument("--quick", action="store_true", help="100 probes, alphas 0 0.5, top_k 32")
    p.add_argument("--packaged", action="store_true", help="also the Gemma 3 270M <- SmolLM2-135M cost")
    p.add_argument("--packaged-only", action="store_true")
    p.add_argument("--packaged-probe", type=int, default=128)
    p.add_argument("--packaged-run", action="store_true", help="run the whole Gemma <- SmolLM2 fuse_pair")
    p.add_argument("--layer-sample", type=int, default=256)
    p.add_argument("--save-activations", default=None, help="packaged arm: save the probe activations (npz)")
    p.add_argument("--save-float64", action="store_true", help="with --save-activations: float64 (~150 MB)")
    p.add_argument("--plans-from", default=None, help="only time transport_plans on saved activations")
    p.add_argument("--ot-device", default=None, help="with --plans-from: where Sinkhorn runs (cuda)")
    p.add_argument(
        "--demo-fusion",
        action="store_true",
        help="the whole Gemma 3 270M <-> SmolLM2-135M fusion, both directions (fuse_models)",
    )
    p.add_argument("--demo-alphas", type=float, nargs="+", default=[0.1, 0.25])
    p.add_argument("--plans-cpu", default=None, help="both directions' plans on the CPU from saved activations")
    p.add_argument("--method", default="auto", choices=("auto", "plain", "log"), help="with --plans-cpu: Sinkhorn")
    p.add_argument(
        "--check-rows",
        type=int,
        nargs="*",
        default=[0, 9, 17],
        help="with --plans-cpu: target blocks checked against the log-domain solver",
    )
    p.add_argument("--plans-cache", default=None, help="with --plans-cpu: a plans cache folder (a Store root)")
    p.add_argument("--out", default=str(HERE / "results" / "transport"))
    args = p.parse_args(argv)
    if args.quick:
        args.probe, args.alphas, args.top_k = 100, [0.0, 0.5], [32]
    sys.path.insert(0, str(HERE.parent / "src"))
    result: dict = {"machine": _machine(), "argv": sys.argv[1:]}
    if args.demo_fusion:
        result["demo"] = demo_fusion_arm(args)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        out.with_suffix(".md").write_text(demo_markdown(result))
        print(demo_markdown(result))
        return 0
    if args.plans_cpu:
        result["plans_cpu"] = plans_cpu_arm(args)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        out.with_suffix(".md").write_text(plans_cpu_markdown(result))
        print(plans_cpu_markdown(result))
        return 0
    if args.plans_from:
        result["plans"] = plans_arm(args)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        out.with_suffix(".md").write_text(plans_markdown(result))
        print(plans_markdown(result))
        return 0
    if not args.packaged_only:
        result["zoo"] = zoo_arm(args)
    if args.packaged or args.packaged_only or args.packaged_run:
        result["packaged"] = packaged_arm(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
