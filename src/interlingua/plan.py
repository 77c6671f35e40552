"""Plan: a run spec -> a list of content-keyed tasks with their dependencies.

Nothing is computed here. Every task's key is a hash of everything its output
depends on (model files, corpus text and ids, options, package version), so
the same task in two runs, or on two machines, has the same key and is
computed once. An executor (:mod:`interlingua.execute`) runs the tasks in
order; assembly (:mod:`interlingua.assemble`) turns their outputs into tables
and a report.

Task kinds: ``audit`` (one model: adapter, tokenizer, NLL; first, when the
config has an ``audit:`` section, followed by ``audit_gate`` under
``audit.strict``), ``extract`` (one model reading one language, every pooling
in one forward pass), ``compare`` (one pair x pooling: every measure, controls
and inference) and ``map`` (one pair: maps fitted and scored on held-out
sentences). With a ``mergeability:`` section: ``weights`` (one pair of models:
coverage and streamed weight diagnostics, keyed by both models' fingerprints,
the base's and the options) and ``barrier`` (one pair: loss barrier on corpus
sides, keyed likewise plus the scored text). With ``word_aligned`` pooling:
``align`` (one language pair's word alignment, before extraction; the
extractions of its sides then also pool the linked words, and a ``compare``
task per pair compares word rows). With a ``quality:`` section: ``quality``
(one model's NLL on one side); with ``transport:``: ``transport`` (one directed
OT fusion); with ``patching:``: ``patch`` (one patching experiment on two
stored sides). Every kind is registered once in :mod:`interlingua.kinds`
(its store namespace, whether it holds a model, how executors group it).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, overload

from interlingua import __version__
from interlingua.compare import Pair, Side, enumerate_pairs, pair_permutation
from interlingua.config import RunSpec
from interlingua.corpora import ParallelCorpus, normalize_language
from interlingua.errors import ConfigError
from interlingua.models.spec import ModelSpec
from interlingua.numerics import resolve_threads
from interlingua.store import canonical_json, sha256_hex

__all__ = [
    "EXTRACT_FORMAT_VERSION",
    "AlignTask",
    "AuditGateTask",
    "AuditTask",
    "BarrierTask",
    "CompareTask",
    "ExtractTask",
    "MapTask",
    "PatchTask",
    "Plan",
    "QualityTask",
    "Task",
    "TransportTask",
    "WeightsTask",
    "build_plan",
    "weight_pairs",
]

#: Bumped whenever stored representations would change for the same inputs.
EXTRACT_FORMAT_VERSION = 2
#: Bumped whenever a stored audit row would change for the same inputs.
AUDIT_FORMAT_VERSION = 2


def content_key(payload: dict[str, Any]) -> str:
    return sha256_hex(canonical_json(payload))


@dataclass(frozen=True)
class ExtractTask:
    """One model reading one language: every requested pooling, one forward pass."""

    kind: ClassVar[str] = "extract"
    key: str
    model: str
    language: str
    entries: tuple[tuple[str, str], ...]  # (pooling, entry key)
    entry_inputs: tuple[tuple[str, str], ...]  # the key's inputs (also stored in each entry)
    depends: tuple[str, ...] = ()

    def entry_key(self, pooling: str) -> str:
        return dict(self.entries)[pooling]


@dataclass(frozen=True)
class CompareTask:
    """One pair x pooling: matched, shuffled, length control, inference; plus the grid."""

    kind: ClassVar[str] = "compare"
    key: str
    pair: Pair
    pooling: str
    sides: tuple[str, str]  # extract task keys of side a and side b
    grid: bool
    control_seed: int
    depends: tuple[str, ...] = ()
    alignment: str | None = None  # word_aligned: the align task key (rows are aligned words)


@dataclass(frozen=True)
class MapTask:
    """One pair x pooling: maps fitted on training folds, scored on held-out sentences (every layer pair)."""

    kind: ClassVar[str] = "map"
    key: str
    pair: Pair
    pooling: str
    sides: tuple[str, str]
    control_seed: int
    depends: tuple[str, ...] = ()


#: Name of the alignment encoder in ``fingerprints`` / the runtime when it is a model spec, not a run model.
ALIGNMENT_ENCODER = "(alignment encoder)"
#: Bumped whenever a stored alignment or word-aligned side would change for the same inputs.
ALIGN_FORMAT_VERSION = 2
#: Bumped whenever stored patching rows would change for the same inputs (2: whole-answer columns; 3: the maps'
#: n_fit, rank and under-determination flag; 4: the identity control, word rows, map_dev and the patch-site agreement).
PATCH_FORMAT_VERSION = 4
#: Bumped whenever stored map rows would change for the same inputs (2: n_fit, rank, underdetermined, identity control).
MAP_FORMAT_VERSION = 2
#: The pooling whose rows are aligned words, not sentences (its own tasks: ``align``, word entries).
WORD_ALIGNED = "word_aligned"


@dataclass(frozen=True)
class AlignTask:
    """One language pair's word alignment over the first ``n`` sentences, for ``word_aligned`` pooling.

    ``languages`` sorted (side ``a`` is the first); equal languages: every word
    linked to itself, no encoder (``model`` None). Otherwise ``model`` is the
    encoder: a run model's name or :data:`ALIGNMENT_ENCODER`.
    """

    kind: ClassVar[str] = "align"
    key: str
    languages: tuple[str, str]
    model: str | None
    n: int
    depends: tuple[str, ...] = ()

    @property
    def identity(self) -> bool:
        return self.languages[0] == self.languages[1]

    def role(self, language: str) -> str:
        """Which side of the alignment a language's words are on (``a`` or ``b``)."""
        return "a" if language == self.languages[0] else "b"


def word_entry(align_key: str, role: str) -> str:
    """The name of a side's word-aligned entry in an extract task: its alignment and side."""
    return f"{WORD_ALIGNED}:{align_key}:{role}"


def parse_word_entry(name: str) -> tuple[str, str] | None:
    """``(alignment key, role)`` of a word-aligned entry name, None for a sentence pooling."""
    if not name.startswith(WORD_ALIGNED + ":"):
        return None
    _, key, role = name.split(":")
    return key, role


@dataclass(frozen=True)
class AuditTask:
    """One model's audit row: adapter, tokenizer provenance, NLL on one corpus side, identity keys."""

    kind: ClassVar[str] = "audit"
    key: str
    model: str
    language: str
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class QualityTask:
    """One model's mean NLL on one language side (teacher-forced, against chance ln V)."""

    kind: ClassVar[str] = "quality"
    key: str
    model: str
    language: str
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class PatchTask:
    """Cross-model activation patching: maps fitted on two stored sides, then the probe experiment."""

    kind: ClassVar[str] = "patch"
    key: str
    target: str
    donor: str
    languages: tuple[str, str]  # corpus sides (donor, target)
    pooling: str
    sides: tuple[str, str]  # extract task keys (donor side, target side)
    experiment: int = 0  # index into spec.patching.resolved()
    depends: tuple[str, ...] = ()
    alignment: str | None = None  # fit "words": the align task whose word pairs are the maps' rows
    control: str = ""  # "identity": the target side patched with itself through its own self-map
    layers: tuple[int, ...] = ()  # start layers (default: the experiment's)


@dataclass(frozen=True)
class TransportTask:
    """One directed OT fusion (target <- donor): plans, fused targets at every alpha, the shuffled control, NLL."""

    kind: ClassVar[str] = "transport"
    key: str
    target: str
    donor: str
    target_language: str
    donor_language: str
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditGateTask:
    """``audit.strict``: stop before any extraction when an audited model's verdict is bad."""

    kind: ClassVar[str] = "audit_gate"
    key: str
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class WeightsTask:
    """One pair of models: coverage (route and why) and the streamed weight diagnostics (over ``base``)."""

    kind: ClassVar[str] = "weights"
    key: str
    a: str
    b: str
    base: str | None = None
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class BarrierTask:
    """One pair of models: NLL of the interpolated weights on corpus sides (the loss barrier)."""

    kind: ClassVar[str] = "barrier"
    key: str
    a: str
    b: str
    languages: tuple[str, ...] = ()
    depends: tuple[str, ...] = ()


Task = (
    AuditTask
    | AuditGateTask
    | QualityTask
    | AlignTask
    | PatchTask
    | TransportTask
    | ExtractTask
    | CompareTask
    | MapTask
    | WeightsTask
    | BarrierTask
)


@dataclass
class Plan:
    """The tasks of a run, in an order that respects dependencies."""

    spec: RunSpec
    corpus: ParallelCorpus
    models: dict[str, ModelSpec]
    fingerprints: dict[str, str]
    pairs: list[Pair]
    map_pairs: list[Pair] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    #: torch CPU threads of every forward pass, resolved once in the driver (numerics.resolve_threads)
    threads: int | str = 1

    @overload
    def of_kind(self, kind: Literal["audit"]) -> list[AuditTask]: ...

    @overload
    def of_kind(self, kind: Literal["audit_gate"]) -> list[AuditGateTask]: ...

    @overload
    def of_kind(self, kind: Literal["quality"]) -> list[QualityTask]: ...

    @overload
    def of_kind(self, kind: Literal["align"]) -> list[AlignTask]: ...

    @overload
    def of_kind(self, kind: Literal["patch"]) -> list[PatchTask]: ...

    @overload
    def of_kind(self, kind: Literal["transport"]) -> list[TransportTask]: ...

    @overload
    def of_kind(self, kind: Literal["extract"]) -> list[ExtractTask]: ...

    @overload
    def of_kind(self, kind: Literal["compare"]) -> list[CompareTask]: ...

    @overload
    def of_kind(self, kind: Literal["map"]) -> list[MapTask]: ...

    @overload
    def of_kind(self, kind: Literal["weights"]) -> list[WeightsTask]: ...

    @overload
    def of_kind(self, kind: Literal["barrier"]) -> list[BarrierTask]: ...

    @overload
    def of_kind(self, kind: str) -> list[Task]: ...

    def of_kind(self, kind: str) -> list[Any]:
        """The plan's tasks of one kind, in plan order (typed by the kind's task class)."""
        return [t for t in self.tasks if t.kind == kind]

    def extract_task(self, model: str, language: str) -> ExtractTask:
        for t in self.of_kind("extract"):
            assert isinstance(t, ExtractTask)
            if t.model == model and t.language == language:
                return t
        raise KeyError((model, language))

    def summary(self) -> dict[str, int]:
        kinds: dict[str, int] = {}
        for t in self.tasks:
            kinds[t.kind] = kinds.get(t.kind, 0) + 1
        return kinds


def build_plan(spec: RunSpec, corpus: ParallelCorpus, fingerprints: dict[str, str]) -> Plan:
    """Pairs, extraction tasks (grouped by model, so each model loads once) and comparison tasks."""
    languages = [normalize_language(code) for code in spec.corpus.languages]
    explicit = [
        (Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language)))
        for p in spec.pairs.explicit
    ]
    names = [m.name or m.label for m in spec.models]
    pairs = enumerate_pairs(
        names, languages, within_model=spec.pairs.within_model, cross_model=spec.pairs.cross_model, explicit=explicit
    )
    if not pairs:
        raise ConfigError(
            "the config selects no pairs: enable pairs.within_model or pairs.cross_model, or list pairs.explicit"
        )
    map_pairs = _map_pairs(spec, pairs)
    needed: dict[str, list[str]] = {m: [] for m in names}
    for p in [*pairs, *map_pairs]:
        for s in (p.a, p.b):
            if s.language not in needed[s.model]:
                needed[s.model].append(s.language)
    patch_sides = _patch_sides(spec)
    for model, lang in {side: None for pair in patch_sides for side in pair}:
        if lang not in needed[model]:
            needed[model].append(lang)

    models = {name: m for name, m in zip(names, spec.models)}
    plan = Plan(
        spec=spec,
        corpus=corpus,
        models=models,
        fingerprints=dict(fingerprints),
        pairs=pairs,
        map_pairs=map_pairs,
        threads=resolve_threads(spec.threads),
    )
    if spec.audit is not None:
        _audit_tasks(plan, spec, corpus, names, models, fingerprints)
    if spec.quality is not None:
        _quality_tasks(plan, spec, corpus, names, models, fingerprints, needed)
    if spec.mergeability is not None:  # headers first: a pair's coverage is known before any extraction
        _mergeability_tasks(plan, spec, corpus, names, fingerprints)
    sentence_poolings = [p for p in spec.pooling if p != WORD_ALIGNED]
    word_pairs = _word_aligned_pairs(spec, pairs)
    aligns = _align_tasks(plan, spec, corpus, fingerprints, word_pairs)
    words_of: dict[tuple[str, str], list[tuple[str, str]]] = {}  # side -> [(align key, role)]
    # patching.fit words: each experiment's two corpus sides get the word entries of their language pair
    patch_pairs = (
        [Pair(Side(*d), Side(*t)) for d, t in patch_sides]
        if spec.patching is not None and spec.patching.fit == "words"
        else []
    )
    aligns.update(
        _align_tasks(plan, spec, corpus, fingerprints, [p for p in patch_pairs if _language_pair(p) not in aligns])
    )
    for pair in [*word_pairs, *patch_pairs]:
        task = aligns[_language_pair(pair)]
        for side in (pair.a, pair.b):
            entry = (task.key, task.role(side.language))
            if entry not in words_of.setdefault((side.model, side.language), []):
                words_of[(side.model, side.language)].append(entry)
    extract_keys: dict[tuple[str, str], str] = {}
    entry_keys: dict[tuple[str, str], str] = {}  # (extract task key, pooling) -> stored entry key
    for name in names:
        for lang in needed[name]:
            entries: list[tuple[str, str]] = []  # (entry name: a pooling or a word entry, its content key)
            inputs = None
            for pooling in sentence_poolings:
                inputs = _entry_inputs(spec, models[name], fingerprints[name], corpus, lang, pooling)
                entries.append((pooling, content_key(inputs)))
            for align_key, role in words_of.get((name, lang), []):
                word_inputs = {
                    **_entry_inputs(spec, models[name], fingerprints[name], corpus, lang, WORD_ALIGNED),
                    "alignment": align_key,
                    "role": role,
                    "align_format": str(ALIGN_FORMAT_VERSION),
                    "first_position": spec.word_alignment.first_position,
                }
                entries.append((word_entry(align_key, role), content_key(word_inputs)))
            key = content_key({"extract": dict(entries)})
            extract_keys[(name, lang)] = key
            assert inputs is not None
            common = tuple(sorted((k, v) for k, v in inputs.items() if k != "pooling"))
            depends = tuple(dict.fromkeys(a for a, _ in words_of.get((name, lang), [])))
            plan.tasks.append(ExtractTask(key, name, lang, tuple(entries), common, depends=depends))
            entry_keys.update({(key, pooling): entry for pooling, entry in entries})

    options = {
        "version": __version__,
        "measures": list(spec.measures),
        "inference": spec.inference.model_dump(mode="json"),
        "test_seed": spec.seeds.test,
        "standardize": spec.standardize,
    }
    for pair in pairs:
        _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
        grid = spec.layer_grid and pair.kind == "cross_model"
        sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
        for pooling in sentence_poolings:
            entry_a, entry_b = entry_keys[(sides[0], pooling)], entry_keys[(sides[1], pooling)]
            key = content_key(
                {
                    **options,
                    "pair": pair.label,
                    "pooling": pooling,
                    "sides": [entry_a, entry_b],
                    "grid": grid,
                    "control_seed": seed,
                }
            )
            plan.tasks.append(CompareTask(key, pair, pooling, sides, grid, seed, depends=sides))
    for pair in word_pairs:  # rows are aligned words: the control permutes word rows (drawn when their count is known)
        _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
        align = aligns[_language_pair(pair)]
        sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
        entry_a = entry_keys[(sides[0], word_entry(align.key, align.role(pair.a.language)))]
        entry_b = entry_keys[(sides[1], word_entry(align.key, align.role(pair.b.language)))]
        grid = spec.layer_grid and pair.kind == "cross_model"
        key = content_key(
            {
                **options,
                "pair": pair.label,
                "pooling": WORD_ALIGNED,
                "sides": [entry_a, entry_b],
                "alignment": align.key,
                "grid": grid,
                "control_seed": seed,
            }
        )
        plan.tasks.append(
            CompareTask(key, pair, WORD_ALIGNED, sides, grid, seed, depends=(*sides, align.key), alignment=align.key)
        )
    if spec.transport is not None:
        _transport_tasks(plan, spec, corpus, fingerprints)
    if spec.patching is not None:
        _patch_tasks(plan, spec, patch_sides, patch_pairs, aligns, extract_keys, entry_keys, fingerprints)
    if spec.maps is not None:
        pooling = spec.maps.pooling or sentence_poolings[0]
        options = {
            "version": __version__,
            "format": MAP_FORMAT_VERSION,
            "maps": spec.maps.model_dump(mode="json", exclude={"pairs"}),
            "folds_seed": spec.seeds.folds,
            "standardize": spec.standardize,
        }
        for pair in map_pairs:
            _, seed = pair_permutation(pair, len(corpus), spec.seeds.control)
            sides = (extract_keys[(pair.a.model, pair.a.language)], extract_keys[(pair.b.model, pair.b.language)])
            key = content_key(
                {
                    **options,
                    "pair": pair.label,
                    "pooling": pooling,
                    "control_seed": seed,
                    "sides": [entry_keys[(sides[0], pooling)], entry_keys[(sides[1], pooling)]],
                }
            )
            plan.tasks.append(MapTask(key, pair, pooling, sides, seed, depends=sides))
    return plan


def _audit_tasks(
    plan: Plan,
    spec: RunSpec,
    corpus: ParallelCorpus,
    names: list[str],
    models: dict[str, ModelSpec],
    fingerprints: dict[str, str],
) -> None:
    """One audit task per model (keyed by its files, the options and the scored text), then the strict gate."""
    opts = spec.audit
    assert opts is not None
    language = normalize_language(opts.language or spec.corpus.languages[0])
    options = {
        "version": __version__,
        "format": AUDIT_FORMAT_VERSION,
        "audit": opts.model_dump(mode="json", exclude={"strict", "language"}),
        "language": language,
        "corpus_fingerprint": corpus.fingerprint(language) if opts.quality else "",
        "ids_sha256": (
            sha256_hex(json.dumps(list(corpus.ids), ensure_ascii=False).encode("utf-8")) if opts.quality else ""
        ),
        "special_tokens": spec.special_tokens,
        "max_length": spec.max_length,
        "threads": _threads_key(spec),
    }
    keys = []
    # models over one base next to each other: the audit loads each base once (adapters go on and off it)
    for name in sorted(names, key=lambda n: (str(models[n].path or models[n].package), names.index(n))):
        m = models[name]
        key = content_key(
            {
                **options,
                "model": name,
                "fingerprint": fingerprints[name],
                "spec": m.model_dump(mode="json", include={"path", "adapter", "tokenizer", "dtype"}),
            }
        )
        plan.tasks.append(AuditTask(key, name, language))
        keys.append(key)
    if opts.strict:
        plan.tasks.append(AuditGateTask(content_key({"audit_gate": keys}), depends=tuple(keys)))


def _quality_tasks(
    plan: Plan,
    spec: RunSpec,
    corpus: ParallelCorpus,
    names: list[str],
    models: dict[str, ModelSpec],
    fingerprints: dict[str, str],
    needed: dict[str, list[str]],
) -> None:
    """One NLL task per model x language side it reads (or the listed sides), grouped by base model."""
    opts = spec.quality
    assert opts is not None
    listed = None if opts.languages == "all" else {normalize_language(c) for c in opts.languages}
    for name in sorted(names, key=lambda n: (str(models[n].path or models[n].package), names.index(n))):
        for lang in needed[name]:
            if listed is not None and lang not in listed:
                continue
            key = content_key(
                {
                    "version": __version__,
                    "format": AUDIT_FORMAT_VERSION,
                    "quality": name,
                    "fingerprint": fingerprints[name],
                    "corpus_fingerprint": corpus.fingerprint(lang),
                    "ids_sha256": sha256_hex(json.dumps(list(corpus.ids), ensure_ascii=False).encode("utf-8")),
                    "special_tokens": spec.special_tokens,
                    "max_length": spec.max_length,
                    "lang": lang,
                    "n": opts.n,
                    "threads": _threads_key(spec),
                }
            )
            plan.tasks.append(QualityTask(key, name, lang))


#: Bumped whenever a stored weights / barrier entry would change for the same inputs.
WEIGHTS_FORMAT_VERSION = 1


def weight_pairs(spec: RunSpec, names: list[str]) -> list[tuple[str, str, str | None]]:
    """(a, b, base) of the ``mergeability:`` section: its pairs, then the checkpoint arm's (each once)."""
    opts = spec.mergeability
    if opts is None:
        return []
    out: list[tuple[str, str, str | None]] = []
    if opts.pairs == "cross_model":
        out += [(a, b, None) for i, a in enumerate(names) for b in names[i + 1 :]]
    elif isinstance(opts.pairs, list):
        out += [(p.a, p.b, p.base) for p in opts.pairs]
    if opts.checkpoints is not None:
        arm = opts.checkpoints.models
        out += [(a, b, None) for i, a in enumerate(arm) for b in arm[i + 1 :]]
    seen: set[tuple[str, str, str | None]] = set()
    unique = []
    for a, b, base in out:
        if (a, b, base) in seen or (b, a, base) in seen:
            continue
        seen.add((a, b, base))
        unique.append((a, b, base))
    return unique


def _mergeability_tasks(
    plan: Plan, spec: RunSpec, corpus: ParallelCorpus, names: list[str], fingerprints: dict[str, str]
) -> None:
    opts = spec.mergeability
    assert opts is not None
    common = {"version": __version__, "format": WEIGHTS_FORMAT_VERSION}
    languages: list[str] = []
    if opts.barriers is not None:
        listed = opts.barriers.languages
        languages = [normalize_language(c) for c in (spec.corpus.languages if listed == "all" else listed)]
    interpolated: set[tuple[str, str]] = set()
    for a, b, base in weight_pairs(spec, names):
        inputs = {
            "a": fingerprints[a],
            "b": fingerprints[b],
            "base": fingerprints[base] if base else "",
            "names": [a, b, base or ""],
        }
        key = content_key({**common, "weights": inputs, "diagnostics": opts.diagnostics, "density": opts.density})
        plan.tasks.append(WeightsTask(key, a, b, base))
        if opts.barriers is not None and (a, b) not in interpolated:  # a barrier needs no base: once per pair
            interpolated.add((a, b))
            inputs = {"a": fingerprints[a], "b": fingerprints[b], "names": [a, b]}
            n = opts.barriers.n
            text = {lang: corpus.fingerprint(lang) for lang in languages}
            key = content_key(
                {
                    **common,
                    "barrier": inputs,
                    "grid": sorted(set(opts.barriers.grid) | {0.0, 1.0}),
                    "text": text,
                    "n": n,
                    "ids_sha256": sha256_hex(json.dumps(list(corpus.ids), ensure_ascii=False).encode("utf-8")),
                    "special_tokens": spec.special_tokens,
                    "max_length": spec.max_length,
                    "threads": _threads_key(spec),
                }
            )
            plan.tasks.append(BarrierTask(key, a, b, tuple(languages)))


def _transport_tasks(plan: Plan, spec: RunSpec, corpus: ParallelCorpus, fingerprints: dict[str, str]) -> None:
    """One task per directed pair, keyed by both models' files, the probe and evaluation text and the options."""
    opts = spec.transport
    assert opts is not None
    if importlib.util.find_spec("ot") is None:  # before any model runs, not when the first plan is solved
        from interlingua.transport.errors import TransportError

        raise TransportError(
            "the run's transport: section needs POT (Python Optimal Transport), which is not installed: "
            "pip install 'interlingua[transport]' (or pip install 'pot>=0.9')"
        )
    if len(corpus) < opts.probe_n + opts.eval_n:
        raise ConfigError(
            f"transport needs probe_n + eval_n = {opts.probe_n + opts.eval_n} disjoint sentences; the corpus has "
            f"{len(corpus)}: lower transport.probe_n / eval_n or raise corpus.n"
        )
    options = opts.model_dump(mode="json", exclude={"pairs"})
    for tp in opts.pairs:
        tl = normalize_language(tp.target_language or spec.corpus.languages[0])
        dl = normalize_language(tp.donor_language) if tp.donor_language else tl
        key = content_key(
            {
                "version": __version__,
                "transport": options,
                "target": fingerprints[tp.target],
                "donor": fingerprints[tp.donor],
                "sides": [corpus.fingerprint(tl), corpus.fingerprint(dl)],
                "ids_sha256": sha256_hex(json.dumps(list(corpus.ids), ensure_ascii=False).encode("utf-8")),
                "max_length": spec.max_length,
                "threads": _threads_key(spec),
            }
        )
        plan.tasks.append(TransportTask(key, tp.target, tp.donor, tl, dl))


def _language_pair(pair: Pair) -> tuple[str, str]:
    la, lb = pair.a.language, pair.b.language
    return (la, lb) if la <= lb else (lb, la)


def _word_aligned_pairs(spec: RunSpec, pairs: list[Pair]) -> list[Pair]:
    """The compared pairs that get word-aligned rows (none without ``word_aligned`` pooling)."""
    if WORD_ALIGNED not in spec.pooling:
        return []
    listed = spec.word_alignment.pairs
    if listed == "all":
        return list(pairs)
    by_sides = {frozenset((p.a, p.b)): p for p in pairs}
    out = []
    for p in listed:
        a, b = Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language))
        found = by_sides.get(frozenset((a, b)))
        if found is None:
            raise ConfigError(
                f"alignment.pairs lists {a.label} vs {b.label}, which the run does not compare; "
                "add it to pairs.explicit or list a compared pair"
            )
        if found not in out:
            out.append(found)
    return out


def _align_tasks(
    plan: Plan, spec: RunSpec, corpus: ParallelCorpus, fingerprints: dict[str, str], word_pairs: list[Pair]
) -> dict[tuple[str, str], AlignTask]:
    """One align task per language pair the word-aligned pairs need, keyed by text, encoder and options."""
    from interlingua.alignment.words import check_segmentable, segmenter_for
    from interlingua.builds import library_versions

    opts = spec.word_alignment
    n = len(corpus) if opts.n is None else min(opts.n, len(corpus))
    if isinstance(opts.encoder, str) or opts.encoder is None:
        encoder = opts.encoder or (spec.models[0].name or spec.models[0].label)
    else:
        encoder = ALIGNMENT_ENCODER
    segmenters = {"jieba": "jieba", "janome": "janome", "pythainlp": "pythainlp"}
    out: dict[tuple[str, str], AlignTask] = {}
    for pair in word_pairs:
        languages = _language_pair(pair)
        if languages in out:
            continue
        identity = languages[0] == languages[1]
        # the text itself: an unspaced script the segmenter cannot split is refused before any model runs
        used = {check_segmentable(lang, corpus.sentences(lang)[:n]) for lang in languages}
        for name in sorted(used & set(segmenters)):  # a missing segmenter stops the run before any model runs
            if importlib.util.find_spec(name) is None:
                from interlingua.alignment.words import missing_segmenter_error

                lang = next(x for x in languages if segmenter_for(x) == name)
                raise missing_segmenter_error(name, lang)
        payload = {
            "version": __version__,
            "format": ALIGN_FORMAT_VERSION,
            "languages": list(languages),
            "n": n,
            "text": [corpus.fingerprint(lang) for lang in languages],
            "ids_sha256": sha256_hex(json.dumps(list(corpus.ids)[:n], ensure_ascii=False).encode("utf-8")),
            "segmenters": library_versions(sorted(segmenters[u] for u in used if u in segmenters)),
        }
        if not identity:
            payload.update(
                {
                    "encoder": fingerprints[encoder],
                    "layer": opts.layer,
                    "method": opts.method,
                    "first_position": opts.first_position,
                    "max_length": spec.max_length,
                    "batch_size": spec.batch_size,
                    "threads": _threads_key(spec),
                }
            )
        task = AlignTask(content_key(payload), languages, None if identity else encoder, n)
        plan.tasks.append(task)
        out[languages] = task
    return out


def _patch_tasks(
    plan: Plan,
    spec: RunSpec,
    patch_sides: list[tuple[tuple[str, str], tuple[str, str]]],
    patch_pairs: list[Pair],
    aligns: dict[tuple[str, str], AlignTask],
    extract_keys: dict[Any, str],
    entry_keys: dict[Any, str],
    fingerprints: dict[str, str],
) -> None:
    """The patch tasks: one identity control per target side first (``identity_control``), then the experiments.

    A control patches the target side with itself through the map fitted from its fit rows onto themselves, at
    every start layer its experiments use; each experiment depends on its target side's control and carries
    the verdict in its rows.
    """
    pt = spec.patching
    assert pt is not None
    shared = pt.model_dump(
        mode="json",
        exclude={"experiments", "target", "donor", "donor_language", "target_language", "layers", "threads"},
    )
    experiments = pt.resolved()
    base = {"version": __version__, "format": PATCH_FORMAT_VERSION, "patching": shared, "seed": spec.seeds.test}

    def fit_of(i: int) -> tuple[tuple[str, str], list[str], AlignTask | None]:
        donor_side, target_side = patch_sides[i]
        sides = (extract_keys[donor_side], extract_keys[target_side])
        if pt.fit == "words":
            align = aligns[_language_pair(patch_pairs[i])]
            entries = [
                entry_keys[(sides[0], word_entry(align.key, align.role(donor_side[1])))],
                entry_keys[(sides[1], word_entry(align.key, align.role(target_side[1])))],
            ]
            return sides, entries, align
        return sides, [entry_keys[(sides[0], pt.pooling)], entry_keys[(sides[1], pt.pooling)]], None

    controls: dict[tuple[str, str], str] = {}
    if pt.identity_control:
        by_target: dict[tuple[str, str], list[int]] = {}
        for i, (_, target_side) in enumerate(patch_sides):
            by_target.setdefault(target_side, []).append(i)
        for target_side, idx in by_target.items():
            first = idx[0]
            sides, entries, align = fit_of(first)
            layers = tuple(sorted({j for i in idx for j in (experiments[i].layers or pt.layers)}))
            model = experiments[first].target
            key = content_key(
                {
                    **base,
                    "control": "identity",
                    "target": model,
                    "layers": list(layers),
                    "sides": [entries[1]],
                    "fingerprints": [fingerprints[model]],
                }
            )
            depends = (sides[1],) if align is None else (sides[1], align.key)
            plan.tasks.append(
                PatchTask(
                    key,
                    model,
                    model,
                    (target_side[1], target_side[1]),
                    pt.pooling,
                    (sides[1], sides[1]),
                    first,
                    depends=depends,
                    alignment=None if align is None else align.key,
                    control="identity",
                    layers=layers,
                )
            )
            controls[target_side] = key
    for i, (exp, (donor_side, target_side)) in enumerate(zip(experiments, patch_sides)):
        sides, entries, align = fit_of(i)
        control = controls.get(target_side)
        key = content_key(
            {
                **base,
                "experiment": exp.model_dump(mode="json"),
                "sides": entries,
                "fingerprints": [fingerprints[exp.donor], fingerprints[exp.target]],
                "identity_control": control,
            }
        )
        depends = (*sides, *(() if align is None else (align.key,)), *(() if control is None else (control,)))
        plan.tasks.append(
            PatchTask(
                key,
                exp.target,
                exp.donor,
                (donor_side[1], target_side[1]),
                pt.pooling,
                sides,
                i,
                depends=tuple(dict.fromkeys(depends)),
                alignment=None if align is None else align.key,
            )
        )


def _patch_sides(spec: RunSpec) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Per patching experiment, the (model, language) of the donor's and the target's sides its maps are fitted on."""
    pt = spec.patching
    if pt is None:
        return []
    out = []
    for exp in pt.resolved():
        donor_lang = normalize_language(exp.donor_language or spec.corpus.languages[0])
        target_lang = normalize_language(exp.target_language) if exp.target_language else donor_lang
        out.append(((exp.donor, donor_lang), (exp.target, target_lang)))
    return out


def _map_pairs(spec: RunSpec, pairs: list[Pair]) -> list[Pair]:
    """The pairs the ``maps:`` section asks for (none when it is absent)."""
    if spec.maps is None:
        return []
    if spec.maps.pairs == "cross_model":
        return [p for p in pairs if p.kind == "cross_model"]
    if spec.maps.pairs == "all":
        return list(pairs)
    return [
        Pair(Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language)))
        for p in spec.maps.pairs
    ]


def _threads_key(spec: RunSpec) -> str:
    """The thread count in the keys of entries a forward pass computes (its last bits depend on it)."""
    return str(resolve_threads(spec.threads))


def _entry_inputs(
    spec: RunSpec, mspec: ModelSpec, fingerprint: str, corpus: ParallelCorpus, language: str, pooling: str
) -> dict[str, str]:
    """Everything one stored representation depends on, as strings (also written into the entry)."""
    return {
        "format_version": str(EXTRACT_FORMAT_VERSION),
        "model_fingerprint": fingerprint,
        "corpus_fingerprint": corpus.fingerprint(language),
        "ids_sha256": sha256_hex(json.dumps(list(corpus.ids), ensure_ascii=False).encode("utf-8")),
        "n": str(len(corpus)),
        "lang": language,
        "pooling": pooling,
        "special_tokens": spec.special_tokens,
        "max_length": str(spec.max_length),
        "batch_size": str(spec.batch_size),
        "dtype": mspec.dtype,
        "threads": _threads_key(spec),  # a forward pass's last bits depend on it (numerics.py)
    }
