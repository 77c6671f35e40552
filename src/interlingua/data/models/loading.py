"""`load_model`: a base transformer (no LM head), its tokenizer, architecture and facts."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from safetensors import SafetensorError
from torch import nn

from interlingua.core.errors import InterlinguaError, ModelError
from interlingua.core.hashing import file_sha256, json_sha256
from interlingua.data.models.architectures import ARCHITECTURES, Architecture, resolve_architecture, text_config
from interlingua.data.models.cachefiles import writable_dir
from interlingua.data.models.facts import ModelFacts
from interlingua.data.models.gguf_cache import converted_folder, find_converted, parse_gguf_once, save_converted
from interlingua.data.models.hashing import adapter_sha256, folder_weights_sha256
from interlingua.data.models.preflight import _preflight, check_adapter_base
from interlingua.data.models.source import Source, hub_cached_file, model_error, named, resolve_source
from interlingua.data.models.spec import ModelSpec
from interlingua.data.models.table import config_int

if TYPE_CHECKING:
    from transformers import PreTrainedModel

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


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


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(
            f"device {name!r} was requested but torch sees no CUDA device; use device: cpu "
            "or 'auto', or install a CUDA build of torch"
        )
    if name.startswith("cuda:") and int(name[5:]) >= torch.cuda.device_count():
        raise ModelError(
            f"device {name!r} was requested but torch sees {torch.cuda.device_count()} CUDA device(s) "
            f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}); choose one of them, or cuda / auto"
        )
    return torch.device(name)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(" .") if text else type(exc).__name__


def _load_error(what: str, source: Source, exc: Exception) -> ModelError:
    text = _first_line(exc)
    if isinstance(exc, pickle.UnpicklingError):
        advice = (
            "the weights are a pickle file (pytorch_model.bin) holding objects that torch's "
            "safe loader (weights_only) refuses; unpickling it could run arbitrary code, so "
            "interlingua does not. Use a safetensors copy of the checkpoint (model.safetensors; "
            "most Hub models have one), or, only if you trust where the file came from, re-save "
            "its tensors once as safetensors (torch.load(..., weights_only=False), then "
            "safetensors.torch.save_file)"
        )
    elif isinstance(exc, SafetensorError):
        advice = (
            "a safetensors weight file is damaged or truncated; re-download it, or re-save the "
            "model with save_pretrained"
        )
    elif "trust_remote_code" in str(exc):
        advice = (
            "this model needs custom code from its repository; set `trust_remote_code: true` "
            "only if you have read and trust that code"
        )
    elif "protobuf" in str(exc):
        advice = "reading a SentencePiece model file needs the protobuf package: `pip install protobuf`"
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


# What from_pretrained raises on a bad checkpoint (a user's problem, not a bug).
_LOAD_ERRORS = (
    OSError,
    ValueError,
    KeyError,
    RuntimeError,
    TypeError,
    pickle.UnpicklingError,
    SafetensorError,
    EOFError,
)


def _hub_kwargs(spec: ModelSpec, source: Source) -> dict[str, Any]:
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


@contextmanager
def hf_progress() -> Iterator[None]:
    """transformers' and huggingface_hub's own progress bars off inside (weight loading, downloads, GGUF conversion).

    Off whether the tool's own bars show or not: beside ours they interleave with them on one terminal (ours
    report the phase and the task, model loads included), and with ours off (``--no-progress``) nothing should
    draw. Both libraries' switches are restored on exit.
    """
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    transformers_on = hf_logging.is_progress_bar_enabled()
    hub_off = are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # also turns huggingface_hub's off
    disable_progress_bars()
    try:
        yield
    finally:
        if transformers_on:
            hf_logging.enable_progress_bar()  # also turns huggingface_hub's back on ...
        if hub_off:
            disable_progress_bars()  # ... which stays off when it was off before
        else:
            enable_progress_bars()


@contextmanager
def _gguf_progress() -> Iterator[None]:
    """GGUF conversion's progress bar follows transformers' progress-bar switch (off under ``--no-progress``).

    transformers dequantises a GGUF under a plain ``tqdm.auto.tqdm`` that ignores
    that switch; while the switch is off, this module's ``tqdm`` name is a
    disabled one, restored on exit (nothing else is touched).
    """
    from transformers.utils import logging as hf_logging

    if hf_logging.is_progress_bar_enabled():
        yield
        return
    import functools

    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    original = gguf_utils.tqdm
    gguf_utils.tqdm = functools.partial(original, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def _from_pretrained(cls: Any, source: Source, dtype: torch.dtype, kwargs: dict[str, Any]) -> PreTrainedModel:
    """``cls.from_pretrained`` that refuses checkpoints whose weights do not cover the model."""
    try:
        with _quiet_transformers(), _gguf_progress():
            model, info = cls.from_pretrained(source.location, dtype=dtype, output_loading_info=True, **kwargs)
    except _LOAD_ERRORS as exc:
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


def _load_module(spec: ModelSpec, source: Source, dtype: torch.dtype) -> tuple[nn.Module, PreTrainedModel]:
    """Return (owner, hf_model): the loaded module and the HF model whose base we extract from."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    kwargs = _hub_kwargs(spec, source)
    config = None
    if source.gguf_file is None:  # GGUF metadata is parsed once, by the model load below
        try:
            config = AutoConfig.from_pretrained(source.location, **kwargs)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise _load_error("config", source, exc) from exc
        kwargs["config"] = config
    if spec.adapter is None:
        model = _from_pretrained(AutoModel, source, dtype, kwargs)
        return model, model
    from peft import PeftModel  # preflight has checked that peft is installed

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
    except _LOAD_ERRORS as exc:
        raise ModelError(
            f"could not apply the PEFT adapter {spec.adapter!r} to {source.location}: "
            f"{_first_line(exc)}. "
            "Check that the adapter was trained on this base model (same architecture and "
            "module names) and that the path or Hub id is right"
        ) from exc
    return wrapped, cast("PreTrainedModel", wrapped.get_base_model())  # ``base``, the adapter's layers injected


def prepare_tokenizer(tokenizer: Any, embedding_rows: int | None = None) -> str:
    """Set a pad token without adding tokens, and right padding (in place). Returns the pad source.

    A tokenizer without a pad token gets pad = eos (else unk, else bos);
    the embedding matrix is never resized. ``embedding_rows`` is the number of
    rows of the model's input embedding (``model.get_input_embeddings().weight.shape[0]``);
    when given, a pad id outside it is refused. The returned source is
    ``"tokenizer"`` (it had a pad token) or the attribute the pad came from
    (``"eos_token"``...). Raises :class:`ModelError` when no such token exists
    or the pad id falls outside the embedding.
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
    if pad_id is None or int(pad_id) < 0:
        raise ModelError(
            f"pad token {tokenizer.pad_token!r} has no id in the tokenizer's vocabulary ({pad_id}); use a "
            "tokenizer whose special tokens are part of its vocabulary"
        )
    if embedding_rows is not None and int(pad_id) >= embedding_rows:
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


def _weights_sha256(source: Source) -> str | None:
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
        return adapter_sha256(folder)
    return None


def _adapter_base_after_load(
    spec: ModelSpec, source: Source, report: dict[str, Any] | None
) -> tuple[str | None, str | None]:
    """(recorded base, check result) of the adapter; checks a Hub adapter's config once downloaded."""
    if report is None:
        return None, None
    if report.get("base_check") is not None:
        return report.get("base"), report["base_check"]
    cfg_file = hub_cached_file(str(spec.adapter), "adapter_config.json", spec.adapter_revision)
    if cfg_file is None:
        return None, "unrecorded"
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, "unrecorded"
    base = cfg.get("base_model_name_or_path") if isinstance(cfg, dict) else None
    return (base if isinstance(base, str) else None), check_adapter_base(spec, source, cfg)


def load_model(spec: ModelSpec, *, cache_dir: str | Path | None = None) -> LoadedModel:
    """Load the base transformer, tokenizer, architecture and facts described by ``spec``.

    ``cache_dir`` is where packaged models are assembled and GGUF checkpoints
    are kept converted (default ``$INTERLINGUA_MODEL_CACHE`` or
    ``~/.cache/interlingua/models``); a pipeline passes its run's cache
    folder. The pre-flight checks of :func:`~interlingua.data.models.preflight_model`
    run first, so a broken folder, a missing package or an adapter for
    another base fails before any weight is read. Every user-caused problem
    raises :class:`~interlingua.core.errors.ModelError` (or ``StoreError`` for a
    model cache that cannot be written) naming the model.
    """
    try:
        with parse_gguf_once():  # a GGUF's metadata is parsed once, not once per config/weights/tokenizer
            return _load_model(spec, cache_dir)
    except InterlinguaError as exc:
        raise named(spec, exc) from exc.__cause__


def _load_model(spec: ModelSpec, cache_dir: str | Path | None) -> LoadedModel:
    from transformers import AutoTokenizer

    report = _preflight(spec, cache_dir, probe_hub=False)
    device = _device(spec.device)
    source = resolve_source(spec, cache_dir)
    dtype = _DTYPES[spec.dtype]
    weights_sha = _weights_sha256(source)
    # A local GGUF is dequantised once; later loads read its converted copy (see gguf_cache).
    convertible = (
        source.gguf_file is not None and source.kind != "hub" and spec.adapter is None and weights_sha is not None
    )
    converted = find_converted(weights_sha, cache_dir) if convertible and weights_sha else None
    will_convert = convertible and converted is None and spec.dtype == "float32" and bool(weights_sha)
    if will_convert:  # fail on an unusable cache folder now, not after minutes of dequantising
        writable_dir(converted_folder(str(weights_sha), cache_dir).parent, "converted copy of the GGUF")
    load_source = Source(str(converted), "local", None) if converted else source
    owner, hf_model = _load_module(spec, load_source, dtype)
    adapter_base, adapter_base_check = _adapter_base_after_load(spec, source, report.get("adapter"))
    arch = resolve_architecture(hf_model, hf_model.config)
    model = arch.text_module
    owner.eval()
    owner.to(device)
    for param in owner.parameters():
        param.requires_grad_(False)

    tokenizer_source = (
        load_source if spec.tokenizer is None else Source(str(Path(spec.tokenizer).expanduser()), "local", None)
    )
    try:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source.location, **_hub_kwargs(spec, tokenizer_source))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _load_error("tokenizer", tokenizer_source, exc) from exc
    if will_convert:
        save_converted(hf_model, tokenizer, str(weights_sha), str(source.gguf_file), cache_dir)
    embedding_rows = int(cast(torch.Tensor, arch.embedding.weight).shape[0])  # an embedding's (rows, width)
    if spec.tokenizer is not None and len(tokenizer) > embedding_rows:
        raise model_error(
            spec,
            f"the tokenizer {spec.tokenizer} has {len(tokenizer)} ids but the model's embedding has "
            f"{embedding_rows} rows: ids >= {embedding_rows} index no row. This tokenizer was not made "
            "for these weights; `interlingua audit` shows how far they disagree",
        )
    pad_source = prepare_tokenizer(tokenizer, embedding_rows)

    config = hf_model.config
    tconfig = text_config(config)
    num_heads = config_int(tconfig, "heads")
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
        hidden_size=int(config_int(tconfig, "hidden") or first_param.shape[-1]),
        num_layers=arch.num_blocks,
        num_heads=num_heads,
        num_kv_heads=config_int(tconfig, "kv_heads") or num_heads,
        vocab_size=config_int(tconfig, "vocab"),
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
        adapter_base=adapter_base,
        adapter_base_check=adapter_base_check,
    )
    # The same identity the pipeline computes without loading (fingerprint.py), so cache
    # keys agree whether or not a model was loaded.
    from interlingua.data.models.fingerprint import spec_fingerprint

    fingerprint = spec_fingerprint(spec, cache_dir=cache_dir)
    return LoadedModel(model, tokenizer, arch, facts, fingerprint, spec, owner, device)


def packaged_model(package: str, cache_dir: str | Path | None = None) -> tuple[Any, Any]:
    """A packaged model (``gemma3-270m`` or ``smollm2-135m``) as Hugging Face objects, offline:
    ``(causal LM, tokenizer)``, e.g. ``model, tokenizer = interlingua.packaged_model("gemma3-270m")``.

    The model is the ``transformers`` causal LM that ``interlingua run`` loads for ``package:`` (its GGUF
    weights dequantised to float32, converted once into the model cache), in eval mode; use it wherever an
    ``AutoModelForCausalLM.from_pretrained(...)`` result would go, e.g. ``interlingua.extract``.
    """
    loaded = load_model(ModelSpec.model_validate({"package": package}), cache_dir=cache_dir)
    return loaded.owner, loaded.tokenizer
