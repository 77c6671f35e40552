"""Build a zoo family into the store: content-keyed, atomic, a no-op when it exists.

Layout under the store root (``--cache-dir``, ``$INTERLINGUA_CACHE``,
``~/.cache/interlingua``)::

    zoo/<key>/                        one family (key: 32 hex digits)
        manifest.json                 config, data hash, seeds, steps, held-out ids, NLLs, file hashes
        eng_Latn/tokenizer/           monolingual SentencePiece tokenizer (ALBERT files)
        eng_Latn/step0/ ... step256/  checkpoints: save_pretrained GPT-2 + its tokenizer
        eng_Latn/final/               the trained model (after ``steps`` steps)
        eng_Latn-deu_Latn/tokenizer/  bilingual tokenizer (English + German verses)
        eng_Latn-deu_Latn/lora/       LoRA adapter over eng_Latn/final, trained on both languages
        eng_Latn-deu_Latn/lora-identity/  the same adapter saved before any step (lora_B == 0)
    zoo/refs/<name>.json              which key the family called <name> ('default', 'tiny') is

The key is the SHA-256 of the zoo format, the interlingua version, every
content field of the config (seeds included) and the hash of the verses and
held-out split. A family is built in ``zoo/.tmp-<host>-<pid>-<key>-*`` and moved into
place only when complete, so a killed build leaves no half family; a second
build of the same key verifies the files against the manifest and returns it
without writing anything.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from interlingua.core.builds import build_folder, discard_damaged_build
from interlingua.core.outputs import install_folder
from interlingua.core.store import atomic_write, canonical_json, default_cache_dir, sha256_hex
from interlingua.data.models.cachefiles import sweep_stale
from interlingua.zoo.config import ZooConfig, preset
from interlingua.zoo.data import ZooData, load_zoo_data
from interlingua.zoo.errors import ZooError

if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

__all__ = [
    "ZOO_FORMAT",
    "build_zoo",
    "family_key",
    "file_sha256",
    "load_manifest",
    "verify_family",
    "zoo_root",
]

#: Part of every family key: bump it with any code change that alters what a build writes
#: (training loop, tokenizer settings, layout), so old families are not served as new ones.
ZOO_FORMAT = "interlingua.zoo/1"
KEY_LENGTH = 32


def zoo_root(root: str | os.PathLike[str] | None = None) -> Path:
    """``<store root>/zoo`` (the store root defaults to ``$INTERLINGUA_CACHE`` or ~/.cache/interlingua)."""
    base = Path(root).expanduser() if root is not None else default_cache_dir()
    return base / "zoo"


def family_key(config: ZooConfig, data: ZooData) -> str:
    """Content key of a family: format, package version, config (seeds included) and data hash."""
    from interlingua import __version__

    payload = {"format": ZOO_FORMAT, "interlingua": __version__, "config": config.key_dict(), "data": data.sha256()}
    return sha256_hex(canonical_json(payload))


def file_sha256(path: Path) -> str:
    """sha256 of a file (:func:`interlingua.core.hashing.file_sha256`: cached by path, size, mtime, inode,
    ctime)."""
    from interlingua.core.hashing import file_sha256 as cached_sha256

    return cached_sha256(path)


def load_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a family folder; :class:`ZooError` when absent or unreadable."""
    path = Path(folder) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ZooError(
            f"{folder} is not a zoo family (no manifest.json); build one with `interlingua zoo build`"
        ) from None
    except (OSError, ValueError) as exc:
        raise ZooError(f"the zoo manifest {path} is unreadable ({exc}); delete {folder} and build again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != ZOO_FORMAT:
        raise ZooError(f"{path} is not a {ZOO_FORMAT} manifest; delete {folder} and build again")
    return manifest


def verify_family(folder: Path, manifest: dict[str, Any], *, hashes: bool = True) -> str | None:
    """None when every file the manifest lists is there, unchanged; else what is wrong."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "its manifest lists no files"
    for rel, expected in sorted(files.items()):
        path = folder / rel
        if not path.is_file():
            return f"{rel} is missing"
        if path.stat().st_size != expected.get("bytes"):
            return f"{rel} has {path.stat().st_size} bytes, the manifest says {expected.get('bytes')}"
        if hashes and file_sha256(path) != expected.get("sha256"):
            return f"{rel} fails its sha256 (changed on disk)"
    return None


def _library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "tokenizers", "sentencepiece", "peft", "safetensors", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def _write_ref(zdir: Path, name: str, key: str) -> None:
    path = zdir / "refs" / f"{name}.json"
    body = json.dumps({"name": name, "key": key, "folder": key[:KEY_LENGTH]}, indent=1, sort_keys=True).encode()
    try:
        if path.read_bytes() == body:
            return  # already points there: write nothing
    except OSError:
        pass
    atomic_write(path, body)


def _check_dependencies() -> None:
    import importlib.util

    missing = [m for m in ("sentencepiece", "peft") if importlib.util.find_spec(m) is None]
    if missing:
        raise ZooError(
            f"building a zoo family needs {' and '.join(missing)}; install them with "
            "`pip install sentencepiece 'interlingua[peft]'`"
        )


def build_zoo(
    config: ZooConfig | str = "default",
    *,
    root: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] | None = None,
    verify: bool = True,
) -> dict[str, Any]:
    """Build the family ``config`` (a :class:`ZooConfig` or a preset name) under ``root``; return its manifest.

    ``root`` is the store root (default ``$INTERLINGUA_CACHE`` or
    ``~/.cache/interlingua``); the family lands in ``<root>/zoo/<key>/`` and
    ``<root>/zoo/refs/<config.name>.json`` points at it. When that folder
    already holds a complete family it is verified (every file's sha256 with
    ``verify``, sizes only without) and its manifest returned; nothing is
    written. A damaged family is warned about, removed and rebuilt. The
    manifest's ``"folder"`` entry is the family's absolute path.
    """
    if isinstance(config, str):
        config = preset(config)
    say = log or (lambda message: None)
    zdir = zoo_root(root)
    data = load_zoo_data(config)
    key = family_key(config, data)
    folder = zdir / key[:KEY_LENGTH]
    if (folder / "manifest.json").exists():
        try:
            manifest = load_manifest(folder)
            problem = verify_family(folder, manifest, hashes=verify)
        except ZooError as exc:
            problem = str(exc)
        if problem is None:
            say(f"zoo family {config.name} is already built: {folder}")
            _write_ref(zdir, config.name, key)
            manifest["folder"] = str(folder.resolve())
            return manifest
        warnings.warn(
            f"zoo family {folder} is damaged ({problem}); it is removed and rebuilt", UserWarning, stacklevel=2
        )
        discard_damaged_build(folder)
    elif folder.exists():  # a folder without a manifest is not ours to trust
        discard_damaged_build(folder)
    _check_dependencies()
    sweep_stale(zdir)  # what killed builds left: their folders are named after their host and process
    with build_folder(folder, _unwritable) as tmp:
        manifest = _build_into(tmp, folder.resolve(), config, data, key, say)
        atomic_write(tmp / "manifest.json", json.dumps(manifest, indent=1).encode())
        if not install_folder(tmp, folder):  # nothing at folder is replaced
            if not (folder / "manifest.json").exists():
                raise ZooError(
                    f"{folder} appeared while the family was built and holds no manifest; remove it and build again"
                )
            say(f"another process finished {folder} first; using it")  # concurrent build of the same key
    _write_ref(zdir, config.name, key)
    manifest = load_manifest(folder)  # what a later no-op build returns, to the byte
    manifest["folder"] = str(folder.resolve())
    return manifest


def _unwritable(parent: Path, exc: OSError) -> ZooError:
    return ZooError(f"cannot write the zoo under {parent} ({exc.strerror or exc}); choose a writable --cache-dir")


def _build_into(
    tmp: Path, final_folder: Path, config: ZooConfig, data: ZooData, key: str, say: Callable[[str], None]
) -> dict[str, Any]:
    from interlingua import __version__
    from interlingua.zoo.tokenizers import copy_tokenizer, encode, load_tokenizer, train_tokenizer
    from interlingua.zoo.train import derive_seed, deterministic_torch, mean_nll, new_gpt2, train_loop

    started = time.perf_counter()
    seconds: dict[str, float] = {}
    model_seeds: dict[str, int] = {}
    tokenizer_seeds: dict[str, int] = {}
    adapter_seeds: dict[str, int] = {}
    seeds: dict[str, dict[str, int] | int] = {
        "family": config.seed,
        "models": model_seeds,
        "tokenizers": tokenizer_seeds,
        "adapters": adapter_seeds,
    }
    models: dict[str, Any] = {}
    tokenizers: dict[str, Any] = {}
    adapters: dict[str, Any] = {}

    with deterministic_torch(config.threads):
        # ---------------------------------------------------------------- monolingual models
        for lang in config.languages:
            t0 = time.perf_counter()
            tok_seed = derive_seed(config.seed, "tokenizer", lang)
            tokenizer_seeds[lang] = tok_seed
            tok_dir = train_tokenizer(
                data.train_texts(lang),
                tmp / lang / "tokenizer",
                vocab_size=config.vocab_size,
                seed=tok_seed,
                max_length=config.max_length,
            )
            tokenizer = load_tokenizer(tok_dir)
            seconds[f"{lang}/tokenizer"] = time.perf_counter() - t0
            train_seqs = encode(tokenizer, data.train_texts(lang), config.max_length)
            held_seqs = encode(tokenizer, data.heldout_texts(lang), config.max_length)
            pad_id, cls_id, sep_id = tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id
            model_seed = derive_seed(config.seed, "model", lang)
            model_seeds[lang] = model_seed
            lm = new_gpt2(
                vocab_size=len(tokenizer),
                n_layer=config.n_layer,
                n_embd=config.n_embd,
                n_head=config.n_head,
                max_length=config.max_length,
                dropout=config.dropout,
                cls_id=cls_id,
                sep_id=sep_id,
                pad_id=pad_id,
                seed=model_seed,
            )
            checkpoints: dict[str, Any] = {}

            def save(
                label: str,
                step: int,
                lm=lm,
                lang=lang,
                tok_dir=tok_dir,
                held_seqs=held_seqs,
                pad_id=pad_id,
                checkpoints=checkpoints,
            ) -> None:
                out = tmp / lang / label
                lm.save_pretrained(out)
                copy_tokenizer(tok_dir, out)
                nll, n_tokens = mean_nll(lm, held_seqs, pad_id, config.eval_batch_size)
                checkpoints[label] = {"step": step, "folder": f"{lang}/{label}", "heldout_nll": nll}
                say(f"  {lang} {label}: held-out NLL {nll:.3f} nats/token")

            say(
                f"{lang}: {len(train_seqs)} training verses, {sum(map(len, train_seqs))} tokens, "
                f"vocabulary {len(tokenizer)}"
            )
            stats = train_loop(
                lm,
                train_seqs,
                schedule=config.model_schedule(),
                pad_id=pad_id,
                seed=derive_seed(config.seed, "batches", lang),
                checkpoints=config.checkpoints,
                # train_loop calls it before this iteration ends, so the late binding is safe
                on_checkpoint=lambda step: save(f"step{step}", step),  # noqa: B023
            )
            save("final", config.steps)
            vocab = len(tokenizer)
            final_nll = checkpoints["final"]["heldout_nll"]
            models[lang] = {
                "folder": lang,
                "final": f"{lang}/final",
                "tokenizer": f"{lang}/tokenizer",
                "vocab_size": vocab,
                "ln_V": math.log(vocab),
                "parameters": sum(p.numel() for p in lm.parameters()),
                "heldout_nll": final_nll,
                "heldout_tokens": sum(len(s) - 1 for s in held_seqs),
                "train_tokens_in_data": sum(len(s) - 1 for s in train_seqs),
                "train_tokens_seen": stats.tokens,
                "train_seconds": stats.seconds,
                "tokens_per_second": stats.tokens_per_second,
                "checkpoints": checkpoints,
            }
            seconds[lang] = time.perf_counter() - t0
            say(
                f"{lang}: final held-out NLL {final_nll:.3f} (ln V = {math.log(vocab):.3f}), "
                f"{stats.tokens_per_second:.0f} tokens/s, {seconds[lang]:.1f} s"
            )
            del lm

        # ---------------------------------------------------------------- bilingual pieces
        if config.pairs:
            eng = config.english
            eng_tok = load_tokenizer(tmp / eng / "tokenizer")
            english = _AdapterBase(eng_tok, eng_tok.pad_token_id, f"{eng}/final", str(final_folder / eng / "final"))
            for first, second in config.pairs:
                pair = f"{first}-{second}"
                t0 = time.perf_counter()
                bi_seed = derive_seed(config.seed, "tokenizer", pair)
                tokenizer_seeds[pair] = bi_seed
                train_tokenizer(
                    data.train_texts(first) + data.train_texts(second),
                    tmp / pair / "tokenizer",
                    vocab_size=config.bilingual_vocab_size,
                    seed=bi_seed,
                    max_length=config.max_length,
                )
                tokenizers[pair] = {
                    "folder": f"{pair}/tokenizer",
                    "languages": [first, second],
                    "vocab_size": len(load_tokenizer(tmp / pair / "tokenizer")),
                }
                adapter_seed = derive_seed(config.seed, "adapter", pair)
                adapter_seeds[pair] = adapter_seed
                adapters[pair] = _build_adapters(tmp, first, second, config, data, english, adapter_seed)
                seconds[pair] = time.perf_counter() - t0
                ad = adapters[pair]
                say(
                    f"{pair}: bilingual tokenizer {tokenizers[pair]['vocab_size']} pieces; LoRA max|B| "
                    f"{ad['lora']['max_abs_lora_B']:.2e}, identity max|B| {ad['lora-identity']['max_abs_lora_B']:.1f}; "
                    f"{seconds[pair]:.1f} s"
                )

    seconds["total"] = time.perf_counter() - started
    files = {}
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        rel = path.relative_to(tmp).as_posix()
        files[rel] = {"sha256": file_sha256(path), "bytes": path.stat().st_size}
    return {
        "format": ZOO_FORMAT,
        "key": key,
        "name": config.name,
        "interlingua": __version__,
        "libraries": _library_versions(),
        "config": config.to_dict(),
        "data": data.describe(),
        "seeds": seeds,
        "steps": {"total": config.steps, "checkpoints": list(config.checkpoints), "final": config.steps},
        "models": models,
        "tokenizers": tokenizers,
        "adapters": adapters,
        "threads": config.threads,
        "seconds": seconds,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": files,
    }


@dataclass(frozen=True)
class _AdapterBase:
    """The English final model every adapter of a family sits on."""

    #: its tokenizer (the adapters' training and held-out verses are encoded with it)
    tokenizer: Any
    #: the tokenizer's padding id
    pad_id: int
    #: its folder inside the family (``<english>/final``)
    relative: str
    #: its folder once the family is installed (written into each adapter's config)
    absolute: str


def _build_adapters(
    tmp: Path, first: str, second: str, config: ZooConfig, data: ZooData, english: _AdapterBase, seed: int
) -> dict[str, Any]:
    """Identity (saved before any step) and trained LoRA adapters of the pair ``first-second`` over the English
    final model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2LMHeadModel

    from interlingua.zoo.tokenizers import encode
    from interlingua.zoo.train import mean_nll, train_loop

    pair = f"{first}-{second}"
    eng_tok, eng_pad, base_rel, base_abs = english.tokenizer, english.pad_id, english.relative, english.absolute
    base = GPT2LMHeadModel.from_pretrained(str(tmp / base_rel))
    held = {lang: encode(eng_tok, data.heldout_texts(lang), config.max_length) for lang in (first, second)}
    base_nll = {lang: mean_nll(base, seqs, eng_pad, config.eval_batch_size)[0] for lang, seqs in held.items()}
    lora_config = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=0.0,
        target_modules=list(config.lora_targets),
        fan_in_fan_out=True,
        bias="none",
        task_type="CAUSAL_LM",
        modules_to_save=None,
    )
    torch.manual_seed(seed)
    peft_model = get_peft_model(base, lora_config)
    peft_model.peft_config["default"].base_model_name_or_path = base_abs
    lm = cast("GPT2LMHeadModel", peft_model.get_base_model())  # the GPT-2 base, LoRA layers injected in place

    def save(name: str) -> dict[str, Any]:
        out = tmp / pair / name
        peft_model.save_pretrained(str(out))
        (out / "README.md").unlink(missing_ok=True)  # PEFT's model card: adapter files only
        cfg_path = out / "adapter_config.json"
        cfg = json.loads(cfg_path.read_text())
        if cfg.get("modules_to_save") or cfg.get("base_model_name_or_path") != base_abs:
            raise ZooError(f"internal: adapter {pair}/{name} saved with modules_to_save or a wrong base: {cfg}")
        b_max = max(float(p.detach().abs().max()) for n, p in peft_model.named_parameters() if "lora_B" in n)
        nll = {lang: mean_nll(lm, seqs, eng_pad, config.eval_batch_size)[0] for lang, seqs in held.items()}
        return {
            "folder": f"{pair}/{name}",
            "base": base_abs,
            "base_relative": base_rel,
            "tokenizer": f"{first}/tokenizer",
            "r": config.lora_r,
            "target_modules": list(config.lora_targets),
            "modules_to_save": None,
            "max_abs_lora_B": b_max,
            "heldout_nll": nll,
        }

    identity = save("lora-identity")
    if identity["max_abs_lora_B"] != 0.0:
        raise ZooError(f"internal: the identity adapter of {pair} has a non-zero lora_B")
    identity["steps"] = 0
    seqs = encode(eng_tok, data.train_texts(first), config.max_length) + encode(
        eng_tok, data.train_texts(second), config.max_length
    )
    stats = train_loop(lm, seqs, schedule=config.lora_schedule(), pad_id=eng_pad, seed=seed)
    trained = save("lora")
    if not trained["max_abs_lora_B"] > 0.0:  # the failure mode an audit of pushed adapters found
        raise ZooError(f"the trained adapter of {pair} still has lora_B == 0 after {config.lora_steps} steps")
    trained["steps"] = config.lora_steps
    trained["train_tokens_seen"] = stats.tokens
    return {"base_heldout_nll": base_nll, "lora": trained, "lora-identity": identity}
