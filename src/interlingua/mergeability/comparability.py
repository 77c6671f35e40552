"""What two checkpoints share: the route between them and a coverage table, tensor by tensor.

Only the safetensors headers (the JSON block at the start of each file) and
``config.json`` are read: no tensor data, no torch.

The key map
-----------
Every tensor name is mapped, by its architecture family, to a *canonical
key*: the quantity the tensor holds, named the same way for every family
(the family's ``tensor_rules`` in the architecture table,
:data:`interlingua.data.models.table.ARCHITECTURES`; a family without rules
is tried with the Llama ones and counts as unmapped). ``transformer.h.0.mlp.c_fc.weight`` (GPT-2),
``gpt_neox.layers.0.mlp.dense_h_to_4h.weight`` (GPT-NeoX) and
``model.layers.0.mlp.up_proj.weight`` (Llama) are all ``layers.0.mlp.up.weight``.
Besides the key, each tensor has

* a *layout*: ``linear`` (a matrix stored out x in, as ``nn.Linear``),
  ``conv1d`` (GPT-2's ``Conv1D``: stored in x out, transposed before it is
  compared with a ``linear`` one), ``table`` (embedding rows), ``vector``;
* a *fusion*: ``qkv-blocks`` (GPT-2 ``c_attn``: the rows of Q, K and V one
  after the other), ``qkv-per-head`` (GPT-NeoX ``query_key_value``: Q, K, V
  interleaved head by head) or none.

The *canonical shape* is the stored shape, reversed for ``conv1d``. Names the
family rules do not know keep their own name as key (``raw:<name>``) and can
only match the same name in the other model.

Same names, different quantities are kept apart: Llama's
``post_attention_layernorm`` is the norm before the MLP (``norm_mlp``) while
Gemma's normalises the attention output (``norm_attn_out``; its
``pre_feedforward_layernorm`` is the ``norm_mlp``).

The table (:data:`COLUMNS`)
---------------------------
One row per canonical key of either model; every tensor of both models is in
exactly one row (nothing padded, truncated or skipped). Status ``shared``:
both models have the key, with the same canonical shape and the same fusion;
the two tensors are comparable element by element (after transposing a
``conv1d`` one to meet a ``linear`` one). Status ``excluded`` with one reason
of :data:`REASONS`, decided in this order:

*Both models have the key, shapes differ.*
``vocab_rows_differ`` (embedding or head tables of the same width and a
different number of rows), ``width_differs`` (hidden widths differ: every
tensor that has the hidden dimension), ``positions_differ`` (position tables
of different lengths), ``grouped_query_heads`` (K / V projections whose rows
differ because the number of key-value heads differs), ``heads_differ`` (other
attention tensors: heads x head size differ), ``ffn_width_differs`` (MLP
tensors: the intermediate width differs), ``fused_layout_differs`` (both fuse
Q, K, V but in different orders), ``shape_differs`` (anything else).

*Only one model has the key.*
``depth_differs`` (a block index at or beyond the other model's number of
blocks), ``fused_vs_split_qkv`` (one model stores Q, K, V fused in one tensor
and the other as three tensors in that block: the fused row and the three
split rows all get this reason), ``tied_embeddings`` (an LM head tensor whose
counterpart is absent because the other model ties its head to its input
embedding), ``no_counterpart`` (the other architecture has no such tensor:
biases, gates, position tables, a vision tower, extra norms).

The route
---------
``native``: the same architecture family (``model_type``, or the table
entry's ``compared_as``: ``gemma3`` counts as ``gemma3_text``) and every
*block* tensor (a tensor of a transformer block of the text stack,
``layer >= 0``) of both models shared: the two checkpoints can be compared,
merged and interpolated tensor by tensor. Embedding / head rows
that differ (vocabularies, tying) do not break it; they are excluded and listed.
``transport``: the same kind of model (both decoders, or both encoders) with a
known key map, but some block tensor is not shared, or the families differ:
relating them needs a change of basis (other widths, depths, heads or
layouts). ``none``: different kinds (an encoder and a decoder) or an unknown
kind. A mapped family's kind is its table entry's ``causal`` (decoder, else
encoder); any other model's is read from its config's ``architectures``
(``...ForCausalLM`` a decoder, ``...ForMaskedLM`` an encoder).

A LoRA adapter folder stands for its base model with the adapter merged: its
tensors are the base's (``adapter_config.json``'s ``base_model_name_or_path``
must be a local folder, or give ``(base, adapter)``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from interlingua.core.safetensors_header import SafetensorsHeaderError, read_safetensors_header
from interlingua.core.schema import Column, result_table
from interlingua.data.models.keymap import FALLBACK_RULES, TensorRule
from interlingua.data.models.table import ARCHITECTURES, ArchitectureEntry, config_int
from interlingua.mergeability.errors import WeightsError

__all__ = [
    "COLUMNS",
    "REASONS",
    "ROUTES",
    "Checkpoint",
    "Comparability",
    "LoraPair",
    "ModelFacts",
    "SharedTensor",
    "TensorInfo",
    "comparability",
    "coverage_table",
    "family_entry",
    "family_rules",
    "read_checkpoint",
]

CheckpointRef = Union[str, "os.PathLike[str]", tuple[Any, Any], "Checkpoint"]

ROUTES = ("native", "transport", "none")

#: Why a tensor is excluded (code -> meaning). ``""`` is the reason of a shared row.
REASONS: dict[str, str] = {
    "vocab_rows_differ": (
        "embedding / head tables of the same width with a different number of rows (vocabularies differ)"
    ),
    "width_differs": "the hidden widths differ",
    "positions_differ": "position tables of different lengths",
    "grouped_query_heads": (
        "K / V projection rows differ: the number of key-value heads (grouped-query attention) differs"
    ),
    "heads_differ": "attention heads x head size differ",
    "ffn_width_differs": "the MLP intermediate widths differ",
    "fused_layout_differs": "both fuse Q, K, V, in different orders",
    "shape_differs": "the canonical shapes differ otherwise",
    "depth_differs": "the block index is at or beyond the other model's number of blocks",
    "fused_vs_split_qkv": "one model fuses Q, K, V into one tensor, the other stores them split",
    "tied_embeddings": "the other model ties its LM head to its input embedding (no head tensor of its own)",
    "no_counterpart": "the other architecture has no such tensor",
}

COLUMNS: tuple[Column, ...] = (
    Column("key", "str", "canonical key: the quantity, named the same for every family (layers.0.attn.q.weight)"),
    Column("part", "str", "embedding, positions, attention, mlp, norm, head, vision or other"),
    Column("layer", "int", "block index of the text stack (-1 outside the blocks)"),
    Column("status", "str", "shared (comparable element by element) or excluded"),
    Column("reason", "str", "why excluded: a code of REASONS (empty when shared)"),
    Column("detail", "str", "the reason with the numbers"),
    Column("name_a", "str", "A's tensor name in its safetensors files (empty: A has none)"),
    Column("shape_a", "str", "A's stored shape, e.g. 32x96"),
    Column("canonical_shape_a", "str", "A's shape out x in (conv1d reversed)"),
    Column("dtype_a", "str", "A's stored dtype (safetensors code, e.g. F32)"),
    Column("layout_a", "str", "linear, conv1d, table or vector"),
    Column("fused_a", "str", "qkv-blocks, qkv-per-head or empty"),
    Column("numel_a", "int", "elements of A's tensor (-1: none)"),
    Column("name_b", "str", "B's tensor name (empty: B has none)"),
    Column("shape_b", "str", "B's stored shape"),
    Column("canonical_shape_b", "str", "B's shape out x in"),
    Column("dtype_b", "str", "B's stored dtype"),
    Column("layout_b", "str", "linear, conv1d, table or vector"),
    Column("fused_b", "str", "qkv-blocks, qkv-per-head or empty"),
    Column("numel_b", "int", "elements of B's tensor (-1: none)"),
)

# ====================================================================== the key map
# The rules are data of the architecture table (ArchitectureEntry.tensor_rules, interlingua.data.models.keymap).


def family_entry(model_type: str) -> tuple[str, ArchitectureEntry | None]:
    """(the family ``model_type`` is compared as, that family's architecture table entry or None).

    The family is the entry's ``compared_as`` (``gemma3`` -> ``gemma3_text``), else ``model_type`` itself.
    """
    own = ARCHITECTURES.get(model_type)
    family = own.compared_as if own is not None and own.compared_as else model_type
    return family, ARCHITECTURES.get(family)


def family_rules(model_type: str) -> tuple[TensorRule, ...] | None:
    """The key-map rules of ``model_type``'s family from the architecture table; None when it has none."""
    entry = family_entry(model_type)[1]
    return entry.tensor_rules if entry is not None else None


# ====================================================================== headers
@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a safetensors file, from its header: where its bytes are, no data."""

    name: str
    file: Path
    dtype: str  # safetensors code: F32, BF16, ...
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    stop: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def read_tensor_infos(path: str | os.PathLike[str]) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """(name -> :class:`TensorInfo`, ``__metadata__``) of one safetensors file; reads the header only
    (:func:`~interlingua.core.safetensors_header.read_safetensors_header`)."""
    path = Path(path)
    try:
        header, size = read_safetensors_header(path, limit=100_000_000)
    except SafetensorsHeaderError as exc:
        if exc.reason == "object":
            raise WeightsError(f"{path} is not a safetensors file (its header is not a JSON object)") from None
        raise WeightsError(f"{path} is not a readable safetensors file ({exc})") from None
    except OSError as exc:
        raise WeightsError(f"{path} is not a readable safetensors file ({exc})") from None
    meta = header.pop("__metadata__", None) or {}
    out = {}
    base = 8 + size
    for name, entry in header.items():
        try:
            begin, end = (int(x) for x in entry["data_offsets"])
            out[name] = TensorInfo(
                name, path, str(entry["dtype"]), tuple(int(s) for s in entry["shape"]), base + begin, base + end
            )
        except (KeyError, TypeError, ValueError):
            raise WeightsError(f"{path}: the header entry of {name!r} is malformed") from None
    return out, dict(meta)


@dataclass(frozen=True)
class LoraPair:
    """The LoRA update of one base tensor: ``W + scaling * (B @ A)``, transposed when W is stored in x out."""

    target: str  # the base tensor's name
    a: str  # the adapter's lora_A tensor name (r x in)
    b: str  # lora_B (out x r)
    scaling: float
    transpose: bool  # W is stored in x out (GPT-2 Conv1D, fan_in_fan_out)


@dataclass(frozen=True)
class Checkpoint:
    """A model folder (and optionally a LoRA adapter over it), by its headers and config.

    ``tensors``: the model's tensors by name (the base's for an adapter: the
    adapter changes values, not names). ``adapter``: the adapter folder,
    ``adapter_config`` its config, ``adapter_tensors`` its LoRA tensors.
    """

    folder: Path
    config: dict[str, Any]
    tensors: dict[str, TensorInfo]
    adapter: Path | None = None
    adapter_config: dict[str, Any] | None = None
    adapter_tensors: dict[str, TensorInfo] = field(default_factory=dict)
    lora: dict[str, LoraPair] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return str(self.folder) if self.adapter is None else f"{self.folder} + adapter {self.adapter}"


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WeightsError(f"the {what} {path} is unreadable ({exc})") from None
    if not isinstance(value, dict):
        raise WeightsError(f"the {what} {path} is not a JSON object")
    return value


def _model_tensors(folder: Path) -> dict[str, TensorInfo]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = _read_json(index, "safetensors index").get("weight_map") or {}
        files = sorted({folder / str(f) for f in weight_map.values()})
    else:
        files = sorted(p for p in folder.glob("*.safetensors") if p.name != "adapter_model.safetensors")
    if not files:
        others = [p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".gguf")]
        hint = (
            (f" (it has {', '.join(others[:3])}: save it again with save_pretrained(..., safe_serialization=True))")
            if others
            else ""
        )
        raise WeightsError(f"the model folder {folder} has no safetensors weights{hint}")
    tensors: dict[str, TensorInfo] = {}
    for f in files:
        if not f.is_file():
            raise WeightsError(f"the safetensors index of {folder} lists {f.name}, which is missing")
        part, _meta = read_tensor_infos(f)
        for name, info in part.items():
            if name in tensors:
                raise WeightsError(f"{folder}: tensor {name!r} is in two files ({tensors[name].file.name}, {f.name})")
            tensors[name] = info
    return tensors


def _folder(path: Any, what: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise WeightsError(
            f"the {what} {folder} is not a folder" if folder.exists() else f"the {what} folder {folder} does not exist"
        )
    return folder


def read_checkpoint(ref: CheckpointRef) -> Checkpoint:
    """A :class:`Checkpoint` from a model folder, a LoRA adapter folder, or ``(base folder, adapter folder)``.

    Reads ``config.json`` and the safetensors headers only. An adapter folder
    alone uses its ``base_model_name_or_path`` (it must be a local folder).
    Raises :class:`WeightsError` for missing folders or files, non-LoRA or
    unsupported adapters (DoRA, ``modules_to_save``, embedding LoRA, biases)
    and adapters whose tensors do not fit the base.
    """
    if isinstance(ref, Checkpoint):
        return ref
    adapter: Path | None = None
    if isinstance(ref, tuple):
        if len(ref) != 2:
            raise WeightsError(f"give a checkpoint as a folder or (base folder, adapter folder), got {ref!r}")
        folder, adapter = _folder(ref[0], "base model"), _folder(ref[1], "adapter")
    else:
        folder = _folder(ref, "model")
        if (folder / "adapter_config.json").is_file():
            adapter = folder
            base = _read_json(folder / "adapter_config.json", "adapter config").get("base_model_name_or_path")
            if not base or not Path(str(base)).expanduser().is_dir():
                raise WeightsError(
                    f"the adapter {folder} names its base {base!r}, which is not a local folder; give "
                    "(base folder, adapter folder) instead"
                )
            folder = Path(str(base)).expanduser()
    if not (folder / "config.json").is_file():
        raise WeightsError(f"the model folder {folder} has no config.json: not a saved transformers model")
    config = _read_json(folder / "config.json", "model config")
    tensors = _model_tensors(folder)
    if adapter is None:
        return Checkpoint(folder, config, tensors)
    conv1d = {m.info.name for m in _map_all(Checkpoint(folder, config, tensors)).values() if m.layout == "conv1d"}
    adapter_config, adapter_tensors, lora = _check_lora(adapter, tensors, conv1d)
    return Checkpoint(folder, config, tensors, adapter, adapter_config, adapter_tensors, lora)


# ====================================================================== LoRA adapters (header checks)
_LORA_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


def lora_module_targets(
    adapter_tensors: Mapping[str, TensorInfo], base: Mapping[str, TensorInfo]
) -> dict[str, dict[str, str]]:
    """``base weight name -> {"A": adapter tensor name, "B": ...}`` for every LoRA pair of an adapter."""
    pairs: dict[str, dict[str, str]] = {}
    for name in adapter_tensors:
        m = _LORA_KEY.match(name)
        if m is None:
            raise WeightsError(
                f"the adapter tensor {name!r} is not a LoRA A/B matrix; only plain LoRA adapters "
                "(lora_A / lora_B weights) can be merged on the fly"
            )
        module = m.group("module")
        target = f"{module}.weight"
        if target not in base:
            raise WeightsError(
                f"the adapter adapts {module!r} but the base model has no tensor {target!r}: this adapter "
                "belongs to another base"
            )
        pairs.setdefault(target, {})[m.group("ab")] = name
    for target, pair in pairs.items():
        if set(pair) != {"A", "B"}:
            raise WeightsError(f"the adapter has lora_{'A' if 'A' not in pair else 'B'} missing for {target!r}")
    return pairs


def _pattern_value(patterns: Mapping[str, Any] | None, module: str, default: Any) -> Any:
    """PEFT's rank_pattern / alpha_pattern lookup: the first key ``k`` with ``module`` matching ``(.*\\.)?(k)$``."""
    for key, value in (patterns or {}).items():
        if re.match(rf"(.*\.)?({key})$", module):
            return value
    return default


def _check_lora(
    adapter: Path, base: dict[str, TensorInfo], conv1d: set[str]
) -> tuple[dict[str, Any], dict[str, TensorInfo], dict[str, LoraPair]]:
    config = _read_json(adapter / "adapter_config.json", "adapter config")
    if str(config.get("peft_type", "")).upper() != "LORA":
        raise WeightsError(f"the adapter {adapter} is a {config.get('peft_type')!r} adapter; only LoRA is supported")
    problems = []
    if config.get("use_dora"):
        problems.append("DoRA (use_dora)")
    if config.get("modules_to_save"):
        problems.append(f"modules_to_save {config['modules_to_save']}")
    if config.get("bias", "none") != "none" or config.get("lora_bias"):
        problems.append(f"trained biases (bias={config.get('bias')!r})")
    for key in ("layer_replication", "trainable_token_indices", "target_parameters"):
        if config.get(key):
            problems.append(key)
    if problems:
        raise WeightsError(
            f"the adapter {adapter} uses {', '.join(problems)}; only plain LoRA (W + scaling * B @ A) is merged "
            "on the fly: merge it with PeftModel.merge_and_unload() and save the result instead"
        )
    file = adapter / "adapter_model.safetensors"
    if not file.is_file():
        raise WeightsError(f"the adapter {adapter} has no adapter_model.safetensors")
    tensors, _ = read_tensor_infos(file)
    if any("lora_embedding" in n for n in tensors):
        raise WeightsError(f"the adapter {adapter} adapts an embedding (lora_embedding_A/B); not supported")
    pairs = lora_module_targets(tensors, base)
    fan = bool(config.get("fan_in_fan_out"))
    lora: dict[str, LoraPair] = {}
    for target, pair in pairs.items():
        a, b, w = tensors[pair["A"]].shape, tensors[pair["B"]].shape, base[target].shape
        transpose = fan or target in conv1d  # PEFT forces fan_in_fan_out for GPT-2's Conv1D
        out_in = (w[1], w[0]) if transpose and len(w) == 2 else w
        if len(a) != 2 or len(b) != 2 or len(w) != 2 or a[0] != b[1] or (b[0], a[1]) != tuple(out_in):
            raise WeightsError(
                f"the adapter's LoRA pair for {target!r} (A {list(a)}, B {list(b)}) does not fit the base "
                f"tensor {list(w)} (fan_in_fan_out={transpose})"
            )
        module = target[: -len(".weight")]
        r = _pattern_value(config.get("rank_pattern"), module, config.get("r"))
        alpha = _pattern_value(config.get("alpha_pattern"), module, config.get("lora_alpha"))
        if not isinstance(r, int) or r <= 0 or r != a[0] or not isinstance(alpha, (int, float)):
            raise WeightsError(
                f"the adapter {adapter}: rank {r!r} / lora_alpha {alpha!r} for {module!r} do not fit its "
                f"lora_A of {a[0]} rows"
            )
        scaling = float(alpha) / (math.sqrt(r) if config.get("use_rslora") else r)
        lora[target] = LoraPair(target, pair["A"], pair["B"], scaling, transpose)
    return config, tensors, lora


# ====================================================================== facts and mapping
@dataclass(frozen=True)
class ModelFacts:
    """What the config and the headers say about one side."""

    label: str
    model_type: str
    family: str
    kind: str  # decoder | encoder | unknown
    mapped: bool  # the family has key-map rules
    hidden: int | None
    layers: int | None  # blocks of the text stack (from the tensors, else the config)
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    ffn: int | None
    vocab: int | None
    tied: bool
    n_tensors: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _text_config(config: Mapping[str, Any]) -> dict[str, Any]:
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else dict(config)


@dataclass(frozen=True)
class _Mapped:
    key: str
    part: str
    layer: int
    layout: str
    fused: str
    shape: tuple[int, ...]
    canonical: tuple[int, ...]
    info: TensorInfo


def _map(name: str, info: TensorInfo, rules: Sequence[TensorRule]) -> _Mapped:
    for rule in rules:
        m = rule.pattern.match(name)
        if m is None:
            continue
        groups = m.groupdict()
        key = rule.key.format(**{k: v for k, v in groups.items() if v is not None})
        param = groups.get("p")
        layout = "vector" if (param == "bias" or len(info.shape) < 2) and rule.layout != "table" else rule.layout
        if rule.part == "vision":
            layout = "linear" if len(info.shape) == 2 else "vector" if len(info.shape) == 1 else "other"
        layer = int(groups["i"]) if groups.get("i") is not None else -1
        canonical = tuple(reversed(info.shape)) if layout == "conv1d" and len(info.shape) == 2 else info.shape
        return _Mapped(key, rule.part, layer, layout, rule.fused, info.shape, canonical, info)
    layout = "vector" if len(info.shape) < 2 else "linear" if len(info.shape) == 2 else "other"
    return _Mapped(f"raw:{name}", "other", -1, layout, "", info.shape, info.shape, info)


def _facts(ckpt: Checkpoint, mapped: Mapping[str, _Mapped]) -> ModelFacts:
    cfg = _text_config(ckpt.config)
    model_type = str(ckpt.config.get("model_type") or "")
    family, entry = family_entry(model_type)
    archs = [str(a) for a in ckpt.config.get("architectures") or []]
    if entry is not None and entry.tensor_rules is not None:  # the table says which kind the family is
        kind = "decoder" if entry.causal else "encoder"
    elif any(a.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")) for a in archs):
        kind = "decoder"
    elif any(a.endswith(("ForMaskedLM", "ForSequenceClassification")) for a in archs):
        kind = "encoder"
    else:
        kind = "unknown"
    hidden = config_int(cfg, "hidden")
    heads = config_int(cfg, "heads")
    kv = config_int(cfg, "kv_heads") or heads
    head_dim = config_int(cfg, "head_dim") or (hidden // heads if hidden and heads else None)
    ffn = config_int(cfg, "ffn") or (4 * hidden if family == "gpt2" and hidden else None)
    block_layers = [m.layer for m in mapped.values() if m.layer >= 0]
    layers = (max(block_layers) + 1) if block_layers else config_int(cfg, "layers")
    has_head = any(m.key == "head.weight" for m in mapped.values())
    tied_cfg = cfg.get("tie_word_embeddings")
    tied = (not has_head) if tied_cfg is None else bool(tied_cfg) and not has_head
    return ModelFacts(
        label=ckpt.label,
        model_type=model_type,
        family=family,
        kind=kind,
        mapped=entry is not None and entry.tensor_rules is not None,
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv,
        head_dim=head_dim,
        ffn=ffn,
        vocab=config_int(cfg, "vocab"),
        tied=tied,
        n_tensors=len(ckpt.tensors),
    )


def _map_all(ckpt: Checkpoint) -> dict[str, _Mapped]:
    rules = family_rules(str(ckpt.config.get("model_type") or "")) or FALLBACK_RULES
    out: dict[str, _Mapped] = {}
    for name, info in ckpt.tensors.items():
        m = _map(name, info, rules)
        if m.key in out:  # two names of one quantity: keep both apart, by their own names
            m = _map(name, info, ())
        out[m.key] = m
    return out


# ====================================================================== the table
@dataclass(frozen=True)
class SharedTensor:
    """One shared tensor: its names in A and B and whether each is stored transposed (conv1d)."""

    key: str
    part: str
    layer: int
    name_a: str
    name_b: str
    transposed_a: bool
    transposed_b: bool
    shape: tuple[int, ...]  # canonical (out x in)


@dataclass(frozen=True)
class Comparability:
    """The route between two checkpoints and the coverage table (:data:`COLUMNS`); see the module docstring."""

    route: str
    reason: str
    a: ModelFacts
    b: ModelFacts
    table: Any  # pandas DataFrame

    def shared(self) -> list[SharedTensor]:
        """The shared rows as :class:`SharedTensor`, in table order."""
        rows = self.table[self.table["status"] == "shared"]
        return [
            SharedTensor(
                r.key,
                r.part,
                int(r.layer),
                r.name_a,
                r.name_b,
                r.layout_a == "conv1d",
                r.layout_b == "conv1d",
                _parse_shape(r.canonical_shape_a),
            )
            for r in rows.itertuples(index=False)
        ]

    def counts(self) -> dict[str, int]:
        """Rows by status and by reason (``shared``, ``excluded``, then each reason code present)."""
        t = self.table
        out = {"shared": int((t["status"] == "shared").sum()), "excluded": int((t["status"] == "excluded").sum())}
        for reason, n in t.loc[t["status"] == "excluded", "reason"].value_counts().sort_index().items():
            out[str(reason)] = int(n)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: route, reason, both sides' facts and the counts."""
        return {
            "route": self.route,
            "reason": self.reason,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "counts": self.counts(),
        }


def _shape_str(shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return ""
    return "x".join(str(s) for s in shape) if shape else "scalar"


def _parse_shape(text: str) -> tuple[int, ...]:
    return () if text in ("", "scalar") else tuple(int(s) for s in text.split("x"))


def _leaf(key: str) -> str:
    return re.sub(r"^layers\.\d+\.", "", key)


def _shape_reason(m_a: _Mapped, m_b: _Mapped, fa: ModelFacts, fb: ModelFacts) -> tuple[str, str]:
    sa, sb = m_a.canonical, m_b.canonical
    shapes = f"A {_shape_str(sa)}, B {_shape_str(sb)}"
    if m_a.fused and m_b.fused and m_a.fused != m_b.fused:
        return "fused_layout_differs", f"A fuses Q, K, V as {m_a.fused}, B as {m_b.fused}"
    leaf, part = _leaf(m_a.key), m_a.part
    if part in ("embedding", "head") and len(sa) == 2 and len(sb) == 2:
        if sa[1] != sb[1]:
            return "width_differs", f"embedding width A {sa[1]}, B {sb[1]} (rows A {sa[0]}, B {sb[0]})"
        return "vocab_rows_differ", f"vocabulary rows A {sa[0]}, B {sb[0]} (width {sa[1]})"
    if part == "positions" and len(sa) == 2 and len(sb) == 2:
        if sa[1] != sb[1]:
            return "width_differs", f"position table width A {sa[1]}, B {sb[1]}"
        return "positions_differ", f"positions A {sa[0]}, B {sb[0]}"
    if fa.hidden is not None and fb.hidden is not None and fa.hidden != fb.hidden:
        return "width_differs", f"hidden width A {fa.hidden}, B {fb.hidden} ({shapes})"
    if leaf.startswith(("attn.k.", "attn.v.")):
        if fa.kv_heads != fb.kv_heads:
            return "grouped_query_heads", (
                f"key-value heads A {fa.kv_heads} x {fa.head_dim}, B {fb.kv_heads} x {fb.head_dim} ({shapes})"
            )
        return "heads_differ", f"head size A {fa.head_dim}, B {fb.head_dim} ({shapes})"
    if leaf.startswith("attn."):
        return (
            "heads_differ",
            f"heads x head size A {fa.heads} x {fa.head_dim}, B {fb.heads} x {fb.head_dim} ({shapes})",
        )
    if part == "mlp":
        return "ffn_width_differs", f"MLP width A {fa.ffn}, B {fb.ffn} ({shapes})"
    return "shape_differs", shapes


_SPLIT = ("attn.q.", "attn.k.", "attn.v.")


def _missing_reason(
    m: _Mapped, side: str, other: str, other_map: Mapping[str, _Mapped], fo: ModelFacts
) -> tuple[str, str]:
    """Why the key of ``m`` (of model ``side``) has no counterpart in model ``other``."""
    if m.layer >= 0 and fo.layers is not None and m.layer >= fo.layers:
        return "depth_differs", f"block {m.layer}: {other} has {fo.layers} blocks"
    leaf = _leaf(m.key)
    prefix = f"layers.{m.layer}."
    param = m.key.rsplit(".", 1)[-1]
    if m.layer >= 0 and leaf.startswith("attn.qkv."):
        split = [
            k
            for k in (f"{prefix}attn.q.{param}", f"{prefix}attn.k.{param}", f"{prefix}attn.v.{param}")
            if k in other_map
        ]
        if split:
            return "fused_vs_split_qkv", (
                f"{side} fuses Q, K, V in one tensor ({m.fused}); {other} stores them split ({', '.join(split)})"
            )
    if m.layer >= 0 and leaf.startswith(_SPLIT) and f"{prefix}attn.qkv.{param}" in other_map:
        return "fused_vs_split_qkv", f"{side} stores Q, K, V split; {other} fuses them ({prefix}attn.qkv.{param})"
    if m.key == "head.weight" and fo.tied:
        return "tied_embeddings", (
            f"{other} ties its LM head to its input embedding (no head tensor of its own); {side}'s head is untied"
        )
    what = "vision tower / projector" if m.part == "vision" else leaf if m.layer >= 0 else m.key
    return "no_counterpart", f"{other} ({fo.family or 'unknown family'}) has no {what}"


def coverage_table(a: CheckpointRef, b: CheckpointRef) -> Any:
    """The coverage table of two checkpoints (:data:`COLUMNS`); :func:`comparability` ``.table``."""
    return comparability(a, b).table


def comparability(a: CheckpointRef, b: CheckpointRef) -> Comparability:
    """The route between checkpoints ``a`` and ``b`` and their coverage table (see the module docstring).

    ``a`` / ``b``: model folders (safetensors + config.json), LoRA adapter
    folders, ``(base, adapter)`` pairs or :class:`Checkpoint` s. Reads headers
    and configs only.
    """
    ca, cb = read_checkpoint(a), read_checkpoint(b)
    ma, mb = _map_all(ca), _map_all(cb)
    fa, fb = _facts(ca, ma), _facts(cb, mb)
    rows: list[dict[str, Any]] = []

    def side(m: _Mapped | None, s: str) -> dict[str, Any]:
        if m is None:
            return {}
        return {
            f"name_{s}": m.info.name,
            f"shape_{s}": _shape_str(m.shape),
            f"canonical_shape_{s}": _shape_str(m.canonical),
            f"dtype_{s}": m.info.dtype,
            f"layout_{s}": m.layout,
            f"fused_{s}": m.fused,
            f"numel_{s}": m.info.numel,
        }

    for key in [*ma, *(k for k in mb if k not in ma)]:
        m_a, m_b = ma.get(key), mb.get(key)
        ref = m_a or m_b
        assert ref is not None
        if m_a is not None and m_b is not None:
            if m_a.canonical == m_b.canonical and m_a.fused == m_b.fused:
                status, reason = "shared", ""
                detail = (
                    ""
                    if m_a.info.dtype == m_b.info.dtype
                    else f"dtypes differ (A {m_a.info.dtype}, B {m_b.info.dtype})"
                )
            else:
                status = "excluded"
                reason, detail = _shape_reason(m_a, m_b, fa, fb)
        elif m_a is not None:
            status = "excluded"
            reason, detail = _missing_reason(m_a, "A", "B", mb, fb)
        else:
            status = "excluded"
            reason, detail = _missing_reason(m_b, "B", "A", ma, fa)  # type: ignore[arg-type]
        rows.append(
            {
                "key": key,
                "part": ref.part,
                "layer": ref.layer,
                "status": status,
                "reason": reason,
                "detail": detail,
                **side(m_a, "a"),
                **side(m_b, "b"),
            }
        )

    def order(row: dict[str, Any]) -> tuple[int, int, str]:
        if row["layer"] >= 0:
            return (1, row["layer"], row["key"])
        group = 0 if row["part"] in ("embedding", "positions") else 2 if row["part"] in ("norm", "head", "other") else 3
        return (group, 0, row["key"])

    rows.sort(key=order)
    table = result_table(rows, COLUMNS)
    route, reason = _route(fa, fb, table)
    return Comparability(route, reason, fa, fb, table)


def _route(fa: ModelFacts, fb: ModelFacts, table: Any) -> tuple[str, str]:
    blocks = table[table["layer"] >= 0]
    excluded = blocks[blocks["status"] != "shared"]
    if fa.kind == "unknown" or fb.kind == "unknown" or fa.kind != fb.kind:
        return (
            "none",
            f"different or unknown kinds of model (A {fa.kind} {fa.model_type!r}, B {fb.kind} {fb.model_type!r})",
        )
    if len(blocks) == 0:
        return "none", "neither model has a block tensor the key map recognises"
    if fa.family == fb.family and excluded.empty:
        return "native", f"same family ({fa.family}) and all {len(blocks)} block tensor rows shared by name and shape"
    if not (fa.mapped and fb.mapped):
        return "none", f"no key map for {fa.family if not fa.mapped else fb.family!r}: block tensors cannot be related"
    why = []
    if fa.family != fb.family:
        why.append(f"families differ ({fa.family} vs {fb.family})")
    for code, n in excluded["reason"].value_counts().sort_index().items():
        why.append(f"{n} block rows {code}")
    return "transport", f"both {fa.kind}s; a change of basis is needed: " + "; ".join(why)
