"""The numeric settings that make a run's numbers independent of the process that computes them.

The same config on the same kind of machine gives byte-identical tables whichever process computes a
task (a fresh run, a run resumed after a kill, a Ray worker), because every source of process-to-process
difference is fixed here, once:

- **Extraction threads.** torch's CPU thread count changes how some float32 reductions are split, hence
  their last bits (measured on the tiny test models: 7% of the pooled values moved by one float32 ulp
  between 1 and 2 threads), and a last bit is enough to flip a nearest neighbour downstream. The count
  is resolved once, in the driver (:func:`resolve_threads`), carried by the plan to every worker (Ray
  sets ``OMP_NUM_THREADS=1`` in its workers; the plan's count overrides it), and is part of the key of
  every stored entry a forward pass computes, so entries computed at another count are never mixed in.
- **MKL's conditional numerical reproducibility.** torch's CPU matrix products run on MKL, which picks
  kernels by CPU and splits work by thread count. ``MKL_CBWR=AUTO,STRICT`` (set when interlingua is
  imported, unless the user set it) makes MKL's products bit-reproducible for a given CPU whatever the
  thread count and buffer alignment. It must be set before MKL's first product in the process;
  importing interlingua before running any torch product is enough.
- **One BLAS thread for the analysis.** Everything after extraction is float64 numpy; its BLAS
  (OpenBLAS in numpy's wheels) runs on one thread in every task (:func:`pinned`), so a Gram or an SVD
  sums in one order in every process. (One thread is also the fastest choice for the many small
  decompositions of a comparison on shared cores; benchmarks/README.md.) The array-level entry points
  (``compare_arrays``, ``permutation_test``, ``grid_permutation_test``, the intervals) run under the same
  limit (:func:`analysis_blas`), so a notebook computes the pipeline's bits, and a permutation test does not
  start one BLAS thread per core for each of its many small products.

``threads: auto`` lets extraction change its thread count by measured speed: then the bits of a
representation depend on the machine's load, the entries are keyed ``auto`` and a rerun may differ in
the last float32 bit. What was fixed is written to ``run.json`` (:func:`numeric_settings`).
"""

from __future__ import annotations

import functools
import os
import platform
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = [
    "ANALYSIS_BLAS_THREADS",
    "CNR_MODE",
    "analysis_blas",
    "ensure_cnr",
    "numeric_settings",
    "pinned",
    "resolve_threads",
    "with_analysis_blas",
]

_F = TypeVar("_F", bound=Callable[..., Any])
#: True inside :func:`analysis_blas` (or :func:`pinned`): nested entry points do not re-apply the limit.
_LIMITED: ContextVar[bool] = ContextVar("interlingua_analysis_blas", default=False)

#: MKL's conditional numerical reproducibility mode: the CPU's best code path, results independent of the
#: thread count and of buffer alignment (Intel's "strict CNR").
CNR_MODE = "AUTO,STRICT"

#: BLAS threads for every task after extraction (float64 numpy).
ANALYSIS_BLAS_THREADS = 1


def ensure_cnr() -> str:
    """Set ``MKL_CBWR`` to :data:`CNR_MODE` unless the user chose a mode; return the mode in force."""
    return os.environ.setdefault("MKL_CBWR", CNR_MODE)


def default_threads() -> int:
    """The torch thread count of a forward pass when neither the config nor the call names one (``run`` and
    ``extract()`` alike): ``OMP_NUM_THREADS`` if set, else ONE.

    One because it does not lose where the cores are shared: there, a product on several threads waits at
    every barrier for its slowest thread, and measured on 2 shared cores (docs/threads.md) one thread ran
    extraction about twice as fast as two; and because a fixed count keeps the last float32 bits, so
    tables, the same whatever the machine's core count. On cores nobody else uses, name the count
    (``threads: N``, ``extract(threads=N)``) or set ``OMP_NUM_THREADS``.
    """
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    if value.isdigit() and int(value) >= 1:
        return int(value)
    return 1


def resolve_threads(setting: int | str | None) -> int | str:
    """The run's extraction thread count, resolved once in the driver: None -> :func:`default_threads`,
    ``"auto"`` stays ``"auto"`` (measured by extraction, not bit-reproducible), a number stays."""
    if setting is None:
        return default_threads()
    if setting == "auto":
        return "auto"
    return int(setting)


@contextmanager
def analysis_blas() -> Iterator[None]:
    """numpy's BLAS on :data:`ANALYSIS_BLAS_THREADS` inside (threadpoolctl), the caller's count restored after.

    Re-entrant at no cost: inside another ``analysis_blas`` (or :func:`pinned`) it does nothing.
    """
    if _LIMITED.get():
        yield
        return
    token = _LIMITED.set(True)
    try:
        with _controller().limit(limits=ANALYSIS_BLAS_THREADS, user_api="blas"):
            yield
    finally:
        _LIMITED.reset(token)


@functools.cache
def _controller() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries, built once (building it walks the loaded libraries:
    too slow for every Sinkhorn solve or permutation test)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def with_analysis_blas(fn: _F) -> _F:
    """Decorate an array-level entry point: it runs under :func:`analysis_blas`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with analysis_blas():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps fn's signature


@contextmanager
def pinned(threads: int | str) -> Iterator[None]:
    """Run one task at the run's numeric settings: torch on ``threads`` CPU threads (``"auto"``: left to
    extraction), numpy's BLAS on :data:`ANALYSIS_BLAS_THREADS`; the caller's settings are restored after."""
    torch = _torch()
    before = torch.get_num_threads() if torch is not None else None
    if torch is not None and isinstance(threads, int) and before != threads:
        torch.set_num_threads(threads)
    try:
        with analysis_blas():
            yield
    finally:
        if torch is not None and before is not None and torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _torch() -> Any:
    """torch, imported on first use (cheap once imported), or None where it is missing."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    return torch


def numeric_settings(threads: int | str) -> dict[str, Any]:
    """What :func:`pinned` fixes, for ``run.json``: thread counts, BLAS libraries, MKL's mode, versions."""
    import numpy
    from threadpoolctl import threadpool_info

    torch = _torch()
    blas = [
        {k: info.get(k) for k in ("internal_api", "version", "architecture", "threading_layer")}
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    ]
    return {
        "extraction_threads": threads,
        "analysis_blas_threads": ANALYSIS_BLAS_THREADS,
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "torch_mkl": bool(torch is not None and torch.backends.mkl.is_available()),
        "blas": blas,
        "analysis_dtype": "float64",
        "numpy": numpy.__version__,
        "torch": getattr(torch, "__version__", None),
        "processor": _processor(),
        "bit_reproducible": threads != "auto",
    }


def _processor() -> str:
    """The CPU's model name (kernels are chosen by CPU: "the same kind of machine")."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
