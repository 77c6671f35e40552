"""What :func:`~interlingua.data.representations.extract` reads hidden states from: bring your own model.

``extract`` accepts

- an interlingua :class:`~interlingua.data.models.LoadedModel` (or any object with
  ``.model``, ``.tokenizer`` and ``.n_hidden_states``), used as it is;
- a Hugging Face ``transformers`` model, with its head (``LlamaForCausalLM``)
  or without (``LlamaModel``), or a PEFT model, plus ``tokenizer=`` (the
  tokenizer object): the base transformer is found with the architecture table
  (:func:`interlingua.data.models.resolve_architecture`, so a multimodal Gemma 3
  reads its text model) and a COPY of the tokenizer is prepared the way
  :func:`~interlingua.data.models.load_model` prepares its own (pad = eos when
  there is no pad token, right padding, the embedding never resized), so the
  result is the one a ``load_model`` of the same checkpoint gives, bit for bit;
- a TransformerLens ``HookedTransformer`` (its own tokenizer, or
  ``tokenizer=``): the residual stream read from its hooks, in the Hugging Face
  convention (index 0 the embedding output ``blocks.0.hook_resid_pre``, index
  k < L ``blocks.{k-1}.hook_resid_post``, index L the final norm's output);
- an nnsight model (``LanguageModel``, ``TransformersModel`` or ``NNsight``) wrapping a Hugging Face model,
  with its ``.tokenizer`` (or ``tokenizer=``): read through the module it wraps, as above, so the states are
  the plain Hugging Face path's, bit for bit. nnsight's envoys pass a call made outside a trace straight to
  the module; a model nnsight built on the meta device (``LanguageModel(repo_id)`` without
  ``dispatch=True``) is dispatched first, as its first trace would dispatch it.

Nothing of the caller's is changed: the tokenizer is copied, and the model's
train/eval flags are restored after the forward passes (extraction runs in
eval mode, so dropout never touches the states).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import torch
from torch import nn

from interlingua.core.errors import ModelError

__all__ = ["Extractable", "as_extractable", "blocks_of", "eval_mode"]

ACCEPTED = (
    "extract() reads an interlingua LoadedModel (interlingua.data.models.load_model(ModelSpec(path=...))), a Hugging "
    "Face transformers model with tokenizer=AutoTokenizer.from_pretrained(...), or a TransformerLens "
    "HookedTransformer, or an nnsight LanguageModel / TransformersModel wrapping a Hugging Face model"
)


@dataclass(frozen=True)
class Extractable:
    """The module to call, its tokenizer, how many hidden states it returns, its embedding rows (if known),
    and its blocks in calling order (if known: :func:`~interlingua.data.representations.depth.states_through`
    stops a forward pass at one of them)."""

    model: nn.Module
    tokenizer: Any
    n_hidden_states: int
    embedding_rows: int | None = None
    blocks: nn.ModuleList | None = None


def _is_loaded(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("model", "tokenizer", "n_hidden_states"))


def _is_hooked_transformer(obj: Any) -> bool:
    """A TransformerLens ``HookedTransformer`` (by class, so TransformerLens is never imported here)."""
    return any(
        c.__name__ == "HookedTransformer" and c.__module__.startswith("transformer_lens") for c in type(obj).__mro__
    )


def _is_nnsight(obj: Any) -> bool:
    """An nnsight envoy (``NNsight``, ``LanguageModel``, ...), by class, so nnsight is never imported here."""
    return any(c.__name__ == "Envoy" and c.__module__.startswith("nnsight") for c in type(obj).__mro__)


def _from_nnsight(obj: Any, tokenizer: Any) -> Extractable:
    """The Hugging Face model an nnsight envoy wraps, with the envoy's tokenizer unless ``tokenizer=`` is given."""
    from transformers import PreTrainedModel

    if getattr(obj, "dispatched", True) is False:
        obj.dispatch()  # built on the meta device: load the real weights, as nnsight's first trace does
    inner = _peft_base(getattr(obj, "_module", None))
    if not isinstance(inner, PreTrainedModel):
        raise ModelError(
            f"extract() reads an nnsight model that wraps a Hugging Face transformers model; this "
            f"{type(obj).__name__} wraps a {type(inner).__name__}; wrap the model loaded with "
            "AutoModelForCausalLM.from_pretrained(...) instead: LanguageModel(model, tokenizer=tokenizer)"
        )
    if any(p.is_meta for p in inner.parameters()):
        raise ModelError(
            f"the nnsight {type(obj).__name__}'s weights are still on the meta device; build it with "
            "dispatch=True (or call .dispatch()) before extract()"
        )
    return _from_hf(inner, tokenizer if tokenizer is not None else getattr(obj, "tokenizer", None))


def _peft_base(obj: Any) -> Any:
    """The Hugging Face model inside a PEFT wrapper (its injected LoRA layers still run), else ``obj``."""
    peft = sys.modules.get("peft")
    cls = getattr(peft, "PeftModel", None) if peft is not None else None
    is_peft = isinstance(cls, type) and isinstance(obj, cls)
    return obj.get_base_model() if is_peft else obj


def _tokenizer_object(tokenizer: Any, model: Any) -> Any:
    """``tokenizer`` as a Hugging Face tokenizer (a processor's ``.tokenizer`` too); a clear error otherwise."""
    from transformers import PreTrainedTokenizerBase

    where = getattr(model, "name_or_path", "") or "the model's folder or Hub id"
    if tokenizer is None:
        raise ModelError(
            f"extract() got a {type(model).__name__} without a tokenizer; pass "
            f"tokenizer=AutoTokenizer.from_pretrained({where!r}) (the tokenizer the model was trained with)"
        )
    inner = getattr(tokenizer, "tokenizer", None)
    if not isinstance(tokenizer, PreTrainedTokenizerBase) and isinstance(inner, PreTrainedTokenizerBase):
        tokenizer = inner  # an AutoProcessor: its text tokenizer
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise ModelError(
            f"tokenizer= must be a Hugging Face tokenizer object, got {type(tokenizer).__name__}; pass "
            f"tokenizer=AutoTokenizer.from_pretrained({where!r})"
        )
    return tokenizer


def _prepared_copy(tokenizer: Any, embedding_rows: int) -> Any:
    """A copy of ``tokenizer`` with pad token and right padding, as ``load_model`` sets them."""
    from interlingua.data.models.loading import prepare_tokenizer

    own = copy.deepcopy(tokenizer)
    prepare_tokenizer(own, embedding_rows)
    return own


def _from_hf(model: nn.Module, tokenizer: Any) -> Extractable:
    from interlingua.data.models.architectures import resolve_architecture

    config = getattr(model, "config", None)
    arch = resolve_architecture(model, config)  # UnsupportedArchitectureError names how to register one
    rows = int(cast(torch.Tensor, arch.embedding.weight).shape[0])  # an embedding's (rows, width)
    tok = _prepared_copy(_tokenizer_object(tokenizer, model), rows)
    return Extractable(arch.text_module, tok, arch.num_blocks + 1, rows, arch.blocks)


class HookedResidualStream(nn.Module):
    """A TransformerLens ``HookedTransformer`` called like a Hugging Face base model.

    ``forward(input_ids, attention_mask, output_hidden_states=True)`` returns an
    object whose ``hidden_states`` are the residual stream at every block
    boundary, from ``run_with_cache``: ``blocks.0.hook_resid_pre`` (embedding
    plus positional embedding), ``blocks.k.hook_resid_post`` for k < L - 1, and
    the final norm applied to the last block's output (what Hugging Face
    returns last), so the layer indices mean what they mean for a HF model.
    """

    def __init__(self, hooked: Any) -> None:
        super().__init__()
        self.hooked = hooked
        self.n_layers = int(hooked.cfg.n_layers)
        self.config = SimpleNamespace(n_positions=int(hooked.cfg.n_ctx))
        self._names = ["blocks.0.hook_resid_pre", *(f"blocks.{k}.hook_resid_post" for k in range(self.n_layers))]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any) -> SimpleNamespace:
        names = set(self._names)
        _, cache = self.hooked.run_with_cache(
            input_ids, attention_mask=attention_mask, return_type=None, names_filter=lambda n: n in names
        )
        states = [cache[name] for name in self._names]
        final = getattr(self.hooked, "ln_final", None)
        if final is not None:
            states[-1] = final(states[-1])
        return SimpleNamespace(hidden_states=tuple(states))


def _from_hooked(hooked: Any, tokenizer: Any) -> Extractable:
    tok = _tokenizer_object(tokenizer if tokenizer is not None else getattr(hooked, "tokenizer", None), hooked)
    embed = getattr(getattr(hooked, "embed", None), "W_E", None)
    rows = int(embed.shape[0]) if isinstance(embed, torch.Tensor) else int(hooked.cfg.d_vocab)
    wrapper = HookedResidualStream(hooked)
    return Extractable(wrapper, _prepared_copy(tok, rows), wrapper.n_layers + 1, rows)


def forward_module(model: torch.nn.Module) -> torch.nn.Module:
    """Return the base transformer of a Hugging Face model with a head, else ``model``.

    ``load_model`` already hands over the base module; this guard keeps a
    ``*ForCausalLM`` passed by a user from computing logits nobody reads.
    """
    from transformers import PreTrainedModel

    if isinstance(model, PreTrainedModel):
        base = model.base_model
        if isinstance(base, torch.nn.Module) and base is not model:
            return base
    return model


def blocks_of(loaded: Any, module: nn.Module) -> nn.ModuleList | None:
    """The loaded model's resolved blocks when ``module`` runs them (``None``: unknown, run every block)."""
    blocks = getattr(getattr(loaded, "arch", None), "blocks", None)
    if not isinstance(blocks, nn.ModuleList) or len(blocks) != int(loaded.n_hidden_states) - 1:
        return None
    return blocks if any(m is blocks for m in module.modules()) else None


def as_extractable(obj: Any, tokenizer: Any = None) -> Extractable:
    """What :func:`extract` calls for ``obj`` (see the module docstring); :class:`ModelError` if it cannot."""
    from transformers import PreTrainedModel

    if _is_nnsight(obj):  # first: an envoy forwards attribute reads (.model) to the module it wraps
        return _from_nnsight(obj, tokenizer)
    if _is_loaded(obj):
        if tokenizer is not None:
            raise ModelError(
                f"extract() got a {type(obj).__name__}, which carries its own tokenizer, and tokenizer=; drop "
                "tokenizer= (or load the model with ModelSpec(tokenizer=...) to use another one)"
            )
        module = forward_module(obj.model)
        return Extractable(module, obj.tokenizer, int(obj.n_hidden_states), blocks=blocks_of(obj, module))
    if _is_hooked_transformer(obj):
        return _from_hooked(obj, tokenizer)
    hf = _peft_base(obj)
    if isinstance(hf, PreTrainedModel):
        return _from_hf(hf, tokenizer)
    hint = ""
    if isinstance(obj, (str, bytes)) or hasattr(obj, "__fspath__"):
        hint = f"; for a folder or Hub id use load_model(ModelSpec(path={str(obj)!r}))"
    elif type(obj).__module__.startswith("transformer_lens"):  # e.g. TransformerLens 4's TransformerBridge
        hint = (
            "; a TransformerLens model other than HookedTransformer is read through the Hugging Face model it "
            "wraps: extract(bridge.original_model, ..., tokenizer=bridge.tokenizer)"
        )
    raise ModelError(f"{ACCEPTED}; got a {type(obj).__name__}{hint}")


@contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    """``module`` in eval mode (no dropout) for the block; every submodule's own flag restored after."""
    flags = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in flags:
            m.training = training
