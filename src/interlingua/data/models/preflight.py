"""Pre-flight checks: will this model load? Answered from its files, without loading weights.

:func:`preflight_model` reads only small files (``config.json``, a GGUF
header, safetensors headers, ``adapter_config.json``) and never imports
torch or transformers' modeling code, so ``interlingua validate`` can check
every model of a config in a second. :func:`~interlingua.data.models.load_model`
runs the same checks first, so a broken folder fails with the same clear
:class:`~interlingua.core.errors.ModelError` either way.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import struct
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from interlingua.core.errors import InterlinguaError, ModelError
from interlingua.core.safetensors_header import SafetensorsHeaderError, read_safetensors_header
from interlingua.data.models.hashing import ADAPTER_WEIGHT_FILES, WEIGHT_SUFFIXES, folder_weights_sha256
from interlingua.data.models.packaged import PACKAGED_MODELS
from interlingua.data.models.source import (
    Source,
    hub_cache_root,
    hub_cached_file,
    hub_id_of_folder,
    hub_offline,
    looks_like_local_path,
    model_error,
    named,
    resolve_source,
)
from interlingua.data.models.spec import ModelSpec
from interlingua.data.models.table import ARCHITECTURES, config_int

__all__ = [
    "adapter_base_matches",
    "check_adapter_base",
    "preflight_model",
    "tokenwise_backbone",
    "transformers_model_types",
]

# Files whose presence means a folder carries tokenizer data (tokenizer_config.json alone does not).
_TOKENIZER_DATA = (
    "tokenizer.json",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "tokenizer.model",
    "sentencepiece.bpe.model",
    "tekken.json",
)
# Files a Trainer checkpoint keeps next to the weights that are not model weights.
_NOT_WEIGHTS = {"training_args.bin", "optimizer.pt", "scheduler.pt", "scaler.pt"}
_HUB_ADVICE = (
    "download it once with network access (`huggingface-cli download {repo}`; run "
    "`huggingface-cli login` first for gated models), give a local folder with `path:` "
    "(e.g. `./models/my-model`), or use `package:` ({packages}) for an offline packaged model"
)


# --------------------------------------------------------------------------- small readers


def _read_json(spec: ModelSpec, path: Path, what: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise model_error(spec, f"{path} is not a text file ({exc.reason}); {what}") from exc
    except OSError as exc:
        raise model_error(spec, f"cannot read {path}: {exc.strerror or exc}; {what}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # A JSON object ends with its closing brace; text that stops before it was cut short.
        state = "is truncated" if not text.rstrip().endswith("}") else "is not valid JSON"
        raise model_error(
            spec,
            f"{path} {state} (line {exc.lineno}, column {exc.colno}: {exc.msg}); {what}",
        ) from exc
    if not isinstance(data, dict):
        raise model_error(spec, f"{path} holds a JSON {type(data).__name__}, not an object; {what}")
    return data


def _safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file cannot be read (header and size), or None if it looks whole."""
    try:
        size = path.stat().st_size
        header, n = read_safetensors_header(path)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    except SafetensorsHeaderError as exc:
        return {
            "short": f"it has {exc.total} bytes, fewer than a safetensors header",
            "size": f"its header claims {exc.size} bytes but the file has {exc.total} (truncated, or not safetensors)",
            "object": "its header is not a JSON object",
        }.get(exc.reason, "its header is not valid JSON (damaged, or not a safetensors file)")
    try:
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (KeyError, TypeError, ValueError, IndexError):
        return "its header lacks tensor offsets (damaged)"
    if 8 + n + end != size:
        return f"its tensors need {8 + n + end} bytes but the file has {size} (truncated or damaged)"
    return None


def _gguf_header(path: Path, wanted: int = 64, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``general.architecture`` and ``<arch>.block_count`` from a GGUF header (first keys only); integer keys
    ending in ``.<e>`` for each ``e`` of ``extra`` too (e.g. ``embedding_length``, for the cost estimate).

    Raises ValueError when the file is not GGUF.
    """
    from interlingua.data.models.gguf import GGUF_INTEGER_TYPES, read_gguf_header

    out: dict[str, Any] = {}

    def take(header: Any) -> bool:
        key = header.last
        vtype = header.types[key]
        integer = vtype in GGUF_INTEGER_TYPES
        value = header.metadata[key] if integer or vtype == 8 else None  # a string or an integer; else unread
        if key == "general.architecture":
            out["architecture"] = value
        elif key.endswith(".block_count") and integer:
            out["block_count"] = value
        elif integer and any(key.endswith(f".{e}") for e in extra):
            out[next(e for e in extra if key.endswith(f".{e}"))] = value
        return "architecture" in out and "block_count" in out and all(e in out for e in extra)

    read_gguf_header(path, max_keys=wanted, tensors=False, until=take, old="empty")
    return out


def gguf_config(path: Path) -> dict[str, Any]:
    """The ``config.json`` shape keys a GGUF header gives (architecture as ``model_type``: ``gemma*`` as the
    ``gemma3`` family; width, depth, MLP width, heads, vocabulary), for the cost model; no tensor read."""
    keys = ("embedding_length", "feed_forward_length", "head_count", "head_count_kv", "key_length", "vocab_size")
    h = _gguf_header(path, wanted=64, extra=keys)
    arch = str(h.get("architecture", ""))
    return {
        "model_type": "gemma3" if arch.startswith("gemma") else arch,
        "hidden_size": h.get("embedding_length"),
        "num_hidden_layers": h.get("block_count"),
        "intermediate_size": h.get("feed_forward_length"),
        "num_attention_heads": h.get("head_count"),
        "num_key_value_heads": h.get("head_count_kv"),
        "head_dim": h.get("key_length"),
        "vocab_size": h.get("vocab_size"),
    }


# --------------------------------------------------------------------------- model types


def _mapping_keys(tree: ast.AST) -> set[str]:
    """String keys of every ``CONFIG_MAPPING_NAMES`` literal (assignment or ``.update``)."""
    keys: set[str] = set()

    def collect(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Tuple) and sub.elts and isinstance(sub.elts[0], ast.Constant):
                if isinstance(sub.elts[0].value, str):
                    keys.add(sub.elts[0].value)
            elif isinstance(sub, ast.Dict):
                keys.update(k.value for k in sub.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CONFIG_MAPPING_NAMES" for t in node.targets
        ):
            collect(node.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "CONFIG_MAPPING_NAMES"
        ):
            collect(node)
    return keys


@lru_cache(maxsize=1)
def _static_model_types() -> frozenset[str] | None:
    found: set[str] = set()
    for module in (
        "transformers.models.auto.auto_mappings",
        "transformers.models.auto.configuration_auto",
    ):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin:
            continue
        try:
            found |= _mapping_keys(ast.parse(Path(spec.origin).read_text(encoding="utf-8")))
        except (OSError, SyntaxError, ValueError):
            continue
    return frozenset(found) if len(found) >= 50 else None  # a parse that found little: do not judge


def transformers_model_types() -> frozenset[str] | None:
    """The ``model_type`` values the installed transformers can build, without importing torch.

    Read from transformers' own mapping source files; when transformers'
    auto-config module is already imported, types registered at runtime
    (``AutoConfig.register``) count too. None when it cannot be determined
    (then no model type is refused).
    """
    static = _static_model_types()
    live = sys.modules.get("transformers.models.auto.configuration_auto")
    mapping = getattr(live, "CONFIG_MAPPING", None) if live is not None else None
    if mapping is None:
        return static
    try:
        return frozenset(mapping.keys()) | (static or frozenset())
    except Exception:  # a transformers version with another mapping API
        return static


# --------------------------------------------------------------------------- config checks


def _num_layers(cfg: dict[str, Any]) -> int | None:
    return config_int(cfg, "layers")


def _check_config(spec: ModelSpec, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """model_type known (table, transformers) or custom code that is allowed; returns the findings."""
    model_type = cfg.get("model_type")
    auto_map = cfg.get("auto_map") if isinstance(cfg.get("auto_map"), dict) else None
    if not isinstance(model_type, str) or not model_type:
        if auto_map and spec.trust_remote_code:
            return {"model_type": None, "num_layers": _num_layers(cfg), "architecture": "remote code"}
        raise model_error(
            spec,
            f"{where} has no `model_type`, so transformers cannot tell which architecture it is; "
            "give the folder written by save_pretrained (its config.json names model_type)",
        )
    known = transformers_model_types()
    in_transformers = known is None or model_type in known
    entry = ARCHITECTURES.get(model_type)
    if entry is not None and entry.extracts and in_transformers:
        architecture = "table"
    elif in_transformers:
        architecture = "introspection"
    elif auto_map:
        if not spec.trust_remote_code:
            raise model_error(
                spec,
                f"{where} has model_type {model_type!r}, which transformers does not implement; "
                f"the checkpoint brings custom code (auto_map: {sorted(auto_map)}). Set "
                "`trust_remote_code: true` only if you have read and trust that code, or use a "
                "model transformers supports",
            )
        architecture = "remote code"
    else:
        import transformers  # the package's metadata only; no torch

        raise model_error(
            spec,
            f"{where} has model_type {model_type!r}, which transformers "
            f"{getattr(transformers, '__version__', '?')} does not know; upgrade transformers "
            "(`pip install -U transformers`), check config.json, or use a supported model",
        )
    return {"model_type": model_type, "num_layers": _num_layers(cfg), "architecture": architecture}


def _check_local_files(spec: ModelSpec, folder: Path) -> dict[str, Any]:
    """Weight files present and whole (safetensors headers, shard lists); tokenizer files present."""
    files = {p.name for p in folder.iterdir() if p.is_file()}
    for index_name in sorted(n for n in files if n.endswith(".index.json")):
        index = _read_json(spec, folder / index_name, "re-download or re-save the checkpoint")
        shards = sorted(set(map(str, (index.get("weight_map") or {}).values())))
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise model_error(
                spec,
                f"{folder / index_name} lists {len(shards)} weight shards but {len(missing)} are "
                f"missing (e.g. {missing[0]}); copy or download the complete checkpoint",
            )
    weights = sorted(
        n
        for n in files
        if Path(n).suffix in WEIGHT_SUFFIXES and not n.startswith(("adapter_", "rng_state")) and n not in _NOT_WEIGHTS
    )
    if not weights:
        raise model_error(
            spec,
            f"{folder} has config.json but no weight files (*.safetensors or pytorch_model.bin); "
            "copy the complete checkpoint written by save_pretrained",
        )
    for name in weights:
        if name.endswith(".safetensors"):
            problem = _safetensors_problem(folder / name)
            if problem is not None:
                raise model_error(
                    spec,
                    f"the weight file {folder / name} is damaged: {problem}. Re-download it or "
                    "re-save the model with save_pretrained",
                )
    has_tokenizer = any(n in files for n in _TOKENIZER_DATA) or any(
        n.endswith((".tiktoken", ".model")) or "vocab" in n for n in files
    )
    if not has_tokenizer and not spec.trust_remote_code:
        raise model_error(
            spec,
            f"{folder} has no tokenizer files (tokenizer.json, vocab.json + merges.txt, vocab.txt "
            "or a SentencePiece .model); save the tokenizer into the folder with "
            "tokenizer.save_pretrained(folder), or copy its files from the original model",
        )
    fmt = "safetensors" if any(n.endswith(".safetensors") for n in weights) else "pickle"
    return {"weights_format": fmt}


def _check_gguf(spec: ModelSpec, path: Path) -> dict[str, Any]:
    try:
        header = _gguf_header(path)
    except (OSError, ValueError, struct.error, KeyError) as exc:
        raise model_error(
            spec,
            f"{path} is not a readable GGUF file ({exc}); re-download it, or check `gguf_file`",
        ) from exc
    return {
        "model_type": header.get("architecture"),
        "num_layers": header.get("block_count"),
        "architecture": None,
        "weights_format": "gguf",
    }


# --------------------------------------------------------------------------- the Hub


def _unreachable(spec: ModelSpec, repo: str, reason: str, what: str = "model") -> ModelError:
    packages = ", ".join(sorted(PACKAGED_MODELS))
    return model_error(
        spec,
        f"{repo!r} is not a local folder (no such path here), so it was taken for a Hugging Face "
        f"Hub {what} id, but the Hub cannot be reached ({reason}) and it is not in the local "
        f"Hugging Face cache ({hub_cache_root()}). " + _HUB_ADVICE.format(repo=repo, packages=packages),
    )


def _hub_failure(spec: ModelSpec, repo: str, revision: str | None, exc: Exception, what: str) -> ModelError | None:
    """A ModelError for answers from the Hub (unknown id, gated, bad revision); None if unreachable."""
    from huggingface_hub import errors as hf_errors

    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return model_error(spec, f"the Hub {what} {repo!r} has no revision {revision!r}; check `revision`")
    if isinstance(exc, hf_errors.GatedRepoError):
        return model_error(
            spec,
            f"the Hub {what} {repo!r} is gated; accept its licence on huggingface.co/{repo} and "
            "run `huggingface-cli login`, or use another model",
        )
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return model_error(
            spec,
            f"{repo!r} is not a local folder and the Hugging Face Hub has no {what} of that name "
            "(or it is private: run `huggingface-cli login`); check the id, give a local folder "
            "with `path:` (e.g. `./models/my-model`), or use `package:` for an offline packaged model",
        )
    if isinstance(exc, hf_errors.EntryNotFoundError):
        return model_error(spec, f"the Hub {what} {repo!r} has no such file: {exc}")
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(" .") if text else type(exc).__name__


def _hub_file(
    spec: ModelSpec, repo: str, filename: str, revision: str | None, *, download: bool, what: str
) -> Path | None:
    """A small file of a Hub repository: from the local cache, else downloaded when allowed.

    Offline (HF_HUB_OFFLINE) and not cached: :class:`ModelError`. Online with
    ``download=False``: None when not cached.
    """
    cached = hub_cached_file(repo, filename, revision)
    if cached is not None:
        return cached
    if hub_offline():
        raise _unreachable(spec, repo, "HF_HUB_OFFLINE is set", what)
    if not download:
        return None
    try:
        from huggingface_hub import hf_hub_download

        return Path(
            hf_hub_download(repo, filename, revision=revision, cache_dir=str(hub_cache_root()), etag_timeout=10)
        )
    except Exception as exc:  # noqa: BLE001 - classified below
        failure = _hub_failure(spec, repo, revision, exc, what)
        if failure is not None:
            raise failure from exc
        raise _unreachable(spec, repo, _first_line(exc), what) from exc


# --------------------------------------------------------------------------- adapters


def _is_pathlike(ref: str) -> bool:
    return looks_like_local_path(ref) or Path(ref).expanduser().exists()


def _identities(ref: str) -> tuple[set[str], set[str], bool]:
    """(full identities, short names, is a local path) of a model reference."""
    ref = ref.strip().rstrip("/\\")
    if _is_pathlike(ref):
        path = Path(ref).expanduser()
        full = {f"path:{path.resolve()}"}
        short = {path.name.lower()}
        hub = hub_id_of_folder(path)
        if hub:
            full.add(f"hub:{hub.lower()}")
            short.add(hub.split("/")[-1].lower())
        return full, short, True
    return {f"hub:{ref.lower()}"}, {ref.split("/")[-1].lower()}, False


def _base_identities(spec: ModelSpec, source: Source) -> tuple[set[str], set[str], bool, set[str]]:
    """(full, short, local, GGUF stems) of the base being loaded."""
    stems = {Path(source.gguf_file).stem.lower()} if source.gguf_file else set()
    if source.kind == "package":
        entry = PACKAGED_MODELS[str(spec.package)]
        full, short = {f"package:{entry.package}"}, {entry.package.lower()}
        if entry.hub_id:
            full.add(f"hub:{entry.hub_id.lower()}")
            short.add(entry.hub_id.split("/")[-1].lower())
        return full, short, True, stems
    if source.kind == "hub":
        full, short, _ = _identities(source.location)
        return full, short, False, stems
    full, short, _ = _identities(source.location)
    if spec.path:
        f2, s2, _ = _identities(spec.path)
        full |= f2
        short |= s2
    return full, short, True, stems


def tokenwise_backbone(folder: Path) -> str | None:
    """The English model folder a tokenwise merge was built from (its ``tokenwise_merge.json``), else None."""
    record = folder / "tokenwise_merge.json"
    if not record.is_file():
        return None
    try:
        english = json.loads(record.read_text(encoding="utf-8"))["sources"]["english"]["folder"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return english if isinstance(english, str) else None


def adapter_base_matches(recorded: str, spec: ModelSpec, source: Source) -> bool:
    """Whether an adapter's recorded base (``base_model_name_or_path``) names the loaded base.

    Equal Hub ids (case-insensitive; ``gpt2`` also matches
    ``openai-community/gpt2``), the same local folder, a local folder whose
    name is the other side's name (``/models/pythia-160m`` and
    ``EleutherAI/pythia-160m``), a GGUF file named after the recorded model, or
    a tokenwise merge built from the recorded folder (same backbone).
    """
    r_full, r_short, r_local = _identities(recorded)
    b_full, b_short, b_local, stems = _base_identities(spec, source)
    if r_full & b_full:
        return True
    recorded_path = Path(recorded.strip()).expanduser()
    if r_local and source.kind == "local" and recorded_path.is_dir():
        # both are folders on this machine: the same folder, or the same weight files, nothing weaker
        # (sibling checkpoints such as eng_Latn/final and deu_Latn/final share their folder name)
        mine, theirs = folder_weights_sha256(Path(source.location)), folder_weights_sha256(recorded_path)
        if mine is not None and mine == theirs:
            return True
        # a tokenwise merge keeps its English model's backbone (only the embedding is rebuilt)
        backbone = tokenwise_backbone(Path(source.location))
        return backbone is not None and Path(backbone).resolve() == recorded_path.resolve()
    if r_local and b_local and source.kind == "local":
        # a recorded folder that is not here (a moved copy): its last two path parts must agree
        tail = lambda p: "/".join(Path(p).expanduser().resolve().parts[-2:]).lower()  # noqa: E731
        return tail(recorded.strip()) == tail(source.location)
    if (r_local or b_local) and r_short & b_short:
        return True
    # two Hub ids of the same name: only when one has no namespace (gpt2, openai-community/gpt2)
    if (
        not r_local
        and not b_local
        and r_short & b_short
        and ("/" not in recorded.strip() or "/" not in source.location)
    ):
        return True
    return any(stem.startswith(name) for stem in stems for name in r_short if name)


def _adapter_config(spec: ModelSpec, *, download: bool) -> tuple[dict[str, Any] | None, str, str]:
    """(adapter_config.json contents or None, location, kind) of ``spec.adapter``."""
    adapter = str(spec.adapter)
    if importlib.util.find_spec("peft") is None:
        raise model_error(
            spec,
            f"`adapter: {adapter}` needs the peft package; install it with "
            "`pip install 'interlingua[peft]'` (or `pip install peft`)",
        )
    local = Path(adapter).expanduser()
    if local.exists():
        if not local.is_dir():
            raise model_error(
                spec,
                f"the adapter {adapter!r} is a file; give the folder written by PEFT's "
                "save_pretrained (adapter_config.json + adapter_model.safetensors)",
            )
        cfg_path = local / "adapter_config.json"
        if not cfg_path.is_file():
            raise model_error(
                spec,
                f"the adapter folder {local} has no adapter_config.json; give the folder written "
                "by PEFT's save_pretrained",
            )
        if not any((local / n).is_file() for n in ADAPTER_WEIGHT_FILES):
            raise model_error(
                spec,
                f"the adapter folder {local} has no adapter weights ({' or '.join(ADAPTER_WEIGHT_FILES)}); "
                "copy the complete adapter folder",
            )
        if (local / ADAPTER_WEIGHT_FILES[0]).is_file():
            problem = _safetensors_problem(local / ADAPTER_WEIGHT_FILES[0])
            if problem is not None:
                raise model_error(spec, f"the adapter weights {local / ADAPTER_WEIGHT_FILES[0]} are damaged: {problem}")
        return _read_json(spec, cfg_path, "re-save the adapter with PEFT"), str(local.resolve()), "local"
    if looks_like_local_path(adapter):
        raise model_error(
            spec,
            f"adapter path {adapter!r} does not exist (resolved to {local.resolve()}); check the "
            "path, or give the adapter's Hub id",
        )
    cfg_file = _hub_file(spec, adapter, "adapter_config.json", spec.adapter_revision, download=download, what="adapter")
    cfg = None if cfg_file is None else _read_json(spec, cfg_file, "the cached file is damaged: delete it and retry")
    return cfg, adapter, "hub"


def check_adapter_base(spec: ModelSpec, source: Source, adapter_cfg: dict[str, Any]) -> str:
    """Compare the base an adapter records with the base being loaded.

    Returns ``"matched"``, ``"unrecorded"`` (the adapter names no base) or
    ``"ignored"`` (a mismatch under ``adapter_base: ignore``); raises
    :class:`ModelError` naming both models on a mismatch otherwise.
    """
    recorded = adapter_cfg.get("base_model_name_or_path")
    recorded = recorded.strip() if isinstance(recorded, str) and recorded.strip() else None
    if recorded is None:
        return "unrecorded"
    recorded_rev = adapter_cfg.get("revision") if isinstance(adapter_cfg.get("revision"), str) else None
    same_revision = not (
        recorded_rev
        and spec.revision
        and not (recorded_rev.startswith(spec.revision) or spec.revision.startswith(recorded_rev))
    )
    if adapter_base_matches(recorded, spec, source) and same_revision:
        return "matched"
    if spec.adapter_base == "ignore":
        return "ignored"
    loaded = f"package:{spec.package}" if source.kind == "package" else source.location
    if not same_revision:
        why = (
            f"was trained on {recorded!r} at revision {recorded_rev!r} (adapter_config.json) but "
            f"is applied to revision {spec.revision!r} of {loaded!r}"
        )
    else:
        why = (
            f"was trained on {recorded!r} (base_model_name_or_path in its adapter_config.json) "
            f"but is applied to {loaded!r}"
        )
    raise model_error(
        spec,
        f"the adapter {spec.adapter!r} {why}. An adapter on another base of the same shape runs "
        "without any error and gives meaningless representations. Load the base it was trained "
        f"on (`path: {recorded}`), or, if this base is a copy or renamed version of it, set "
        "`adapter_base: ignore` on this model (the facts record that the check was skipped)",
    )


def _check_adapter(spec: ModelSpec, source: Source, *, download: bool) -> dict[str, Any] | None:
    if spec.adapter is None:
        return None
    cfg, location, kind = _adapter_config(spec, download=download)
    report: dict[str, Any] = {"location": location, "kind": kind, "base": None, "base_check": None}
    if cfg is None:  # a Hub adapter not cached yet; load_model checks its config after download
        return report
    base = cfg.get("base_model_name_or_path")
    report["base"] = base if isinstance(base, str) and base.strip() else None
    report["base_check"] = check_adapter_base(spec, source, cfg)
    return report


# --------------------------------------------------------------------------- entry point


def _check_hub_model(spec: ModelSpec, source: Source, probe_hub: bool) -> tuple[dict[str, Any], Path | None]:
    """Offline: the model must be in the local HF cache. Online with ``probe_hub``: ask the Hub."""
    repo = source.location
    wanted = source.gguf_file or "config.json"
    cached = hub_cached_file(repo, wanted, spec.revision)
    if cached is None and hub_offline():
        raise _unreachable(spec, repo, "HF_HUB_OFFLINE is set")
    found: dict[str, Any] = {}
    if probe_hub and not hub_offline():
        try:
            from huggingface_hub import HfApi

            info = HfApi().model_info(repo, revision=spec.revision, timeout=10)
        except Exception as exc:  # noqa: BLE001 - classified below
            failure = _hub_failure(spec, repo, spec.revision, exc, "model")
            if failure is not None:
                raise failure from exc
            if cached is None:
                raise _unreachable(spec, repo, _first_line(exc)) from exc
        else:
            names = {s.rfilename for s in (info.siblings or [])}
            if names and wanted not in names:
                raise model_error(
                    spec,
                    f"the Hub model {repo!r} has no {wanted}; it is not a transformers checkpoint "
                    "(or set `gguf_file` to one of its .gguf files)",
                )
            if names and source.gguf_file is None and not any(Path(n).suffix in WEIGHT_SUFFIXES for n in names):
                raise model_error(spec, f"the Hub model {repo!r} has no weight files")
            found["revision"] = info.sha
            if cached is None and source.gguf_file is None:
                cached = _hub_file(spec, repo, "config.json", spec.revision, download=True, what="model")
    return found, cached


def _preflight(spec: ModelSpec, cache_dir: str | Path | None, *, probe_hub: bool) -> dict[str, Any]:
    source = resolve_source(spec, cache_dir, assemble=False)
    report: dict[str, Any] = {
        "name": spec.label,
        "kind": source.kind,
        "location": source.location,
        "folder": None,
        "gguf_file": source.gguf_file,
        "model_type": None,
        "num_layers": None,
        "architecture": None,
        "weights_format": None,
    }
    if source.kind == "package":
        report["folder"] = source.location
        gguf = Path(source.location) / str(source.gguf_file)
        if gguf.is_file():  # an installed GGUF, or one assembled before
            report.update(_check_gguf(spec, gguf))
    elif source.kind == "local":
        folder = Path(source.location)
        report["folder"] = str(folder)
        if source.gguf_file is not None:
            report.update(_check_gguf(spec, folder / source.gguf_file))
        else:
            cfg = _read_json(spec, folder / "config.json", "re-download the model or re-save it with save_pretrained")
            report.update(_check_config(spec, cfg, str(folder / "config.json")))
            report.update(_check_local_files(spec, folder))
    else:
        found, cached = _check_hub_model(spec, source, probe_hub)
        report.update(found)
        if cached is not None:
            report["folder"] = str(cached.parent)
            if source.gguf_file is None:
                cfg = _read_json(spec, cached, "the cached file is damaged: delete it and retry")
                report.update(_check_config(spec, cfg, f"config.json of {source.location!r}"))
    report["adapter"] = _check_adapter(spec, source, download=not hub_offline())
    report["tokenizer"] = _check_tokenizer_override(spec)
    return report


def _check_tokenizer_override(spec: ModelSpec) -> str | None:
    """The folder of ``spec.tokenizer`` (None without one); it must hold tokenizer files."""
    if spec.tokenizer is None:
        return None
    if spec.tokenizer.startswith("zoo:"):
        raise model_error(spec, f"`tokenizer: {spec.tokenizer}` is a zoo name; resolve it first (the run does)")
    folder = Path(spec.tokenizer).expanduser()
    if not folder.is_dir():
        raise model_error(
            spec,
            f"`tokenizer: {spec.tokenizer}` is not a folder; give the folder a tokenizer was saved into "
            "(tokenizer.save_pretrained) or a zoo tokenizer (`zoo:eng-deu/tokenizer`)",
        )
    files = {p.name for p in folder.iterdir() if p.is_file()}
    if not (any(n in files for n in _TOKENIZER_DATA) or any(n.endswith(".model") for n in files)):
        raise model_error(
            spec,
            f"`tokenizer: {spec.tokenizer}` has no tokenizer files (tokenizer.json, vocab.json + merges.txt, "
            "vocab.txt or a SentencePiece .model)",
        )
    return str(folder)


def preflight_model(spec: ModelSpec, cache_dir: str | Path | None = None, *, probe_hub: bool = True) -> dict[str, Any]:
    """Check that ``spec`` can be loaded, without loading weights (and without torch).

    Checks: a local path exists (``models/x`` whose ``models/`` exists, or a
    path starting with ``./``, ``../``, ``~`` or ``/``, is never taken for a
    Hub id); a local folder has a readable ``config.json`` (or the GGUF file)
    whose ``model_type`` transformers knows, or custom code that
    ``trust_remote_code`` allows; its weight files exist and safetensors files
    are whole; it has tokenizer files; a packaged model's package is installed
    (and the model cache is writable when the GGUF is still to be
    assembled); an adapter folder has ``adapter_config.json`` and weights and
    was trained on this base (``adapter_base``). A Hub id must be reachable or
    already in the local Hugging Face cache; ``probe_hub=False`` skips asking
    the Hub when online.

    Returns ``name``, ``kind`` (local | hub | package), ``location``,
    ``folder`` (None for a Hub model not cached), ``gguf_file``,
    ``model_type``, ``num_layers`` (when the config says), ``architecture``
    (``"table"``, ``"introspection"``, ``"remote code"`` or None),
    ``weights_format`` and ``adapter`` (None, or its location, kind,
    recorded ``base`` and ``base_check``). Raises
    :class:`~interlingua.core.errors.ModelError` (or ``StoreError`` for a model
    cache that cannot be written) naming the model and what to do.
    """
    try:
        return _preflight(spec, cache_dir, probe_hub=probe_hub)
    except InterlinguaError as exc:
        raise named(spec, exc) from exc.__cause__
