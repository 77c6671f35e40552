"""Benchmark: the width / depth confound of raw similarity scores, and what calibration does to it.

Part (a), widths. Two INDEPENDENT anisotropic Gaussian sides (n = 300 rows,
column k scaled by k^-0.5, no shared signal at all) at widths 32..2048. For
each width and seed: the raw score, the permutation null's critical value
``tau`` (K draws, the (1 - alpha) order statistic with the observed value
included) and the calibrated score, for biased linear CKA (bounded), debiased
linear CKA (unbounded: the excess over tau) and mutual kNN (k = 10). Under
independence the calibrated score must be 0 in at least 1 - alpha of the
seeds at every width, whatever the raw score does.

Part (b), depths. Two independent stacks of L layers (width 256, each layer a
fresh random mixture of the side's latent plus noise, so layers of one side
are correlated with each other and not with the other side), L = 1..16:
the raw maximum of the L x L biased-CKA grid, the same maximum calibrated
per cell (its own null: what a search that ignores itself reports), and
calibrated aggregation-aware (the maxima of the permuted grids, one
permutation for every layer of side B).

Part (c), trained miniature models (``--models``): GPT-2s of the miniature
family's architecture (:func:`interlingua.zoo.train.new_gpt2`, trained by
:func:`interlingua.zoo.train.train_loop` as the zoo trains them) on the same
English Bible verses (John and Matthew, one SentencePiece tokenizer) with
different seeds (initialisation and batch order), at several widths (depth 2)
and depths (width 64); the same architectures at random initialisation are
the null. Per architecture, seed 0 is compared with seed 1 on held-out verses
(mean-pooled over real tokens): last layer vs last layer (raw and calibrated
biased linear CKA) and the all-layers grid (raw maximum, aggregation-aware
calibrated maximum), trained vs trained and random vs random.

Run::

    PYTHONPATH=src nice -n 10 python benchmarks/bench_calibration_scale.py            # parts (a), (b)
    PYTHONPATH=src nice -n 10 python benchmarks/bench_calibration_scale.py --models-only --steps 200  # part (c)

Writes ``benchmarks/results/calibration_scale.json`` and the figure
``docs/assets/calibration-scale.png``; ``docs/results/calibration.md`` reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.analysis.inference import (
    calibrate_grid_result,
    calibrate_result,
    grid_permutation_test,
    permutation_test,
)

ROOT = Path(__file__).resolve().parent.parent
OUT_JSON = ROOT / "benchmarks" / "results" / "calibration_scale.json"
OUT_FIG = ROOT / "docs" / "assets" / "calibration-scale.png"
OUT_MODELS = ROOT / "benchmarks" / "results" / "calibration_models.json"
OUT_MODELS_FIG = ROOT / "docs" / "assets" / "calibration-models.png"
MEASURES = ("cka_linear_biased", "cka_linear_debiased", "mknn_k10")


def widths_part(widths: list[int], seeds: int, n: int, k: int, alpha: float) -> list[dict[str, Any]]:
    rows = []
    for w in widths:
        scale = np.arange(1, w + 1, dtype=float) ** -0.5
        for s in range(seeds):
            rng = np.random.default_rng([w, s])
            x = rng.standard_normal((n, w)) * scale
            y = rng.standard_normal((n, w)) * scale
            for mid in MEASURES:
                res = permutation_test(mid, x, y, n_permutations=k, seed=s)
                c = calibrate_result(res, alpha=alpha)
                rows.append(
                    {
                        "width": w,
                        "seed": s,
                        "measure": mid,
                        "raw": c.observed,
                        "tau": c.tau,
                        "calibrated": c.calibrated,
                        "p": c.p_value,
                    }
                )
        print(f"width {w}: done", flush=True)
    return rows


def _stack(rng: np.random.Generator, depth: int, n: int, width: int) -> list[np.ndarray]:
    latent = rng.standard_normal((n, width))
    scale = np.arange(1, width + 1, dtype=float) ** -0.5
    return [
        (latent @ rng.standard_normal((width, width)) / np.sqrt(width) + 0.5 * rng.standard_normal((n, width))) * scale
        for _ in range(depth)
    ]


def depths_part(depths: list[int], seeds: int, n: int, width: int, k: int, alpha: float) -> list[dict[str, Any]]:
    rows = []
    for d in depths:
        for s in range(seeds):
            rng = np.random.default_rng([d, s, 7])
            a, b = _stack(rng, d, n, width), _stack(rng, d, n, width)
            res = grid_permutation_test(a, b, n_permutations=k, seed=s)
            cal = calibrate_grid_result(res, alpha=alpha)
            i, j = cal.argmax
            rows.append(
                {
                    "depth": d,
                    "seed": s,
                    "raw_max": cal.maximum.observed,
                    "cell_calibrated_of_max": float(cal.cell_calibrated[i, j]),
                    "cell_p_of_max": float(res.cell_p_values[i, j]),
                    "tau_max": cal.maximum.tau,
                    "calibrated_max": cal.maximum.calibrated,
                    "p_max": cal.maximum.p_value,
                    "raw_mean": cal.mean.observed,
                    "calibrated_mean": cal.mean.calibrated,
                }
            )
        print(f"depth {d}: done", flush=True)
    return rows


def _pooled(lm: Any, seqs: list[list[int]], pad_id: int) -> np.ndarray:
    """(n_states, n, width) float64: each hidden state mean-pooled over the real tokens of each sequence."""
    import torch

    from interlingua.zoo.train import collate

    out = []
    with torch.no_grad():
        for start in range(0, len(seqs), 64):
            batch = seqs[start : start + 64]
            ids = collate(batch, pad_id)
            mask = (torch.arange(ids.shape[1])[None, :] < torch.tensor([len(b) for b in batch])[:, None]).float()
            hs = lm(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True).hidden_states
            out.append(torch.stack([(h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True) for h in hs]))
    return torch.cat(out, dim=1).double().numpy()


def models_part(
    shapes: list[tuple[int, int]], steps: int, k: int, alpha: float, heldout: int, folder: Path
) -> list[dict[str, Any]]:
    """Train two seeds of each (width, depth) on the same verses; compare seed 0 with seed 1, trained and random."""
    from interlingua.zoo import preset
    from interlingua.zoo.config import TrainSchedule
    from interlingua.zoo.data import load_zoo_data
    from interlingua.zoo.tokenizers import encode, load_tokenizer, train_tokenizer
    from interlingua.zoo.train import deterministic_torch, new_gpt2, train_loop

    cfg = preset("tiny", languages=("eng_Latn",), books=("JHN", "MAT"), heldout=heldout)
    data = load_zoo_data(cfg)
    lang = cfg.english
    tok = load_tokenizer(
        train_tokenizer(data.train_texts(lang), folder / "tok", vocab_size=1000, seed=0, max_length=cfg.max_length)
    )
    train = encode(tok, data.train_texts(lang), cfg.max_length)
    held = encode(tok, data.heldout_texts(lang), cfg.max_length)
    pad, cls, sep = tok.pad_token_id, tok.cls_token_id, tok.sep_token_id
    rows = []
    for width, depth in shapes:
        states: dict[tuple[str, int], np.ndarray] = {}
        for seed in (0, 1):
            t0 = time.time()
            with deterministic_torch(1):
                lm = new_gpt2(
                    vocab_size=len(tok),
                    n_layer=depth,
                    n_embd=width,
                    n_head=max(1, width // 32),
                    max_length=cfg.max_length,
                    dropout=0.0,
                    cls_id=cls,
                    sep_id=sep,
                    pad_id=pad,
                    seed=1000 + seed,
                )
                lm.eval()
                states[("random", seed)] = _pooled(lm, held, pad)
                stats = train_loop(
                    lm,
                    train,
                    schedule=TrainSchedule(
                        steps=steps,
                        batch_size=cfg.batch_size,
                        lr=cfg.lr,
                        warmup=cfg.warmup,
                        weight_decay=cfg.weight_decay,
                    ),
                    pad_id=pad,
                    seed=2000 + seed,
                )
                states[("trained", seed)] = _pooled(lm, held, pad)
            print(
                f"width {width} depth {depth} seed {seed}: loss {stats.losses[0]:.2f} -> "
                f"{np.mean(stats.losses[-10:]):.2f}, {time.time() - t0:.0f} s",
                flush=True,
            )
        for kind in ("trained", "random"):
            a, b = states[(kind, 0)], states[(kind, 1)]
            last = calibrate_result(
                permutation_test("cka_linear_biased", a[-1], b[-1], n_permutations=k, seed=0), alpha=alpha
            )
            grid = calibrate_grid_result(grid_permutation_test(a, b, n_permutations=k, seed=0), alpha=alpha)
            rows.append(
                {
                    "kind": kind,
                    "width": width,
                    "depth": depth,
                    "n": a.shape[1],
                    "raw_last": last.observed,
                    "tau_last": last.tau,
                    "calibrated_last": last.calibrated,
                    "p_last": last.p_value,
                    "raw_grid_max": grid.maximum.observed,
                    "tau_grid_max": grid.maximum.tau,
                    "calibrated_grid_max": grid.maximum.calibrated,
                    "p_grid_max": grid.maximum.p_value,
                    "final_loss": float(np.mean(stats.losses[-10:])) if kind == "trained" else float("nan"),
                }
            )
    return rows


def models_figure(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    t = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (var, fixed, label) in zip(axes, (("width", "depth", "depth 2"), ("depth", "width", "width 64"))):
        other = 2 if var == "width" else 64
        sub = t[t[fixed] == other].sort_values(var)
        for kind, colour in (("trained", "C0"), ("random", "C3")):
            g = sub[sub["kind"] == kind]
            ax.plot(g[var], g["raw_last"], "-o", color=colour, ms=3, label=f"{kind}: raw (last layers)")
            ax.plot(g[var], g["calibrated_last"], "--s", color=colour, ms=3, label=f"{kind}: calibrated")
            ax.plot(g[var], g["calibrated_grid_max"], ":^", color=colour, ms=3, label=f"{kind}: calibrated grid max")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"{var} ({label}); seed 0 vs seed 1")
        ax.set_ylabel("biased linear CKA")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("miniature GPT-2s trained on the same verses vs the same architectures at random init")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def summarise(rows: list[dict[str, Any]], key: str, values: list[str], by: list[str]) -> list[dict[str, Any]]:
    import pandas as pd

    t = pd.DataFrame(rows)
    g = t.groupby(by, sort=True)
    out = g[values].median().add_prefix("median_")
    for v in values:
        if v.startswith("calibrated") or v.startswith("cell_calibrated"):
            out[f"share_zero_{v}"] = g[v].apply(lambda s: float((s == 0).mean()))
    return out.reset_index().to_dict("records")


def figure(widths: list[dict[str, Any]], depths: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    w = pd.DataFrame(widths)
    d = pd.DataFrame(depths)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ax = axes[0]
    for mid, colour in zip(MEASURES, ("C0", "C1", "C2")):
        g = w[w["measure"] == mid].groupby("width")
        ax.plot(g["raw"].median().index, g["raw"].median(), "-o", color=colour, ms=3, label=f"{mid} raw")
        ax.plot(
            g["calibrated"].mean().index, g["calibrated"].mean(), "--s", color=colour, ms=3, label=f"{mid} calibrated"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width (independent sides, n = 300, column scales k^-0.5)")
    ax.set_ylabel("score (median raw; mean calibrated)")
    ax.set_title("raw scores rise with width; calibrated stay 0")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax = axes[1]
    g = d.groupby("depth")
    ax.plot(g["raw_max"].median().index, g["raw_max"].median(), "-o", label="raw grid max (median)")
    ax.plot(g["tau_max"].median().index, g["tau_max"].median(), ":", label="tau of the max (median)")
    ax.plot(
        g["cell_calibrated_of_max"].mean().index,
        g["cell_calibrated_of_max"].mean(),
        "--^",
        label="max cell calibrated per cell (mean)",
    )
    ax.plot(g["calibrated_max"].mean().index, g["calibrated_max"].mean(), "--s", label="aggregation-aware (mean)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("layers per side (independent stacks, width 256)")
    ax.set_title("best layer pair: per-cell vs aggregation-aware")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[32, 64, 128, 256, 512, 1024, 2048])
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--permutations", type=int, default=200)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--models-only", action="store_true", help="only part (c): trained miniature models")
    ap.add_argument("--steps", type=int, default=200, help="training steps per model in part (c)")
    ap.add_argument("--heldout", type=int, default=300, help="held-out verses compared in part (c)")
    args = ap.parse_args()
    t0 = time.time()
    load = os.getloadavg()
    if args.models_only:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            shapes = [(32, 2), (64, 2), (128, 2), (64, 1), (64, 4)]
            rows = models_part(shapes, args.steps, args.permutations, args.alpha, args.heldout, Path(tmp))
        out_m = {
            "settings": vars(args),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_at_start": load},
            "rows": rows,
            "seconds": round(time.time() - t0, 1),
        }
        out_m["machine"]["load_at_end"] = os.getloadavg()
        OUT_MODELS.write_text(json.dumps(out_m, indent=1), encoding="utf-8")
        models_figure(rows, OUT_MODELS_FIG)
        for r in rows:
            print(
                f"{r['kind']:8s} width {r['width']:4d} depth {r['depth']}: raw last {r['raw_last']:.3f} "
                f"calibrated {r['calibrated_last']:.3f} (p {r['p_last']:.3f}); grid max {r['raw_grid_max']:.3f} "
                f"calibrated {r['calibrated_grid_max']:.3f}"
            )
        print(f"{out_m['seconds']} s; load {load} -> {out_m['machine']['load_at_end']}")
        return
    widths = widths_part(args.widths, args.seeds, args.n, args.permutations, args.alpha)
    depths = depths_part(args.depths, args.seeds, args.n, 256, args.permutations, args.alpha)
    out: dict[str, Any] = {
        "settings": vars(args),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_at_start": load},
        "widths": summarise(widths, "width", ["raw", "tau", "calibrated", "p"], ["measure", "width"]),
        "depths": summarise(
            depths,
            "depth",
            ["raw_max", "tau_max", "cell_calibrated_of_max", "calibrated_max", "raw_mean", "calibrated_mean"],
            ["depth"],
        ),
        "rows": {"widths": widths, "depths": depths},
    }
    out["seconds"] = round(time.time() - t0, 1)
    out["machine"]["load_at_end"] = os.getloadavg()
    OUT_JSON.parent.mkdir(parents=True, exist_ok=True)
    OUT_JSON.write_text(json.dumps(out, indent=1), encoding="utf-8")
    figure(widths, depths, OUT_FIG)
    for r in out["widths"]:
        print(
            f"{r['measure']:22s} width {int(r['width']):5d}: raw {r['median_raw']:.4f} tau {r['median_tau']:.4f} "
            f"calibrated {r['median_calibrated']:.4f} (zero in {r['share_zero_calibrated']:.0%})"
        )
    for r in out["depths"]:
        print(
            f"depth {int(r['depth']):3d}: raw max {r['median_raw_max']:.4f} tau {r['median_tau_max']:.4f} "
            f"per-cell calibrated zero {r['share_zero_cell_calibrated_of_max']:.0%}, "
            f"aggregation-aware zero {r['share_zero_calibrated_max']:.0%}"
        )
    print(f"{out['seconds']} s; load {load} -> {out['machine']['load_at_end']}")


if __name__ == "__main__":
    main()
