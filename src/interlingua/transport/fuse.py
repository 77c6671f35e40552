"""Fusion: donor weights carried into the target's coordinates through the transport plans.

What is fused
-------------
The target keeps its architecture, tokenizer, embeddings, LM head, norms,
position tables and attention Q / K / V projections (they keep the target's
values for every alpha: across families the attention input side is not
commensurable: fused vs split QKV, head counts, grouped-query K / V). In every
target block ``i`` three kinds of tensors are fused, each on the target units
of its own interface selected by a top-k mask:

* the MLP input projections (rows = MLP units; GPT-2 ``c_fc``, GPT-NeoX
  ``dense_h_to_4h``, Llama-style ``gate_proj`` and ``up_proj``): the masked
  ROWS, and the matching bias entries when both models have a bias;
* the MLP output projection (columns = MLP units; ``c_proj``,
  ``dense_4h_to_h``, ``down_proj``): the masked COLUMNS;
* the attention output projection (columns = attention output units;
  ``attn.c_proj``, ``attention.dense``, ``o_proj``): the masked COLUMNS.

Input projections are matched by role (:class:`interlingua.data.models.table.Sublayers`):
``"in"`` feeds the non-linearity (GPT-2 ``c_fc`` is matched with Llama's
``gate_proj``), ``"up"`` is a gated MLP's linear branch; a role the donor
lacks keeps the target's values (listed in the record as ``kept_roles``).
Biases on the residual side (output and attention-output projections) keep
the target's values; a donor bias the target has no parameter for is not
used.

The transported donor weight
----------------------------
With ``W`` the donor tensor of block ``j`` in out x in layout (GPT-2's
``Conv1D`` is transposed to it and back), ``phi`` / ``psi`` the
row-stochastic output- and input-side maps of the neuron plans of the pair
``(i, j)`` (:mod:`.plans`), and ``P_eff[i, j]`` the layer weights of the
``m`` donor blocks kept for ``i``::

    in-proj   T = sum_j P_eff[i, j] * phi_mlp  @ W_in_j   @ psi_res
    in-bias   t = sum_j P_eff[i, j] * phi_mlp  @ b_in_j
    out-proj  T = sum_j P_eff[i, j] * phi_res  @ W_out_j  @ psi_mlp
    attn-out  T = sum_j P_eff[i, j] * phi_res  @ W_o_j    @ psi_attn

Only the masked rows (in-proj) / columns (out-proj, attn-out) are formed. The
fused entries are ``W_target' = (1 - alpha) W_target + alpha T`` (float64,
cast once to the target's dtype); ``alpha = 0`` reproduces the target's
weights bit for bit, ``alpha`` must lie in [0, 1].

The mask
--------
Per block and interface (``mlp``, ``attn``), the ``top_k`` target units with
the lowest expected transport cost ``sum_j P_eff[i, j] sum_b phi_ij[a, b]
C_ij[a, b]`` under the OT plans (the best-matched units; ties: lower index);
all units when ``top_k`` is None or at least the width. The shuffled control
uses the same mask.

Writing
-------
:func:`build_fused_model` writes a model folder (``save_pretrained``
safetensors + config, the target's tokenizer via its ``save_pretrained``, and
``transport.json``: the recipe, its key, the plan summary, every written
file's sha256). The recipe key (:func:`fusion_key`) is the sha256 of the
canonical JSON of :func:`fusion_recipe`: format, the target's and donor's
content identity (:func:`interlingua.data.models.fingerprint.spec_fingerprint`:
weight and tokenizer files' sha256, or the Hub commit; plus ``config.json``'s
sha256 for local folders), the probe sentences' sha256 on each side, the
epsilon request and its calibration settings, alpha, top_k, m, seed, the
control, the sublayers and layer_sample. The build goes into a temporary
sibling folder renamed to ``out`` when complete (an interrupted build leaves
nothing); an existing non-empty ``out`` is a no-op when it holds an intact
build of the same key, else a :class:`TransportError`.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.core.builds import build_folder, install_build, library_versions, previous_build
from interlingua.core.store import atomic_write, canonical_json, json_safe, sha256_hex
from interlingua.transport.correspond import (
    INTERFACES,
    ParallelProbe,
    ProbeActivations,
    probe_activations,
    resolve_blocks,
    sentences_sha256,
)
from interlingua.transport.errors import TransportError
from interlingua.transport.plans import (
    COST_TOLERANCE,
    EPSILON_GRID,
    EXCESS_TOLERANCE,
    PlanOptions,
    TransportPlans,
    transport_plans,
)

__all__ = [
    "CONTROLS",
    "DEFAULT_TOP_K",
    "FUSION_FORMAT",
    "RECORD_FILE",
    "SUBLAYER_CHOICES",
    "Fusion",
    "FusionOptions",
    "TransportModel",
    "build_fused_model",
    "check_alpha",
    "fusion_key",
    "fusion_recipe",
    "load_transport_model",
    "model_activations",
    "prepare_fusion",
]

#: Part of every recipe key: bump it with any change of a rule or of what a build writes.
FUSION_FORMAT = "interlingua.transport/1"
RECORD_FILE = "transport.json"
SUBLAYER_CHOICES: tuple[str, ...] = ("mlp", "attn")
CONTROLS: tuple[str, ...] = ("ot", "shuffled")
DEFAULT_TOP_K = 128


# ====================================================================== models
@dataclass
class TransportModel:
    """A loaded causal LM with its tokenizer, content identity and cached probe activations."""

    label: str
    lm: Any
    tokenizer: Any
    identity: dict[str, Any]
    spec: Any = None
    activations: dict[tuple[Any, ...], ProbeActivations] = field(default_factory=dict)


def _identity(spec: Any, cache_dir: Any) -> dict[str, Any]:
    from interlingua.core.hashing import file_sha256
    from interlingua.data.models.fingerprint import spec_fingerprint
    from interlingua.data.models.source import resolve_source

    out: dict[str, Any] = {"fingerprint": spec_fingerprint(spec, cache_dir=cache_dir)}
    source = resolve_source(spec, cache_dir, assemble=False)
    config = Path(source.location) / "config.json"
    if source.kind == "local" and source.gguf_file is None and config.is_file():
        out["config_sha256"] = file_sha256(config)
    return out


def load_transport_model(ref: Any, *, label: str | None = None, cache_dir: Any = None) -> TransportModel:
    """A :class:`TransportModel` from a folder / Hub id / :class:`~interlingua.data.models.ModelSpec` (or itself).

    Loaded with :func:`interlingua.data.causal_lm.load_causal_lm` (float32
    unless the spec says otherwise). Adapters are refused (merge them first);
    ``zoo:`` specs must be resolved to their folder first.
    """
    if isinstance(ref, TransportModel):
        return ref
    from interlingua.data.causal_lm import load_causal_lm
    from interlingua.data.models.spec import ModelSpec

    if isinstance(ref, (str, os.PathLike)):
        spec = ModelSpec(path=str(ref))
    elif isinstance(ref, ModelSpec):
        spec = ref
    else:
        raise TransportError(
            f"a model must be a folder, a Hub id, a ModelSpec or a TransportModel, got {type(ref).__name__}"
        )
    if spec.adapter is not None:
        raise TransportError(
            f"model {spec.label!r} has a PEFT adapter; transport fuses plain checkpoints: merge the adapter "
            "(merge_and_unload + save_pretrained) and give that folder"
        )
    lm, tok = load_causal_lm(spec, cache_dir)
    return TransportModel(label or spec.label, lm, tok, _identity(spec, cache_dir), spec)


def model_activations(
    model: TransportModel,
    sentences: Sequence[str],
    *,
    interfaces: Sequence[str] = INTERFACES,
    batch_size: int = 16,
    max_length: int = 512,
) -> ProbeActivations:
    """:func:`~.correspond.probe_activations` of ``model``, cached on it by (sentences, interfaces, max_length)."""
    key = (sentences_sha256(list(sentences)), tuple(interfaces), int(max_length))
    cached = model.activations.get(key)
    if cached is None:
        cached = probe_activations(
            model.lm, model.tokenizer, sentences, interfaces=interfaces, batch_size=batch_size, max_length=max_length
        )
        model.activations[key] = cached
    return cached


# ====================================================================== checks
def check_alpha(alpha: Any) -> float:
    """``alpha`` as a float in [0, 1]; :class:`TransportError` otherwise."""
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, numbers.Real)
        or not math.isfinite(float(alpha))
        or not 0.0 <= float(alpha) <= 1.0
    ):
        raise TransportError(f"alpha must be a number in [0, 1] (0 = the target unchanged), got {alpha!r}")
    return float(alpha)


def check_top_k(top_k: Any) -> int | None:
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral) or int(top_k) < 1:
        raise TransportError(f"top_k must be an int >= 1 (units fused per block) or None (all), got {top_k!r}")
    return int(top_k)


def check_sublayers(sublayers: Any) -> tuple[str, ...]:
    if isinstance(sublayers, str):
        sublayers = (sublayers,)
    out = tuple(dict.fromkeys(sublayers))
    if not out or set(out) - set(SUBLAYER_CHOICES):
        raise TransportError(
            f"sublayers must be a non-empty subset of {SUBLAYER_CHOICES}, got {list(sublayers)}: no shared "
            "interface to fuse through"
        )
    return out


def interfaces_for(sublayers: Sequence[str]) -> tuple[str, ...]:
    """The interfaces whose plans a fusion of ``sublayers`` needs (always the residual)."""
    return tuple(f for f in INTERFACES if f in sublayers or f == "residual")


@dataclass(frozen=True)
class FusionOptions:
    """How one fused model is made, validated once and passed down whole (instead of a keyword list at each level).

    The plans (``m`` donor layers per target layer, ``epsilon``: ``"auto"``, a number or one per interface,
    calibrated to ``tolerance`` / ``excess_tolerance`` over ``grid``, ``layer_sample`` units per layer pair),
    the fusion (``top_k`` units per block, None: all; the fused ``sublayers``), the ``seed``, and the probe's
    forward passes (``max_length``, ``batch_size``); ``ot_device``: where Sinkhorn runs (None: numpy;
    ``"cuda"``: POT's torch backend; not part of a fused model's key). A run builds it from its
    ``transport:`` section (:meth:`interlingua.transport.evaluate.SweepOptions.from_spec`).
    """

    top_k: int | None = DEFAULT_TOP_K
    m: int = 3
    epsilon: Any = "auto"
    seed: int = 0
    sublayers: tuple[str, ...] = SUBLAYER_CHOICES
    layer_sample: int = 256
    tolerance: float = COST_TOLERANCE
    excess_tolerance: float = EXCESS_TOLERANCE
    grid: tuple[float, ...] = EPSILON_GRID
    max_length: int = 512
    batch_size: int = 16
    ot_device: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "top_k", check_top_k(self.top_k))
        object.__setattr__(self, "sublayers", check_sublayers(self.sublayers))
        object.__setattr__(self, "grid", tuple(float(g) for g in self.grid))

    def plan_options(self) -> PlanOptions:
        """The :class:`~interlingua.transport.plans.PlanOptions` of :func:`~interlingua.transport.plans.transport_plans`
        these options set (the interfaces of ``sublayers``; the Sinkhorn solver's defaults)."""
        return PlanOptions(
            epsilon=self.epsilon,
            m=self.m,
            seed=self.seed,
            interfaces=interfaces_for(self.sublayers),
            layer_sample=self.layer_sample,
            tolerance=self.tolerance,
            excess_tolerance=self.excess_tolerance,
            grid=self.grid,
            device=self.ot_device,
        )


# ====================================================================== the fusion
def _canonical(tensor: Any, transposed: bool) -> Any:
    return tensor.T if transposed else tensor


def _np(tensor: Any, transposed: bool = False) -> np.ndarray:
    return _canonical(tensor.detach(), transposed).double().cpu().numpy()


def _top_k(score: np.ndarray, k: int | None) -> np.ndarray:
    if k is None or k >= len(score):
        return np.arange(len(score))
    return np.sort(np.argsort(score, kind="stable")[:k])


@dataclass
class _Slot:
    name: str
    param: Any
    transposed: bool
    axis: int
    index: Any
    original: Any
    transported: dict[str, Any]

    def write(self, values: Any) -> None:
        view = _canonical(self.param.data, self.transposed)
        view.index_copy_(self.axis, self.index, values.to(dtype=view.dtype, device=view.device))


class Fusion:
    """The masked target entries with their transported donor values, per control (``ot``, ``shuffled``).

    :meth:`apply` writes ``(1 - alpha) W + alpha T`` into the target model IN
    PLACE; :meth:`restore` puts the target's values back. ``record`` says what
    was fused (parameters, masks, roles).
    """

    def __init__(
        self, lm: Any, slots: list[_Slot], record: dict[str, Any], masks: dict[str, list[list[int]]] | None = None
    ) -> None:
        self.lm = lm
        self.slots = slots
        self.record = record
        self.masks = masks or {}  # interface -> per target block, the fused unit indices
        self.state: tuple[str, float] | None = None

    @property
    def parameters(self) -> list[str]:
        """Names of the target parameters fusion writes to."""
        return sorted({s.name for s in self.slots})

    def transported(self, control: str) -> dict[str, Any]:
        """``{parameter name: [(axis, index, transported values)]}`` of ``control`` (for inspection)."""
        out: dict[str, Any] = {}
        for s in self.slots:
            out.setdefault(s.name, []).append((s.axis, s.index, s.transported[control]))
        return out

    def apply(self, alpha: float, control: str = "ot") -> None:
        import torch

        alpha = check_alpha(alpha)
        if control not in CONTROLS:
            raise TransportError(f"control must be one of {CONTROLS}, got {control!r}")
        with torch.no_grad():
            for s in self.slots:
                s.write(s.original * (1.0 - alpha) + s.transported[control] * alpha)
        self.state = (control, alpha)

    def restore(self) -> None:
        import torch

        with torch.no_grad():
            for s in self.slots:
                s.write(s.original)
        self.state = None


def prepare_fusion(
    target: TransportModel,
    donor: TransportModel,
    plans: TransportPlans,
    *,
    top_k: int | None = DEFAULT_TOP_K,
    sublayers: Sequence[str] = SUBLAYER_CHOICES,
    seed: int | None = None,
) -> Fusion:
    """The transported donor values of every masked target entry, for the OT plans and the shuffled control.

    ``seed``: the control's permutation seed (default: the plans' seed).
    Nothing is written to the model until :meth:`Fusion.apply`.
    """
    import torch

    top_k = check_top_k(top_k)
    sublayers = check_sublayers(sublayers)
    missing = [f for f in interfaces_for(sublayers) if f not in plans.interfaces]
    if missing:
        raise TransportError(f"no shared interface: the plans lack {missing} needed to fuse {list(sublayers)}")
    if plans.control != "ot":
        raise TransportError("prepare_fusion takes the OT plans (it derives the shuffled control itself)")
    entry_t, blocks_t, _ = resolve_blocks(target.lm)
    entry_d, blocks_d, _ = resolve_blocks(donor.lm)
    if (len(blocks_t), len(blocks_d)) != (plans.target_layers, plans.donor_layers):
        raise TransportError(
            f"the plans are for {plans.target_layers} x {plans.donor_layers} blocks, the models have "
            f"{len(blocks_t)} x {len(blocks_d)}: they were computed for other models"
        )
    names = {id(p): n for n, p in target.lm.named_parameters()}
    roles = [r for r in entry_t.mlp_in if r in entry_d.mlp_in]
    kept_roles = [r for r in entry_t.mlp_in if r not in entry_d.mlp_in]
    if "mlp" in sublayers and not roles:
        raise TransportError("no shared interface: the two MLPs share no input-projection role")
    slots: list[_Slot] = []
    masks: dict[str, list[list[int]]] = {f: [] for f in sublayers}
    biases: dict[str, str] = {}

    def add_slot(param: Any, transposed: bool, axis: int, index: np.ndarray, values: dict[str, np.ndarray]) -> None:
        idx = torch.as_tensor(index, dtype=torch.long)
        original = _canonical(param.data, transposed).index_select(axis, idx).double().cpu().clone()
        transported = {c: torch.from_numpy(np.ascontiguousarray(v)) for c, v in values.items()}
        for c, t in transported.items():
            if tuple(t.shape) != tuple(original.shape):
                raise TransportError(
                    f"internal: transported {names.get(id(param), '?')} ({c}) has shape {tuple(t.shape)}, the "
                    f"target slice {tuple(original.shape)}"
                )
            if not torch.isfinite(t).all():
                raise TransportError(f"the transported values of {names.get(id(param), '?')} are not finite")
        slots.append(_Slot(names.get(id(param), "?"), param, transposed, axis, idx, original, transported))

    for i, bt in enumerate(blocks_t):
        kept = plans.kept(i)
        mask = {}
        for iface in sublayers:
            score = sum(w * plans.pairs[(i, j)].row_cost[iface] for j, w in kept)
            mask[iface] = _top_k(np.asarray(score), top_k)
            masks[iface].append([int(x) for x in mask[iface]])
        acc: dict[tuple[str, ...], dict[str, np.ndarray]] = {}

        def add(
            key: tuple[str, ...],
            control: str,
            value: np.ndarray,
            acc: dict[tuple[str, ...], dict[str, np.ndarray]] = acc,
        ) -> None:
            slot = acc.setdefault(key, {})
            slot[control] = slot[control] + value if control in slot else value

        for control in CONTROLS:
            for j, w in kept:
                pp = plans.pairs[(i, j)] if control == "ot" else plans.shuffled_pair((i, j), seed)
                bd = blocks_d[j]
                res = pp.plans["residual"]
                phi_res, psi_res = res.phi(), res.psi()
                if "mlp" in sublayers:
                    mlp = pp.plans["mlp"]
                    phi_m, psi_m = mlp.phi_rows(mask["mlp"]), mlp.psi_cols(mask["mlp"])
                    for role in roles:
                        mod = bd.mlp_in[role]
                        add(("in", role, "weight"), control, w * (phi_m @ _np(mod.weight, entry_d.conv1d) @ psi_res))
                        tb = getattr(bt.mlp_in[role], "bias", None)
                        db = getattr(mod, "bias", None)
                        if tb is not None and db is not None:
                            add(("in", role, "bias"), control, w * (phi_m @ _np(db)))
                    add(("out", "weight"), control, w * (phi_res @ _np(bd.mlp_out.weight, entry_d.conv1d) @ psi_m))
                if "attn" in sublayers:
                    psi_a = pp.plans["attn"].psi_cols(mask["attn"])
                    add(("attn", "weight"), control, w * (phi_res @ _np(bd.attn_out.weight, entry_d.conv1d) @ psi_a))
        for key, values in acc.items():
            if key[0] == "in":
                module = bt.mlp_in[key[1]]
                if key[2] == "weight":
                    add_slot(module.weight, entry_t.conv1d, 0, mask["mlp"], values)
                else:
                    add_slot(module.bias, False, 0, mask["mlp"], values)
                    biases[f"{key[1]}"] = "fused"
            elif key[0] == "out":
                add_slot(bt.mlp_out.weight, entry_t.conv1d, 1, mask["mlp"], values)
            else:
                add_slot(bt.attn_out.weight, entry_t.conv1d, 1, mask["attn"], values)
    record = {
        "sublayers": list(sublayers),
        "top_k": top_k,
        "fused_roles": roles,
        "kept_roles": kept_roles,
        "in_biases_fused": sorted(biases),
        "mask_sizes": {f: [len(x) for x in v] for f, v in masks.items()},
        "parameters": sorted({s.name for s in slots}),
    }
    return Fusion(target.lm, slots, record, masks)


# ====================================================================== recipes and writing
def _epsilon_json(epsilon: Any) -> Any:
    if isinstance(epsilon, Mapping):
        return {str(k): _epsilon_json(v) for k, v in sorted(epsilon.items())}
    return epsilon if epsilon == "auto" else float(epsilon)


def fusion_recipe(
    target: TransportModel,
    donor: TransportModel,
    probe: ParallelProbe,
    *,
    alpha: float,
    control: str = "ot",
    options: FusionOptions | None = None,
) -> dict[str, Any]:
    """The validated recipe of one fused model (what its key and ``transport.json`` record); ``probe``: the
    parallel probe set the plans are made from (its languages are not part of the recipe)."""
    o = FusionOptions() if options is None else options
    if control not in CONTROLS:
        raise TransportError(f"control must be one of {CONTROLS}, got {control!r}")
    probe_t, probe_d = list(probe.target), list(probe.donor)
    return {
        "format": FUSION_FORMAT,
        "target": target.identity,
        "donor": donor.identity,
        "probe": {
            "target_sha256": sentences_sha256(probe_t),
            "donor_sha256": sentences_sha256(probe_d),
            "n": len(probe_t),
            "pooling": "mean",
            "special_tokens": "exclude",
            "max_length": int(o.max_length),
        },
        "epsilon": _epsilon_json(o.epsilon),
        "tolerance": float(o.tolerance),
        "excess_tolerance": float(o.excess_tolerance),
        "grid": list(o.grid),
        "alpha": check_alpha(alpha),
        "control": control,
        "top_k": o.top_k,
        "m": int(o.m),
        "seed": int(o.seed),
        "sublayers": list(o.sublayers),
        "layer_sample": int(o.layer_sample),
    }


def fusion_key(recipe: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of a :func:`fusion_recipe`."""
    return sha256_hex(canonical_json(dict(recipe)))


def _versions() -> dict[str, str]:
    return library_versions(("interlingua", "pot", "numpy", "torch", "transformers", "safetensors"))


def _unwritable(parent: Path, exc: OSError) -> TransportError:
    return TransportError(f"cannot write under {parent} ({exc.strerror or exc}); choose a writable folder")


def _previous_build(out: Path, key: str) -> dict[str, Any] | None:
    return previous_build(out, RECORD_FILE, key)


@contextmanager
def _quiet() -> Iterator[None]:
    """transformers' progress bars and warnings off (a build writes many small folders)."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _refuse(out: Path) -> TransportError:
    return TransportError(
        f"{out} exists and holds something other than an identical transport build (another recipe or other "
        "inputs, other files, or a damaged build); choose another output folder or delete it"
    )


def write_fused(
    out: str | os.PathLike[str],
    target: TransportModel,
    fusion: Fusion,
    recipe: dict[str, Any],
    plans: TransportPlans,
) -> dict[str, Any]:
    """Write the fused model of ``recipe`` (its alpha and control) as a model folder, atomically."""
    from interlingua.core.hashing import file_sha256

    key = fusion_key(recipe)
    out = Path(out).expanduser()
    if out.exists():
        if not out.is_dir():
            raise TransportError(f"the output {out} exists and is a file; give a folder path")
        if any(out.iterdir()):
            previous = _previous_build(out, key)
            if previous is None:
                raise _refuse(out)
            return previous
    with build_folder(out, _unwritable) as tmp:
        fusion.apply(recipe["alpha"], recipe["control"])
        try:
            with _quiet():
                target.lm.save_pretrained(str(tmp))
        finally:
            fusion.restore()
        if not list(tmp.glob("*.safetensors")):
            raise TransportError(f"internal: save_pretrained wrote no safetensors file into {tmp}")
        target.tokenizer.save_pretrained(str(tmp))
        record: dict[str, Any] = {
            "format": FUSION_FORMAT,
            "key": key,
            "recipe": recipe,
            "target": target.label,
            "fusion": fusion.record,
            "plans": json_safe(plans.summary()),
            "ot_device": plans.device,
            "libraries": _versions(),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        record["files"] = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        atomic_write(tmp / RECORD_FILE, (json.dumps(json_safe(record), indent=1, sort_keys=True) + "\n").encode())
        existing = install_build(tmp, out, RECORD_FILE, key, _refuse)  # nothing at out is ever replaced
        if existing is not None:
            return existing
    return json.loads((out / RECORD_FILE).read_text(encoding="utf-8"))


def build_fused_model(
    target: Any,
    donor: Any,
    probe: ParallelProbe,
    out: str | os.PathLike[str],
    *,
    alpha: float,
    control: str = "ot",
    options: FusionOptions | None = None,
    cache_dir: Any = None,
) -> dict[str, Any]:
    """Fuse ``donor`` into ``target`` at ``alpha`` (through the OT or the shuffled plans) and write ``out``.

    ``target`` / ``donor``: folders, Hub ids, ModelSpecs or loaded
    :class:`TransportModel` s; each reads its own side of the parallel probe
    set ``probe`` (:class:`~interlingua.transport.correspond.ParallelProbe`). ``options``: how the plans and
    the fusion are made (:class:`FusionOptions`; default: its defaults).
    Returns the ``transport.json`` record. See the module docstring.
    """
    o = FusionOptions() if options is None else options
    tm = load_transport_model(target, cache_dir=cache_dir)
    dm = load_transport_model(donor, cache_dir=cache_dir)
    recipe = fusion_recipe(tm, dm, probe, alpha=alpha, control=control, options=o)
    out_path = Path(out).expanduser()
    if out_path.is_dir() and any(out_path.iterdir()):
        previous = _previous_build(out_path, fusion_key(recipe))
        if previous is None:
            raise _refuse(out_path)
        return previous
    interfaces = interfaces_for(o.sublayers)
    at = model_activations(
        tm, list(probe.target), interfaces=interfaces, batch_size=o.batch_size, max_length=o.max_length
    )
    ad = model_activations(
        dm, list(probe.donor), interfaces=interfaces, batch_size=o.batch_size, max_length=o.max_length
    )
    plans = transport_plans(at, ad, o.plan_options())
    fusion = prepare_fusion(tm, dm, plans, top_k=o.top_k, sublayers=o.sublayers, seed=o.seed)
    return write_fused(out_path, tm, fusion, recipe, plans)
