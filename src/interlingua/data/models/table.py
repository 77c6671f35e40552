"""The architecture table as data: what the toolkit knows of each model family, in one place.

One :class:`ArchitectureEntry` per ``model_type`` holds everything the three
readers need:

* extraction (:mod:`.architectures`, :mod:`.preflight`, :mod:`.loading`, the
  tokenizer audit): where the base transformer keeps its embedding, blocks
  and final norm (``embedding`` / ``blocks`` / ``final_norm`` /
  ``last_hidden_state_is_normed`` / ``text_model``) and ``causal``;
* transport (:func:`interlingua.transport.correspond.resolve_blocks`): the
  sublayer paths inside a block (``sublayers``, a :class:`Sublayers`; None
  for a family transport cannot fuse, e.g. BERT);
* weight comparability (:mod:`interlingua.mergeability.comparability`): the
  key map of its tensor names (``tensor_rules``, see :mod:`.keymap`), the
  family it is compared as (``compared_as``: ``gemma3`` is compared as
  ``gemma3_text``) and its kind (``causal``: decoder, else encoder);
* the cost model (:func:`interlingua.pipeline.cost.model_shape`): whether its
  MLP is gated (``gated_mlp``: three ``hidden x ffn`` matrices, not two).

How deep and how wide a model is, read from its ``config.json`` (a dict) or a
loaded config (an object), is :func:`config_int` with the spellings of
:data:`SHAPE_KEYS`: the one reader of pre-flight, loading, weight comparability
and the cost model.

A family whose module paths are not in the table (``embedding`` / ``blocks``
None: ``qwen2``, ``qwen3``, ``gemma``, ``gemma2``, ``mixtral``, which no test
model covers) is extracted as an unknown family is (introspection, see
:func:`.architectures.resolve_architecture`); its entry serves transport and
comparability only. :func:`register_architecture` is the one way to add a
family.

Torch-free, so that pre-flight checks and config validation can consult it
without importing torch (:mod:`.architectures` resolves the entries against a
loaded module).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlingua.data.models.keymap import (
    BERT_RULES,
    GEMMA_RULES,
    GPT2_RULES,
    LLAMA_RULES,
    NEOX_RULES,
    VISION_RULES,
    TensorRule,
)

__all__ = [
    "ARCHITECTURES",
    "SHAPE_KEYS",
    "ArchitectureEntry",
    "Sublayers",
    "config_int",
    "extraction_families",
    "gated_mlp",
    "register_architecture",
]

#: The config keys of a model's shape, by what they give, in the order they are tried (families spell them
#: differently: GPT-2 ``n_embd`` / ``n_layer``, T5 ``d_model``, Llama ``hidden_size`` / ``num_hidden_layers``).
SHAPE_KEYS: dict[str, tuple[str, ...]] = {
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "heads": ("num_attention_heads", "n_head", "num_heads"),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "ffn": ("intermediate_size", "n_inner", "ffn_dim", "d_ff"),
    "vocab": ("vocab_size",),
}


def config_int(config: Any, what: str) -> int | None:
    """The first integer among :data:`SHAPE_KEYS` ``[what]`` in ``config``: a ``config.json`` dict (its
    ``text_config`` read over it: a multimodal model's text model) or a loaded config object (attributes);
    None when it gives none."""
    keys = SHAPE_KEYS[what]
    if isinstance(config, Mapping):
        text = config.get("text_config")
        merged = {**config, **text} if isinstance(text, Mapping) else config
        values = [merged.get(k) for k in keys]
    else:
        values = [getattr(config, k, None) for k in keys]
    return next((int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)), None)


def gated_mlp(model_type: str) -> bool:
    """Whether the table says ``model_type``'s MLP is gated (False for a family not in the table)."""
    entry = ARCHITECTURES.get(model_type)
    return entry is not None and entry.gated_mlp


@dataclass(frozen=True)
class Sublayers:
    """Where a block keeps its MLP and attention projections (paths relative to the block).

    ``mlp_in``: the MLP's input projections by role: ``"in"`` feeds the
    non-linearity (GPT-2 ``c_fc``, GPT-NeoX ``dense_h_to_4h``, Llama
    ``gate_proj``), ``"up"`` is the linear branch of a gated MLP (Llama
    ``up_proj``). ``mlp_out`` / ``attn_out``: the output projections whose
    inputs are the ``mlp`` / ``attn`` interfaces. ``qkv``: the attention input
    projections (never fused, listed so tests can check they are untouched).
    ``conv1d``: weights stored in x out (GPT-2 ``Conv1D``) instead of out x in.
    """

    mlp_in: Mapping[str, str]
    mlp_out: str
    attn_out: str
    qkv: tuple[str, ...]
    conv1d: bool = False


@dataclass(frozen=True)
class ArchitectureEntry:
    """What the toolkit knows of one model family (``model_type``).

    Module paths (``embedding``, ``blocks``, ``final_norm``) are relative to
    the base transformer (the text model ``text_model`` inside it, when
    given); None where the table does not give them (then extraction
    introspects the loaded model, as for a family not in the table).
    ``last_hidden_state_is_normed``: whether the last entry of
    ``output_hidden_states`` is taken AFTER the final norm (True for the
    decoder families in transformers 5.x; a forward hook on the last block
    sees the pre-norm residual instead); required with the paths.
    ``causal``: a decoder (loaded as a causal LM when a PEFT adapter is
    applied; a decoder to weight comparability) or an encoder (``AutoModel``).
    ``sublayers``: the MLP / attention projections inside a block, for
    transport (None: transport refuses the family). ``tensor_rules``: the
    weight key map of its checkpoints (None: tried with the Llama rules and
    counted as unmapped). ``compared_as``: the family whose entry weight
    comparability uses for this one (None: itself). ``gated_mlp``: its MLP
    multiplies a gated branch (Llama's ``gate_proj`` and ``up_proj``): three
    ``hidden x ffn`` matrices per block, which the cost model counts.
    """

    model_type: str
    embedding: str | None = None
    blocks: str | None = None
    final_norm: str | None = None
    last_hidden_state_is_normed: bool | None = None
    text_model: str | None = None
    causal: bool = True
    sublayers: Sublayers | None = None
    tensor_rules: tuple[TensorRule, ...] | None = None
    compared_as: str | None = None
    gated_mlp: bool = False

    def __post_init__(self) -> None:
        paths = (self.embedding, self.blocks)
        if any(p is not None for p in paths) and (
            any(p is None for p in paths) or self.last_hidden_state_is_normed is None
        ):
            raise ValueError(
                f"the architecture entry of {self.model_type!r} gives only some of embedding, blocks and "
                "last_hidden_state_is_normed; give all three (final_norm may be None) or none"
            )

    @property
    def extracts(self) -> bool:
        """Whether the entry gives the module paths extraction reads (else the family is introspected)."""
        return self.embedding is not None and self.blocks is not None


_GATED = Sublayers(
    {"in": "mlp.gate_proj", "up": "mlp.up_proj"},
    "mlp.down_proj",
    "self_attn.o_proj",
    ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
)
_GPT2_SUBLAYERS = Sublayers({"in": "mlp.c_fc"}, "mlp.c_proj", "attn.c_proj", ("attn.c_attn",), conv1d=True)
_NEOX_SUBLAYERS = Sublayers(
    {"in": "mlp.dense_h_to_4h"}, "mlp.dense_4h_to_h", "attention.dense", ("attention.query_key_value",)
)
_GEMMA3_RULES = (*GEMMA_RULES, *VISION_RULES)

ARCHITECTURES: dict[str, ArchitectureEntry] = {
    e.model_type: e
    for e in (
        ArchitectureEntry("gpt2", "wte", "h", "ln_f", True, sublayers=_GPT2_SUBLAYERS, tensor_rules=GPT2_RULES),
        ArchitectureEntry(
            "gpt_neox",
            "embed_in",
            "layers",
            "final_layer_norm",
            True,
            sublayers=_NEOX_SUBLAYERS,
            tensor_rules=NEOX_RULES,
        ),
        ArchitectureEntry(
            "llama", "embed_tokens", "layers", "norm", True, sublayers=_GATED, tensor_rules=LLAMA_RULES, gated_mlp=True
        ),
        ArchitectureEntry(
            "mistral",
            "embed_tokens",
            "layers",
            "norm",
            True,
            sublayers=_GATED,
            tensor_rules=LLAMA_RULES,
            gated_mlp=True,
        ),
        ArchitectureEntry(
            "gemma3_text",
            "embed_tokens",
            "layers",
            "norm",
            True,
            sublayers=_GATED,
            tensor_rules=_GEMMA3_RULES,
            gated_mlp=True,
        ),
        ArchitectureEntry(
            "gemma3",
            "embed_tokens",
            "layers",
            "norm",
            True,
            text_model="language_model",
            sublayers=_GATED,
            compared_as="gemma3_text",
            gated_mlp=True,
        ),
        ArchitectureEntry(
            "bert", "embeddings.word_embeddings", "encoder.layer", None, False, causal=False, tensor_rules=BERT_RULES
        ),
        # no module paths: no test model covers these, extraction introspects them (as before the merge)
        ArchitectureEntry("qwen2", sublayers=_GATED, tensor_rules=LLAMA_RULES, gated_mlp=True),
        ArchitectureEntry("qwen3", sublayers=_GATED, tensor_rules=LLAMA_RULES, gated_mlp=True),
        ArchitectureEntry("gemma", sublayers=_GATED, tensor_rules=LLAMA_RULES, gated_mlp=True),
        ArchitectureEntry("gemma2", sublayers=_GATED, tensor_rules=GEMMA_RULES, gated_mlp=True),
        ArchitectureEntry("mixtral", tensor_rules=LLAMA_RULES, gated_mlp=True),
        # the cost model's knowledge only (a gated MLP); extracted by introspection, not fused nor key-mapped
        *(
            ArchitectureEntry(t, gated_mlp=True)
            for t in ("phi3", "olmo", "olmo2", "qwen2_moe", "cohere", "granite", "stablelm", "smollm3")
        ),
    )
}


def extraction_families() -> list[str]:
    """The families whose module paths the table gives (the rest are introspected), sorted."""
    return sorted(t for t, e in ARCHITECTURES.items() if e.extracts)


def register_architecture(entry: ArchitectureEntry, *, overwrite: bool = False) -> None:
    """Add a model family to the table (``overwrite=True`` to replace one).

    The one registration: extraction, transport (``sublayers``) and weight
    comparability (``tensor_rules``, ``compared_as``, ``causal``) all read the
    entry.
    """
    if entry.model_type in ARCHITECTURES and not overwrite:
        raise ValueError(
            f"model_type {entry.model_type!r} is already in the architecture table; pass overwrite=True to replace it"
        )
    ARCHITECTURES[entry.model_type] = entry
