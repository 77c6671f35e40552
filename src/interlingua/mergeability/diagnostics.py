"""Weight-space diagnostics of two checkpoints, streamed tensor by tensor from their safetensors files.

Which tensors
-------------
The shared tensors of :func:`interlingua.mergeability.comparability.comparability`
(same canonical key and canonical shape); every excluded tensor is in the
coverage table with its reason, none is silently dropped: the diagnostics
carry that table (``.coverage``). A tensor B stores transposed relative to A
(GPT-2 ``Conv1D`` against ``nn.Linear``) is transposed to A's layout first;
the base's likewise.

Streaming
---------
Each tensor is read with a plain file read at the byte offsets its header
gives (no memory map, so nothing of a file stays mapped), one tensor of each
model at a time, in its stored dtype, and released before the next; sums run
over float64 blocks of 4M elements, and TIES trimming holds one float64 copy
of one task vector at a time (plus a selection buffer): memory is a few copies
of the largest tensor, never a whole model. A LoRA adapter
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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from interlingua.core.schema import Column, result_table
from interlingua.mergeability.comparability import (
    Checkpoint,
    CheckpointRef,
    Comparability,
    SharedTensor,
    TensorInfo,
    comparability,
    read_checkpoint,
)
from interlingua.mergeability.errors import WeightsError

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
}
for _code, _name in (
    ("F8_E4M3", "float8_e4m3fn"),
    ("F8_E5M2", "float8_e5m2"),
    ("U16", "uint16"),
    ("U32", "uint32"),
    ("U64", "uint64"),
):
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
    buf = torch.empty(size, dtype=torch.uint8)  # not zero-filled first: every byte is read into it
    fh = handle if handle is not None else info.file.open("rb")
    try:
        fh.seek(info.start)
        if fh.readinto(buf.numpy()) != size:  # type: ignore[arg-type]  # an ndarray is a buffer; 3.11 stubs lack it
            raise WeightsError(f"{info.file}: tensor {info.name!r} is cut short: damaged or truncated file")
    finally:
        if handle is None:
            fh.close()
    return buf.view(dtype).reshape(info.shape)


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
    """Entries TIES trimming keeps of an ``numel``-element tensor.

    ``max(1, int(density * numel))`` (mergekit's rule).
    """
    if density >= 1:
        return numel
    if density <= 0 or numel == 0:
        return 0
    return min(numel, max(1, int(density * numel)))


_CHUNK = 1 << 22  # elements per float64 block of the sums


def _blocks(n: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, _CHUNK):
        yield start, min(n, start + _CHUNK)


_SAMPLE = 1 << 16


def _kth_largest(flat: torch.Tensor, k: int) -> float:
    """The ``k``-th largest entry of a 1-D tensor of finite values (1 <= k <= n), exactly.

    A strided sample of about 65,536 entries brackets it: ``hi`` and ``lo`` are
    the sample's values ``4 sqrt(m) + 2`` ranks above and below the k-th's
    expected rank; one chunked pass counts the entries above ``hi`` and gathers
    those in ``[lo, hi]``, among which ``torch.kthvalue`` finds it. If the
    bracket misses (or holds a quarter of the tensor or more), plain
    ``torch.kthvalue``. Memory: two boolean masks and the bracket's entries
    (about 3% of the tensor), not the 16 bytes per entry ``kthvalue`` allocates.
    """
    n = flat.numel()
    if n <= 4 * _SAMPLE:
        return float(torch.kthvalue(flat, n - k + 1).values)
    step = max(1, n // _SAMPLE)
    sample = torch.sort(flat[::step].contiguous(), descending=True).values
    m = sample.numel()
    rank = k * m / n  # the k-th largest's expected rank in the sample (1-based)
    delta = 4.0 * math.sqrt(m) + 2.0
    hi_rank, lo_rank = math.floor(rank - delta), math.ceil(rank + delta)
    hi = float(sample[hi_rank - 1]) if hi_rank >= 1 else math.inf
    lo = float(sample[lo_rank - 1]) if lo_rank <= m else -math.inf
    above = int(torch.count_nonzero(flat > hi))
    inside = flat <= hi
    inside &= flat >= lo
    count = int(torch.count_nonzero(inside))
    if above < k <= above + count and count <= n // 4:  # else the bracket missed, or many equal values
        between = flat[inside]
        return float(torch.kthvalue(between, count - (k - above) + 1).values)
    return float(torch.kthvalue(flat, n - k + 1).values)


def top_k_mask(values: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean mask of the ``k`` largest entries of ``values`` (flattened), ties at the threshold by lower index.

    The threshold (the k-th largest) comes from :func:`_kth_largest` (no copy
    of a large ``values``). Raises :class:`WeightsError` when ``values`` holds
    NaN or infinity (no order to trim by).
    """
    flat = values.reshape(-1)
    n = flat.numel()
    if n:
        low, high = torch.aminmax(flat)  # NaN propagates
        if not (math.isfinite(float(low)) and math.isfinite(float(high))):
            raise WeightsError(
                "a task vector holds NaN or infinite values: the checkpoint (or its base) is damaged; "
                "check it with torch.isfinite before trimming"
            )
    if k >= n:
        return torch.ones(values.shape, dtype=torch.bool)
    if k <= 0:
        return torch.zeros(values.shape, dtype=torch.bool)
    threshold = _kth_largest(flat, k)
    mask = flat > threshold
    need = k - int(torch.count_nonzero(mask))
    for start, stop in _blocks(n):  # ties at the threshold: lower index first
        if need <= 0:
            break
        ties = torch.nonzero(flat[start:stop] == threshold).flatten()[:need]
        mask[ties + start] = True
        need -= ties.numel()
    return mask.reshape(values.shape)


def _f64(x: torch.Tensor) -> torch.Tensor:
    """A float64 copy (never a view of ``x``, even when ``x`` is float64 already)."""
    return x.to(torch.float64, copy=True)


def _trim_side(x: torch.Tensor, base: torch.Tensor, density: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(mask of the non-zero entries of trim(x - base), mask of x - base > 0), flat; one float64 copy at a time."""
    n = x.numel()
    t = torch.empty(n, dtype=torch.float64)
    for start, stop in _blocks(n):
        t[start:stop] = _f64(x[start:stop]).sub_(base[start:stop])
    positive = t > 0
    t.abs_()
    keep = top_k_mask(t, trim_count(n, density))
    keep &= t != 0
    return keep, positive


def _tensor_sums(a: torch.Tensor, b: torch.Tensor, base: torch.Tensor | None, density: float) -> dict[str, float]:
    """The float64 sums and TIES counts of one tensor pair (see the module docstring).

    ``a``, ``b``, ``base``: tensors of one shape in any floating dtype. The sums
    run over blocks of :data:`_CHUNK` elements converted to float64 (partial sums
    added in float64); the trimming of each task vector holds one float64 copy
    of it at a time.
    """
    fa, fb = a.reshape(-1), b.reshape(-1)
    f0 = base.reshape(-1) if base is not None else None
    names = ("dot", "sq_a", "sq_b", "sq_diff") + (("tv_dot", "tv_sq_a", "tv_sq_b") if f0 is not None else ())
    out: dict[str, float] = dict.fromkeys(names, 0.0)
    for start, stop in _blocks(fa.numel()):
        x, y = _f64(fa[start:stop]), _f64(fb[start:stop])
        out["dot"] += float(x @ y)
        out["sq_a"] += float(x @ x)
        out["sq_b"] += float(y @ y)
        d = x - y
        out["sq_diff"] += float(d @ d)
        if f0 is not None:
            z = _f64(f0[start:stop])
            x.sub_(z)
            y.sub_(z)
            out["tv_dot"] += float(x @ y)
            out["tv_sq_a"] += float(x @ x)
            out["tv_sq_b"] += float(y @ y)
    out["numel"] = fa.numel()
    if f0 is None:
        return out
    keep_a, pos_a = _trim_side(fa, f0, density)
    keep_b, pos_b = _trim_side(fb, f0, density)
    both = keep_a & keep_b
    out["ties_kept_a"] = int(keep_a.sum())
    out["ties_kept_b"] = int(keep_b.sum())
    out["ties_both"] = int(both.sum())
    out["ties_agree"] = int((both & (pos_a == pos_b)).sum())  # both non-zero: same sign <=> same side of 0
    return out


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 and math.isfinite(den) else math.nan


def _derived(s: dict[str, Any], has_base: bool, density: float) -> dict[str, Any]:
    norm_a, norm_b, dist = math.sqrt(s["sq_a"]), math.sqrt(s["sq_b"]), math.sqrt(s["sq_diff"])
    row = {
        **{k: s[k] for k in ("numel", "dot", "sq_a", "sq_b", "sq_diff")},
        "norm_a": norm_a,
        "norm_b": norm_b,
        "cosine": _ratio(s["dot"], norm_a * norm_b),
        "rel_l2": _ratio(dist, norm_b),
        "rel_l2_sym": _ratio(2 * dist, norm_a + norm_b),
        "norm_ratio": _ratio(norm_a, norm_b),
    }
    if has_base:
        tna, tnb = math.sqrt(s["tv_sq_a"]), math.sqrt(s["tv_sq_b"])
        row.update(
            {
                "tv_dot": s["tv_dot"],
                "tv_sq_a": s["tv_sq_a"],
                "tv_sq_b": s["tv_sq_b"],
                "tv_norm_a": tna,
                "tv_norm_b": tnb,
                "tv_cosine": _ratio(s["tv_dot"], tna * tnb),
                "density": density,
                **{k: int(s[k]) for k in _COUNTS},
                "ties_sign_agreement": _ratio(s["ties_agree"], s["ties_both"]),
            }
        )
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


def _base_pairs(
    shared: list[SharedTensor], a: Checkpoint, base: Checkpoint
) -> tuple[Comparability, dict[str, tuple[str, bool]]]:
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
                # stored dtype; LoRA-adapted tensors stay float64 (their W + scaling * B A)
                ta = readers[0].get(s.name_a, float64=s.name_a in ca.lora)
                tb = readers[1].get(s.name_b, float64=s.name_b in cb.lora)
                if s.transposed_a != s.transposed_b:
                    tb = tb.T
                tbase = None
                if cbase is not None:
                    name, transposed = base_names[s.key]
                    tbase = readers[2].get(name, float64=name in cbase.lora)
                    if transposed != s.transposed_a:
                        tbase = tbase.T
                sums = _tensor_sums(ta, tb.contiguous(), None if tbase is None else tbase.contiguous(), density)
                del ta, tb, tbase
                sums["n_tensors"] = 1
                rows.append(
                    {
                        "scope": "tensor",
                        "key": s.key,
                        "layer": s.layer,
                        "part": s.part,
                        "name_a": s.name_a,
                        "name_b": s.name_b,
                        "n_tensors": 1,
                        **_derived(sums, has_base, density),
                    }
                )
                _add(layers.setdefault(s.layer, {}), sums)
                _add(total, sums)
    finally:
        for r in readers:
            r.close()
    for layer in sorted(layers, key=lambda i: (i < 0, i)):
        layer_sums = layers[layer]
        rows.append(
            {
                "scope": "layer",
                "layer": layer,
                "n_tensors": int(layer_sums["n_tensors"]),
                **_derived(layer_sums, has_base, density),
            }
        )
    rows.append(
        {"scope": "global", "layer": -1, "n_tensors": int(total["n_tensors"]), **_derived(total, has_base, density)}
    )
    return WeightDiagnostics(result_table(rows, COLUMNS), coverage, base_cov, density)
