"""Execute: run a plan's tasks, reading finished ones from the store, computing the rest.

An :class:`Executor` runs tasks; the :class:`Runtime` knows how to run one
task of each kind and where results live (the :class:`~interlingua.store.Store`).
:class:`LocalExecutor` runs them in plan order in this process; a cluster
executor plugs in with the same interface and the same content keys, so a
task whose output is already stored is never recomputed, wherever it ran.
"""

from __future__ import annotations

import gc
import json
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from tqdm.auto import tqdm

from interlingua.compare import SideData, compare_grid, compare_pair, pair_permutation
from interlingua.errors import InterlinguaError
from interlingua.kinds import KINDS, namespace
from interlingua.models.spec import ModelSpec
from interlingua.plan import (
    ALIGNMENT_ENCODER,
    AlignTask,
    AuditGateTask,
    AuditTask,
    BarrierTask,
    CompareTask,
    ExtractTask,
    MapTask,
    PatchTask,
    Plan,
    QualityTask,
    Task,
    TransportTask,
    WeightsTask,
    parse_word_entry,
    word_entry,
)
from interlingua.store import Store, json_safe

__all__ = ["Executor", "LocalExecutor", "ModelHandle", "Runtime"]


@contextmanager
def _hf_progress(show: bool) -> Iterator[None]:
    """Hide transformers' own progress bars (weight loading, GGUF conversion) when progress is off."""
    if show:
        yield
        return
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class ModelHandle:
    """A model that loads on first use; facts are kept in the store so cached runs never load it."""

    def __init__(
        self,
        spec: ModelSpec,
        fingerprint: str,
        store: Store,
        on_load: Callable[[], None] | None = None,
        progress: bool = True,
    ) -> None:
        self.spec = spec
        self.fingerprint = fingerprint
        self.store = store
        self.on_load = on_load  # told of every load, whatever needed the model (extraction or facts)
        self.progress = progress
        self._loaded: Any = None

    @property
    def loaded(self) -> Any:
        if self._loaded is None:
            from interlingua.models import load_model

            with _hf_progress(self.progress):
                self._loaded = load_model(self.spec, cache_dir=self.store.folder("models"))
            self.store.put_json("facts", self.fingerprint, self._loaded.facts.to_dict())
            if self.on_load is not None:
                self.on_load()
        return self._loaded

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    def facts(self) -> dict[str, Any]:
        if self._loaded is not None:
            return self._loaded.facts.to_dict()
        cached = self.store.get_json("facts", self.fingerprint)
        if isinstance(cached, dict) and isinstance(cached.get("num_layers"), int):
            return cached
        facts = self.loaded.facts.to_dict()  # absent or damaged: load once to record them again
        self.release()  # loaded only for its facts: never hold two models at once
        return facts

    def release(self) -> None:
        self._loaded = None
        gc.collect()


@dataclass
class ExtractOutput:
    """One side's stored arrays per pooling, and what extraction reported."""

    data: dict[str, Any]  # pooling -> SideData; word-aligned entry name -> WordSide
    truncated: list[str]
    max_length: int


@dataclass
class Runtime:
    """Runs one task of each kind against the store; holds the models of a local run."""

    plan: Plan
    store: Store
    progress: bool = True
    handles: dict[str, ModelHandle] = field(default_factory=dict)
    loaded_models: list[str] = field(default_factory=list)
    computed: dict[str, int] = field(default_factory=dict)
    audit_models: Any = None  # audit.CausalLMCache: one base held across audit tasks
    status: Callable[[str], None] | None = None  # told what the current task is doing (a progress bar's postfix)
    seconds: dict[str, float] = field(default_factory=dict)  # wall seconds per task kind (LocalExecutor; with loads)

    def handle(self, name: str) -> ModelHandle:
        if name not in self.handles:
            if name == ALIGNMENT_ENCODER:  # the word aligner's encoder, given as a model spec
                spec = self.plan.spec.word_alignment.encoder
                assert isinstance(spec, ModelSpec)
            else:
                spec = self.plan.models[name]
            self.handles[name] = ModelHandle(
                spec,
                self.plan.fingerprints[name],
                self.store,
                lambda: self._loaded(name),
                progress=self.progress,
            )
        return self.handles[name]

    def _loaded(self, name: str) -> None:
        if name not in self.loaded_models:
            self.loaded_models.append(name)

    def release_except(self, name: str | None) -> None:
        """Keep at most one model in memory (extraction tasks are grouped by model)."""
        for other, h in self.handles.items():
            if other != name and h.is_loaded:
                h.release()
        if self.audit_models is not None:
            self.audit_models.release()

    def run(self, task: Task, done: dict[str, Any]) -> Any:
        """Run one task at the run's numeric settings (numerics.pinned), in any process."""
        from interlingua.numerics import pinned

        runner = _RUNNERS.get(task.kind)
        if runner is None:
            raise InterlinguaError(f"no runner for task kind {task.kind!r}")
        with pinned(self.plan.threads):
            return runner(self, task, done)

    def _count(self, kind: str) -> None:
        self.computed[kind] = self.computed.get(kind, 0) + 1


def _entry_path(rt: Runtime, task: ExtractTask, pooling: str) -> Any:
    word = parse_word_entry(pooling)
    stem = f"{task.language}.{pooling}" if word is None else f"{task.language}.word_aligned.{word[0][:16]}.{word[1]}"
    return rt.store.arrays_path(
        namespace("extract"), task.entry_key(pooling), folder=rt.plan.fingerprints[task.model][:16], stem=stem
    )


@dataclass(frozen=True)
class WordSide:
    """One side's word-aligned entry: a vector per linked word of its alignment side (``linked_words`` order).

    ``reps`` ``(n_hidden_states, n_words, d)``; ``n_tokens`` sub-words averaged into each word (0: none
    covered it, the word is ``covered`` False and never a row); ``n_chars`` the word's length.
    """

    reps: np.ndarray
    n_tokens: np.ndarray
    n_chars: np.ndarray

    @property
    def covered(self) -> np.ndarray:
        return self.n_tokens > 0


def _alignment(rt: Runtime, key: str, done: dict[str, Any]) -> dict[str, Any]:
    """An align task's output: from this run, else the store (a worker reading a finished dependency)."""
    if key in done:
        return done[key]
    task = next(t for t in rt.plan.of_kind("align") if t.key == key)
    return run_align(rt, task, done)


def _word_side(
    rt: Runtime, task: ExtractTask, entries: list[tuple[str, str]], done: dict[str, Any]
) -> dict[str, WordSide]:
    """Word-aligned entries of one side: from the store, or pooled from the model (one pass per alignment)."""
    from interlingua.alignment.links import from_json, linked_words
    from interlingua.alignment.simalign import word_states

    inputs = dict(task.entry_inputs)
    out: dict[str, WordSide] = {}
    for name, key in entries:
        align_key, role = parse_word_entry(name)  # type: ignore[misc]
        expected = {
            **inputs,
            "pooling": "word_aligned",
            "alignment": align_key,
            "role": role,
            "first_position": rt.plan.spec.word_alignment.first_position,
        }
        got = rt.store.get_arrays(namespace("extract"), _entry_path(rt, task, name), key, expected)
        if got is not None:
            arrays = got[0]
            out[name] = WordSide(arrays["representations"], arrays["n_tokens"], arrays["n_chars"])
            continue
        payload = _alignment(rt, align_key, done)
        alignments = from_json(payload["sentences"])
        used = linked_words(alignments, role)
        words = [[(al.words_a if role == "a" else al.words_b)[i] for i in u] for al, u in zip(alignments, used)]
        sentences = rt.plan.corpus.sentences(task.language)[: len(alignments)]
        rt.release_except(task.model)
        spec = rt.plan.spec
        states = word_states(
            rt.handle(task.model).loaded,
            sentences,
            words,
            batch_size=spec.batch_size,
            max_length=spec.max_length,
            first_position=spec.word_alignment.first_position == "include",
        )
        d = int(next((v.shape[-1] for v in states.vectors if v.shape[1]), 0))
        reps = np.concatenate([v.reshape(v.shape[0], v.shape[1], d) for v in states.vectors], axis=1)
        arrays = {
            "representations": np.ascontiguousarray(reps, dtype=np.float32),
            "n_tokens": np.concatenate(states.n_tokens).astype(np.int64),
            "n_chars": np.array([w.end - w.start for ws in words for w in ws], dtype=np.int64),
        }
        rt.store.put_arrays(_entry_path(rt, task, name), key, arrays, expected)
        out[name] = WordSide(arrays["representations"], arrays["n_tokens"], arrays["n_chars"])
        rt._count("extract")
    return out


def _side_data(arrays: dict[str, np.ndarray], n_chars: np.ndarray) -> SideData:
    lengths = np.stack([arrays["n_tokens"].astype(np.float64), n_chars], axis=1)
    return SideData(arrays["representations"], lengths, arrays["special_share"])


def run_extract(rt: Runtime, task: ExtractTask, done: dict[str, Any]) -> ExtractOutput:
    """Read every pooling of this side from the store, or extract the missing ones in one pass."""
    corpus = rt.plan.corpus
    sentences = corpus.sentences(task.language)
    n_chars = np.array([len(s) for s in sentences], dtype=np.float64)
    inputs = dict(task.entry_inputs)
    data: dict[str, SideData | WordSide] = {}  # pooling -> SideData; word-aligned entry name -> WordSide
    missing: list[str] = []
    truncated: list[str] = []
    max_length = int(rt.plan.spec.max_length)
    word_entries = [(p, k) for p, k in task.entries if parse_word_entry(p) is not None]
    for pooling, key in task.entries:
        if parse_word_entry(pooling) is not None:
            continue
        expected = {**inputs, "pooling": pooling}
        got = rt.store.get_arrays(namespace("extract"), _entry_path(rt, task, pooling), key, expected)
        if got is None:
            missing.append(pooling)
            continue
        arrays, meta = got
        truncated = list(json.loads(meta.get("truncated", "[]")))
        max_length = int(meta.get("effective_max_length", max_length))
        data[pooling] = _side_data(arrays, n_chars)
    if missing:
        from interlingua.representations.extract import extract

        rt.release_except(task.model)
        handle = rt.handle(task.model)
        spec = rt.plan.spec
        result = extract(
            handle.loaded,
            sentences,
            missing,
            special_tokens=spec.special_tokens,
            max_length=spec.max_length,
            batch_size=spec.batch_size,
            progress=rt.progress,
            context=f"model {task.model!r} ({handle.spec.dtype}) on {task.language}",
            sentence_ids=list(corpus.ids),
            threads=None if rt.plan.threads == "auto" else int(rt.plan.threads),
        )
        truncated = [corpus.ids[i] for i in result.truncated]
        max_length = int(result.max_length)
        for pooling in missing:
            arrays = {
                "representations": result.pooled[pooling],
                "n_tokens": np.asarray(result.n_tokens, dtype=np.int64),
                "special_share": np.asarray(result.special_share[pooling], dtype=np.float64),
            }
            meta = {
                **inputs,
                "pooling": pooling,
                "truncated": json.dumps(truncated),
                "effective_max_length": str(max_length),
            }
            rt.store.put_arrays(_entry_path(rt, task, pooling), task.entry_key(pooling), arrays, meta)
            data[pooling] = _side_data(arrays, n_chars)
        rt._count("extract")
    elif truncated:  # a cached side repeats what extraction warned about
        warnings.warn(
            f"{task.model} on {task.language}: {len(truncated)} sentences were truncated to {max_length} tokens "
            f"(first: {truncated[:5]}); raise max_length to keep them whole",
            UserWarning,
            stacklevel=2,
        )
    if word_entries:
        data.update(_word_side(rt, task, word_entries, done))
    return ExtractOutput({p: data[p] for p, _ in task.entries}, truncated, max_length)


def run_compare(rt: Runtime, task: CompareTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of one pair x pooling, from the store or computed."""
    cached = rt.store.get_json(namespace("compare"), task.key)
    if isinstance(cached, list):
        return cached
    spec = rt.plan.spec
    a: ExtractOutput = done[task.sides[0]]
    b: ExtractOutput = done[task.sides[1]]
    if task.alignment is not None:
        return _compare_words(rt, task, a, b, done)
    perm, seed = pair_permutation(task.pair, len(rt.plan.corpus), spec.seeds.control)
    kw: dict[str, Any] = dict(
        pooling=task.pooling,
        measures=spec.measures,
        permutation=perm,
        control_seed=seed,
        inference=spec.inference,
        test_seed=spec.seeds.test,
        standardized=spec.standardize,
    )
    side_a, side_b = a.data[task.pooling], b.data[task.pooling]
    if rt.status is not None:
        status = rt.status
        kw["on_step"] = lambda step: status(f"{task.pair.label} {task.pooling}: {step}")
    rows = compare_pair(task.pair, side_a, side_b, **kw)
    if task.grid:
        rows += compare_grid(task.pair, side_a, side_b, **kw)
    rt.store.put_json(namespace("compare"), task.key, rows)
    rt._count("compare")
    return rows


def word_sides(
    rt: Runtime, task: CompareTask, a: ExtractOutput, b: ExtractOutput, done: dict[str, Any]
) -> tuple[SideData, SideData, Any]:
    """The two sides of a word-aligned comparison: one row per aligned word both sides cover.

    Lengths are each word's sub-word count and characters (the length control regresses them out);
    no special token is ever pooled, so the special share is 0.
    """
    from interlingua.alignment.links import from_json, word_rows

    assert task.alignment is not None
    align = next(t for t in rt.plan.of_kind("align") if t.key == task.alignment)
    assert isinstance(align, AlignTask)
    ws_a: WordSide = a.data[word_entry(align.key, align.role(task.pair.a.language))]
    ws_b: WordSide = b.data[word_entry(align.key, align.role(task.pair.b.language))]
    alignments = from_json(_alignment(rt, align.key, done)["sentences"])
    if align.role(task.pair.a.language) == "b":  # the pair lists the alignment's languages the other way round
        from interlingua.alignment.simalign import SentenceAlignment

        alignments = [
            SentenceAlignment(al.words_b, al.words_a, tuple(sorted((j, i) for i, j in al.links))) for al in alignments
        ]
    rows = word_rows(alignments, ws_a.covered, ws_b.covered)

    def side(ws: WordSide, index: np.ndarray) -> SideData:
        lengths = np.stack([ws.n_tokens[index], ws.n_chars[index]], axis=1).astype(np.float64)
        return SideData(ws.reps[:, index], lengths, np.zeros(ws.reps.shape[0]))

    return side(ws_a, rows.index_a), side(ws_b, rows.index_b), rows


def _compare_words(
    rt: Runtime, task: CompareTask, a: ExtractOutput, b: ExtractOutput, done: dict[str, Any]
) -> list[dict[str, Any]]:
    """Rows of one pair's word-aligned comparison: aligned words are the rows, the control permutes them."""
    from interlingua.errors import MeasureInputError

    spec = rt.plan.spec
    side_a, side_b, rows = word_sides(rt, task, a, b, done)
    n = side_a.reps.shape[1]
    if n < 3:
        raise MeasureInputError(
            f"{task.pair.label}: only {n} aligned word rows ({rows.n_links} links, {rows.n_dropped} dropped); "
            "align more sentences (alignment.n) or another encoder layer"
        )
    perm, seed = pair_permutation(task.pair, n, spec.seeds.control)
    kw: dict[str, Any] = dict(
        pooling=task.pooling,
        measures=spec.measures,
        permutation=perm,
        control_seed=seed,
        inference=spec.inference,
        test_seed=spec.seeds.test,
        standardized=spec.standardize,
    )
    out = compare_pair(task.pair, side_a, side_b, **kw)
    if task.grid:
        out += compare_grid(task.pair, side_a, side_b, **kw)
    words = (
        f"rows are aligned words: {n} of {rows.n_links} links "
        f"({rows.n_dropped} dropped: a side's tokens cover no character of the word)"
    )
    for row in out:
        row["note"] = "; ".join(x for x in (words, row.get("note", "")) if x)
    rt.store.put_json(namespace("compare"), task.key, out)
    rt._count("compare")
    return out


def run_align(rt: Runtime, task: AlignTask, done: dict[str, Any]) -> dict[str, Any]:
    """One language pair's word alignment (JSON: words with spans and links per sentence), stored."""
    import time

    from interlingua.alignment.links import identity_alignments, to_json
    from interlingua.alignment.simalign import align

    cached = rt.store.get_json(namespace("align"), task.key)
    if isinstance(cached, dict) and "sentences" in cached:
        return cached
    corpus, opts, spec = rt.plan.corpus, rt.plan.spec.word_alignment, rt.plan.spec
    la, lb = task.languages
    sents_a, sents_b = corpus.sentences(la)[: task.n], corpus.sentences(lb)[: task.n]
    start = time.perf_counter()
    layer = None
    if task.identity:
        alignments = identity_alignments(sents_a, la)
    else:
        assert task.model is not None
        rt.release_except(task.model)
        loaded = rt.handle(task.model).loaded
        from interlingua.alignment.simalign import default_layer

        layer = default_layer(loaded) if opts.layer is None else opts.layer
        alignments = align(
            loaded,
            sents_a,
            sents_b,
            language_a=la,
            language_b=lb,
            layer=layer,
            method=opts.method,
            batch_size=spec.batch_size,
            first_position=opts.first_position == "include",
        )
    payload = {
        "languages": [la, lb],
        "n": task.n,
        "identity": task.identity,
        "encoder": None
        if task.identity
        else (task.model if task.model != ALIGNMENT_ENCODER else rt.handle(task.model).spec.label),
        "layer": layer,
        "method": None if task.identity else opts.method,
        "links": sum(len(al.links) for al in alignments),
        "words_a": sum(len(al.words_a) for al in alignments),
        "words_b": sum(len(al.words_b) for al in alignments),
        "unaligned_sentences": sum(1 for al in alignments if not al.links),
        "seconds": round(time.perf_counter() - start, 3),
        "sentences": to_json(alignments),
    }
    rt.store.put_json(namespace("align"), task.key, payload)
    rt._count("align")
    return payload


def run_map(rt: Runtime, task: MapTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Held-out map rows of one pair, from the store or computed (fitted maps saved when asked)."""
    cached = rt.store.get_json(namespace("map"), task.key)
    if isinstance(cached, list):
        return cached
    from interlingua.mapping import evaluate_pair, fit_layer_maps

    spec = rt.plan.spec
    opts = spec.maps
    assert opts is not None
    reps_a = done[task.sides[0]].data[task.pooling].reps
    reps_b = done[task.sides[1]].data[task.pooling].reps
    perm, seed = pair_permutation(task.pair, len(rt.plan.corpus), spec.seeds.control)
    pair = task.pair
    labels = {
        "pair": pair.label,
        "model_a": pair.a.model,
        "lang_a": pair.a.language,
        "model_b": pair.b.model,
        "lang_b": pair.b.language,
        "pooling": task.pooling,
        "control_seed": seed,
    }
    # one BLAS thread (Runtime.run pins it for every task): fastest for these many small decompositions on
    # shared cores, and the same sums in every process
    rows = evaluate_pair(
        reps_a,
        reps_b,
        estimators=list(opts.estimators),
        folds=opts.folds,
        seed=spec.seeds.folds,
        control_permutation=perm,
        layers=opts.layers,
        directions=list(opts.directions),
        bootstrap=opts.bootstrap,
        level=opts.level,
        csls_k=opts.csls_k,
        standardize=spec.standardize,
        labels=labels,
    )
    if opts.save_maps:
        folder = rt.store.folder(namespace("map")) / "fitted" / task.key[:32]
        for estimator in opts.estimators:
            fit_layer_maps(
                reps_a,
                reps_b,
                folder / estimator,
                estimator=estimator,
                layers="last" if opts.layers == "last" else "auto",
                direction="a->b",
                metadata={"pair": pair.label, "pooling": task.pooling},
            )
    rt.store.put_json(namespace("map"), task.key, rows)
    rt._count("map")
    return rows


def run_audit(rt: Runtime, task: AuditTask, done: dict[str, Any]) -> dict[str, Any]:
    """One model's audit row and identity keys, from the store or computed (loads the model with its LM head)."""
    cached = rt.store.get_json(namespace("audit"), task.key)
    if isinstance(cached, dict) and "row" in cached:
        return cached
    from dataclasses import asdict

    from interlingua.audit import audit_one

    opts = rt.plan.spec.audit
    assert opts is not None
    _lm_cache(rt)
    spec = rt.plan.spec
    sentences = rt.plan.corpus.sentences(task.language) if opts.quality else None
    with _hf_progress(rt.progress):
        row, identity = audit_one(
            rt.plan.models[task.model],
            corpus_sentences=sentences,
            cache_dir=rt.store.folder("models"),
            tiny_threshold=opts.tiny_threshold,
            min_agreement=opts.min_agreement,
            margin=opts.margin,
            special_tokens=spec.special_tokens,
            max_length=spec.max_length,
            batch_size=spec.batch_size,
            lm_cache=rt.audit_models,
        )
    row["model"] = task.model
    if opts.quality:
        row["quality_language"] = task.language
    out = {"row": json_safe(row, infinite=True), "identity": asdict(identity)}
    rt.store.put_json(namespace("audit"), task.key, out)
    rt._count("audit")
    return out


def _lm_cache(rt: Runtime) -> Any:
    """The causal-LM cache audits and quality tasks share (one base held); extraction models released first."""
    from interlingua.audit import CausalLMCache

    if rt.audit_models is None:
        rt.release_except(None)
        rt.audit_models = CausalLMCache(rt.store.folder("models"))
    return rt.audit_models


def run_quality(rt: Runtime, task: QualityTask, done: dict[str, Any]) -> dict[str, Any]:
    """One model's NLL on one side, from the store or computed on the shared causal-LM cache."""
    cached = rt.store.get_json(namespace("quality"), task.key)
    if isinstance(cached, dict) and "nll" in cached:
        return cached
    spec = rt.plan.spec
    with _hf_progress(rt.progress):
        opts = spec.quality
        sentences = rt.plan.corpus.sentences(task.language)[: opts.n if opts is not None and opts.n else None]
        q = _lm_cache(rt).quality(
            rt.plan.models[task.model],
            sentences,
            special_tokens=spec.special_tokens,
            max_length=spec.max_length,
            batch_size=spec.batch_size,
        )
    out = json_safe(
        {
            "model": task.model,
            "language": task.language,
            "nll": q.nll,
            "chance_nll": q.chance,
            "vocab": q.vocab,
            "n_tokens": q.n_tokens,
            "n_sentences": q.n_sentences,
            "truncated": q.truncated,
            "verdict": q.verdict,
        },
        infinite=True,
    )
    rt.store.put_json(namespace("quality"), task.key, out)
    rt._count("quality")
    return out


def _patch_fit_rows(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, str]:
    """The rows the patching maps are fitted on, ``(n_states, n, d)`` per side, and what they are.

    ``fit: sentences``: the two sides' ``pooling`` vectors of the corpus sentences. ``fit: words``: one row per
    aligned word pair (both words covered), each the mean of the word's sub-word states, the kind of state the
    patch writes (``span_rule: mean`` over the subject's tokens). The identity control fits the target side onto
    itself: its sentence vectors, or every covered word of its word entry.
    """
    donor_out, target_out = done[task.sides[0]], done[task.sides[1]]
    if task.alignment is None:
        what = f"{task.pooling}-pooled sentences"
        rt_ = target_out.data[task.pooling].reps
        return (rt_ if task.control else donor_out.data[task.pooling].reps), rt_, what
    align = next(t for t in rt.plan.of_kind("align") if t.key == task.alignment)
    assert isinstance(align, AlignTask)
    what = "aligned words (mean of each word's sub-word states)"
    if task.control:
        ws: WordSide = target_out.data[word_entry(align.key, align.role(task.languages[1]))]
        reps = ws.reps[:, ws.covered]
        return reps, reps, what
    from types import SimpleNamespace

    from interlingua.compare import Pair, Side

    spec = rt.plan.spec
    assert spec.patching is not None
    exp = spec.patching.resolved()[task.experiment]
    shim = SimpleNamespace(
        alignment=align.key, pair=Pair(Side(exp.donor, task.languages[0]), Side(exp.target, task.languages[1]))
    )
    side_d, side_t, _ = word_sides(rt, shim, donor_out, target_out, done)  # type: ignore[arg-type]
    return side_d.reps, side_t.reps, what


def _control_of(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> dict[str, Any]:
    """The identity control's verdict columns for an experiment's rows (empty when the run has no control)."""
    from interlingua.interventions.patch import CONTROL_COLUMNS

    controls = [t for t in rt.plan.of_kind("patch") if getattr(t, "control", "") and t.key in task.depends]
    if not controls:
        return {"identity_control": "not run"}
    rows = done.get(controls[0].key)
    if not isinstance(rows, list):
        rows = run_patch(rt, controls[0], done)
    return {c: rows[0][c] for c in CONTROL_COLUMNS if c.startswith("identity_control") and rows}


def run_patch(rt: Runtime, task: PatchTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Patching rows from the store, or maps fitted on the two stored sides and the probe experiment run.

    An identity control (``task.control``) patches the target side with itself through its own self-map and
    judges the result (:func:`interlingua.interventions.patch.identity_control_verdict`); an experiment's rows
    carry its target side's verdict, and a failed one is warned about (``PatchWarning``).
    """
    import warnings

    from interlingua.interventions import PatchModel, maps_from_representations, patch_experiment
    from interlingua.interventions.patch import PatchWarning, identity_control_verdict

    cached = rt.store.get_json(namespace("patch"), task.key)
    control = {} if task.control else _control_of(rt, task, done)
    if isinstance(cached, list):
        rows = cached
    else:
        spec = rt.plan.spec
        pt = spec.patching
        assert pt is not None
        exp = pt.resolved()[task.experiment]
        layers = list(task.layers) or exp.layers or pt.layers
        reps_donor, reps_target, fit_rows = _patch_fit_rows(rt, task, done)
        rt.release_except(None)  # the two causal LMs are loaded by the experiment
        n_states = len(reps_target)
        maps = maps_from_representations(
            reps_donor, reps_target, estimator=pt.estimator, layers=range(min(min(layers), n_states - 1), n_states)
        )
        from interlingua.interventions.probes import probe_language

        languages = tuple(probe_language(code) for code in task.languages)
        # the control: unprojected is within here (the same vector), shuffled and noise say nothing about identity
        conditions = ["none", "within", "mapped"] if task.control else pt.conditions
        with _hf_progress(rt.progress):
            cache = rt.store.folder("models")
            target = PatchModel.from_spec(rt.plan.models[task.target], cache)
            donor = target if task.donor == task.target else PatchModel.from_spec(rt.plan.models[task.donor], cache)
            table = patch_experiment(
                target,
                donor,
                maps,
                languages=languages,
                relations=pt.relations,
                layers=layers,
                conditions=conditions,
                seed=spec.seeds.test,
                span_rule=pt.span_rule,
                countries=pt.countries,
                pairs=pt.pairs,
                batch_size=pt.batch_size,
                threads=pt.threads,
            )
            del target, donor
        label = f"{task.donor}:{task.languages[0]}->{task.target}:{task.languages[1]}"
        if task.control:
            label = f"identity control: {label}"
        extra = identity_control_verdict(table) if task.control else {}
        rows = [
            json_safe(
                {
                    **row,
                    "experiment": label,
                    "target": task.target,
                    "donor": task.donor,
                    "estimator": pt.estimator,
                    "pooling": task.pooling,
                    "pairs": str(pt.pairs),
                    "control": task.control,
                    "fit_rows": fit_rows,
                    **extra,
                },
                infinite=True,
            )
            for row in table.to_dict("records")
        ]
        rt.store.put_json(namespace("patch"), task.key, rows)
        rt._count("patch")
    rows = [{**row, **control} for row in rows]
    verdict = rows[0].get("identity_control") if rows else None
    if verdict == "failed":
        head = rows[0]
        warnings.warn(
            f"patching identity control FAILED for {head['target']} ({task.languages[1]}): "
            f"{head.get('identity_control_note', '')}. The map fitted from a side onto itself is not the identity "
            f"or does not reproduce the within-model patch, so the chain is broken and a null from "
            f"{'this control' if task.control else head['experiment']} is not a finding; fit on more rows "
            "(patching.fit: words, corpus.n) or another estimator (procrustes_span within one model).",
            PatchWarning,
            stacklevel=2,
        )
    return rows


def run_transport(rt: Runtime, task: TransportTask, done: dict[str, Any]) -> list[dict[str, Any]]:
    """Fusion rows of one directed pair from the store, or computed (probe, plans, fused targets, NLL)."""
    cached = rt.store.get_json(namespace("transport"), task.key)
    if isinstance(cached, list):
        if cached and cached[0].get("self_control") == "failed":  # fuse_pair warned when it computed them
            from interlingua.transport.errors import TransportWarning

            warnings.warn(
                f"transport {task.target} <- {task.donor} (stored rows): {cached[0].get('note', '')}",
                TransportWarning,
                stacklevel=2,
            )
        return cached
    from interlingua.transport import fuse_pair

    spec = rt.plan.spec
    opts = spec.transport
    assert opts is not None
    rt.release_except(None)  # fuse_pair loads both models itself
    corpus = rt.plan.corpus
    probe = slice(0, opts.probe_n)
    held = slice(len(corpus) - opts.eval_n, len(corpus))
    evaluation = {
        lang: corpus.sentences(lang)[held] for lang in dict.fromkeys((task.target_language, task.donor_language))
    }
    table = fuse_pair(
        rt.plan.models[task.target],
        rt.plan.models[task.donor],
        corpus.sentences(task.target_language)[probe],
        corpus.sentences(task.donor_language)[probe],
        evaluation,
        alphas=opts.alphas,
        top_k=opts.top_k,
        m=opts.m,
        epsilon=opts.epsilon,
        seed=opts.seed,
        target_language=task.target_language,
        donor_language=task.donor_language,
        max_length=spec.max_length,
        cache_dir=rt.store.folder("models"),
        plans_cache=rt.store,  # plans keyed by their inputs: another alpha grid or eval set reuses them
        controls=opts.controls,
        stability_k=opts.stability_k,
    )
    rows = [
        json_safe({**row, "target": task.target, "donor": task.donor}, infinite=True)
        for row in table.to_dict("records")
    ]
    rt.store.put_json(namespace("transport"), task.key, rows)
    rt._count("transport")
    return rows


def run_audit_gate(rt: Runtime, task: AuditGateTask, done: dict[str, Any]) -> None:
    """``audit.strict``: raise :class:`AuditError` naming every model whose audit found something bad."""
    from interlingua.errors import AuditError

    bad = [(done[k]["row"]["model"], done[k]["row"]["_bad"]) for k in task.depends if done[k]["row"].get("_bad")]
    if bad:
        lines = "\n".join(f"  {model}: {'; '.join(findings)}" for model, findings in bad)
        raise AuditError(
            f"audit.strict: {len(bad)} model(s) are not what they claim to be:\n{lines}\n"
            "fix or drop them, or set audit.strict: false to compare them anyway (audit.csv keeps the verdicts)"
        )


def run_weights(rt: Runtime, task: WeightsTask, done: dict[str, Any]) -> dict[str, Any]:
    """One pair's coverage rows and diagnostics row, from the store or computed (headers, streamed tensors)."""
    cached = rt.store.get_json(namespace("weights"), task.key)
    if isinstance(cached, dict) and "row" in cached:
        return cached
    from interlingua.mergeability import run_weights_pair

    opts = rt.plan.spec.mergeability
    assert opts is not None
    out = run_weights_pair(
        task.a, task.b, task.base, rt.plan.models, rt.store, diagnostics=opts.diagnostics, density=opts.density
    )
    rt.store.put_json(namespace("weights"), task.key, out)
    rt._count("weights")
    return out


def run_barrier(rt: Runtime, task: BarrierTask, done: dict[str, Any]) -> dict[str, Any]:
    """One pair's loss barrier on the corpus sides, from the store or computed (one model in memory)."""
    cached = rt.store.get_json(namespace("barrier"), task.key)
    if isinstance(cached, dict) and "summary" in cached:
        return cached
    from interlingua.mergeability import run_barrier_pair

    spec = rt.plan.spec
    opts = spec.mergeability
    assert opts is not None and opts.barriers is not None
    n = opts.barriers.n
    texts = {lang: rt.plan.corpus.sentences(lang)[:n] for lang in task.languages}
    with _hf_progress(rt.progress):
        out = run_barrier_pair(
            task.a,
            task.b,
            rt.plan.models,
            rt.store,
            texts,
            grid=list(opts.barriers.grid),
            max_length=spec.max_length,
            batch_size=spec.batch_size,
            special_tokens=spec.special_tokens,
        )
    rt.store.put_json(namespace("barrier"), task.key, out)
    rt._count("barrier")
    return out


_RUNNERS: dict[str, Callable[[Runtime, Any, dict[str, Any]], Any]] = {
    "align": run_align,
    "audit": run_audit,
    "audit_gate": run_audit_gate,
    "quality": run_quality,
    "patch": run_patch,
    "transport": run_transport,
    "extract": run_extract,
    "compare": run_compare,
    "map": run_map,
    "weights": run_weights,
    "barrier": run_barrier,
}

#: Where a kind's output lives in the store, for kinds stored as one JSON entry under the task key
#: (``extract``: one arrays entry per pooling; ``audit_gate`` stores nothing and always runs).
OUTPUT_NAMESPACES: dict[str, str] = {
    k.name: k.namespaces[0] for k in KINDS.values() if k.namespaces and k.name != "extract"
}


def output_paths(rt: Runtime, task: Task) -> list[Any]:
    """The store paths holding ``task``'s output (empty for a kind that stores nothing)."""
    if isinstance(task, ExtractTask):
        return [_entry_path(rt, task, pooling) for pooling, _ in task.entries]
    namespace = OUTPUT_NAMESPACES.get(task.kind)
    return [rt.store.json_path(namespace, task.key)] if namespace else []


def is_done(rt: Runtime, task: Task) -> bool:
    """Whether ``task``'s output is in the store: existence only, so a driver can ask it of every task
    before submitting any (an entry is still verified when read, and a damaged one recomputed then)."""
    paths = output_paths(rt, task)
    return bool(paths) and all(p.exists() for p in paths)


def task_label(task: Task) -> str:
    """What a task does, for a progress bar: its kind and what it reads (model, language, pair, pooling)."""
    if isinstance(task, (CompareTask, MapTask)):
        return f"{task.kind} {task.pair.label} {task.pooling}"
    if isinstance(task, (ExtractTask, AuditTask, QualityTask)):
        return f"{task.kind} {task.model} on {task.language}"
    if isinstance(task, AlignTask):
        return f"align {'-'.join(task.languages)}"
    if isinstance(task, (WeightsTask, BarrierTask)):
        return f"{task.kind} {task.a} vs {task.b}"
    if isinstance(task, (PatchTask, TransportTask)):
        return f"{task.kind} {task.donor} -> {task.target}"
    return task.kind


class Executor(Protocol):
    """Runs every task of a plan and returns ``{task key: output}``."""

    def execute(self, plan: Plan, runtime: Runtime) -> dict[str, Any]: ...


class LocalExecutor:
    """Tasks in plan order, in this process; at most one model in memory at a time."""

    def execute(self, plan: Plan, runtime: Runtime) -> dict[str, Any]:
        done: dict[str, Any] = {}
        desc = "comparing and mapping pairs" if plan.of_kind("map") else "comparing pairs"
        counted = [t for t in plan.tasks if KINDS[t.kind].progress]
        bar = tqdm(total=len(counted), desc=desc, disable=not runtime.progress)
        try:
            if runtime.progress and runtime.status is None:
                runtime.status = bar.set_postfix_str
            for task in plan.tasks:  # the plan orders dependencies first, extraction grouped by model
                if not KINDS[task.kind].holds_model:  # the model-holding kinds keep one model across tasks
                    runtime.release_except(None)
                if runtime.progress:
                    bar.set_postfix_str(task_label(task))
                started = time.perf_counter()
                done[task.key] = runtime.run(task, done)
                runtime.seconds[task.kind] = runtime.seconds.get(task.kind, 0.0) + time.perf_counter() - started
                if KINDS[task.kind].progress:
                    bar.update(1)
        finally:
            bar.close()
        return done
