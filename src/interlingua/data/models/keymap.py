"""The weight key map as data: tensor names of each family -> canonical keys.

Torch-free (regular expressions only). Every tensor name of a checkpoint is
mapped, by its architecture family, to a *canonical key*: the quantity the
tensor holds, named the same way for every family
(``transformer.h.0.mlp.c_fc.weight`` of GPT-2, ``gpt_neox.layers.0.mlp.
dense_h_to_4h.weight`` of GPT-NeoX and ``model.layers.0.mlp.up_proj.weight``
of Llama are all ``layers.0.mlp.up.weight``), with its part, layout and
fusion. Each family's rules sit in its entry of the architecture table
(:attr:`interlingua.data.models.table.ArchitectureEntry.tensor_rules`);
:mod:`interlingua.mergeability.comparability` applies them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "BERT_RULES",
    "FALLBACK_RULES",
    "GEMMA_RULES",
    "GPT2_RULES",
    "LLAMA_RULES",
    "NEOX_RULES",
    "VISION_RULES",
    "TensorRule",
    "tensor_rule",
]

_P = r"(?P<p>weight|bias)"
_I = r"(?P<i>\d+)"


@dataclass(frozen=True)
class TensorRule:
    """One key-map rule: a tensor name pattern and the canonical key, part, layout and fusion it maps to."""

    pattern: re.Pattern[str]
    key: str  # template with {i} and {p}
    part: str
    layout: str  # for .weight; a bias is always "vector"
    fused: str = ""


def tensor_rule(pattern: str, key: str, part: str, layout: str = "linear", fused: str = "") -> TensorRule:
    """A :class:`TensorRule` matching the whole name ``pattern`` (groups ``i``: block index, ``p``: weight/bias)."""
    return TensorRule(re.compile(rf"^{pattern}$"), key, part, layout, fused)


GPT2_RULES: tuple[TensorRule, ...] = (
    tensor_rule(r"(?:transformer\.)?wte\.weight", "embed.tokens.weight", "embedding", "table"),
    tensor_rule(r"(?:transformer\.)?wpe\.weight", "embed.positions.weight", "positions", "table"),
    tensor_rule(rf"(?:transformer\.)?h\.{_I}\.ln_1\.{_P}", "layers.{i}.norm_attn.{p}", "norm", "vector"),
    tensor_rule(
        rf"(?:transformer\.)?h\.{_I}\.attn\.c_attn\.{_P}",
        "layers.{i}.attn.qkv.{p}",
        "attention",
        "conv1d",
        "qkv-blocks",
    ),
    tensor_rule(rf"(?:transformer\.)?h\.{_I}\.attn\.c_proj\.{_P}", "layers.{i}.attn.out.{p}", "attention", "conv1d"),
    tensor_rule(rf"(?:transformer\.)?h\.{_I}\.ln_2\.{_P}", "layers.{i}.norm_mlp.{p}", "norm", "vector"),
    tensor_rule(rf"(?:transformer\.)?h\.{_I}\.mlp\.c_fc\.{_P}", "layers.{i}.mlp.up.{p}", "mlp", "conv1d"),
    tensor_rule(rf"(?:transformer\.)?h\.{_I}\.mlp\.c_proj\.{_P}", "layers.{i}.mlp.down.{p}", "mlp", "conv1d"),
    tensor_rule(rf"(?:transformer\.)?ln_f\.{_P}", "final_norm.{p}", "norm", "vector"),
    tensor_rule(r"lm_head\.weight", "head.weight", "head", "table"),
)
NEOX_RULES: tuple[TensorRule, ...] = (
    tensor_rule(r"(?:gpt_neox\.)?embed_in\.weight", "embed.tokens.weight", "embedding", "table"),
    tensor_rule(r"embed_out\.weight", "head.weight", "head", "table"),
    tensor_rule(rf"(?:gpt_neox\.)?layers\.{_I}\.input_layernorm\.{_P}", "layers.{i}.norm_attn.{p}", "norm", "vector"),
    tensor_rule(
        rf"(?:gpt_neox\.)?layers\.{_I}\.post_attention_layernorm\.{_P}", "layers.{i}.norm_mlp.{p}", "norm", "vector"
    ),
    tensor_rule(
        rf"(?:gpt_neox\.)?layers\.{_I}\.attention\.query_key_value\.{_P}",
        "layers.{i}.attn.qkv.{p}",
        "attention",
        "linear",
        "qkv-per-head",
    ),
    tensor_rule(rf"(?:gpt_neox\.)?layers\.{_I}\.attention\.dense\.{_P}", "layers.{i}.attn.out.{p}", "attention"),
    tensor_rule(rf"(?:gpt_neox\.)?layers\.{_I}\.mlp\.dense_h_to_4h\.{_P}", "layers.{i}.mlp.up.{p}", "mlp"),
    tensor_rule(rf"(?:gpt_neox\.)?layers\.{_I}\.mlp\.dense_4h_to_h\.{_P}", "layers.{i}.mlp.down.{p}", "mlp"),
    tensor_rule(rf"(?:gpt_neox\.)?final_layer_norm\.{_P}", "final_norm.{p}", "norm", "vector"),
)
_LLAMA_PREFIX = r"(?:model\.language_model\.|language_model\.model\.|model\.)?"
_LLAMA_COMMON = (
    tensor_rule(rf"{_LLAMA_PREFIX}embed_tokens\.weight", "embed.tokens.weight", "embedding", "table"),
    tensor_rule(r"(?:language_model\.)?lm_head\.weight", "head.weight", "head", "table"),
    tensor_rule(rf"{_LLAMA_PREFIX}norm\.{_P}", "final_norm.{p}", "norm", "vector"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.self_attn\.q_proj\.{_P}", "layers.{i}.attn.q.{p}", "attention"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.self_attn\.k_proj\.{_P}", "layers.{i}.attn.k.{p}", "attention"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.self_attn\.v_proj\.{_P}", "layers.{i}.attn.v.{p}", "attention"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.self_attn\.o_proj\.{_P}", "layers.{i}.attn.out.{p}", "attention"),
    tensor_rule(
        rf"{_LLAMA_PREFIX}layers\.{_I}\.self_attn\.q_norm\.{_P}", "layers.{i}.attn.q_norm.{p}", "attention", "vector"
    ),
    tensor_rule(
        rf"{_LLAMA_PREFIX}layers\.{_I}\.self_attn\.k_norm\.{_P}", "layers.{i}.attn.k_norm.{p}", "attention", "vector"
    ),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.mlp\.gate_proj\.{_P}", "layers.{i}.mlp.gate.{p}", "mlp"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.mlp\.up_proj\.{_P}", "layers.{i}.mlp.up.{p}", "mlp"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.mlp\.down_proj\.{_P}", "layers.{i}.mlp.down.{p}", "mlp"),
    tensor_rule(rf"{_LLAMA_PREFIX}layers\.{_I}\.input_layernorm\.{_P}", "layers.{i}.norm_attn.{p}", "norm", "vector"),
)
LLAMA_RULES: tuple[TensorRule, ...] = (
    *_LLAMA_COMMON,
    tensor_rule(
        rf"{_LLAMA_PREFIX}layers\.{_I}\.post_attention_layernorm\.{_P}", "layers.{i}.norm_mlp.{p}", "norm", "vector"
    ),
)
GEMMA_RULES: tuple[TensorRule, ...] = (
    *_LLAMA_COMMON,
    tensor_rule(
        rf"{_LLAMA_PREFIX}layers\.{_I}\.post_attention_layernorm\.{_P}",
        "layers.{i}.norm_attn_out.{p}",
        "norm",
        "vector",
    ),
    tensor_rule(
        rf"{_LLAMA_PREFIX}layers\.{_I}\.pre_feedforward_layernorm\.{_P}", "layers.{i}.norm_mlp.{p}", "norm", "vector"
    ),
    tensor_rule(
        rf"{_LLAMA_PREFIX}layers\.{_I}\.post_feedforward_layernorm\.{_P}",
        "layers.{i}.norm_mlp_out.{p}",
        "norm",
        "vector",
    ),
)
VISION_RULES: tuple[TensorRule, ...] = (
    tensor_rule(
        r"(?:model\.)?(?P<rest>(?:vision_tower|vision_model|multi_modal_projector)\..+)",
        "vision:{rest}",
        "vision",
        "linear",
    ),
)
BERT_RULES: tuple[TensorRule, ...] = (
    tensor_rule(r"(?:bert\.)?embeddings\.word_embeddings\.weight", "embed.tokens.weight", "embedding", "table"),
    tensor_rule(r"(?:bert\.)?embeddings\.position_embeddings\.weight", "embed.positions.weight", "positions", "table"),
    tensor_rule(
        r"(?:bert\.)?embeddings\.token_type_embeddings\.weight", "embed.token_types.weight", "embedding", "table"
    ),
    tensor_rule(rf"(?:bert\.)?embeddings\.LayerNorm\.{_P}", "embed.norm.{p}", "norm", "vector"),
    tensor_rule(
        rf"(?:bert\.)?encoder\.layer\.{_I}\.attention\.self\.query\.{_P}", "layers.{i}.attn.q.{p}", "attention"
    ),
    tensor_rule(rf"(?:bert\.)?encoder\.layer\.{_I}\.attention\.self\.key\.{_P}", "layers.{i}.attn.k.{p}", "attention"),
    tensor_rule(
        rf"(?:bert\.)?encoder\.layer\.{_I}\.attention\.self\.value\.{_P}", "layers.{i}.attn.v.{p}", "attention"
    ),
    tensor_rule(
        rf"(?:bert\.)?encoder\.layer\.{_I}\.attention\.output\.dense\.{_P}", "layers.{i}.attn.out.{p}", "attention"
    ),
    tensor_rule(
        rf"(?:bert\.)?encoder\.layer\.{_I}\.attention\.output\.LayerNorm\.{_P}",
        "layers.{i}.norm_attn_out.{p}",
        "norm",
        "vector",
    ),
    tensor_rule(rf"(?:bert\.)?encoder\.layer\.{_I}\.intermediate\.dense\.{_P}", "layers.{i}.mlp.up.{p}", "mlp"),
    tensor_rule(rf"(?:bert\.)?encoder\.layer\.{_I}\.output\.dense\.{_P}", "layers.{i}.mlp.down.{p}", "mlp"),
    tensor_rule(
        rf"(?:bert\.)?encoder\.layer\.{_I}\.output\.LayerNorm\.{_P}", "layers.{i}.norm_mlp_out.{p}", "norm", "vector"
    ),
    tensor_rule(rf"(?:bert\.)?pooler\.dense\.{_P}", "pooler.{p}", "other"),
)

#: The rules an unknown family's tensors are tried with (a Llama-like decoder, maybe with a vision tower).
FALLBACK_RULES: tuple[TensorRule, ...] = (*LLAMA_RULES, *VISION_RULES)
