"""`load_model`: a base transformer (no LM head), its tokenizer, architecture and facts."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ModelError
from .architectures import ARCHITECTURES, Architecture, resolve_architecture, text_config
from .facts import (
    ADAPTER_FILES,
    ModelFacts,
    file_sha256,
    folder_files_sha256,
    folder_weights_sha256,
    json_sha256,
)
from .gguf_cache import find_converted, save_converted
from .packaged import resolve_packaged
from .spec import ModelSpec

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass
class LoadedModel:
    """A loaded model ready for extraction.

    ``model`` is the base text transformer (no LM head, ``.eval()``); calling it
    with ``output_hidden_states=True`` returns ``n_hidden_states`` states,
    index 0 = embeddings. ``owner`` is the full module that was loaded (causal
    LM or PEFT wrapper) and holds ``model`` (with an adapter, ``model``
    runs the injected LoRA layers).
    """

    model: nn.Module
    tokenizer: Any
    arch: Architecture
    facts: ModelFacts
    fingerprint: str
    spec: ModelSpec
    owner: nn.Module
    device: torch.device

    @property
    def num_layers(self) -> int:
        """Number of transformer blocks."""
        return self.arch.num_blocks

    @property
    def n_hidden_states(self) -> int:
        """num_layers + 1 (index 0 = embedding output)."""
        return self.arch.num_blocks + 1

    @property
    def name(self) -> str:
        """Label used in results."""
        return self.facts.name


@dataclass(frozen=True)
class _Source:
    """Where the weights come from."""

    location: str  # local folder or Hub id
    kind: str  # "local" | "hub" | "package"
    gguf_file: str | None


def _looks_like_local_path(path: str) -> bool:
    return (
        path.startswith(("/", ".", "~"))
        or "\\" in path
        or path.count("/") > 1
        or not _HUB_ID.match(path)
    )


def _resolve_source(spec: ModelSpec, cache_dir: str | Path | None) -> _Source:
    if spec.package is not None:
        if spec.revision is not None:
            raise ModelError(
                f"`revision` applies to Hub ids; the packaged model {spec.package!r} is one "
                "fixed file: remove `revision`"
            )
        folder, gguf = resolve_packaged(spec.package, cache_dir)
        return _Source(str(folder), "package", gguf)
    assert spec.path is not None  # guaranteed by ModelSpec validation
    local = Path(spec.path).expanduser()
    if local.exists():
        if spec.revision is not None:
            raise ModelError(
                f"`revision: {spec.revision}` applies to Hub ids, but {spec.path!r} is a local "
                "path (one fixed version): remove `revision` or give the Hub id"
            )
        gguf = spec.gguf_file
        if local.is_file():
            if local.suffix != ".gguf":
                raise ModelError(
                    f"{local} is a file but not a .gguf; give the folder written by "
                    "save_pretrained, or a .gguf file"
                )
            if gguf is not None and gguf != local.name:
                raise ModelError(
                    f"`path` names the GGUF file {local.name!r} but `gguf_file` says {gguf!r}; "
                    "keep one of them"
                )
            return _Source(str(local.parent.resolve()), "local", local.name)
        if gguf is not None and not (local / gguf).is_file():
            found = sorted(p.name for p in local.glob("*.gguf"))
            raise ModelError(
                f"GGUF file {gguf!r} not found in {local}; .gguf files there: {found or 'none'}. "
                "Check `gguf_file`"
            )
        if gguf is None and not (local / "config.json").is_file():
            raise ModelError(
                f"{local} has no config.json; give a folder written by save_pretrained, "
                "or set `gguf_file` to a .gguf file inside it"
            )
        return _Source(str(local.resolve()), "local", gguf)
    if _looks_like_local_path(spec.path):
        raise ModelError(
            f"local model path {spec.path!r} does not exist (resolved to {local.resolve()}); "
            "check the path, or give a Hub id such as 'EleutherAI/pythia-160m', or use "
            "`package:` for an offline packaged model"
        )
    return _Source(spec.path, "hub", spec.gguf_file)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ModelError(
            "device 'cuda' was requested but torch sees no CUDA device; use device: cpu "
            "or 'auto', or install a CUDA build of torch"
        )
    return torch.device(name)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(" .") if text else type(exc).__name__


def _load_error(what: str, source: _Source, exc: Exception) -> ModelError:
    text = _first_line(exc)
    if "trust_remote_code" in str(exc):
        advice = (
            "this model needs custom code from its repository; set `trust_remote_code: true` "
            "only if you have read and trust that code"
        )
    elif "protobuf" in str(exc):
        advice = (
            "reading a SentencePiece model file needs the protobuf package: "
            "`pip install protobuf`"
        )
    elif source.kind == "hub":
        advice = (
            "check the Hub id and revision, run `huggingface-cli login` for gated models, check "
            "the network (or the local Hugging Face cache when offline), or use `package:` "
            "for an offline packaged model"
        )
    else:
        advice = "check that the folder is a complete save_pretrained checkpoint (or a valid GGUF)"
    where = f"{source.location}" + (f" (gguf_file={source.gguf_file})" if source.gguf_file else "")
    return ModelError(f"could not load the {what} from {where}: {text}. {advice}")


def _hub_kwargs(spec: ModelSpec, source: _Source) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code}
    if source.kind == "hub" and spec.revision is not None:
        kwargs["revision"] = spec.revision
    if source.gguf_file is not None:
        kwargs["gguf_file"] = source.gguf_file
    return kwargs


def _adapter_is_causal(adapter: str, default: bool) -> bool:
    cfg = Path(adapter).expanduser() / "adapter_config.json"
    if cfg.is_file():
        task = json.loads(cfg.read_text()).get("task_type")
        if task is not None:
            return task == "CAUSAL_LM"
    return default


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report; missing weights are checked explicitly instead."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _from_pretrained(cls: Any, source: _Source, dtype: torch.dtype, kwargs: dict[str, Any]) -> nn.Module:
    """``cls.from_pretrained`` that refuses checkpoints whose weights do not cover the model."""
    try:
        with _quiet_transformers():
            model, info = cls.from_pretrained(
                source.location, dtype=dtype, output_loading_info=True, **kwargs
            )
    except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
        raise _load_error("model", source, exc) from exc
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(str(k) for k in info.get("mismatched_keys") or ())
    if missing or mismatched:
        shown = ", ".join((missing + mismatched)[:5])
        raise ModelError(
            f"the checkpoint at {source.location} does not match {type(model).__name__}: "
            f"{len(missing)} weights missing and {len(mismatched)} with the wrong shape "
            f"(e.g. {shown}); they would be randomly initialised. Check that config.json and "
            "the weight files belong together"
        )
    return model


def _load_module(spec: ModelSpec, source: _Source, dtype: torch.dtype) -> tuple[nn.Module, nn.Module]:
    """Return (owner, hf_model): the loaded module and the HF model whose base we extract from."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    kwargs = _hub_kwargs(spec, source)
    config = None
    if source.gguf_file is None:  # GGUF metadata is parsed once, by the model load below
        try:
            config = AutoConfig.from_pretrained(source.location, **kwargs)
        except (OSError, ValueError, KeyError) as exc:
            raise _load_error("config", source, exc) from exc
        kwargs["config"] = config
    if spec.adapter is None:
        model = _from_pretrained(AutoModel, source, dtype, kwargs)
        return model, model
    if importlib.util.find_spec("peft") is None:
        raise ModelError(
            f"`adapter: {spec.adapter}` needs the peft package; install it with "
            "`pip install 'interlingua[peft]'` (or `pip install peft`)"
        )
    from peft import PeftModel

    entry = ARCHITECTURES.get(getattr(config, "model_type", "") or "")
    causal = _adapter_is_causal(spec.adapter, entry.causal if entry else True)
    cls = AutoModelForCausalLM if causal else AutoModel
    base = _from_pretrained(cls, source, dtype, kwargs)
    adapter_kwargs: dict[str, Any] = {"is_trainable": False}
    if spec.adapter_revision is not None:
        adapter_kwargs["revision"] = spec.adapter_revision
    try:
        with _quiet_transformers():
            wrapped = PeftModel.from_pretrained(base, spec.adapter, **adapter_kwargs)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ModelError(
            f"could not apply the PEFT adapter {spec.adapter!r} to {source.location}: "
            f"{_first_line(exc)}. "
            "Check that the adapter was trained on this base model (same architecture and "
            "module names) and that the path or Hub id is right"
        ) from exc
    return wrapped, wrapped.get_base_model()


def prepare_tokenizer(tokenizer: Any, embedding_rows: int) -> str:
    """Set a pad token without adding tokens, and right padding. Returns the pad source.

    A tokenizer without a pad token gets pad = eos (else unk, else bos);
    the embedding matrix is never resized. Raises :class:`ModelError` when
    no such token exists or the pad id falls outside the embedding.
    """
    source = "tokenizer"
    if tokenizer.pad_token is None:
        for attr in ("eos_token", "unk_token", "bos_token"):
            token = getattr(tokenizer, attr, None)
            if token is not None:
                tokenizer.pad_token = token
                source = attr
                break
        else:
            raise ModelError(
                f"{type(tokenizer).__name__} has no pad, eos, unk or bos token, so batches "
                "cannot be padded without adding an embedding row; use a tokenizer that "
                "defines one of them, or batch_size 1"
            )
    tokenizer.padding_side = "right"
    pad_id = tokenizer.pad_token_id
    if pad_id is None or not 0 <= int(pad_id) < embedding_rows:
        raise ModelError(
            f"pad token {tokenizer.pad_token!r} has id {pad_id}, outside the embedding "
            f"({embedding_rows} rows); the tokenizer does not match the model weights"
        )
    return source


def _tokenizer_sha256(tokenizer: Any) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    serialized = backend.to_str() if backend is not None else None
    vocab = None if serialized is not None else sorted(tokenizer.get_vocab().items())
    return json_sha256(
        {
            "class": type(tokenizer).__name__,
            "backend": serialized,
            "vocab": vocab,
            "special": tokenizer.special_tokens_map,
            "padding_side": tokenizer.padding_side,
        }
    )


def _weights_sha256(source: _Source) -> str | None:
    if source.kind == "hub":
        return None
    folder = Path(source.location)
    if source.gguf_file is not None:
        return file_sha256(folder / source.gguf_file)
    return folder_weights_sha256(folder)


def _adapter_sha256(adapter: str | None) -> str | None:
    if adapter is None:
        return None
    folder = Path(adapter).expanduser()
    if folder.is_dir():
        return folder_files_sha256(folder, ADAPTER_FILES)
    return None


def _first_int(config: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    return None


def load_model(spec: ModelSpec, *, cache_dir: str | Path | None = None) -> LoadedModel:
    """Load the base transformer, tokenizer, architecture and facts described by ``spec``.

    ``cache_dir`` is where packaged models are assembled and GGUF checkpoints
    are kept converted (default ``$INTERLINGUA_MODEL_CACHE`` or
    ``~/.cache/interlingua/models``).
    """
    from transformers import AutoTokenizer

    source = _resolve_source(spec, cache_dir)
    device = _device(spec.device)
    dtype = _DTYPES[spec.dtype]
    weights_sha = _weights_sha256(source)
    # A local GGUF is dequantised once; later loads read its converted copy (see gguf_cache).
    convertible = (
        source.gguf_file is not None
        and source.kind != "hub"
        and spec.adapter is None
        and weights_sha is not None
    )
    converted = find_converted(weights_sha, cache_dir) if convertible and weights_sha else None
    load_source = _Source(str(converted), "local", None) if converted else source
    owner, hf_model = _load_module(spec, load_source, dtype)
    arch = resolve_architecture(hf_model, hf_model.config)
    model = arch.text_module
    owner.eval()
    owner.to(device)
    for param in owner.parameters():
        param.requires_grad_(False)

    try:
        tokenizer = AutoTokenizer.from_pretrained(
            load_source.location, **_hub_kwargs(spec, load_source)
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _load_error("tokenizer", load_source, exc) from exc
    if convertible and converted is None and spec.dtype == "float32" and weights_sha:
        save_converted(hf_model, tokenizer, weights_sha, str(source.gguf_file), cache_dir)
    embedding_rows = int(arch.embedding.weight.shape[0])
    pad_source = prepare_tokenizer(tokenizer, embedding_rows)

    config = hf_model.config
    tconfig = text_config(config)
    num_heads = _first_int(tconfig, "num_attention_heads", "n_head")
    adapter_sha = _adapter_sha256(spec.adapter)
    tokenizer_sha = _tokenizer_sha256(tokenizer)
    commit = getattr(config, "_commit_hash", None)
    revision = commit if (source.kind == "hub" and commit) else spec.revision
    first_param = next(model.parameters())
    facts = ModelFacts(
        name=spec.label,
        source=source.location if source.kind != "package" else f"package:{spec.package}",
        model_type=str(config.model_type),
        architecture=(getattr(config, "architectures", None) or [type(hf_model).__name__])[0],
        base_class=type(model).__name__,
        hidden_size=int(_first_int(tconfig, "hidden_size", "n_embd") or first_param.shape[-1]),
        num_layers=arch.num_blocks,
        num_heads=num_heads,
        num_kv_heads=_first_int(tconfig, "num_key_value_heads") or num_heads,
        vocab_size=_first_int(tconfig, "vocab_size"),
        tokenizer_size=len(tokenizer),
        embedding_rows=embedding_rows,
        parameter_count=sum(p.numel() for p in model.parameters()),
        dtype=str(first_param.dtype).removeprefix("torch."),
        device=str(first_param.device),
        revision=revision,
        weights_sha256=weights_sha,
        gguf_file=source.gguf_file,
        loaded_from=load_source.location,
        adapter=spec.adapter,
        adapter_sha256=adapter_sha,
        tokenizer_class=type(tokenizer).__name__,
        tokenizer_sha256=tokenizer_sha,
        pad_token=tokenizer.pad_token,
        pad_token_source=pad_source,
        padding_side=tokenizer.padding_side,
        last_hidden_state_is_normed=arch.last_hidden_state_is_normed,
        architecture_source=arch.source,
        blocks_path=arch.blocks_path,
        embedding_path=arch.embedding_path,
        final_norm_path=arch.final_norm_path,
    )
    # The same identity the pipeline computes without loading (fingerprint.py), so cache
    # keys agree whether or not a model was loaded.
    from .fingerprint import spec_fingerprint

    fingerprint = spec_fingerprint(spec, cache_dir=cache_dir)
    return LoadedModel(model, tokenizer, arch, facts, fingerprint, spec, owner, device)
