"""Where each architecture keeps its embedding, blocks and final norm, found on a loaded model.

The table itself is data in :mod:`.table` (torch-free).

Paths are relative to the BASE transformer module (``GPT2Model``,
``LlamaModel``, ...), the module that :func:`interlingua.data.models.load_model`
returns as ``LoadedModel.model``. Given a ``*ForCausalLM``, its base model is
taken first (Hugging Face's ``base_model``); multimodal wrappers name the text
model inside the base with ``text_model``. Unknown model types fall back to
introspection (the single ``nn.ModuleList`` whose length equals
``num_hidden_layers``; the embedding from ``get_input_embeddings()``), and so
do the families whose table entry gives no module paths (an entry kept for
transport and weight comparability only: ``qwen2``, ``gemma2``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from interlingua.core.errors import UnsupportedArchitectureError
from interlingua.data.models.table import (
    ARCHITECTURES,
    ArchitectureEntry,
    extraction_families,
    register_architecture,
)

__all__ = [
    "ARCHITECTURES",
    "Architecture",
    "ArchitectureEntry",
    "base_module",
    "register_architecture",
    "resolve_architecture",
    "text_config",
]


@dataclass(frozen=True)
class Architecture:
    """The resolved modules of one loaded model.

    ``text_module`` is the module to call for hidden states (the base
    transformer, or the text model inside a multimodal base). Paths are
    relative to ``text_module``; ``source`` is ``"table"`` or
    ``"introspection"``.
    """

    model_type: str
    text_module: nn.Module
    embedding: nn.Module
    blocks: nn.ModuleList
    final_norm: nn.Module | None
    embedding_path: str
    blocks_path: str
    final_norm_path: str | None
    last_hidden_state_is_normed: bool
    source: str

    @property
    def num_blocks(self) -> int:
        """Number of transformer blocks."""
        return len(self.blocks)


def text_config(config: Any) -> Any:
    """The config describing the text transformer (``text_config`` of multimodal models)."""
    getter = getattr(config, "get_text_config", None)
    return getter() if callable(getter) else config


def base_module(model: nn.Module) -> nn.Module:
    """The base transformer of a Hugging Face model (itself when it has no head)."""
    base = getattr(model, "base_model", None)
    return base if isinstance(base, nn.Module) else model


def _unsupported(model_type: str, why: str) -> UnsupportedArchitectureError:
    known = ", ".join(extraction_families())
    return UnsupportedArchitectureError(
        f"model_type {model_type!r} is not supported: {why}. interlingua knows {known}. "
        "Add the family with interlingua.data.models.register_architecture(ArchitectureEntry("
        f"model_type={model_type!r}, embedding=..., blocks=..., final_norm=..., "
        "last_hidden_state_is_normed=...)) giving module paths relative to the base model, "
        "or use a supported model."
    )


def _get(module: nn.Module, path: str, model_type: str) -> nn.Module:
    try:
        return module.get_submodule(path)
    except AttributeError as exc:
        raise _unsupported(
            model_type,
            f"the architecture table says {path!r} but {type(module).__name__} has no such "
            "submodule (a different transformers version may have renamed it)",
        ) from exc


def _probe_last_state_normed(module: nn.Module, blocks: nn.ModuleList) -> bool:
    """Run two tokens and tell whether the last hidden state differs from the last block's output."""
    captured: dict[str, torch.Tensor] = {}

    def hook(_mod: nn.Module, _inp: Any, out: Any) -> None:
        captured["out"] = out[0] if isinstance(out, (tuple, list)) else out

    handle = blocks[-1].register_forward_hook(hook)
    param = next(module.parameters())
    try:
        with torch.no_grad():
            ids = torch.tensor([[1, 2]], device=param.device)
            states = module(input_ids=ids, output_hidden_states=True).hidden_states
    finally:
        handle.remove()
    return not torch.equal(states[-1], captured["out"])


def _introspect(text_module: nn.Module, n_layers: int, model_type: str) -> Architecture:
    candidates = [
        (name, mod)
        for name, mod in text_module.named_modules()
        if isinstance(mod, nn.ModuleList) and len(mod) == n_layers and name
    ]
    if len(candidates) != 1:
        found = ", ".join(f"{n!r}" for n, _ in candidates) or "none"
        raise _unsupported(
            model_type,
            f"introspection needs exactly one nn.ModuleList of length num_hidden_layers={n_layers} and found {found}",
        )
    blocks_path, blocks = candidates[0]
    getter = getattr(text_module, "get_input_embeddings", None)
    embedding = getter() if callable(getter) else None
    if not isinstance(embedding, nn.Module):
        raise _unsupported(model_type, "get_input_embeddings() returned no embedding module")
    embedding_path = next(n for n, m in text_module.named_modules() if m is embedding)
    norms = [
        (name, child)
        for name, child in text_module.named_children()
        if "norm" in type(child).__name__.lower() or name in {"ln_f", "norm", "final_norm"}
    ]
    norm_path, norm = norms[0] if len(norms) == 1 else (None, None)
    normed = _probe_last_state_normed(text_module, blocks)
    return Architecture(
        model_type,
        text_module,
        embedding,
        blocks,
        norm,
        embedding_path,
        blocks_path,
        norm_path,
        normed,
        "introspection",
    )


def resolve_architecture(model: nn.Module, config: Any) -> Architecture:
    """Find embedding, blocks and final norm of ``model`` (a base model or a model with a head).

    Raises :class:`UnsupportedArchitectureError` when the layout cannot be
    resolved, or when the number of blocks differs from ``num_hidden_layers``.
    """
    model_type = str(getattr(config, "model_type", "") or type(model).__name__)
    base = base_module(model)
    entry = ARCHITECTURES.get(model_type)
    n_layers = getattr(text_config(config), "num_hidden_layers", None)
    if (
        entry is None or entry.embedding is None or entry.blocks is None or entry.last_hidden_state_is_normed is None
    ):  # not in the table, or an entry without module paths: introspect
        if not isinstance(n_layers, int):
            raise _unsupported(model_type, "its config has no integer num_hidden_layers")
        arch = _introspect(base, n_layers, model_type)
    else:
        text_module = _get(base, entry.text_model, model_type) if entry.text_model else base
        blocks = _get(text_module, entry.blocks, model_type)
        if not isinstance(blocks, nn.ModuleList):
            raise _unsupported(model_type, f"{entry.blocks!r} is a {type(blocks).__name__}, not an nn.ModuleList")
        arch = Architecture(
            model_type,
            text_module,
            _get(text_module, entry.embedding, model_type),
            blocks,
            _get(text_module, entry.final_norm, model_type) if entry.final_norm else None,
            entry.embedding,
            entry.blocks,
            entry.final_norm,
            entry.last_hidden_state_is_normed,
            "table",
        )
    if n_layers is not None and arch.num_blocks != n_layers:
        raise UnsupportedArchitectureError(
            f"{model_type!r}: found {arch.num_blocks} blocks at {arch.blocks_path!r} but the "
            f"config says num_hidden_layers={n_layers}; the checkpoint and its config disagree "
            "(check config.json) or the architecture table entry is wrong for this model"
        )
    return arch
