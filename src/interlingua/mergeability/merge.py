"""Merge operators on checkpoints of one architecture: linear, SLERP, task arithmetic, TIES, DARE.

The operators follow mergekit (0.1.5, ``mergekit/merge_methods/linear.py``,
``slerp.py``, ``generalized_task_arithmetic.py``, ``mergekit/sparsify.py``;
tests compare them with mergekit's own outputs). Per tensor, with inputs
``x_1 .. x_n`` (the same tensor of each model), weights ``w_i``, the base
(shared ancestor) ``x_0``, and all arithmetic in float64, cast once to the
first model's dtype (``linear``: in float32, as mergekit, see below):

``linear`` (base-free)
    ``sum_i w_i x_i / sum_i w_i`` (``normalize=True``, default) or
    ``sum_i w_i x_i``. Weights default to 1 each (the mean). Two models with
    weights ``(1 - t, t)`` is the lerp. A build computes it as mergekit does,
    in float32 (float64 inputs: float64; ``_linear_into``), each product
    rounded before it is added: equal to the float64 formula
    (:func:`merge_tensors`) to float32 rounding, at float32 speed.
``slerp`` (base-free, two models, ``t`` in [0, 1]; ``t = 0`` gives the first)
    Over the whole flattened tensor: ``u = x_1 / |x_1|``, ``v = x_2 / |x_2|``
    (a norm <= 1e-8 is taken as 1), ``d = clamp(u . v, -1, 1)``; when
    ``|d| > 0.9995`` the lerp ``(1 - t) x_1 + t x_2``, else with
    ``theta = acos(d)``: ``sin((1 - t) theta) / sin(theta) * x_1 +
    sin(t theta) / sin(theta) * x_2`` (the coefficients apply to the raw,
    unnormalised tensors).
``task_arithmetic`` (base)
    ``delta_i = x_i - x_0``; ``m = sum_i w_i delta_i``, divided by
    ``sum_i w_i`` when ``normalize`` (default False; a sum below 1e-8 in
    magnitude counts as 1); result ``x_0 + lambda * m``.
``ties`` (base)
    ``delta_i = trim(x_i - x_0, density_i)``: the ``max(1, int(density *
    n))`` entries of largest magnitude of the ``n``-element tensor kept, the
    rest zero (``density >= 1``: all kept; ties by lower index); ``d_i = w_i
    delta_i``; elected sign ``s = +1`` where ``sum_i d_i >= 0``, else ``-1``;
    ``mask_i = (sign(d_i) == s)`` (a zero never agrees); ``m = sum_i mask_i
    d_i``, divided by ``sum_i w_i mask_i`` (0 counts as 1) when ``normalize``
    (default True); result ``x_0 + lambda * m``.
``dare_linear`` / ``dare_ties`` (base, ``seed``)
    ``delta_i = dare(x_i - x_0)``: each entry kept with probability
    ``density_i`` (a Bernoulli mask drawn in float32 from a generator seeded
    with :func:`dare_seed` ``(seed, tensor name)``; the masks of the inputs
    are drawn one after the other, in input order, from that one generator),
    then with ``rescale`` (default True) multiplied by ``sum|delta| /
    sum|masked|`` (mergekit's L1 rescale; left as is when either sum is below
    1e-7; the DARE paper rescales by ``1 / density``, equal in expectation).
    ``dare_linear`` then combines as ``task_arithmetic``, ``dare_ties`` as
    ``ties`` (sign election on the DARE deltas); ``normalize`` default False.

Each method is one :class:`MergeMethod` declared in :data:`MERGE_METHODS` (a
:class:`~interlingua.core.named.Registry`): its name, the options it accepts, its
minimum number of models, whether it needs a base, how its recipe is validated and
the function that combines the tensors; :func:`merge_recipe`, :func:`merge_tensors`
and a build look the method up there.

Base-requiring operators refuse to run without ``base``; the base-free ones
refuse a ``base`` (they are what is left when checkpoints share no ancestor).
Every input (and the base) must be *native* with the first model (see
:mod:`interlingua.mergeability.comparability`) with every tensor shared: nothing is
padded or dropped. Non-floating tensors (integer buffers) are copied from the
first model and must be equal in every input.

Writing
-------
:func:`build_merge` streams: one tensor of each input at a time, written
straight into ``model.safetensors`` (its header is known from the inputs'
headers, so tensors are written in order as they are merged); the output
folder holds that file, the first model's ``config.json`` (and
``generation_config.json``), its tokenizer files, and ``merge.json`` (the
record: recipe, inputs with their files' sha256, the written files' sha256).
It loads with ``AutoModelForCausalLM.from_pretrained``. The build goes into a
temporary sibling folder renamed to ``out`` when complete; an existing
non-empty ``out`` is never overwritten: an identical build (same recipe key,
intact files) is a no-op, anything else a :class:`WeightsError`.
:func:`merge_recipe_key` is the content key: format, method, the parameters
with their defaults filled in, and every input file's sha256 (not the folder
names).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import queue
import shutil
import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from interlingua.core.builds import build_folder, install_build, library_versions, previous_build
from interlingua.core.hashing import file_sha256, remember_sha256
from interlingua.core.named import Registry
from interlingua.core.store import atomic_write, canonical_json, sha256_hex
from interlingua.data.models.hashing import TOKENIZER_FILES
from interlingua.mergeability.comparability import Checkpoint, CheckpointRef, comparability, read_checkpoint
from interlingua.mergeability.diagnostics import _DTYPES, TensorReader, top_k_mask, trim_count
from interlingua.mergeability.errors import WeightsError, unwritable

__all__ = [
    "BASE_FREE",
    "MERGE_FILE",
    "MERGE_FORMAT",
    "MERGE_METHODS",
    "METHODS",
    "MergeMethod",
    "build_merge",
    "dare_seed",
    "merge_recipe",
    "merge_recipe_key",
    "merge_tensors",
]

#: Part of every recipe key: bump it with any change of an operator or of what a build writes.
MERGE_FORMAT = "interlingua.merge/3"
MERGE_FILE = "merge.json"
_SLERP_DOT_THRESHOLD = 0.9995
_SLERP_EPS = 1e-8
_CONFIG_FILES = ("config.json", "generation_config.json")
#: A sparsifier of task vectors: ``(delta, recipe, i, generator)``, ``delta`` (input i's) changed in place.
_Sparsify = Callable[[torch.Tensor, dict[str, Any], int, torch.Generator | None], None]


# ====================================================================== recipes
def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise WeightsError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _per_model(value: Any, n: int, what: str, default: float) -> list[float]:
    if value is None:
        return [default] * n
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise WeightsError(f"{what} has {len(value)} values for {n} models; give one per model (or one number)")
        return [_number(v, what) for v in value]
    return [_number(value, what)] * n


def merge_recipe(
    method: str,
    n_models: int,
    *,
    has_base: bool,
    weights: Sequence[float] | float | None = None,
    t: float | None = None,
    density: Sequence[float] | float | None = None,
    lambda_: float | None = None,
    normalize: bool | None = None,
    rescale: bool | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The validated recipe with defaults filled in (what the key and ``merge.json`` record).

    Raises :class:`WeightsError` for an unknown method, a base given to a
    base-free method or missing for one that needs it, parameters that do not
    apply to the method, and values out of range.
    """
    declared = MERGE_METHODS.get(method)
    if not declared.needs_base and has_base:
        raise WeightsError(f"{method} is base-free: give no base (use task_arithmetic / ties / dare_* with a base)")
    if declared.needs_base and not has_base:
        raise WeightsError(
            f"{method} merges task vectors and needs the shared ancestor: give base=<the checkpoint both were "
            f"trained from>; without one only {' and '.join(BASE_FREE)} apply"
        )
    if n_models < declared.min_models:
        raise WeightsError(f"{method} needs at least {declared.min_models} models, got {n_models}")
    given = {
        "weights": weights,
        "t": t,
        "density": density,
        "lambda_": lambda_,
        "normalize": normalize,
        "rescale": rescale,
        "seed": seed,
    }
    allowed = declared.options
    extra = sorted(k for k, v in given.items() if v is not None and k not in allowed)
    if extra:
        raise WeightsError(f"{', '.join(extra)} do(es) not apply to {method} (it takes {', '.join(sorted(allowed))})")
    return {"method": method, **declared.recipe(n_models, given)}


def _slerp_recipe(n_models: int, given: dict[str, Any]) -> dict[str, Any]:
    if n_models != 2:
        raise WeightsError(f"slerp interpolates exactly two models, got {n_models}")
    t = given["t"]
    if t is None:
        raise WeightsError("slerp needs t in [0, 1] (0 = the first model, 1 = the second)")
    tv = _number(t, "t")
    if not 0 <= tv <= 1:
        raise WeightsError(f"t must be in [0, 1], got {t!r}")
    return {"t": tv, "dot_threshold": _SLERP_DOT_THRESHOLD, "eps": _SLERP_EPS}


def _linear_recipe(n_models: int, given: dict[str, Any]) -> dict[str, Any]:
    recipe: dict[str, Any] = {"weights": _per_model(given["weights"], n_models, "weights", 1.0)}
    recipe["normalize"] = True if given["normalize"] is None else bool(given["normalize"])
    if recipe["normalize"] and abs(sum(recipe["weights"])) < 1e-8:
        raise WeightsError(f"linear weights {recipe['weights']} sum to 0: nothing to normalise by")
    return recipe


def dare_seed(seed: int, name: str) -> int:
    """The seed of a tensor's DARE generator: the first 8 bytes of sha256(``"<seed>\\0<name>"``), < 2**63."""
    digest = hashlib.sha256(f"{int(seed)}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


# ====================================================================== operators
def _slerp(t: float, v0: torch.Tensor, v1: torch.Tensor) -> torch.Tensor:
    a, b = v0.reshape(-1), v1.reshape(-1)
    na, nb = torch.linalg.vector_norm(a), torch.linalg.vector_norm(b)
    na = na if na > _SLERP_EPS else torch.ones_like(na)
    nb = nb if nb > _SLERP_EPS else torch.ones_like(nb)
    dot = float(torch.dot(a / na, b / nb).clamp(-1, 1))
    if abs(dot) > _SLERP_DOT_THRESHOLD:
        return (1 - t) * v0 + t * v1
    theta = math.acos(dot)
    s = math.sin(theta)
    return (math.sin((1 - t) * theta) / s) * v0 + (math.sin(t * theta) / s) * v1


def _dare_(delta: torch.Tensor, density: float, rescale: bool, generator: torch.Generator) -> torch.Tensor:
    """DARE on ``delta`` in place (it is the caller's own float64 tensor)."""
    if density >= 1:
        return delta
    before = float(delta.abs().sum()) if rescale else 0.0
    mask = torch.bernoulli(torch.full(delta.shape, density, dtype=torch.float32), generator=generator)
    delta.mul_(mask)
    del mask
    if rescale:
        after = float(delta.abs().sum())
        if before >= 1e-7 and after >= 1e-7:
            delta.mul_(before / after)
    return delta


def _ties_trim_(delta: torch.Tensor, density: float) -> torch.Tensor:
    """TIES trimming of ``delta`` in place: entries outside the top-k magnitudes set to 0."""
    if density >= 1:
        return delta
    keep = top_k_mask(delta.abs(), trim_count(delta.numel(), density))
    return delta.mul_(keep)


def merge_tensors(
    recipe: dict[str, Any],
    tensors: Sequence[torch.Tensor],
    base: torch.Tensor | None = None,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One merged tensor (float64) from ``tensors`` (and ``base``) by ``recipe`` (:func:`merge_recipe`).

    ``generator``: the DARE mask generator (see :func:`dare_seed`); required by
    ``dare_*``. The formulas are in the module docstring. The inputs are not
    modified; besides them, memory is one float64 delta per input and a few
    float64 / boolean buffers of the tensor's size.
    """
    method = MERGE_METHODS.get(recipe["method"])
    if method.needs_base and base is None:
        raise WeightsError(f"{method.name} needs the base tensor")
    if method.seeded and generator is None:
        raise WeightsError(f"{method.name} needs a generator (seeded with dare_seed(seed, name))")
    return method.combine(recipe, tensors, base, generator)


def _slerp_tensors(
    recipe: dict[str, Any], tensors: Sequence[torch.Tensor], base: torch.Tensor | None, generator: Any
) -> torch.Tensor:
    return _slerp(recipe["t"], tensors[0].double(), tensors[1].double())


def _linear_tensors(
    recipe: dict[str, Any], tensors: Sequence[torch.Tensor], base: torch.Tensor | None, generator: Any
) -> torch.Tensor:
    w = recipe["weights"]
    out = torch.zeros(tensors[0].shape, dtype=torch.float64)
    for wi, x in zip(w, tensors):
        out.add_(x.double() * wi)  # w_i x_i, summed in input order
    return out.div_(sum(w)) if recipe["normalize"] else out


def _ties_sparsify(delta: torch.Tensor, recipe: dict[str, Any], i: int, generator: torch.Generator | None) -> None:
    _ties_trim_(delta, recipe["density"][i])


def _dare_sparsify(delta: torch.Tensor, recipe: dict[str, Any], i: int, generator: torch.Generator | None) -> None:
    assert generator is not None  # merge_tensors refuses a seeded method without one
    _dare_(delta, recipe["density"][i], recipe["rescale"], generator)


def _task_vectors(
    recipe: dict[str, Any],
    tensors: Sequence[torch.Tensor],
    base: torch.Tensor | None,
    generator: torch.Generator | None,
    *,
    sparsify: _Sparsify | None,
    elect: bool,
) -> torch.Tensor:
    """``x_0 + lambda * m`` from the task vectors ``x_i - x_0``, each sparsified in place, then weighted;
    ``m`` their (normalised) sum, or with ``elect`` the TIES sign-elected sum."""
    assert base is not None  # merge_tensors refuses a base-requiring method without one
    w = recipe["weights"]
    x0 = base.double()
    weighted: list[torch.Tensor] = []
    for i, (wi, x) in enumerate(zip(w, tensors)):
        d = x.double() - x0  # a new tensor: ours to change in place
        if sparsify is not None:
            sparsify(d, recipe, i, generator)
        weighted.append(d.mul_(wi))
    divisor: torch.Tensor | float
    if elect:
        # weighted holds one tensor per model (at least one), so its sum is a tensor
        elected = cast(torch.Tensor, sum(weighted)) >= 0  # True: +1, False: -1 (a sum of exactly 0 elects +)
        mixed = torch.zeros_like(x0)
        divisor = torch.zeros_like(x0)
        for wi, d in zip(w, weighted):
            agree = torch.where(elected, d > 0, d < 0)  # sign(d) == elected sign; a zero never agrees
            mixed.add_(d.mul_(agree))
            divisor.add_(agree.to(torch.float64).mul_(wi))
        divisor[divisor == 0] = 1.0
    else:
        mixed = cast(torch.Tensor, sum(weighted))
        total = sum(w)
        divisor = 1.0 if abs(total) < 1e-8 else total
    del weighted
    if recipe["normalize"]:
        mixed = mixed / divisor
    if recipe["lambda"] != 1:
        mixed = mixed * recipe["lambda"]
    return x0 + mixed


#: Elements per block of the blockwise linear merge (float32 buffers of 256 KiB: they stay in cache).
_LINEAR_BLOCK = 1 << 16


def linear_work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype ``linear`` computes in for inputs stored as ``dtype``: float32, float64 for float64 (as mergekit)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _linear_into(recipe: dict[str, Any], tensors: Sequence[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """``linear`` as mergekit computes it, block by block, cast once into a ``dtype`` tensor.

    In :func:`linear_work_dtype` (float32 for float32 / bfloat16 / float16
    inputs; mergekit 0.1.5 ``linear_merge``): ``x_1 * w_1 + x_2 * w_2 + ...``
    in input order (each product rounded, never fused, so the result does not
    depend on the block size or the CPU's vector width), then ``/ sum w``
    (skipped when the sum is 1: exact). mergekit starts from zeros, which only
    turns an all-``-0.0`` sum into ``+0.0``; every value is equal. It equals
    :func:`merge_tensors` (float64) to float32 rounding. Memory is the output
    plus two blocks; a float32 output is accumulated in place.
    """
    w = recipe["weights"]
    total = sum(w)
    work = linear_work_dtype(dtype)
    flat = [x.reshape(-1) for x in tensors]
    out = torch.empty(tensors[0].shape, dtype=dtype)
    view = out.reshape(-1)
    n = view.numel()
    acc = None if dtype == work else torch.empty(min(n, _LINEAR_BLOCK), dtype=work)
    tmp = torch.empty(min(n, _LINEAR_BLOCK), dtype=work)
    for start in range(0, n, _LINEAR_BLOCK):
        stop = min(n, start + _LINEAR_BLOCK)
        a = view[start:stop] if acc is None else acc[: stop - start]
        t = tmp[: stop - start]
        for i, (wi, x) in enumerate(zip(w, flat)):
            block, into = x[start:stop], (a if i == 0 else t)
            if block.dtype == work:
                torch.mul(block, wi, out=into)
            else:
                into.copy_(block).mul_(wi)
            if i:
                a.add_(t)
        if recipe["normalize"] and total != 1.0:  # x / 1.0 is x exactly: skip the pass
            a.div_(total)
        if acc is not None:
            view[start:stop].copy_(a)
    return out


# ====================================================================== the methods
#: ``(recipe, tensors, base, generator) -> merged float64 tensor``.
_Combine = Callable[[dict[str, Any], Sequence[torch.Tensor], torch.Tensor | None, torch.Generator | None], torch.Tensor]


@dataclass(frozen=True)
class MergeMethod:
    """One merge method, declared once in :data:`MERGE_METHODS`.

    ``options``: the keyword parameters of :func:`merge_recipe` / :func:`build_merge` it accepts (any
    other one given is refused); ``min_models``: the fewest models it merges; ``needs_base``: whether it
    merges task vectors over a shared ancestor (else it is base-free and refuses a base);
    ``recipe(n_models, given)``: the method's recipe fields from the given parameters (``None`` where not
    given), validated, with its defaults filled in; ``combine(recipe, tensors, base, generator)``: one
    merged float64 tensor (:func:`merge_tensors`); ``seeded``: it draws random masks, so it needs a
    generator (a build seeds one per tensor with :func:`dare_seed`); ``blockwise(recipe, tensors, dtype)``:
    when given, a build merges floating tensors with it in their stored dtype instead of ``combine``.
    """

    name: str
    options: frozenset[str]
    min_models: int
    needs_base: bool
    recipe: Callable[[int, dict[str, Any]], dict[str, Any]] = field(repr=False)
    combine: _Combine = field(repr=False)
    seeded: bool = False
    blockwise: Callable[[dict[str, Any], Sequence[torch.Tensor], torch.dtype], torch.Tensor] | None = field(
        default=None, repr=False
    )


def _task_vector_method(name: str, *, sparsify: _Sparsify | None, elect: bool, normalize: bool) -> MergeMethod:
    """A base-requiring method: task arithmetic, with TIES trimming or DARE masks, and TIES sign election.

    ``normalize``: the default of its ``normalize`` option. With ``sparsify`` it takes ``density``
    (TIES: default 1, every entry kept; DARE: required); DARE's masks make it ``seeded``
    (``seed`` required, ``rescale`` default True).
    """
    seeded = sparsify is _dare_sparsify
    options = {"weights", "lambda_", "normalize"} | ({"density"} if sparsify else set())
    options |= {"rescale", "seed"} if seeded else set()

    def recipe(n_models: int, given: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"weights": _per_model(given["weights"], n_models, "weights", 1.0)}
        out["lambda"] = 1.0 if given["lambda_"] is None else _number(given["lambda_"], "lambda_")
        out["normalize"] = normalize if given["normalize"] is None else bool(given["normalize"])
        if sparsify is not None:
            density = given["density"]
            if density is None and seeded:
                raise WeightsError(f"{name} needs density in (0, 1] (the probability of keeping an entry)")
            dens = _per_model(density, n_models, "density", 1.0)
            if any(not 0 < d <= 1 for d in dens):
                raise WeightsError(f"density must be in (0, 1], got {dens}")
            out["density"] = dens
        if seeded:
            seed = given["seed"]
            if seed is None or isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
                raise WeightsError(f"{name} draws random masks: give an int seed, got {seed!r}")
            out["seed"] = int(seed)
            out["rescale"] = True if given["rescale"] is None else bool(given["rescale"])
        return out

    def combine(
        recipe: dict[str, Any],
        tensors: Sequence[torch.Tensor],
        base: torch.Tensor | None,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        return _task_vectors(recipe, tensors, base, generator, sparsify=sparsify, elect=elect)

    return MergeMethod(name, frozenset(options), 1, True, recipe, combine, seeded=seeded)


#: The merge methods by name, each declared once (:class:`~interlingua.core.named.Registry`).
MERGE_METHODS: Registry[MergeMethod] = Registry(
    "merge method", error=WeightsError, unknown="unknown merge method {name!r}; choose one of {names}"
)
for _method in (
    MergeMethod(
        "linear",
        frozenset({"weights", "normalize"}),
        1,
        False,
        _linear_recipe,
        _linear_tensors,
        blockwise=_linear_into,
    ),
    MergeMethod("slerp", frozenset({"t"}), 2, False, _slerp_recipe, _slerp_tensors),
    _task_vector_method("task_arithmetic", sparsify=None, elect=False, normalize=False),
    _task_vector_method("ties", sparsify=_ties_sparsify, elect=True, normalize=True),
    _task_vector_method("dare_linear", sparsify=_dare_sparsify, elect=False, normalize=False),
    _task_vector_method("dare_ties", sparsify=_dare_sparsify, elect=True, normalize=False),
):
    MERGE_METHODS.add(_method.name, _method)
del _method

#: The method names, in declaration order; the base-free ones (what is left without a shared ancestor).
METHODS = tuple(MERGE_METHODS.names())
BASE_FREE = tuple(name for name, m in MERGE_METHODS.items() if not m.needs_base)


# ====================================================================== inputs and keys
def _checkpoint_files(ckpt: Checkpoint) -> dict[str, Any]:
    files = sorted({info.file for info in ckpt.tensors.values()})
    files += [ckpt.folder / n for n in (*_CONFIG_FILES, "model.safetensors.index.json") if (ckpt.folder / n).is_file()]
    entry: dict[str, Any] = {
        "folder": str(ckpt.folder.resolve()),
        "files": {p.name: file_sha256(p) for p in sorted(files)},
    }
    if ckpt.adapter is not None:
        names = ("adapter_config.json", "adapter_model.safetensors")
        entry["adapter"] = {
            "folder": str(ckpt.adapter.resolve()),
            "files": {n: file_sha256(ckpt.adapter / n) for n in names if (ckpt.adapter / n).is_file()},
        }
    return entry


def _tokenizer_folder(ckpt: Checkpoint) -> Path:
    if ckpt.adapter is not None and any((ckpt.adapter / n).is_file() for n in TOKENIZER_FILES):
        return ckpt.adapter
    return ckpt.folder


def _inputs(models: list[Checkpoint], base: Checkpoint | None) -> dict[str, Any]:
    tok = _tokenizer_folder(models[0])
    tok_files = [tok / n for n in TOKENIZER_FILES if (tok / n).is_file()]
    return {
        "models": [_checkpoint_files(m) for m in models],
        "base": None if base is None else _checkpoint_files(base),
        "tokenizer": {"folder": str(tok.resolve()), "files": {p.name: file_sha256(p) for p in tok_files}},
    }


def _key(recipe: dict[str, Any], inputs: dict[str, Any]) -> str:
    def files(entry: dict[str, Any] | None) -> Any:
        if entry is None:
            return None
        return {"files": entry["files"], "adapter": (entry.get("adapter") or {}).get("files")}

    payload = {
        "format": MERGE_FORMAT,
        "recipe": recipe,
        "models": [files(m) for m in inputs["models"]],
        "base": files(inputs["base"]),
        "tokenizer": inputs["tokenizer"]["files"],
    }
    return sha256_hex(canonical_json(payload))


def _prepare(models: Sequence[CheckpointRef], base: CheckpointRef | None, params: dict[str, Any]):
    if isinstance(models, (str, os.PathLike, tuple)) or not isinstance(models, Sequence) or not models:
        raise WeightsError("models must be a non-empty list of checkpoints (folders or (base, adapter) pairs)")
    recipe = merge_recipe(params.pop("method"), len(models), has_base=base is not None, **params)
    ckpts = [read_checkpoint(m) for m in models]
    cbase = read_checkpoint(base) if base is not None else None
    return recipe, ckpts, cbase


def merge_recipe_key(
    models: Sequence[CheckpointRef],
    *,
    method: str,
    base: CheckpointRef | None = None,
    **params: Any,
) -> str:
    """Content key of a :func:`build_merge` (sha256 hex): format, recipe with defaults, every input file's sha256.

    ``params``: as :func:`build_merge` (``weights``, ``t``, ``density``,
    ``lambda_``, ``normalize``, ``rescale``, ``seed``). Folder names are not part
    of the key; the order of the models is.
    """
    recipe, ckpts, cbase = _prepare(models, base, {"method": method, **params})
    return _key(recipe, _inputs(ckpts, cbase))


# ====================================================================== alignment of the inputs
def _aligned_names(ckpts: list[Checkpoint], cbase: Checkpoint | None) -> list[tuple[str, list[tuple[str, bool]]]]:
    """For each tensor of the first model: (its name, [(name, transposed vs the first) in every other input])."""
    first = ckpts[0]
    others = [*ckpts[1:], *([cbase] if cbase is not None else [])]
    maps = []
    for i, other in enumerate(others):
        cov = comparability(first, other)
        role = f"model {i + 2}" if i < len(ckpts) - 1 else "the base"
        excluded = cov.table[cov.table["status"] != "shared"]
        if cov.route != "native" or not excluded.empty:
            reasons = ", ".join(f"{n} {r}" for r, n in excluded["reason"].value_counts().sort_index().items())
            raise WeightsError(
                f"{role} ({other.label}) cannot be merged with the first model ({first.label}): route {cov.route} "
                f"({cov.reason}){'; excluded tensors: ' + reasons if reasons else ''}. A merge needs the same "
                "architecture with every tensor shared (see comparability(a, b).table)"
            )
        maps.append({s.name_a: (s.name_b, s.transposed_a != s.transposed_b) for s in cov.shared()})
    return [(name, [m[name] for m in maps]) for name in first.tensors]


# ====================================================================== streamed safetensors writing
_CODES = {
    v: k
    for k, v in {
        "F64": torch.float64,
        "F32": torch.float32,
        "F16": torch.float16,
        "BF16": torch.bfloat16,
        "I64": torch.int64,
        "I32": torch.int32,
        "I16": torch.int16,
        "I8": torch.int8,
        "U8": torch.uint8,
        "BOOL": torch.bool,
    }.items()
}


#: Bytes per chunk handed to the writer thread, and how many chunks it may lag behind the merge.
_WRITE_CHUNK = 8 << 20
_WRITE_AHEAD = 8
#: Bytes the writer thread writes between two fdatasync calls (its own thread waits for the disk, not the merge).
_SYNC_EVERY = 64 << 20


def _write_streamed(path: Path, entries: list[tuple[str, str, tuple[int, ...], int]], produce) -> str:
    """Write a safetensors file whose tensors ``produce(name)`` returns one at a time, in ``entries`` order.

    Returns the file's sha256, computed from the bytes as they are written
    (the file is never read back). Writing and hashing run on a second
    thread, at most ``_WRITE_AHEAD`` chunks of ``_WRITE_CHUNK`` bytes behind
    the merge (hashlib and file writes release the GIL), so the next tensor
    is merged while the last one is written; that thread syncs the data to
    disk as it goes (every ``_SYNC_EVERY`` bytes) and the file is fsynced at
    the end, before the build's folder is renamed into place.
    """
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    digest = hashlib.sha256()
    chunks: queue.Queue[memoryview | bytes | None] = queue.Queue(maxsize=_WRITE_AHEAD)
    failed: list[BaseException] = []

    def drain(fh: Any) -> None:
        unsynced = 0
        while (chunk := chunks.get()) is not None:
            if failed:
                continue  # keep taking chunks so that the merging thread never blocks
            try:
                fh.write(chunk)
                digest.update(chunk)
                unsynced += len(chunk)
                if unsynced >= _SYNC_EVERY:  # the disk writes while the merge goes on: the final fsync is short
                    fh.flush()
                    os.fdatasync(fh.fileno())
                    unsynced = 0
            except BaseException as exc:  # handed to the merging thread
                failed.append(exc)

    with path.open("wb") as fh:
        writer = threading.Thread(target=drain, args=(fh,), name="merge-write-sha256", daemon=True)
        writer.start()
        try:
            chunks.put(struct.pack("<Q", len(blob)))
            chunks.put(blob)
            for name, dtype, shape, nbytes in entries:
                tensor = produce(name)
                if _CODES.get(tensor.dtype) != dtype or tuple(tensor.shape) != tuple(shape):
                    raise WeightsError(
                        f"internal: {name} came out {tensor.dtype} {tuple(tensor.shape)}, not {dtype} {shape}"
                    )
                data = memoryview(tensor.contiguous().reshape(-1).view(torch.uint8).numpy())
                if data.nbytes != nbytes:
                    raise WeightsError(f"internal: {name} has {data.nbytes} bytes, not {nbytes}")
                for start in range(0, nbytes, _WRITE_CHUNK):
                    if failed:
                        raise failed[0]
                    chunks.put(data[start : start + _WRITE_CHUNK])
        finally:
            chunks.put(None)
            writer.join()
        if failed:
            raise failed[0]
        fh.flush()
        os.fsync(fh.fileno())
    return digest.hexdigest()


# ====================================================================== the build


def _refuse(out: Path) -> WeightsError:
    return WeightsError(
        f"{out} exists and holds something other than an identical merge build (another recipe or other inputs, "
        "other files, or a damaged build); choose another output folder or delete it"
    )


def build_merge(
    models: Sequence[CheckpointRef],
    out: str | os.PathLike[str],
    *,
    method: str,
    base: CheckpointRef | None = None,
    weights: Sequence[float] | float | None = None,
    t: float | None = None,
    density: Sequence[float] | float | None = None,
    lambda_: float | None = None,
    normalize: bool | None = None,
    rescale: bool | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """Merge ``models`` (over ``base``) by ``method`` into the model folder ``out``; return its ``merge.json`` record.

    ``models``: model folders, LoRA adapter folders or ``(base, adapter)``
    pairs, all native with the first and sharing every tensor; the output
    takes the first model's tensor names, dtypes, config and tokenizer.
    Parameters per method and their defaults: see the module docstring and
    :func:`merge_recipe`. Raises :class:`WeightsError` for bad recipes, inputs
    that cannot be merged and an ``out`` holding something else.
    """
    params = {
        "method": method,
        "weights": weights,
        "t": t,
        "density": density,
        "lambda_": lambda_,
        "normalize": normalize,
        "rescale": rescale,
        "seed": seed,
    }
    recipe, ckpts, cbase = _prepare(models, base, params)
    out = Path(out).expanduser()
    if out.exists():
        if not out.is_dir():
            raise WeightsError(f"the output {out} exists and is a file; give a folder path")
        if any(out.iterdir()):
            previous = previous_build(out, MERGE_FILE, _key(recipe, _inputs(ckpts, cbase)))
            if previous is None:
                raise _refuse(out)
            return previous
    # The key is needed only for the record: the inputs are hashed (or found in the hash cache) on a
    # second thread while the merge runs (hashlib and file reads release the GIL, as torch's kernels do).
    hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="merge-inputs-sha256")
    pending_inputs = hashing.submit(_inputs, ckpts, cbase)
    hashing.shutdown(wait=False)
    try:
        return _build(recipe, ckpts, cbase, out, pending_inputs)
    finally:
        pending_inputs.cancel()


def _build(
    recipe: dict[str, Any], ckpts: list[Checkpoint], cbase: Checkpoint | None, out: Path, pending_inputs: Future
) -> dict[str, Any]:
    """The streamed build of :func:`build_merge` into a temporary sibling of ``out``, renamed when complete."""
    aligned_map = dict(_aligned_names(ckpts, cbase))
    method = MERGE_METHODS.get(recipe["method"])
    first = ckpts[0]
    n = len(ckpts)

    readers = [TensorReader(c) for c in ckpts] + ([TensorReader(cbase)] if cbase is not None else [])
    copied: list[str] = []

    def produce(name: str) -> torch.Tensor:
        info = first.tensors[name]
        dtype = _DTYPES.get(info.dtype)
        if dtype is None:
            raise WeightsError(f"{first.label}: tensor {name!r} has dtype {info.dtype}, which torch cannot hold here")
        floating = dtype.is_floating_point
        names = [(name, False), *aligned_map[name]]
        loaded = []
        blockwise = floating and method.blockwise is not None  # stored dtype in, float32 block by block
        for reader, (other, transposed) in zip(readers, names):
            # LoRA-adapted tensors stay float64 until the one cast
            x = reader.get(other, float64=floating and (not blockwise or other in reader.checkpoint.lora))
            loaded.append((x.T.contiguous() if blockwise else x.T) if transposed else x)
        if not floating:
            if any(not torch.equal(loaded[0], x) for x in loaded[1:]):
                raise WeightsError(f"the non-floating tensor {name!r} differs between the inputs; it cannot be merged")
            copied.append(name)
            return loaded[0]
        if blockwise:
            assert method.blockwise is not None
            return method.blockwise(recipe, loaded[:n], dtype)
        generator = None
        if method.seeded:
            generator = torch.Generator().manual_seed(dare_seed(recipe["seed"], name))
        with torch.no_grad():
            merged = merge_tensors(recipe, loaded[:n], loaded[n] if cbase is not None else None, generator=generator)
        return merged.to(dtype).contiguous()

    entries = [(name, info.dtype, info.shape, info.stop - info.start) for name, info in sorted(first.tensors.items())]
    with build_folder(out, unwritable) as tmp:
        # The blockwise linear path runs element-wise ops on 8 MiB blocks: one intra-op thread is ~3x
        # faster than two on a busy 2-core machine (threads wait for each other; 124M parameters:
        # 5.5 s vs 18 s, benchmarks/README.md) and no slower on an idle one.
        threads = torch.get_num_threads()
        if method.blockwise is not None:
            torch.set_num_threads(1)
        try:
            weights_sha = _write_streamed(tmp / "model.safetensors", entries, produce)
        finally:
            torch.set_num_threads(threads)
            for r in readers:
                r.close()
        for name in _CONFIG_FILES:
            if (first.folder / name).is_file():
                shutil.copyfile(first.folder / name, tmp / name)
        tok = _tokenizer_folder(first)
        for name in TOKENIZER_FILES:
            if (tok / name).is_file():
                shutil.copyfile(tok / name, tmp / name)
        inputs = pending_inputs.result()
        key = _key(recipe, inputs)
        record: dict[str, Any] = {
            "format": MERGE_FORMAT,
            "key": key,
            "recipe": recipe,
            "inputs": inputs,
            "output": {
                "tensors": len(entries),
                "names_from": first.label,
                "copied_non_float": copied,
                "config_from": str(first.folder),
                "tokenizer_from": str(tok),
            },
            "libraries": library_versions(("interlingua", "torch", "safetensors", "transformers")),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        record["files"] = {
            p.name: weights_sha if p.name == "model.safetensors" else file_sha256(p)
            for p in sorted(tmp.iterdir())
            if p.is_file()
        }
        atomic_write(tmp / MERGE_FILE, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))
        existing = install_build(tmp, out, MERGE_FILE, key, _refuse)  # nothing at out is ever replaced
        if existing is not None:
            return existing
    remember_sha256(out / "model.safetensors", weights_sha)  # a later previous_build() need not read it back
    return record
