"""The architecture table as data: where each model family keeps its modules.

Torch-free, so that pre-flight checks and config validation can consult it
without importing torch (:mod:`.architectures` resolves the entries against a
loaded module).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchitectureEntry:
    """Module paths of one model family, relative to its base transformer.

    ``last_hidden_state_is_normed``: whether the last entry of
    ``output_hidden_states`` is taken AFTER the final norm (True for the
    decoder families in transformers 5.x; a forward hook on the last block
    sees the pre-norm residual instead). ``causal``: loaded as a causal LM
    when a PEFT adapter is applied (encoders load with ``AutoModel``).
    """

    model_type: str
    embedding: str
    blocks: str
    final_norm: str | None
    last_hidden_state_is_normed: bool
    text_model: str | None = None
    causal: bool = True


ARCHITECTURES: dict[str, ArchitectureEntry] = {
    e.model_type: e
    for e in (
        ArchitectureEntry("gpt2", "wte", "h", "ln_f", True),
        ArchitectureEntry("gpt_neox", "embed_in", "layers", "final_layer_norm", True),
        ArchitectureEntry("llama", "embed_tokens", "layers", "norm", True),
        ArchitectureEntry("mistral", "embed_tokens", "layers", "norm", True),
        ArchitectureEntry("gemma3_text", "embed_tokens", "layers", "norm", True),
        ArchitectureEntry("gemma3", "embed_tokens", "layers", "norm", True, text_model="language_model"),
        ArchitectureEntry("bert", "embeddings.word_embeddings", "encoder.layer", None, False, causal=False),
    )
}


def register_architecture(entry: ArchitectureEntry, *, overwrite: bool = False) -> None:
    """Add a model family to the table (``overwrite=True`` to replace one)."""
    if entry.model_type in ARCHITECTURES and not overwrite:
        raise ValueError(
            f"model_type {entry.model_type!r} is already in the architecture table; pass overwrite=True to replace it"
        )
    ARCHITECTURES[entry.model_type] = entry
