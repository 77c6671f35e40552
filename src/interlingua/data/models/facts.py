"""Facts recorded with every result."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ModelFacts:
    """What was loaded, recorded next to every result.

    ``revision`` is the resolved commit hash for Hub models when available
    (else the requested revision). ``weights_sha256`` hashes the GGUF file or
    a local folder's safetensors files (None for Hub downloads, which the
    revision identifies). ``last_hidden_state_is_normed`` says whether the
    last hidden state is taken after the final norm. ``loaded_from`` is the
    folder actually read (a GGUF's converted copy after its first load).
    ``adapter_base`` is the base model an adapter records in its
    ``adapter_config.json`` (``base_model_name_or_path``) and
    ``adapter_base_check`` what came of comparing it with the loaded base:
    ``"matched"``, ``"ignored"`` (``adapter_base: ignore``), ``"unrecorded"``
    (the adapter names no base), or None without an adapter.
    """

    name: str
    source: str
    model_type: str
    architecture: str
    base_class: str
    hidden_size: int
    num_layers: int
    num_heads: int | None
    num_kv_heads: int | None
    vocab_size: int | None
    tokenizer_size: int
    embedding_rows: int
    parameter_count: int
    dtype: str
    device: str
    revision: str | None
    weights_sha256: str | None
    gguf_file: str | None
    loaded_from: str
    adapter: str | None
    adapter_sha256: str | None
    tokenizer_class: str
    tokenizer_sha256: str
    pad_token: str | None
    pad_token_source: str
    padding_side: str
    last_hidden_state_is_normed: bool
    architecture_source: str
    blocks_path: str
    embedding_path: str
    final_norm_path: str | None
    adapter_base: str | None = None
    adapter_base_check: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of all facts."""
        return asdict(self)
