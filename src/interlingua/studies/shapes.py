"""Published shapes of the study models, for pricing a study without the Hub (``plan --offline``).

``interlingua plan`` reads a model's shape from its ``config.json``, which needs the Hub (or a download).
Offline, the studies' models are priced from this table instead: each entry is the architecture the model's
published ``config.json`` declares (as the source studies recorded it, and docs/protocol's model facts), and
the bytes per parameter of its published weight files. Parameters and download sizes are COMPUTED from these
shapes (the same formula as :func:`interlingua.pipeline.cost._from_config`, plus the embedding and LM-head rows), not
read from the Hub: a real ``interlingua plan`` where the Hub is reachable replaces them with the files' own
sizes. Bytes per parameter marked ``assumed`` were not recorded by the studies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PUBLISHED", "PublishedShape", "published_shape"]


@dataclass(frozen=True)
class PublishedShape:
    """A model's published architecture and weight format (see the module docstring for what is computed)."""

    model_type: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int  # embedding rows
    tied: bool  # LM head shares the embedding matrix
    bytes_per_param: int
    bytes_note: str  # "published" or "assumed"

    def config(self) -> dict[str, Any]:
        """The shape as ``config.json`` keys (what :func:`interlingua.pipeline.cost._from_config` reads)."""
        return {
            "model_type": self.model_type,
            "hidden_size": self.hidden,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "intermediate_size": self.ffn,
            "vocab_size": self.vocab,
        }

    @property
    def block_params(self) -> int:
        from interlingua.pipeline.cost import _from_config

        found = _from_config(self.config())
        assert found is not None
        return int(found["params"])

    @property
    def total_params(self) -> int:
        """Blocks plus the embedding (and an untied LM head); norms and biases left out (under 0.1%)."""
        return self.block_params + self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def weight_bytes(self) -> int:
        return self.total_params * self.bytes_per_param


_GF_BIG = PublishedShape("gpt2", 768, 12, 12, 12, 3072, 51200, True, 4, "assumed (float32)")
_GF_SMALL = PublishedShape("gpt2", 512, 4, 8, 8, 2048, 51200, True, 4, "assumed (float32)")

#: Hub id -> published shape. Goldfish: 100mb/1000mb tiers GPT-2 12 x 768, 5mb/10mb tiers 4 x 512, embedding
#: padded to 51 200 rows. The five ~1B models as their configs declare them (Bielik: `llama`, 32 layers).
PUBLISHED: dict[str, PublishedShape] = {
    "EleutherAI/pythia-1.4b": PublishedShape(
        "gpt_neox", 2048, 24, 16, 16, 8192, 50304, False, 2, "published (float16)"
    ),
    "SJTU-CL/Zh-Pythia-1.4B": PublishedShape("gpt_neox", 2048, 24, 16, 16, 8192, 49953, False, 2, "assumed (float16)"),
    "TucanoBR/Tucano-1b1": PublishedShape("llama", 2048, 22, 32, 4, 5632, 32000, False, 2, "assumed (bfloat16)"),
    "speakleash/Bielik-1.5B-v3": PublishedShape("llama", 1536, 32, 12, 2, 8960, 32000, False, 2, "assumed (bfloat16)"),
    "sapienzanlp/Minerva-1B-base-v1.0": PublishedShape(
        "mistral", 2048, 16, 16, 4, 7168, 32768, False, 2, "assumed (bfloat16)"
    ),
    "google-bert/bert-base-multilingual-cased": PublishedShape(
        "bert", 768, 12, 12, 12, 3072, 119547, True, 4, "published (float32)"
    ),
}


def published_shape(repo_id: str) -> PublishedShape | None:
    """The table's shape of ``repo_id`` (Goldfish ids by their tier), or None when the table has none."""
    if repo_id in PUBLISHED:
        return PUBLISHED[repo_id]
    owner, _, name = repo_id.partition("/")
    if owner == "goldfish-models":
        tier = name.rsplit("_", 1)[-1]
        if tier in ("100mb", "1000mb"):
            return _GF_BIG
        if tier in ("5mb", "10mb"):
            return _GF_SMALL
    return None
