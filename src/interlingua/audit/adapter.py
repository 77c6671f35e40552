"""Audit of a PEFT LoRA adapter folder from its files alone (the base model's weights are never loaded).

A LoRA adapter adds ``delta_W = scaling * B @ A`` to each target module, with
``scaling = lora_alpha / r`` (``lora_alpha / sqrt(r)`` under rsLoRA; per-module
``rank_pattern`` / ``alpha_pattern`` override both). PEFT initialises ``B`` to
zero, so an adapter saved before any training step (or one whose training
never reached ``B``) is an exact no-op: loading it on its base gives the base.
That is invisible at load time and to any downstream comparison, so this audit
reads ``adapter_config.json`` and the adapter tensors and says, per target
module, how large ``B`` and ``delta_W`` are:

* ``max|delta_W|`` is computed exactly (float64) when ``delta_W`` has at most
  ``exact_limit`` elements, else bounded by ``scaling * ||B||_2 * ||A||_2``
  (spectral norms; every entry of a matrix is at most its spectral norm). The
  ``method`` of each module says which.
* verdict ``identity``: every ``lora_B`` is exactly zero and nothing else is
  shipped (no ``modules_to_save`` copies, no DoRA magnitudes, no trainable
  token rows), so the adapter is provably the base. ``tiny``: the largest
  ``max|delta_W|`` (or its bound) is below ``tiny_threshold``. ``active``:
  otherwise (a bound above the threshold is reported as ``active``, the
  conservative side). ``missing``: the folder, its config or its weights are
  absent or unreadable. ``unsupported``: not a LoRA adapter.

The recorded base (``base_model_name_or_path``) is compared with the spec's
base by :func:`interlingua.data.models.preflight.adapter_base_matches`, the check
``load_model`` applies, without raising.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.data.models.hashing import ADAPTER_WEIGHT_FILES
from interlingua.data.models.spec import ModelSpec

__all__ = ["ModuleDelta", "AdapterAudit", "audit_adapter", "DEFAULT_TINY_THRESHOLD", "DEFAULT_EXACT_LIMIT"]

DEFAULT_TINY_THRESHOLD = 1e-6
DEFAULT_EXACT_LIMIT = 1 << 24  # elements of delta_W computed exactly (128 MiB in float64)

_LORA_KEY = re.compile(
    r"^(?P<module>.+)\.(?P<kind>lora_A|lora_B|lora_embedding_A|lora_embedding_B)(?:\.[^.]+)?(?:\.weight)?$"
)


@dataclass(frozen=True)
class ModuleDelta:
    """One target module: its rank, scaling, ``max|B|`` and ``max|scaling * B @ A|`` (exact or bounded)."""

    module: str
    r: int
    alpha: float
    scaling: float
    shape: tuple[int, int]  # delta_W as (rows of B, columns of A)
    max_abs_b: float
    max_abs_a: float
    max_abs_delta: float
    method: str  # "exact" or "bound" (scaling * ||B||_2 * ||A||_2, an upper bound of max|delta_W|)


@dataclass
class AdapterAudit:
    """What an adapter folder holds and what it does to its base (see the module docstring)."""

    adapter: str
    verdict: str  # identity | tiny | active | missing | unsupported
    reason: str = ""
    peft_type: str = ""
    r: int = -1
    alpha: float = math.nan
    use_rslora: bool = False
    target_modules: list[str] = field(default_factory=list)
    modules_to_save: list[str] = field(default_factory=list)
    base_recorded: str = ""
    base_check: str = ""  # matched | mismatched | unrecorded | not checked (no spec) | error: ...
    modules: list[ModuleDelta] = field(default_factory=list)
    extra_tensors: list[str] = field(default_factory=list)
    tiny_threshold: float = DEFAULT_TINY_THRESHOLD

    @property
    def max_abs_b(self) -> float:
        return max((m.max_abs_b for m in self.modules), default=math.nan)

    @property
    def max_abs_delta(self) -> float:
        return max((m.max_abs_delta for m in self.modules), default=math.nan)

    @property
    def delta_method(self) -> str:
        """``exact`` when every module's value is exact, ``bound`` when any is a bound, "" without modules."""
        if not self.modules:
            return ""
        return "bound" if any(m.method == "bound" for m in self.modules) else "exact"

    def module_rows(self) -> list[dict[str, Any]]:
        """One dict per target module (for a DataFrame or JSON)."""
        return [{**asdict(m), "shape": list(m.shape)} for m in self.modules]


def _pattern_value(module: str, pattern: dict[str, Any], default: Any) -> Any:
    """PEFT's rank_pattern / alpha_pattern lookup: a key matches a module name ending in ``.key`` or equal to it."""
    for key, value in (pattern or {}).items():
        if re.match(rf"(.*\.)?{key}$", module):
            return value
    return default


def _load_tensors(path: Path) -> dict[str, np.ndarray]:
    """The adapter tensors as float64 numpy arrays (safetensors without torch where the dtype allows)."""
    if path.suffix == ".safetensors":
        try:
            from safetensors.numpy import load_file

            return {k: np.asarray(v, dtype=np.float64) for k, v in load_file(str(path)).items()}
        except (TypeError, ValueError):  # bfloat16 and other dtypes numpy lacks: read with torch
            from safetensors.torch import load_file as load_torch

            return {k: v.double().numpy() for k, v in load_torch(str(path)).items()}
    import torch  # adapter_model.bin: a pickled state dict, read without executing code

    state = torch.load(str(path), map_location="cpu", weights_only=True)
    return {k: v.double().numpy() for k, v in state.items()}


def _base_check(cfg: dict[str, Any], spec: ModelSpec | None, cache_dir: str | Path | None) -> str:
    recorded = cfg.get("base_model_name_or_path")
    if not (isinstance(recorded, str) and recorded.strip()):
        return "unrecorded"
    if spec is None or (spec.path is None and spec.package is None):
        return "not checked (no base given)"
    from interlingua.core.errors import InterlinguaError
    from interlingua.data.models.preflight import check_adapter_base
    from interlingua.data.models.source import resolve_source

    try:
        source = resolve_source(spec, cache_dir, assemble=False)
        outcome = check_adapter_base(spec.model_copy(update={"adapter_base": "ignore"}), source, cfg)
    except InterlinguaError as exc:
        return f"error: {exc}"
    if outcome == "ignored":
        return "mismatched"
    # The name check accepts two local folders of the same name (``eng/final`` and ``deu/final``); when both
    # exist here, their weight files decide: the same bytes at another path is still the recorded base.
    recorded_dir = Path(recorded.strip()).expanduser()
    if outcome == "matched" and source.kind == "local" and not source.gguf_file and recorded_dir.is_dir():
        base_dir = Path(source.location)
        if recorded_dir.resolve() != base_dir.resolve():
            from interlingua.data.models.hashing import folder_weights_sha256
            from interlingua.data.models.preflight import tokenwise_backbone

            backbone = tokenwise_backbone(base_dir)  # a tokenwise merge keeps the recorded model's backbone
            if backbone is not None and Path(backbone).resolve() == recorded_dir.resolve():
                return outcome
            same = folder_weights_sha256(recorded_dir)
            if same is None or same != folder_weights_sha256(base_dir):
                return "mismatched"
    return outcome


def _module_delta(
    module: str, a: np.ndarray, b: np.ndarray, embedding: bool, cfg: dict[str, Any], exact_limit: int
) -> ModuleDelta:
    # lora_embedding_A: (r, num_embeddings), lora_embedding_B: (dim, r): delta = (B @ A).T, same entries
    if a.ndim != 2 or b.ndim != 2 or b.shape[1] != a.shape[0]:
        raise ValueError(f"{module}: lora_B {b.shape} and lora_A {a.shape} do not multiply")
    r = int(a.shape[0])
    alpha = float(_pattern_value(module, cfg.get("alpha_pattern") or {}, cfg.get("lora_alpha", r)))
    scaling = alpha / math.sqrt(r) if cfg.get("use_rslora") else alpha / r
    rows, cols = int(b.shape[0]), int(a.shape[1])
    max_b = float(np.abs(b).max()) if b.size else 0.0
    max_a = float(np.abs(a).max()) if a.size else 0.0
    if max_b == 0.0 or max_a == 0.0:
        delta, method = 0.0, "exact"
    elif rows * cols <= exact_limit:
        delta, method = float(np.abs(scaling * (b @ a)).max()), "exact"
    else:
        delta, method = abs(scaling) * float(np.linalg.norm(b, 2)) * float(np.linalg.norm(a, 2)), "bound"
    return ModuleDelta(module, r, alpha, scaling, (rows, cols), max_b, max_a, delta, method)


def audit_adapter(
    adapter: str | Path,
    spec: ModelSpec | None = None,
    *,
    tiny_threshold: float = DEFAULT_TINY_THRESHOLD,
    exact_limit: int = DEFAULT_EXACT_LIMIT,
    cache_dir: str | Path | None = None,
) -> AdapterAudit:
    """Audit the PEFT adapter folder ``adapter`` (never raises for a missing or damaged folder).

    ``spec``: the model the adapter is applied to (its ``path`` / ``package`` is
    the base compared with the adapter's recorded base); without it the base is
    not checked. ``tiny_threshold``: ``max|scaling * B @ A|`` below it is
    ``tiny``. ``exact_limit``: the largest ``delta_W`` (elements) computed
    exactly; larger ones are bounded by spectral norms.
    """
    if not (tiny_threshold >= 0 and math.isfinite(tiny_threshold)):
        raise ValueError(f"tiny_threshold must be a finite number >= 0, got {tiny_threshold!r}")
    folder = Path(adapter).expanduser()
    out = AdapterAudit(adapter=str(adapter), verdict="missing", tiny_threshold=tiny_threshold)
    if not folder.is_dir():
        out.reason = f"the adapter folder {folder} does not exist (or is not a folder)"
        return out
    cfg_path = folder / "adapter_config.json"
    if not cfg_path.is_file():
        out.reason = f"{folder} has no adapter_config.json; give the folder written by PEFT's save_pretrained"
        return out
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        out.reason = f"{cfg_path} is unreadable ({exc}); re-save the adapter with PEFT"
        return out
    out.peft_type = str(cfg.get("peft_type") or "")
    out.r = int(cfg["r"]) if isinstance(cfg.get("r"), int) else -1
    out.alpha = float(cfg["lora_alpha"]) if isinstance(cfg.get("lora_alpha"), (int, float)) else math.nan
    out.use_rslora = bool(cfg.get("use_rslora"))
    targets = cfg.get("target_modules")
    out.target_modules = [targets] if isinstance(targets, str) else sorted(targets or [])
    out.modules_to_save = sorted(cfg.get("modules_to_save") or [])
    out.base_recorded = str(cfg.get("base_model_name_or_path") or "")
    out.base_check = _base_check(cfg, spec, cache_dir)
    if out.peft_type.upper() != "LORA":
        out.verdict = "unsupported"
        out.reason = f"peft_type {out.peft_type or '(none)'!r}: only LoRA adapters are audited"
        return out
    weights = next((folder / n for n in ADAPTER_WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        out.reason = f"{folder} has no adapter weights ({' or '.join(ADAPTER_WEIGHT_FILES)}); copy the complete folder"
        return out
    try:
        tensors = _load_tensors(weights)
    except Exception as exc:  # a damaged file of any kind is a verdict, never a crash
        out.reason = f"{weights} is unreadable ({type(exc).__name__}: {exc}); copy the adapter again"
        return out
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key, value in tensors.items():
        m = _LORA_KEY.match(key)
        if m is None:
            out.extra_tensors.append(key)
        else:
            pairs.setdefault(m["module"], {})[m["kind"]] = value
    try:
        for module in sorted(pairs):
            got = pairs[module]
            emb = "lora_embedding_A" in got or "lora_embedding_B" in got
            a = got.get("lora_embedding_A" if emb else "lora_A")
            b = got.get("lora_embedding_B" if emb else "lora_B")
            if a is None or b is None:
                raise ValueError(f"{module} has only one of lora_A / lora_B")
            out.modules.append(_module_delta(module, a, b, emb, cfg, exact_limit))
    except ValueError as exc:
        out.modules.clear()
        out.reason = f"{weights}: {exc}; the adapter is damaged"
        return out
    out.extra_tensors.sort()
    if not out.modules:
        out.reason = f"{weights} holds no lora_A / lora_B tensors"
        return out
    all_zero = all(m.max_abs_b == 0.0 for m in out.modules)
    if all_zero and not out.extra_tensors and not out.modules_to_save:
        out.verdict = "identity"
        out.reason = "every lora_B is exactly zero: B @ A == 0, the adapter leaves its base unchanged"
    elif out.extra_tensors or out.modules_to_save:
        out.verdict = "active"
        out.reason = (
            "the adapter ships tensors besides lora_A / lora_B "
            f"({', '.join(out.modules_to_save or out.extra_tensors[:3])}): they replace or rescale base weights, "
            "so it is not a provable no-op"
        )
    elif out.max_abs_delta < tiny_threshold:
        out.verdict = "tiny"
        out.reason = f"max|scaling * B @ A| = {out.max_abs_delta:.3g} ({out.delta_method}) < {tiny_threshold:g}"
    else:
        out.verdict = "active"
        out.reason = f"max|scaling * B @ A| = {out.max_abs_delta:.3g} ({out.delta_method})"
    return out
