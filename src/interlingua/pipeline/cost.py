"""The cost before the run: the plan's tasks by kind, which are stored, and a time estimate per phase.

``interlingua plan CONFIG`` (and ``run --dry-run``, and one line of ``validate``) print it; a run whose
estimate exceeds :data:`THRESHOLD_SECONDS` says so before starting, with the cheaper choices.

The cost model is small and says where it is rough. It is calibrated on this machine once per process:

- a measured matmul rate (:func:`matmul_rate`; float32 for extraction, float64 for the analysis), numpy only,
  so ``validate`` and ``plan`` never import torch;
- each model's FLOPs per token, ``2 x`` its non-embedding parameters plus the attention term, from facts
  recorded at an earlier load, its ``config.json`` or its GGUF header (:func:`model_shape`; no weights read);
- per measure, the fixed cost of one call and of one permutation, measured on a small synthetic case
  (:func:`measure_overheads`), plus the arithmetic of the path it takes at the run's shapes (:func:`measure_flops`:
  the Gram gather of linear CKA, the prepared ``r x r`` step of Procrustes/CCA/RSA, a full recompute otherwise).

Maps, patching, fusion, audits and barriers are estimated from their forward passes and fits only (rough).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from interlingua.analysis.inference.cost import GATHER_COST, SVD_PENALTY, measure_flops
from interlingua.contract.capability import CostPhase
from interlingua.pipeline.extract_kind import model_bytes

__all__ = [
    "GATHER_COST",
    "SVD_PENALTY",
    "THRESHOLD_SECONDS",
    "CostContext",
    "CostEstimate",
    "MachineLoad",
    "Phase",
    "ModelShape",
    "estimate",
    "format_plan",
    "matmul_rate",
    "measure_flops",
    "model_shape",
    "phases",
    "summary_line",
    "long_run_warning",
    "advice",
    "apply_load",
    "machine_load",
    "nominal_machine",
]

#: A run estimated above this many seconds says so before starting (a warning, not an error).
THRESHOLD_SECONDS = 30 * 60.0
#: Share of the one-thread float32 matmul rate a one-thread CPU forward pass reaches (small batches, attention,
#: norms; measured on the packaged models, see docs/cost.md).
FORWARD_EFFICIENCY = 0.35
#: What each torch thread beyond the first adds to a forward pass's rate, as a share of the first's.
THREAD_SCALING = 0.7
#: Seconds of Python per transformer block per batch (module calls, hooks): what a tiny model's forward pass costs.
BLOCK_OVERHEAD = 4e-4
#: Seconds per sentence of tokenising, pooling and storing (measured on the tiny test models).
SENTENCE_OVERHEAD = 1.5e-3
#: Importing torch and transformers, once per run that loads any model (measured here: 2-6 s on 2 shared cores).
TORCH_IMPORT_SECONDS = 3.0
#: Loading a model: a fixed part (building modules, the tokenizer) and reading its weight files.
LOAD_FIXED_SECONDS = 1.0
DISK_BYTES_PER_SECOND = 300e6
#: A packaged GGUF model's one-time conversion to safetensors (dequantising every tensor).
CONVERT_BYTES_PER_SECOND = 40e6
#: Seconds of every run before and around its tasks: imports (torch, transformers), pre-flight, stored entries read.
STARTUP_SECONDS = 5.0
#: Seconds per report figure (matplotlib, 120 dpi): the outputs phase is mostly figures; every run, cached or not.
FIGURE_SECONDS = 0.4


# --------------------------------------------------------------------------- calibration

#: The nominal machine of docs' cost tables (:func:`nominal_machine`): one BLAS thread of this project's 2-core
#: reference machine at load 0-3 (docs/cost.md: float64 47-51 GFLOP/s; float32 about twice that), and each
#: measure's fixed costs (one call, a permutation test's setup, one draw) as measured there at n = 24.
NOMINAL_RATES = {"float32": 95e9, "float64": 48e9}
NOMINAL_OVERHEADS = (3e-4, 1.3e-2, 1e-5)
#: The nominal machine's CPUs: its default ``workers`` (concurrent extractions, docs/threads.md) is this / threads.
NOMINAL_CORES = 2
_NOMINAL: list[bool] = [False]


@contextlib.contextmanager
def nominal_machine() -> Iterator[None]:
    """Within it, estimates use :data:`NOMINAL_RATES` and :data:`NOMINAL_OVERHEADS` instead of a live calibration:
    the same numbers on every machine and at any load (the cost tables in the docs, regenerated in CI)."""
    _NOMINAL.append(True)
    try:
        yield
    finally:
        _NOMINAL.pop()


def _rates() -> tuple[float, float]:
    """(float32, float64) FLOP/s of one BLAS thread: calibrated here, or the nominal machine's."""
    if _NOMINAL[-1]:
        return NOMINAL_RATES["float32"], NOMINAL_RATES["float64"]
    return matmul_rate("float32"), matmul_rate("float64")


def _overheads(measure_id: str) -> tuple[float, float, float]:
    return NOMINAL_OVERHEADS if _NOMINAL[-1] else measure_overheads(measure_id)


@dataclass(frozen=True)
class MachineLoad:
    """How busy the machine was at calibration: the 1-minute load average and the CPUs this process may use.

    The calibration takes the fastest matmul repeat, so it measures what a core can do, not the share of it a run
    will get; this is that share (see :attr:`share`), so the estimate can say what the load costs."""

    load: float
    cores: int

    @property
    def share(self) -> float:
        """Share of a core one more runnable thread gets: 1 while the runnable threads fit the cores, else
        ``cores / (load + 1)`` (the scheduler splits the cores evenly among the runnable threads)."""
        return min(1.0, self.cores / (self.load + 1.0)) if self.cores > 0 else 1.0

    @property
    def busy(self) -> bool:
        return self.share < 0.9

    def describe(self) -> str:
        if not self.busy:
            return f"machine idle enough: load {self.load:.1f} on {self.cores} core(s)"
        return (
            f"machine busy: load {self.load:.1f} on {self.cores} core(s), so a run gets about "
            f"{100 * self.share:.0f}% of each core it uses; the estimate assumes this load lasts (times scaled by "
            f"1/{self.share:.2f}); an idle machine would take about {100 * self.share:.0f}% of it"
        )


def machine_load() -> MachineLoad | None:
    """The load at this moment (``os.getloadavg``, ``os.sched_getaffinity``); None where the system has no load
    average (Windows)."""
    try:
        load = float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no affinity; every CPU
        cores = os.cpu_count() or 1
    return MachineLoad(load, cores)


def apply_load(est: CostEstimate, load: MachineLoad | None) -> CostEstimate:
    """``est`` with each phase's seconds divided by the load's :attr:`MachineLoad.share` (every phase runs on the
    CPUs: extraction, the analysis, loading's decompression, the figures) and the load recorded for the text."""
    est.load = load
    if load is None or not load.busy:
        return est
    for p in est.phases:
        p.seconds /= load.share
        p.parts = {k: v / load.share for k, v in p.parts.items()}
    return est


@functools.cache
def matmul_rate(dtype: str = "float64") -> float:
    """FLOP/s of a 384 x 384 matmul on ONE BLAS thread: the fastest of repeats over ~0.15 s (cached per process).

    One thread, because the analysis runs on one (numerics.analysis_blas) and because a multi-threaded
    product on busy cores waits for its slowest thread: measured that way, the rate fell 14x between two
    processes a minute apart on this 2-core machine. Extraction's rate is this times its torch threads
    (:func:`forward_rate`). The fastest repeat, not the median: it measures what a core can do, so an estimate
    made while other work shares the cores does not balloon by the share it happened to get."""
    from interlingua.core.numerics import analysis_blas

    rng = np.random.default_rng(0)
    size = 384
    a = rng.standard_normal((size, size)).astype(dtype)
    b = rng.standard_normal((size, size)).astype(dtype)
    with analysis_blas():  # the analysis' one BLAS thread
        a @ b  # warm-up
        times: list[float] = []
        deadline = time.perf_counter() + 0.15
        while time.perf_counter() < deadline or len(times) < 3:
            t = time.perf_counter()
            a @ b
            times.append(max(time.perf_counter() - t, 1e-7))
    return 2.0 * size**3 / min(times)


def forward_rate(rate32: float, threads: int | str) -> float:
    """FLOP/s of a CPU forward pass on ``threads`` torch threads ("auto": every CPU) from the one-thread float32 rate:
    :data:`FORWARD_EFFICIENCY` of it per thread, threads beyond the first adding :data:`THREAD_SCALING` each."""
    from interlingua.core.numerics import default_threads

    n = default_threads() if not isinstance(threads, int) else max(threads, 1)
    return rate32 * FORWARD_EFFICIENCY * (1.0 + THREAD_SCALING * (n - 1))


@functools.cache
def measure_overheads(measure_id: str) -> tuple[float, float, float]:
    """(seconds of one direct call, of a permutation test's setup, of one more permutation) of ``measure_id`` on
    n = 24 rows of width 32, where arithmetic is negligible: the fixed Python and LAPACK-call costs the FLOP model
    does not see. Two tests (16 and 256 draws) split the setup from the per-draw cost (cached per process)."""
    import warnings

    from interlingua.analysis.inference import permutation_test
    from interlingua.analysis.measures import get_measure

    measure = get_measure(measure_id)
    kw: dict[str, Any] = {"same_model": True} if measure.metadata.requires_same_model else {}
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 32))  # wide enough that linear CKA takes its Gram gather, as at real widths
    y = x @ rng.standard_normal((32, 32)) + 0.5 * rng.standard_normal((24, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        measure(x, y, **kw)  # warm-up
        t = time.perf_counter()
        for _ in range(3):
            measure(x, y, **kw)
        direct = (time.perf_counter() - t) / 3
        spent = []
        for k in (16, 256):
            t = time.perf_counter()
            permutation_test(measure, x, y, n_permutations=k, seed=0, **kw)
            spent.append(time.perf_counter() - t)
    per = max(spent[1] - spent[0], 0.0) / 240
    return direct, max(spent[0] - 16 * per, 0.0), per


# --------------------------------------------------------------------------- models without weights


@dataclass(frozen=True)
class ModelShape:
    """What the cost model needs of a model: depth, width, parameters, and where they were read."""

    layers: int
    hidden: int
    params: int  # non-embedding parameters: the per-token matmul weights
    vocab: int
    weight_bytes: int
    source: str  # "facts" (an earlier load), "config.json", "GGUF header" or "weight files"

    def flops_per_token(self, context: float, lm_head: bool = False) -> float:
        """Forward FLOPs of one token: ``2 x`` weights, attention over half the context (causal), an LM head."""
        return (
            2.0 * self.params
            + 2.0 * self.layers * self.hidden * context
            + (2.0 * self.hidden * self.vocab if lm_head else 0.0)
        )


def _weight_bytes(report: dict[str, Any]) -> int:
    folder = report.get("folder")
    gguf = report.get("gguf_file")
    if folder and gguf and (Path(folder) / gguf).is_file():
        return (Path(folder) / gguf).stat().st_size
    loc = Path(str(report.get("location") or ""))
    if loc.is_file():
        return loc.stat().st_size
    if folder and Path(folder).is_dir():
        return sum(
            p.stat().st_size
            for p in Path(folder).iterdir()
            if p.suffix in (".safetensors", ".bin", ".gguf", ".pt") and p.is_file()
        )
    return 0


def _from_config(cfg: dict[str, Any]) -> dict[str, int] | None:
    """Depth, width, non-embedding parameters and vocabulary of a ``config.json`` (the architecture table's readers:
    :func:`~interlingua.data.models.table.config_int`, :func:`~interlingua.data.models.table.gated_mlp`)."""
    from interlingua.data.models.table import config_int, gated_mlp

    hidden = config_int(cfg, "hidden")
    layers = config_int(cfg, "layers")
    if hidden is None or layers is None:
        return None
    heads = config_int(cfg, "heads") or 1
    kv = config_int(cfg, "kv_heads") or heads
    head_dim = config_int(cfg, "head_dim") or hidden // heads
    ffn = config_int(cfg, "ffn") or 4 * hidden
    text = cfg.get("text_config")
    model_type = ({**cfg, **text} if isinstance(text, dict) else cfg).get("model_type", "")
    attn = hidden * head_dim * 2 * (heads + kv)
    mlp = (3 if gated_mlp(str(model_type)) else 2) * hidden * ffn
    return {"hidden": hidden, "layers": layers, "params": layers * (attn + mlp), "vocab": config_int(cfg, "vocab") or 0}


def model_shape(report: dict[str, Any], facts: dict[str, Any] | None = None) -> ModelShape:
    """A model's shape from an earlier load's facts, else its config.json or GGUF header (pre-flight's ``report``),
    else its weight files' size; never from its weights."""
    from interlingua.data.models.preflight import gguf_config

    size = _weight_bytes(report)
    if facts and isinstance(facts.get("num_layers"), int) and isinstance(facts.get("hidden_size"), int):
        h = int(facts["hidden_size"])
        params = int(facts.get("parameter_count") or 0) - int(facts.get("embedding_rows") or 0) * h
        return ModelShape(int(facts["num_layers"]), h, max(params, 0), int(facts.get("vocab_size") or 0), size, "facts")
    folder = report.get("folder")
    found, source = None, "config.json"
    cfg_path = Path(folder) / "config.json" if folder else None
    if cfg_path is not None and cfg_path.is_file():
        try:
            found = _from_config(json.loads(cfg_path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            found = None
    gguf = Path(folder) / report["gguf_file"] if folder and report.get("gguf_file") else None
    if found is None and gguf is not None and gguf.is_file():
        found, source = _from_config(gguf_config(gguf)), "GGUF header"
    if found is None:  # weight files alone: 2 bytes a parameter, 12 h^2 per block
        layers = int(report.get("num_layers") or 12)
        params = max(size // 2, 1)
        hidden = max(int(math.sqrt(params / (12 * layers))), 1)
        return ModelShape(layers, hidden, params, 0, size, "weight files")
    return ModelShape(found["layers"], found["hidden"], found["params"], found["vocab"], size, source)


def mean_tokens(sentences: list[str], folder: str | None, max_length: int) -> tuple[float, str]:
    """Mean tokens per sentence: the model's ``tokenizer.json`` (the ``tokenizers`` library, no torch) on up to 200
    sentences, else UTF-8 bytes / 4; capped at ``max_length``; and which was used."""
    sample = sentences[:200]
    if not sample:
        return 0.0, "none"
    path = Path(folder) / "tokenizer.json" if folder else None
    if path is not None and path.is_file():
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(path))
            counts = [min(len(e.ids), max_length) for e in tok.encode_batch(sample)]
            return float(np.mean(counts)), "tokenizer"
        except Exception:  # noqa: BLE001 - any tokenizer trouble: the byte estimate
            pass
    return float(np.mean([min(len(s.encode("utf-8")) / 4 + 1, max_length) for s in sample])), "bytes / 4"


# --------------------------------------------------------------------------- the estimate


@dataclass
class Phase:
    """One phase of the run: its tasks, how many are stored, seconds for the rest, and how it was estimated."""

    name: str
    tasks: int = 0
    stored: int = 0
    seconds: float = 0.0
    detail: str = ""
    rough: bool = False
    parts: dict[str, float] = field(default_factory=dict)  # e.g. comparisons: seconds per measure
    peak_bytes: float = 0.0  # the largest working set of one of its tasks (0: not estimated)
    overlap: float = 0.0  # seconds saved by tasks running at once (workers): one after another, seconds + overlap


@dataclass
class CostEstimate:
    """The plan's tasks by kind (total, stored) and the phases' estimates."""

    kinds: dict[str, tuple[int, int]]
    phases: list[Phase]
    rates: dict[str, float]
    models: dict[str, ModelShape]
    stored_known: bool = True
    load: MachineLoad | None = None  # the load at calibration, when the estimate was scaled by it (apply_load)

    @property
    def seconds(self) -> float:
        return float(sum(p.seconds for p in self.phases))

    @property
    def peak_bytes(self) -> float:
        """The largest phase peak: phases run one after another, so their peaks do not add."""
        return float(max((p.peak_bytes for p in self.phases), default=0.0))

    def phase(self, name: str) -> Phase:
        return next(p for p in self.phases if p.name == name)


def _facts(store: Any, fingerprint: str | None) -> dict[str, Any] | None:
    """Facts an earlier load recorded (read without touching the store's hit counts)."""
    if not fingerprint or store is None:
        return None
    path = store.json_path("facts", fingerprint)
    try:
        payload = json.loads(path.read_text(encoding="utf-8")).get("payload")
    except (OSError, ValueError, AttributeError):
        return None
    return payload if isinstance(payload, dict) else None


@dataclass
class CostContext:
    """What a kind's cost hook (``Kind.cost(task, ctx)``) reads: the plan, the models' shapes and the calibrated
    rates, and the forward-pass model every kind that runs a model shares (:meth:`forward_seconds`)."""

    plan: Any
    reports: dict[str, dict[str, Any]]
    store: Any
    shapes: dict[str, ModelShape]
    rate32: float  # float32 FLOP/s of one BLAS thread
    rate64: float  # float64 FLOP/s of one BLAS thread: the analysis
    fwd_rate: float  # FLOP/s of a forward pass on the run's threads
    load_fixed_seconds: float = LOAD_FIXED_SECONDS  # a model load's fixed part
    disk_bytes_per_second: float = DISK_BYTES_PER_SECOND
    _tokens: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def spec(self) -> Any:
        """The run's spec."""
        return self.plan.spec

    @property
    def n(self) -> int:
        """The corpus' sentences."""
        return len(self.plan.corpus)

    def mean_tokens(self, model: str, language: str) -> float:
        """Mean tokens per sentence of ``language`` under ``model``'s tokenizer (:func:`mean_tokens`, once per pair)."""
        if (model, language) not in self._tokens:
            self._tokens[(model, language)] = mean_tokens(
                self.plan.corpus.sentences(language), self.reports.get(model, {}).get("folder"), self.spec.max_length
            )[0]
        return self._tokens[(model, language)]

    def forward_seconds(
        self, model: str, language: str, count: int, lm_head: bool = False, blocks: int | None = None
    ) -> float:
        """Seconds of ``count`` sentences of ``language`` through ``model`` (with its LM head: ``lm_head``);
        ``blocks``: only the first ``blocks`` blocks run (a forward stopped at a middle layer), else all."""
        t, sh = self.mean_tokens(model, language) + 1.0, self.shapes[model]
        batches = math.ceil(count / max(self.spec.batch_size, 1))
        share = 1.0 if blocks is None or sh.layers <= 0 else min(max(blocks, 0), sh.layers) / sh.layers
        return (
            count * t * sh.flops_per_token(t / 2, lm_head) * share / self.fwd_rate
            + batches * sh.layers * share * BLOCK_OVERHEAD
            + count * SENTENCE_OVERHEAD
        )

    def model_bytes(self, model: str) -> float:
        """``model``'s float32 weights in memory (its matmul weights and its embedding table)."""
        return model_bytes(self.shapes[model])

    def overheads(self, measure_id: str) -> tuple[float, float, float]:
        """A measure's fixed costs (:func:`measure_overheads`, or the nominal machine's)."""
        return _overheads(measure_id)


#: The pipeline's own phases: before any task, loading the models the tasks load, and the outputs after them.
STARTUP = CostPhase("startup, pre-flight, stored entries", 0, rough=True)
LOADING = CostPhase("model loading/conversion", 10, rough=True, advice=("fewer models", "weights on a local disk"))
OUTPUTS = CostPhase(
    "outputs (tables, report, figures)",
    100,
    rough=True,
    advice=("layer_grid: false (one grid figure per cross-model pair)",),
)


def phases() -> dict[str, CostPhase]:
    """Every phase an estimate may hold, by name: the pipeline's own and those the registered kinds declare."""
    from interlingua.pipeline.registry import cost_phases

    return {p.name: p for p in (STARTUP, LOADING, *cost_phases(), OUTPUTS)}


def estimate(
    plan: Any,
    reports: dict[str, dict[str, Any]],
    store: Any = None,
    *,
    stored: bool = True,
    shapes: dict[str, ModelShape] | None = None,
) -> CostEstimate:
    """The cost of ``plan``: tasks by kind with how many are stored (``stored``: ask the store; False when the
    plan's keys are placeholders, as in ``validate``), and seconds per phase for the tasks still to run, each
    priced by its kind's cost hook (``Kind.cost``) into its kind's phase (``Kind.phase``).
    ``shapes``: models' shapes given by the caller (``plan --offline``: a table of published shapes)."""
    from interlingua.pipeline.execute import Runtime, is_done
    from interlingua.pipeline.registry import kind as kind_of

    rt = Runtime(plan, store, progress=False) if stored and store is not None else None
    done = {t.key: (rt is not None and is_done(rt, t)) for t in plan.tasks}
    kinds: dict[str, tuple[int, int]] = {}
    for t in plan.tasks:
        total, have = kinds.get(t.kind, (0, 0))
        kinds[t.kind] = (total + 1, have + int(done[t.key]))
    rate32, rate64 = _rates()
    given = shapes or {}
    shapes = {
        name: given[name]
        if name in given
        else model_shape(reports.get(name, {}), _facts(store, plan.fingerprints.get(name)))
        for name in plan.models
    }
    ctx = CostContext(plan, reports, store, shapes, rate32, rate64, forward_rate(rate32, plan.threads))
    declared = phases()
    found: dict[str, Phase] = {}
    tokens: dict[str, float] = {}
    needs_load: set[str] = set()
    lanes: dict[str, list[float]] = {}  # model -> [seconds, peak bytes] of its extractions that may run concurrently

    for t in plan.tasks:
        k = kind_of(t.kind)
        assert k.phase is not None and k.cost is not None  # the registry refuses a kind without them
        phase = found.setdefault(k.phase.name, Phase(k.phase.name, rough=k.phase.rough))
        phase.tasks += 1
        phase.stored += int(done[t.key])
        if done[t.key]:
            continue
        c = k.cost(t, ctx)
        if t.kind == "extract" and not t.extra:  # may run beside other models' extractions (workers)
            lane = lanes.setdefault(t.model, [0.0, 0.0])
            lane[0] += float(sum(c.seconds))
            lane[1] = max(lane[1], c.peak_bytes)
        needs_load.update(c.loads)
        for i, s in enumerate(c.seconds):
            phase.seconds += s
            if c.parts:
                phase.parts[c.parts[i]] = phase.parts.get(c.parts[i], 0.0) + s
        phase.peak_bytes = max(phase.peak_bytes, c.peak_bytes)
        tokens[phase.name] = tokens.get(phase.name, 0.0) + c.tokens
    loading = Phase(LOADING.name, rough=LOADING.rough)
    if needs_load:
        loading.seconds += TORCH_IMPORT_SECONDS
    for name in sorted(needs_load):
        sh = shapes[name]
        loading.tasks += 1
        loading.seconds += LOAD_FIXED_SECONDS + sh.weight_bytes / DISK_BYTES_PER_SECOND
        loading.peak_bytes = max(loading.peak_bytes, model_bytes(sh) * (2 if _is_gguf(reports, name) else 1))
        if reports.get(name, {}).get("weights_format") == "gguf":  # at most once per machine: the conversion
            loading.seconds += 4 * (sh.params + sh.vocab * sh.hidden) / CONVERT_BYTES_PER_SECOND * _unconverted(store)
    gb = sum(shapes[m].weight_bytes for m in needs_load) / 1e9
    loading.detail = f"{len(needs_load)} model(s) to load, weights {gb:.2f} GB" + (
        "; a packaged GGUF model converts once per machine"
        if any(reports.get(m, {}).get("weights_format") == "gguf" for m in needs_load)
        else ""
    )
    for phase in found.values():
        if tokens.get(phase.name):
            per_tok = {m: f"{shapes[m].flops_per_token(0) / 1e9:.2g}" for m in plan.models}
            phase.detail = f"{tokens[phase.name]:,.0f} tokens to run; GFLOP per token " + ", ".join(
                f"{m} {v}" for m, v in per_tok.items()
            )
        if phase.parts:
            phase.detail = f"by {declared[phase.name].parts}: " + ", ".join(
                f"{m} {_fmt(s)}" for m, s in sorted(phase.parts.items(), key=lambda kv: -kv[1])
            )
    extraction = kind_of("extract").phase
    if lanes and extraction is not None and extraction.name in found:
        _concurrent_extraction(found[extraction.name], plan, shapes, lanes)
    startup = Phase(STARTUP.name, rough=STARTUP.rough)
    startup.seconds = STARTUP_SECONDS + 0.05 * sum(done.values())
    startup.detail = "imports and pre-flight; every run, cached or not"
    outputs = Phase(OUTPUTS.name, rough=OUTPUTS.rough)
    figures = figure_count(plan)
    outputs.seconds, outputs.detail = 1.0 + figures * FIGURE_SECONDS, f"about {figures} figures; rewritten every run"
    ordered = sorted([loading, *found.values()], key=lambda p: declared[p.name].rank)
    body = [p for p in ordered if p.tasks or p.seconds]
    return CostEstimate(
        kinds, [startup, *body, outputs], {"float32": rate32, "float64": rate64}, shapes, stored_known=rt is not None
    )


def _concurrent_extraction(
    phase: Phase, plan: Any, shapes: dict[str, ModelShape], lanes: dict[str, list[float]]
) -> None:
    """The extraction phase when the local executor runs several models' extractions at once (``workers``,
    :mod:`interlingua.pipeline.workers`): its wall time is the busiest lane's, its peak the largest models' together."""
    from interlingua.pipeline.execute import resolve_workers
    from interlingua.pipeline.workers import default_workers, schedule_seconds

    setting = getattr(plan.spec, "workers", None)
    if _NOMINAL[-1] and setting is None:  # the nominal machine's cores, and no memory bound: the same on every machine
        count, why = default_workers(plan.threads, len(lanes), cores=NOMINAL_CORES)
    else:
        count, why = resolve_workers(plan, None, shapes)
    count = min(count, len(lanes))
    if count < 2:
        return
    seconds = [v[0] for v in lanes.values()]
    phase.overlap = sum(seconds) - schedule_seconds(seconds, count)
    phase.seconds -= phase.overlap
    phase.peak_bytes = max(phase.peak_bytes, sum(sorted((v[1] for v in lanes.values()), reverse=True)[:count]))
    phase.detail = (phase.detail + "; " if phase.detail else "") + f"{count} models at once (workers: {why})"


def figure_count(plan: Any) -> int:
    """About how many figures the report draws: the sum of each capability's count (``Capability.figure_count``)."""
    from interlingua.pipeline.registry import capabilities

    return sum(c.figure_count(plan) for c in capabilities() if c.figure_count is not None)


def _is_gguf(reports: dict[str, dict[str, Any]], name: str) -> bool:
    """A GGUF model is dequantised once: its float32 copy is written while the reader's tensors are held."""
    return reports.get(name, {}).get("weights_format") == "gguf"


def _unconverted(store: Any) -> float:
    """1 when the store holds no converted GGUF model yet (the first run converts), else 0."""
    if store is None:
        return 1.0
    folder = Path(store.root) / "models" / "gguf-converted"
    return 0.0 if folder.is_dir() and any(folder.iterdir()) else 1.0


# --------------------------------------------------------------------------- text


def _fmt(seconds: float) -> str:
    if seconds < 1:
        return "<1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _fmt_bytes(b: float) -> str:
    if b <= 0:
        return "-"
    if b < 2**30:
        return f"{b / 2**20:.0f} MiB"
    return f"{b / 2**30:.1f} GiB"


def format_plan(est: CostEstimate, *, title: str = "") -> list[str]:
    """The table ``interlingua plan`` prints: tasks by kind, then the phases and the total."""
    lines = [title] if title else []
    where = "calibrated here (one BLAS thread)" if not _NOMINAL[-1] else "nominal machine, not calibrated here"
    lines.append(
        f"{where}: float32 matmul {est.rates['float32'] / 1e9:.1f} GFLOP/s, float64 "
        f"{est.rates['float64'] / 1e9:.1f} GFLOP/s; models: "
        + ", ".join(
            f"{m} ({s.layers} layers, d {s.hidden}, {s.params / 1e6:.1f}M non-embedding parameters from {s.source})"
            for m, s in est.models.items()
        )
    )
    if est.load is not None:
        lines.append(est.load.describe())
    stored_head = "stored" if est.stored_known else "stored (not checked)"
    lines.append(f"{'task kind':<14}{'total':>7}  {stored_head:>8}  {'to run':>7}")
    for kind, (total, have) in est.kinds.items():
        lines.append(f"{kind:<14}{total:>7}  {have if est.stored_known else '-':>8}  {total - have:>7}")
    lines.append(f"{'phase':<36}{'estimate':>10}  {'peak mem':>9}  how")
    for p in est.phases:
        how = (p.detail or f"{p.tasks - p.stored} of {p.tasks} tasks to run") + (" (rough)" if p.rough else "")
        lines.append(f"{p.name:<36}{_fmt(p.seconds):>10}  {_fmt_bytes(p.peak_bytes):>9}  {how}")
    lines.append(
        f"{'total':<36}{_fmt(est.seconds):>10}  {_fmt_bytes(est.peak_bytes):>9}  (measured runs: docs/cost.md; "
        "peak mem: the largest task's working set beyond the interpreter)"
    )
    warning = long_run_warning(est, None)
    if warning:
        lines.append(warning)
    return lines


def summary_line(est: CostEstimate) -> str:
    """One line for ``validate``: the tasks and the estimate by phase."""
    tasks = ", ".join(f"{total} {kind}" for kind, (total, _) in est.kinds.items())
    phases = ", ".join(f"{p.name} {_fmt(p.seconds)}" for p in est.phases if p.seconds >= 1)
    return (
        f"plan: {tasks}; estimated {_fmt(est.seconds)}"
        + (f" ({phases})" if phases else "")
        + "; `interlingua plan CONFIG` for details"
    )


def advice(est: CostEstimate, *, most: int = 3) -> list[str]:
    """The cheaper choices for ``est``, aimed at its costliest phases: every phase holding at least a quarter of the
    time (at most ``most``, costliest first), each with its share and what cuts it (declared with the phase:
    ``CostPhase.advice``); a phase's costliest parts (the measures by cost) when it has some. Fewer sentences is
    advised only where extraction or comparisons dominate: when fusion and barriers are 26 of 28 hours, the
    sentence count is not what to change."""
    total = est.seconds
    if total <= 0:
        return []
    heavy = sorted((p for p in est.phases if p.seconds >= 0.25 * total), key=lambda p: -p.seconds)[:most]
    if not heavy:  # no phase holds a quarter: the costliest one
        heavy = [max(est.phases, key=lambda p: p.seconds)]
    declared = phases()
    ideas = []
    for p in heavy:
        d = declared.get(p.name)
        tips = list(d.advice) if d is not None else []
        if d is not None and d.parts and p.parts:
            top = sorted(p.parts.items(), key=lambda kv: -kv[1])[:2]
            tips.append(f"fewer {d.parts}s (most costly: " + ", ".join(f"{m} {_fmt(v)}" for m, v in top) + ")")
            tips += d.parts_advice
        if tips:
            ideas.append(f"{p.name} ({_fmt(p.seconds)}, {100 * p.seconds / total:.0f}%): " + "; ".join(tips))
    return ideas


def long_run_warning(est: CostEstimate, spec: Any, threshold: float = THRESHOLD_SECONDS) -> str | None:
    """A warning line with the cheaper choices (:func:`advice`) when the estimate exceeds ``threshold`` seconds,
    else None."""
    if est.seconds <= threshold:
        return None
    return (
        f"interlingua: warning: this run is estimated at {_fmt(est.seconds)} (over {_fmt(threshold)}); "
        "cheaper: " + " | ".join(advice(est))
    )


def unhashed_fingerprints(spec: Any) -> dict[str, str]:
    """Fingerprints standing in for hashed ones so ``validate`` can count the plan's tasks without hashing weights:
    one per run model and per model a capability loads beside them (``Capability.extra_models``: the word
    aligner's own encoder), under the names the plan keys them by."""
    from interlingua.pipeline import registry

    out = {m.name or m.label: f"unhashed:{m.name or m.label}" for m in spec.models}
    for cap in registry.capabilities():
        for extra in cap.extra_models(spec) if cap.extra_models is not None else ():
            out[extra.name] = f"unhashed:{extra.name}"
    return out


def estimate_checked(checked: Any, *, stored: bool = True) -> tuple[Any, CostEstimate]:
    """The plan of a pre-flight result and its estimate (unhashed keys when it holds no fingerprints)."""
    from interlingua.pipeline.plan import build_plan

    prints = dict(checked.fingerprints) if checked.fingerprints else unhashed_fingerprints(checked.spec)
    plan = build_plan(checked.spec, checked.corpus, prints)
    reports = {name: r for name, r in checked.models.items() if isinstance(r, dict)}
    return plan, estimate(plan, reports, checked.store, stored=stored and bool(checked.fingerprints))


# --------------------------------------------------------------------------- the commands


def plan_command(spec: Any, source: str, *, show: Any = print) -> int:
    """``interlingua plan CONFIG`` and ``run --dry-run``: pre-flight (weights hashed, nothing run), the plan's tasks,
    which are stored, and the estimate per phase."""
    from interlingua.pipeline.preflight import preflight

    checked = preflight(spec)
    assert checked.target is not None  # preflight with an output (the default) prepares the target
    plan, est = estimate_checked(checked)
    apply_load(est, machine_load())  # the load at calibration: said, and the times scaled by it
    title = (
        f"{source}: {len(plan.models)} models, {len(checked.corpus.languages)} languages, {len(checked.corpus)} "
        f"sentences; output {checked.target.path}; cache {checked.store.root}"
    )
    for line in format_plan(est, title=title):
        show(line)
    return 0


def announce(plan: Any, checked: Any, *, threshold: float = THRESHOLD_SECONDS) -> CostEstimate | None:
    """Before a run's tasks: its estimate, and on stderr a warning with the cheaper choices when it exceeds
    ``threshold``. Nothing to run (everything stored): no estimate, no calibration."""
    import sys

    from interlingua.pipeline.execute import Runtime, is_done

    rt = Runtime(plan, checked.store, progress=False)
    from interlingua.pipeline.registry import driver_kinds

    drivers = driver_kinds()
    if all(is_done(rt, t) for t in plan.tasks if t.kind not in drivers):
        return None
    reports = {name: r for name, r in checked.models.items() if isinstance(r, dict)}
    est = apply_load(estimate(plan, reports, checked.store), machine_load())
    warning = long_run_warning(est, plan.spec, threshold)
    if warning:
        print(warning, file=sys.stderr)
    return est
