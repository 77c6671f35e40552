"""Weight-space diagnostics of two checkpoints, streamed tensor by tensor from their safetensors files.

Which tensors
-------------
The shared tensors of :func:`interlingua.weights.comparability.comparability`
(same canonical key and canonical shape); every excluded tensor is in the
coverage table with its reason, none is silently dropped: the diagnostics
carry that table (``.coverage``). A tensor B stores transposed relative to A
(GPT-2 ``Conv1D`` against ``nn.Linear``) is transposed to A's layout first;
the base's likewise.

Streaming
---------
Each tensor is read with a plain file read at the byte offsets its header
gives (no memory map, so nothing of a file stays mapped), one tensor of each
model at a time, converted to float64 and released before the next: memory is
a few float64 copies of the largest tensor, never a whole model. A LoRA adapter
folder (or ``(base, adapter)``) is its base with the adapter merged on the fly:
for each adapted tensor ``W_eff = W + scaling * (B @ A)`` (transposed when
``W`` is stored in x out: ``fan_in_fan_out``, GPT-2 ``Conv1D``), with
``scaling = lora_alpha / r`` (``lora_alpha / sqrt(r)`` with ``use_rslora``;
``rank_pattern`` / ``alpha_pattern`` per module as PEFT reads them), in float64.

The values (:data:`COLUMNS`)
----------------------------
Per tensor, all sums in float64 over the elements of ``a`` (A's tensor) and
``b`` (B's): ``dot = sum a*b``, ``sq_a = sum a^2``, ``sq_b = sum b^2``,
``sq_diff = sum (a-b)^2`` (summed directly, not as sq_a + sq_b - 2 dot).
A layer's and the global values are the sums of its tensors' sums, so

* ``cosine = dot / sqrt(sq_a * sq_b)``
* ``rel_l2 = sqrt(sq_diff) / sqrt(sq_b)``: relative to B (B is the reference)
* ``rel_l2_sym = 2 sqrt(sq_diff) / (sqrt(sq_a) + sqrt(sq_b))``: symmetric
* ``norm_ratio = sqrt(sq_a) / sqrt(sq_b)``

are the values over the concatenation of those tensors (NaN where a norm is 0).

With a common ``base`` (the shared ancestor; every shared tensor must be
shared with it too), the task vectors ``ta = a - base`` and ``tb = b - base``:
``tv_dot``, ``tv_sq_a``, ``tv_sq_b`` summed the same way, ``tv_cosine``,
``tv_norm_a``, ``tv_norm_b``. TIES sign agreement after trimming (per tensor,
as TIES / mergekit trim): ``trim(t)`` keeps the ``k = max(1, int(density * n))``
entries of largest ``|t|`` of each ``n``-element tensor (``density >= 1``:
all; ties at the threshold by lower flat index) and zeroes the rest.
``ties_kept_a`` / ``ties_kept_b`` count the non-zero entries of ``trim(ta)`` /
``trim(tb)``; ``ties_both`` the positions where both are non-zero;
``ties_agree`` those of them where the signs are equal;
``ties_sign_agreement = ties_agree / ties_both`` (NaN when 0). Sums over a
layer or the model are sums of the per-tensor counts.

Rows: ``scope`` ``tensor`` (one per shared tensor), ``layer`` (one per block,
then ``layer = -1``: the shared tensors outside the blocks, if any) and one
``global`` row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interlingua.schema import Column, result_table
from interlingua.weights.comparability import (
    Checkpoint,
    CheckpointRef,
    Comparability,
    SharedTensor,
    TensorInfo,
    comparability,
    read_checkpoint,
)
from interlingua.weights.errors import WeightsError

__all__ = [
    "COLUMNS",
    "TensorReader",
    "WeightDiagnostics",
    "read_tensor",
    "top_k_mask",
    "trim_count",
    "weight_diagnostics",
]

COLUMNS: tuple[Column, ...] = (
    Column("scope", "str", "tensor, layer or global"),
    Column("key", "str", "canonical key (tensor rows; empty otherwise)"),
    Column("layer", "int", "block index; -1: outside the blocks (tensor / layer rows) or the global row"),
    Column("part", "str", "embedding, attention, mlp, norm, ... (tensor rows)"),
    Column("name_a", "str", "A's tensor name (tensor rows)"),
    Column("name_b", "str", "B's tensor name (tensor rows)"),
    Column("n_tensors", "int", "shared tensors summed into the row"),
    Column("numel", "int", "elements summed into the row"),
    Column("dot", "float", "sum a*b (float64)"),
    Column("sq_a", "float", "sum a^2"),
    Column("sq_b", "float", "sum b^2"),
    Column("sq_diff", "float", "sum (a-b)^2"),
    Column("norm_a", "float", "sqrt(sq_a)"),
    Column("norm_b", "float", "sqrt(sq_b)"),
    Column("cosine", "float", "dot / sqrt(sq_a sq_b)"),
    Column("rel_l2", "float", "||a-b|| / ||b|| (relative to B)"),
    Column("rel_l2_sym", "float", "2 ||a-b|| / (||a|| + ||b||)"),
    Column("norm_ratio", "float", "||a|| / ||b||"),
    Column("tv_dot", "float", "sum (a-base)(b-base) (NaN without a base)"),
    Column("tv_sq_a", "float", "sum (a-base)^2"),
    Column("tv_sq_b", "float", "sum (b-base)^2"),
    Column("tv_norm_a", "float", "||a-base||"),
    Column("tv_norm_b", "float", "||b-base||"),
    Column("tv_cosine", "float", "task-vector cosine tv_dot / sqrt(tv_sq_a tv_sq_b)"),
    Column("density", "float", "TIES trimming density (share of entries kept per tensor)"),
    Column("ties_kept_a", "int", "non-zero entries of trim(a-base) (-1 without a base)"),
    Column("ties_kept_b", "int", "non-zero entries of trim(b-base)"),
    Column("ties_both", "int", "positions where both trimmed task vectors are non-zero"),
    Column("ties_agree", "int", "of those, positions where their signs agree"),
    Column("ties_sign_agreement", "float", "ties_agree / ties_both"),
)

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}
for _code, _name in (("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"), ("U16", "uint16"),
                     ("U32", "uint32"), ("U64", "uint64")):
    if hasattr(torch, _name):
        _DTYPES[_code] = getattr(torch, _name)
_SUMS = ("dot", "sq_a", "sq_b", "sq_diff", "tv_dot", "tv_sq_a", "tv_sq_b")
_COUNTS = ("ties_kept_a", "ties_kept_b", "ties_both", "ties_agree")


# ====================================================================== reading
def read_tensor(info: TensorInfo, handle: Any = None) -> torch.Tensor:
    """One tensor, read from its file at its header's byte offsets (a fresh, writable CPU tensor)."""
    dtype = _DTYPES.get(info.dtype)
    if dtype is None:
        raise WeightsError(f"{info.file}: tensor {info.name!r} has dtype {info.dtype}, which torch cannot hold here")
    size = info.stop - info.start
    expected = info.numel * torch.empty((), dtype=dtype).element_size()
    if size != expected:
        raise WeightsError(f"{info.file}: tensor {info.name!r} spans {size} bytes, not {expected}: damaged file")
    if size == 0:
        return torch.empty(info.shape, dtype=dtype)
    buf = bytearray(size)
    fh = handle if handle is not None else info.file.open("rb")
    try:
        fh.seek(info.start)
        if fh.readinto(buf) != size:
            raise WeightsError(f"{info.file}: tensor {info.name!r} is cut short: damaged or truncated file")
    finally:
        if handle is None:
            fh.close()
    return torch.frombuffer(buf, dtype=dtype).reshape(info.shape)


class TensorReader:
    """Reads one checkpoint's tensors one at a time (LoRA merged on the fly); use as a context manager."""

    def __init__(self, checkpoint: CheckpointRef) -> None:
        self.checkpoint: Checkpoint = read_checkpoint(checkpoint)
        self._handles: dict[Path, Any] = {}

    def __enter__(self) -> TensorReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for fh in self._handles.values():
            fh.close()
        self._handles.clear()

    def _read(self, info: TensorInfo) -> torch.Tensor:
        fh = self._handles.get(info.file)
        if fh is None:
            fh = self._handles[info.file] = info.file.open("rb")
        return read_tensor(info, fh)

    def names(self) -> list[str]:
        return list(self.checkpoint.tensors)

    def info(self, name: str) -> TensorInfo:
        try:
            return self.checkpoint.tensors[name]
        except KeyError:
            raise WeightsError(f"{self.checkpoint.label} has no tensor {name!r}") from None

    def get(self, name: str, *, float64: bool = False) -> torch.Tensor:
        """The effective tensor ``name``: stored dtype (LoRA-adapted ones: cast back to it), or float64."""
        info = self.info(name)
        w = self._read(info)
        pair = self.checkpoint.lora.get(name)
        if pair is None:
            return w.double() if float64 else w
        adapter = self.checkpoint.adapter_tensors
        a = self._read(adapter[pair.a]).double()
        b = self._read(adapter[pair.b]).double()
        delta = (b @ a).mul_(pair.scaling)
        out = w.double().add_(delta.T if pair.transpose else delta)
        return out if float64 else out.to(w.dtype)


# ====================================================================== per-tensor arithmetic
def trim_count(numel: int, density: float) -> int:
    """Entries TIES trimming keeps of an ``numel``-element tensor: ``max(1, int(density * numel))`` (mergekit's rule)."""
    if density >= 1:
        return numel
    if density <= 0 or numel == 0:
        return 0
    return min(numel, max(1, int(density * numel)))


def top_k_mask(values: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean mask of the ``k`` largest entries of ``values`` (flattened), ties at the threshold by lower index."""
    flat = values.reshape(-1)
    n = flat.numel()
    if k >= n:
        return torch.ones(values.shape, dtype=torch.bool)
    if k <= 0:
        return torch.zeros(values.shape, dtype=torch.bool)
    threshold = torch.kthvalue(flat, n - k + 1).values  # the k-th largest
    mask = flat > threshold
    need = k - int(mask.sum())
    if need > 0:
        ties = torch.nonzero(flat == threshold).flatten()[:need]
        mask[ties] = True
    return mask.reshape(values.shape)


def _trimmed_nonzero(t: torch.Tensor, density: float) -> torch.Tensor:
    """Mask of the non-zero entries of trim(t)."""
    keep = top_k_mask(t.abs(), trim_count(t.numel(), density))
    return keep & (t != 0)


def _tensor_sums(a: torch.Tensor, b: torch.Tensor, base: torch.Tensor | None, density: float) -> dict[str, float]:
    """The float64 sums and TIES counts of one tensor pair (see the module docstring); consumes a and b."""
    out: dict[str, float] = {
        "numel": a.numel(),
        "dot": float(torch.dot(a.reshape(-1), b.reshape(-1))),
        "sq_a": float(torch.dot(a.reshape(-1), a.reshape(-1))),
        "sq_b": float(torch.dot(b.reshape(-1), b.reshape(-1))),
    }
    diff = a - b
    out["sq_diff"] = float(torch.dot(diff.reshape(-1), diff.reshape(-1)))
    del diff
    if base is None:
        return out
    ta, tb = a.sub_(base), b.sub_(base)  # in place: a and b are ours
    out["tv_dot"] = float(torch.dot(ta.reshape(-1), tb.reshape(-1)))
    out["tv_sq_a"] = float(torch.dot(ta.reshape(-1), ta.reshape(-1)))
    out["tv_sq_b"] = float(torch.dot(tb.reshape(-1), tb.reshape(-1)))
    ka, kb = _trimmed_nonzero(ta, density), _trimmed_nonzero(tb, density)
    both = ka & kb
    out["ties_kept_a"] = int(ka.sum())
    out["ties_kept_b"] = int(kb.sum())
    out["ties_both"] = int(both.sum())
    out["ties_agree"] = int((both & (torch.sign(ta) == torch.sign(tb))).sum())
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 and math.isfinite(den) else math.nan


def _derived(s: dict[str, Any], has_base: bool, density: float) -> dict[str, Any]:
    norm_a, norm_b, dist = math.sqrt(s["sq_a"]), math.sqrt(s["sq_b"]), math.sqrt(s["sq_diff"])
    row = {
        **{k: s[k] for k in ("numel", "dot", "sq_a", "sq_b", "sq_diff")},
        "norm_a": norm_a, "norm_b": norm_b,
        "cosine": _ratio(s["dot"], norm_a * norm_b),
        "rel_l2": _ratio(dist, norm_b),
        "rel_l2_sym": _ratio(2 * dist, norm_a + norm_b),
        "norm_ratio": _ratio(norm_a, norm_b),
    }
    if has_base:
        tna, tnb = math.sqrt(s["tv_sq_a"]), math.sqrt(s["tv_sq_b"])
        row.update({
            "tv_dot": s["tv_dot"], "tv_sq_a": s["tv_sq_a"], "tv_sq_b": s["tv_sq_b"],
            "tv_norm_a": tna, "tv_norm_b": tnb, "tv_cosine": _ratio(s["tv_dot"], tna * tnb),
            "density": density,
            **{k: int(s[k]) for k in _COUNTS},
            "ties_sign_agreement": _ratio(s["ties_agree"], s["ties_both"]),
        })
    return row


def _add(total: dict[str, Any], s: dict[str, Any]) -> None:
    for k, v in s.items():
        total[k] = total.get(k, 0) + v


# ====================================================================== the diagnostics
@dataclass(frozen=True)
class WeightDiagnostics:
    """Diagnostics of A vs B: ``table`` (:data:`COLUMNS`), the A-B ``coverage``, the A-base ``base_coverage``."""

    table: Any
    coverage: Comparability
    base_coverage: Comparability | None
    density: float

    @property
    def tensors(self) -> Any:
        return self.table[self.table["scope"] == "tensor"].reset_index(drop=True)

    @property
    def layers(self) -> Any:
        return self.table[self.table["scope"] == "layer"].reset_index(drop=True)

    @property
    def global_(self) -> dict[str, Any]:
        """The global row as a dict."""
        return self.table[self.table["scope"] == "global"].iloc[0].to_dict()


def _base_pairs(shared: list[SharedTensor], a: Checkpoint, base: Checkpoint) -> tuple[Comparability, dict[str, tuple[str, bool]]]:
    cov = comparability(a, base)
    by_key = {s.key: (s.name_b, s.transposed_b) for s in cov.shared()}
    missing = [s.key for s in shared if s.key not in by_key]
    if missing:
        raise WeightsError(
            f"the base {base.label} does not share {len(missing)} of the tensors A and B share "
            f"(e.g. {', '.join(missing[:3])}); a task vector needs the base to have every one of them "
            "with the same shape: give the common ancestor of both checkpoints"
        )
    return cov, by_key


def weight_diagnostics(
    a: CheckpointRef,
    b: CheckpointRef,
    *,
    base: CheckpointRef | None = None,
    density: float = 0.2,
    keys: Iterable[str] | None = None,
) -> WeightDiagnostics:
    """Streamed weight diagnostics of ``a`` against ``b`` (see the module docstring for every value).

    ``a`` / ``b`` / ``base``: model folders, LoRA adapter folders or
    ``(base, adapter)`` pairs. ``density``: TIES trimming density in (0, 1]
    (used only with ``base``). ``keys``: restrict to these canonical keys
    (default: every shared tensor). Raises :class:`WeightsError` when nothing
    is shared or the base lacks a shared tensor.
    """
    if isinstance(density, bool) or not isinstance(density, (int, float)) or not 0 < float(density) <= 1:
        raise WeightsError(f"density must be a number in (0, 1] (the share of each task vector kept), got {density!r}")
    density = float(density)
    ca, cb = read_checkpoint(a), read_checkpoint(b)
    coverage = comparability(ca, cb)
    shared = coverage.shared()
    if keys is not None:
        wanted = set(keys)
        unknown = wanted - {s.key for s in shared}
        if unknown:
            raise WeightsError(f"keys {sorted(unknown)[:5]} are not shared tensors of A and B (see the coverage table)")
        shared = [s for s in shared if s.key in wanted]
    if not shared:
        raise WeightsError(
            f"A ({ca.label}) and B ({cb.label}) share no tensor (route {coverage.route}: {coverage.reason}); "
            "see comparability(a, b).table for why each one is excluded"
        )
    cbase = read_checkpoint(base) if base is not None else None
    base_cov, base_names = _base_pairs(shared, ca, cbase) if cbase is not None else (None, {})
    has_base = cbase is not None

    rows: list[dict[str, Any]] = []
    layers: dict[int, dict[str, Any]] = {}
    total: dict[str, Any] = {}
    readers = [TensorReader(ca), TensorReader(cb)] + ([TensorReader(cbase)] if cbase is not None else [])
    try:
        with torch.no_grad():
            for s in shared:
                ta = readers[0].get(s.name_a, float64=True)
                tb = readers[1].get(s.name_b, float64=True)
                if s.transposed_a != s.transposed_b:
                    tb = tb.T
                tbase = None
                if cbase is not None:
                    name, transposed = base_names[s.key]
                    tbase = readers[2].get(name, float64=True)
                    if transposed != s.transposed_a:
                        tbase = tbase.T
                sums = _tensor_sums(ta, tb.contiguous(), tbase, density)
                del ta, tb, tbase
                sums["n_tensors"] = 1
                rows.append({"scope": "tensor", "key": s.key, "layer": s.layer, "part": s.part,
                             "name_a": s.name_a, "name_b": s.name_b, "n_tensors": 1,
                             **_derived(sums, has_base, density)})
                _add(layers.setdefault(s.layer, {}), sums)
                _add(total, sums)
    finally:
        for r in readers:
            r.close()
    for layer in sorted(layers, key=lambda i: (i < 0, i)):
        s = layers[layer]
        rows.append({"scope": "layer", "layer": layer, "n_tensors": int(s["n_tensors"]), **_derived(s, has_base, density)})
    rows.append({"scope": "global", "layer": -1, "n_tensors": int(total["n_tensors"]), **_derived(total, has_base, density)})
    return WeightDiagnostics(result_table(rows, COLUMNS), coverage, base_cov, density)
