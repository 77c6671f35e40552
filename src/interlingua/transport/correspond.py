"""Neuron correspondences between two causal LMs, from their activations on parallel probe sentences.

Interfaces
----------
Every decoder whose architecture table entry gives its sublayers
(:attr:`interlingua.data.models.table.ArchitectureEntry.sublayers`) has, in each block,
three sets of units that a neuron correspondence can pair across models of
different widths:

``mlp``
    The MLP hidden units: the INPUT of the MLP's output projection (GPT-2
    ``mlp.c_proj``, GPT-NeoX ``mlp.dense_4h_to_h``, Llama / Mistral / Qwen /
    Gemma ``mlp.down_proj``), i.e. the activations after the non-linearity
    (after the gate product in a gated MLP). Width ``d_ffn``.
``attn``
    The attention output units: the INPUT of the attention output projection
    (GPT-2 ``attn.c_proj``, GPT-NeoX ``attention.dense``, Llama-style
    ``self_attn.o_proj``): the concatenated per-head outputs, width
    ``heads x head size``. This is the residual width for GPT-2, Pythia or
    SmolLM2, not for Gemma 3 270M (4 x 256 = 1024 against a width of 640),
    so it has a plan of its own.
``residual``
    The residual stream: the output of the block (what a forward hook on the
    block returns), width ``d_model``. It is taken before the final norm, also
    for the last block (Hugging Face's last ``hidden_states`` entry is after it).

The blocks come from the architecture table (:func:`interlingua.data.models.
architectures.resolve_architecture`); the modules inside a block from the same
entry's ``sublayers`` (:class:`Sublayers`, paths relative to the block). Activations are captured with
plain forward hooks (pre-hooks on the two projections, a hook on the block),
registered for one pass over the probe set and always removed (try/finally).

Pooling
-------
Sentence level: each unit's activation is averaged over the sentence's tokens
(mean over positions; the tokenizer's special tokens are left out of the mean
as in :func:`interlingua.data.representations.extract.extract`'s default, the model
still sees them; padding never counts). The correspondence is therefore one of
*sentence-mean* activations; token-level correlations (the paper's
alternative) are not computed. Each model reads its own language's side of the
parallel probe set with its own tokenizer: the only thing the two sides share
is the sentence index.

Cost
----
``C[a, b] = 1 - rho(a, b)`` with ``rho`` the Pearson correlation, over the
``N`` probe sentences, between target unit ``a`` and donor unit ``b``
(float64; population standard deviations). A unit that is constant over the
probe set (standard deviation <= 1e-12 times its largest magnitude, or 0) has
no defined correlation: its ``rho`` is taken as 0 (cost 1, the cost of an
unrelated unit) and it is counted in ``constant_target`` / ``constant_donor``.
Costs lie in [0, 2]. At least :data:`MIN_PROBE_SENTENCES` probe sentences are
required (a correlation over fewer is noise); the paper uses 2000, the seed
512.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from interlingua.core.store import canonical_json, sha256_hex
from interlingua.data.models.table import ARCHITECTURES, Sublayers
from interlingua.transport.errors import TransportError

__all__ = [
    "INTERFACES",
    "MIN_PROBE_SENTENCES",
    "BlockModules",
    "ParallelProbe",
    "CostInfo",
    "ProbeActivations",
    "Sublayers",
    "correlation_cost",
    "probe_activations",
    "resolve_blocks",
    "sentences_sha256",
    "check_probe",
]

INTERFACES: tuple[str, ...] = ("mlp", "attn", "residual")
#: Fewest probe sentences a correlation is computed over.
MIN_PROBE_SENTENCES = 10
_CONSTANT_REL = 1e-12


# ====================================================================== modules
@dataclass(frozen=True)
class BlockModules:
    """The resolved modules of one block."""

    block: Any
    mlp_in: dict[str, Any]  # role -> module
    mlp_out: Any
    attn_out: Any
    qkv: tuple[Any, ...]


def _model_type(lm: Any) -> str:
    return str(getattr(getattr(lm, "config", None), "model_type", "") or type(lm).__name__)


def _in_features(module: Any, conv1d: bool) -> int:
    weight = getattr(module, "weight", None)
    if weight is None or weight.dim() != 2:
        raise TransportError(f"{type(module).__name__} has no 2-D weight; it is not a linear projection")
    return int(weight.shape[0] if conv1d else weight.shape[1])


def resolve_blocks(lm: Any) -> tuple[Sublayers, list[BlockModules], Any]:
    """(sublayer entry, the modules of every block, the text module to call) of a causal LM.

    Raises :class:`TransportError` when the family has no sublayer entry (no
    interface to transport through) or a path is missing.
    """
    from interlingua.core.errors import UnsupportedArchitectureError
    from interlingua.data.models.architectures import resolve_architecture

    model_type = _model_type(lm)
    family = ARCHITECTURES.get(model_type)
    entry = family.sublayers if family is not None else None
    if entry is None:
        known = sorted(t for t, e in ARCHITECTURES.items() if e.sublayers is not None)
        raise TransportError(
            f"no shared interface: model_type {model_type!r} has no sublayers in the architecture table (known: "
            f"{', '.join(known)}); transport needs decoder blocks with an MLP and an attention output "
            "projection. Add the family with interlingua.data.models.register_architecture(ArchitectureEntry("
            f"{model_type!r}, ..., sublayers=Sublayers(...)))"
        )
    try:
        arch = resolve_architecture(lm, lm.config)
    except UnsupportedArchitectureError as exc:
        raise TransportError(f"no shared interface: {exc}") from exc
    blocks = []
    for index, block in enumerate(arch.blocks):

        def get(path: str, index: int = index, block: Any = block) -> Any:
            try:
                return block.get_submodule(path)
            except AttributeError:
                raise TransportError(
                    f"no shared interface: block {index} of {model_type!r} has no submodule {path!r} (the "
                    "architecture table's sublayers are wrong for this transformers version or this model)"
                ) from None

        blocks.append(
            BlockModules(
                block,
                {role: get(path) for role, path in entry.mlp_in.items()},
                get(entry.mlp_out),
                get(entry.attn_out),
                tuple(get(p) for p in entry.qkv),
            )
        )
    if not blocks:
        raise TransportError(f"no shared interface: {model_type!r} has no blocks")
    return entry, blocks, arch.text_module


# ====================================================================== activations
def sentences_sha256(sentences: Sequence[str]) -> str:
    """sha256 of a list of sentences (canonical JSON; order matters)."""
    return sha256_hex(canonical_json(list(sentences)))


@dataclass(frozen=True)
class ProbeActivations:
    """Sentence-mean activations of one model on one probe set.

    ``layers[interface][l]``: ``(N, width)`` float64, row ``s`` the mean over
    sentence ``s``'s (non-special) tokens of block ``l``'s units.
    """

    model_type: str
    n_sentences: int
    sentences_sha256: str
    layers: dict[str, list[np.ndarray]]
    n_tokens: np.ndarray
    truncated: tuple[int, ...]
    pooling: str = "mean"
    special_tokens: str = "exclude"
    widths: dict[str, list[int]] = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return len(next(iter(self.layers.values())))


def check_probe(sentences: Sequence[str], what: str) -> list[str]:
    """The probe sentences as a list; :class:`TransportError` unless they are >= MIN_PROBE_SENTENCES strings."""
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TransportError(f"{what} must be a list of sentences, got {type(sentences).__name__}")
    out = list(sentences)
    bad = [i for i, s in enumerate(out) if not isinstance(s, str) or not s.strip()]
    if bad:
        raise TransportError(f"{what}: entries {bad[:10]} are not non-empty strings")
    if len(out) < MIN_PROBE_SENTENCES:
        raise TransportError(
            f"{what} has {len(out)} sentences; a correlation needs at least {MIN_PROBE_SENTENCES} (the paper "
            "uses 2000, seed 003 used 512): give more parallel probe sentences"
        )
    return out


@dataclass(frozen=True)
class ParallelProbe:
    """The two sides of one parallel probe set, checked when made: each model reads its own side (index-aligned)
    with its own tokenizer; the languages only label a fusion's rows."""

    target: Sequence[str]
    """the target model's side (at least ``MIN_PROBE_SENTENCES`` non-empty strings)"""
    donor: Sequence[str]
    """the donor model's side: the same sentences, translated, in the same order"""
    target_language: str = ""
    """the target side's language (a row's ``target_language``; "" when not named)"""
    donor_language: str = ""
    """the donor side's language (a row's ``donor_language``)"""

    def __post_init__(self) -> None:
        target = check_probe(self.target, "probe_target_sentences")
        donor = check_probe(self.donor, "probe_donor_sentences")
        if len(target) != len(donor):
            raise TransportError(
                f"the probe sides have {len(target)} and {len(donor)} sentences; they must be parallel (index by index)"
            )
        object.__setattr__(self, "target", tuple(target))
        object.__setattr__(self, "donor", tuple(donor))


def _first_tensor(args: tuple, kwargs: dict) -> Any:
    import torch

    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value
    raise TransportError("internal: a hooked projection was called without a tensor input")


def probe_activations(
    lm: Any,
    tokenizer: Any,
    sentences: Sequence[str],
    *,
    interfaces: Sequence[str] = INTERFACES,
    batch_size: int = 16,
    max_tokens: int = 8192,
    max_length: int = 512,
) -> ProbeActivations:
    """Sentence-mean activations of ``lm`` (a causal LM) on ``sentences`` at every block's interfaces.

    ``tokenizer`` is the model's own; sentences are tokenized with its special
    tokens, right padded, batched longest first. Raises
    :class:`TransportError` for too few sentences, an unknown family, a
    sentence made only of special tokens, or non-finite activations.
    """
    import torch

    from interlingua.data.representations.extract import (
        length_sorted_batches,
        special_token_ids,
        tokenize_for_extraction,
    )

    sentences = check_probe(sentences, "the probe set")
    wanted = tuple(dict.fromkeys(interfaces))
    unknown = sorted(set(wanted) - set(INTERFACES))
    if unknown or not wanted:
        raise TransportError(f"interfaces must be a non-empty subset of {INTERFACES}, got {list(interfaces)}")
    entry, blocks, text_module = resolve_blocks(lm)
    config = getattr(lm, "config", None)
    for attr in ("n_positions", "max_position_embeddings"):
        limit = getattr(config, attr, None)
        if isinstance(limit, int) and limit >= 1:
            max_length = min(max_length, limit)
            break
    tok = tokenize_for_extraction(tokenizer, sentences, max_length)
    specials = np.fromiter(special_token_ids(tokenizer), dtype=np.int64)
    keep = [~np.isin(np.asarray(ids, dtype=np.int64), specials) for ids in tok.input_ids]
    empty = [i for i, k in enumerate(keep) if not k.any()]
    if empty:
        raise TransportError(f"probe sentences {empty[:10]} consist only of special tokens; drop or fix them")
    n = len(tok.input_ids)
    pad = tokenizer.pad_token_id if getattr(tokenizer, "pad_token_id", None) is not None else 0
    device = next(lm.parameters()).device
    out: dict[str, list[np.ndarray | None]] = {k: [None] * len(blocks) for k in wanted}
    state: dict[str, Any] = {}

    def store(interface: str, layer: int, h: Any) -> None:
        if h.dim() != 3:
            raise TransportError(f"internal: {interface} activations of block {layer} have shape {tuple(h.shape)}")
        pooled = torch.einsum("btw,bt->bw", h.detach().double(), state["weights"]).cpu().numpy()
        if not np.isfinite(pooled).all():
            raise TransportError(
                f"non-finite {interface} activations in block {layer} (model {_model_type(lm)!r}); use float32 "
                "weights or check the checkpoint"
            )
        buf = out[interface][layer]
        if buf is None:
            buf = out[interface][layer] = np.empty((n, pooled.shape[1]), dtype=np.float64)
        buf[state["index"]] = pooled

    def pre_hook(interface: str, layer: int):
        def hook(_module: Any, args: tuple, kwargs: dict) -> None:
            store(interface, layer, _first_tensor(args, kwargs))

        return hook

    def block_hook(layer: int):
        def hook(_module: Any, _args: tuple, output: Any) -> None:
            store("residual", layer, output[0] if isinstance(output, (tuple, list)) else output)

        return hook

    handles = []
    was_training = lm.training
    try:
        for layer, mods in enumerate(blocks):
            if "mlp" in wanted:
                handles.append(mods.mlp_out.register_forward_pre_hook(pre_hook("mlp", layer), with_kwargs=True))
            if "attn" in wanted:
                handles.append(mods.attn_out.register_forward_pre_hook(pre_hook("attn", layer), with_kwargs=True))
            if "residual" in wanted:
                handles.append(mods.block.register_forward_hook(block_hook(layer)))
        lm.eval()
        lengths = [len(ids) for ids in tok.input_ids]
        with torch.inference_mode():
            for batch in length_sorted_batches(lengths, batch_size, max_tokens):
                width = max(lengths[i] for i in batch)
                ids = torch.full((len(batch), width), int(pad), dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                weights = torch.zeros((len(batch), width), dtype=torch.float64)
                for row, i in enumerate(batch):
                    ids[row, : lengths[i]] = torch.tensor(tok.input_ids[i])
                    mask[row, : lengths[i]] = 1
                    w = torch.from_numpy(keep[i].astype(np.float64))
                    weights[row, : lengths[i]] = w / w.sum()
                state["weights"] = weights.to(device)
                state["index"] = np.asarray(batch)
                kwargs: dict[str, Any] = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
                try:
                    text_module(**kwargs, use_cache=False)
                except TypeError:
                    text_module(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
        lm.train(was_training)
    missing = [f"{k} block {i}" for k, layers in out.items() for i, a in enumerate(layers) if a is None]
    if missing:
        raise TransportError(f"internal: no activations were captured for {', '.join(missing[:5])}")
    layers = {k: [np.asarray(a) for a in v] for k, v in out.items()}
    return ProbeActivations(
        model_type=_model_type(lm),
        n_sentences=n,
        sentences_sha256=sentences_sha256(sentences),
        layers=layers,
        n_tokens=np.asarray(lengths, dtype=np.int64),
        truncated=tuple(tok.truncated),
        widths={k: [a.shape[1] for a in v] for k, v in layers.items()},
    )


# ====================================================================== costs
def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0, keepdims=True)
    std = np.sqrt((centred**2).mean(axis=0))
    scale = np.abs(x).max(axis=0) if len(x) else np.zeros(x.shape[1])
    constant = (std <= _CONSTANT_REL * scale) | (std == 0) | ~np.isfinite(std)
    z = np.divide(centred, std, out=np.zeros_like(centred), where=~constant)
    return z, constant


@dataclass(frozen=True)
class CostInfo:
    """What :func:`correlation_cost` saw: sample count and constant units on each side."""

    n_sentences: int
    constant_target: int
    constant_donor: int


def correlation_cost(target: np.ndarray, donor: np.ndarray) -> tuple[np.ndarray, CostInfo]:
    """``C = 1 - rho``: (n_target x n_donor) float64 Pearson costs between the columns of two (N, .) arrays.

    Rows of ``target`` and ``donor`` are the same probe sentences. Constant
    units get ``rho = 0`` (cost 1). Raises :class:`TransportError` for
    mismatched or too few rows, or non-finite values.
    """
    target = np.asarray(target, dtype=np.float64)
    donor = np.asarray(donor, dtype=np.float64)
    if target.ndim != 2 or donor.ndim != 2:
        raise TransportError(f"activations must be 2-D (sentences x units), got {target.shape} and {donor.shape}")
    if target.shape[0] != donor.shape[0]:
        raise TransportError(
            f"the two sides have {target.shape[0]} and {donor.shape[0]} probe sentences; a correspondence needs "
            "the same parallel sentences, index by index"
        )
    if target.shape[0] < MIN_PROBE_SENTENCES:
        raise TransportError(f"{target.shape[0]} probe sentences; at least {MIN_PROBE_SENTENCES} are needed")
    if not (np.isfinite(target).all() and np.isfinite(donor).all()):
        raise TransportError("activations contain NaN or inf")
    zt, ct = _standardise(target)
    zd, cd = _standardise(donor)
    rho = np.clip(zt.T @ zd / target.shape[0], -1.0, 1.0)
    return 1.0 - rho, CostInfo(int(target.shape[0]), int(ct.sum()), int(cd.sum()))
