"""The ``alignment`` capability: word alignments of language pairs, and each side's word-aligned entries.

Its section is :class:`~interlingua.alignment.config.AlignmentSpec` (its defaults apply when a capability
asks for word rows without one). Other capabilities ask for word-aligned rows of a side pair
(``PlanContext.request_words``: ``word_aligned`` pooling, patching's ``fit: words``); this one plans one
``align`` task per language pair (before extraction) and adds a word entry to each side's extraction
(one vector per linked word, :func:`read_entries`). :func:`word_sides` gives a pair's aligned word rows.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from interlingua.alignment.columns import ALIGNMENT_COLUMNS
from interlingua.alignment.config import AlignmentSpec
from interlingua.alignment.cost import align_cost
from interlingua.contract.capability import EXTRACTION, Capability, ExtraModel, Kind, SideEntry
from interlingua.core.errors import InterlinguaError
from interlingua.core.store import content_key
from interlingua.data.corpora import normalize_language
from interlingua.data.models.spec import ModelSpec

if TYPE_CHECKING:
    import pandas as pd

    from interlingua.contract.capability import PlanContext
    from interlingua.contract.pairs import Pair, SideData
    from interlingua.data.corpora import ParallelCorpus
    from interlingua.pipeline.config import RunSpec
    from interlingua.pipeline.execute import ExtractOutput, Runtime
    from interlingua.pipeline.plan import ExtractTask, Plan

__all__ = [
    "ALIGNMENT",
    "ALIGNMENT_ENCODER",
    "ALIGN_FORMAT_VERSION",
    "WORD_ALIGNED",
    "AlignTask",
    "WordSide",
    "language_pair",
    "options",
    "parse_word_entry",
    "word_entry",
    "word_aligned_languages",
    "word_sides",
]

#: Name of the alignment encoder in ``fingerprints`` / the runtime when it is a model spec, not a run model.
ALIGNMENT_ENCODER = "(alignment encoder)"
#: Bumped whenever a stored alignment or word-aligned side would change for the same inputs.
ALIGN_FORMAT_VERSION = 2
#: The pooling whose rows are aligned words, not sentences (its own tasks: ``align``, word entries).
WORD_ALIGNED = "word_aligned"


def align_example() -> tuple[Any, Any]:
    """A sample alignment task and what a finished one holds."""

    return AlignTask("k-align", ("deu_Latn", "eng_Latn"), "m", 4), {"sentences": []}


@dataclass(frozen=True)
class AlignTask:
    """One language pair's word alignment over the first ``n`` sentences, for ``word_aligned`` pooling.

    ``languages`` sorted (side ``a`` is the first); equal languages: every word
    linked to itself, no encoder (``model`` None). Otherwise ``model`` is the
    encoder: a run model's name or :data:`ALIGNMENT_ENCODER`.
    """

    kind: ClassVar[str] = "alignment"
    key: str
    languages: tuple[str, str]
    model: str | None
    n: int
    depends: tuple[str, ...] = ()
    options: AlignmentSpec | None = field(default=None, compare=False, repr=False)

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


def _options_of(task: AlignTask) -> AlignmentSpec:
    """The alignment options an align task was planned with."""
    if task.options is None:
        raise ValueError(f"align task {task.key[:12]} carries no options; plan it with the alignment capability")
    return task.options


def options(spec: RunSpec) -> AlignmentSpec:
    """The ``alignment:`` section, or its defaults (word rows asked for without the section)."""
    found = spec.section("alignment", AlignmentSpec)
    return AlignmentSpec() if found is None else found


def extra_models(spec: RunSpec) -> list[ExtraModel]:
    """The word aligner's encoder when the config gives it as a model spec (not a run model's name).

    Any user of the word rows (``word_aligned`` pooling, patching's ``fit: words``) needs the ``alignment:``
    section for a model-spec encoder, so the section's presence decides, not the pooling."""
    section = spec.section("alignment", AlignmentSpec)
    encoder = section.encoder if section is not None else None
    return [ExtraModel(ALIGNMENT_ENCODER, "alignment", "encoder", encoder)] if isinstance(encoder, ModelSpec) else []


def word_aligned_languages(spec: RunSpec) -> list[str]:
    """Canonical codes of the languages on a word-aligned pair (the pairs ``plan`` builds; torch-free)."""
    if "word_aligned" not in spec.pooling:
        return []
    listed = options(spec).pairs
    sides: list[tuple[str, ...]]  # the languages of one alignment pair, or all the corpus's at once
    if listed != "all":
        sides = [(p.a.language, p.b.language) for p in listed]
    else:
        languages = [normalize_language(code) for code in spec.corpus.languages]
        sides = [(p.a.language, p.b.language) for p in spec.pairs.explicit]
        several_models = len(spec.models) > 1 and spec.pairs.cross_model != "none"
        if (spec.pairs.within_model and len(languages) > 1) or several_models:
            sides.append(tuple(languages))
    return sorted({normalize_language(code) for side in sides for code in side})


def preflight(spec: RunSpec, corpus: ParallelCorpus, *, placeholder: bool = False) -> None:
    """A word segmenter for every language of a word-aligned pair (read on the sampled text)."""
    from interlingua.alignment.words import check_segmentable, missing_segmenter_error

    if placeholder:
        return
    opts = options(spec)
    n = len(corpus) if opts.n is None else min(opts.n, len(corpus))
    for lang in word_aligned_languages(spec):
        if lang not in corpus.languages:
            continue  # the corpus check names it
        name = check_segmentable(lang, corpus.sentences(lang)[:n])
        if name != "spaced" and importlib.util.find_spec(name) is None:
            raise missing_segmenter_error(name, lang)


def check(spec: RunSpec) -> None:
    """The encoder is a run model (or a model spec), its pairs compared sides, and the section is used."""
    if WORD_ALIGNED in spec.pooling and not spec.sentence_poolings():
        raise ValueError(
            "pooling [word_aligned] alone is not supported: list a sentence pooling too (e.g. "
            "[mean, word_aligned]); maps, patching and the report's pooling comparison use it"
        )
    wanted = spec.wants_words()
    section = spec.section("alignment", AlignmentSpec)
    if wanted:
        encoder = options(spec).encoder
        names = spec.model_names()
        if isinstance(encoder, str) and encoder not in names:
            raise ValueError(
                f"alignment.encoder {encoder!r} is not among models {names}; name a run model or give a model spec"
            )
    elif section is not None:
        raise ValueError(
            "an alignment: section is set but pooling has no word_aligned (nor patching.fit: words); "
            "add it to pooling or drop the section"
        )
    if section is not None and isinstance(section.pairs, list):
        spec.check_sides(section.pairs)


def language_pair(pair: Pair) -> tuple[str, str]:
    """The pair's two languages, sorted (an alignment's key: one per language pair)."""
    la, lb = pair.a.language, pair.b.language
    return (la, lb) if la <= lb else (lb, la)


def plan(ctx: PlanContext) -> None:
    """One align task per language pair the word-aligned side pairs need (keyed by text, encoder and options),
    and each side's word entry, which its extraction adds (:func:`read_entries`)."""
    from interlingua.alignment.words import check_segmentable, segmenter_for
    from interlingua.contract.keys import threads_key
    from interlingua.core.builds import library_versions

    if not ctx.word_pairs:
        return
    spec, corpus, fingerprints = ctx.spec, ctx.corpus, ctx.fingerprints
    opts = options(spec)
    if isinstance(opts.encoder, ModelSpec):
        ctx.plan.extra_models[ALIGNMENT_ENCODER] = opts.encoder
    n = len(corpus) if opts.n is None else min(opts.n, len(corpus))
    if isinstance(opts.encoder, str) or opts.encoder is None:
        encoder = opts.encoder or (spec.models[0].name or spec.models[0].label)
    else:
        encoder = ALIGNMENT_ENCODER
    segmenters = {"jieba": "jieba", "janome": "janome", "pythainlp": "pythainlp"}
    out: dict[tuple[str, str], AlignTask] = ctx.shared.setdefault("alignment", {})
    for pair in ctx.word_pairs:
        languages = language_pair(pair)
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
        payload = ctx.versioned(
            {
                "format": ALIGN_FORMAT_VERSION,
                "languages": list(languages),
                "n": n,
                "text": [corpus.fingerprint(lang) for lang in languages],
                "ids_sha256": ctx.ids_sha256(n),
                "segmenters": library_versions(sorted(segmenters[u] for u in used if u in segmenters)),
            }
        )
        if not identity:
            payload.update(
                {
                    "encoder": fingerprints[encoder],
                    "layer": opts.layer,
                    "method": opts.method,
                    "first_position": opts.first_position,
                    "max_length": spec.max_length,
                    "batch_size": spec.batch_size,
                    "threads": threads_key(spec),
                }
            )
        task = AlignTask(content_key(payload), languages, None if identity else encoder, n, options=opts)
        ctx.add(task)
        out[languages] = task
    for pair in ctx.word_pairs:
        task = out[language_pair(pair)]
        for side in (pair.a, pair.b):
            role = task.role(side.language)
            name = word_entry(task.key, role)
            inputs = {
                "pooling": WORD_ALIGNED,
                "alignment": task.key,
                "role": role,
                "align_format": str(ALIGN_FORMAT_VERSION),
                "first_position": opts.first_position,
            }
            stem = f"{WORD_ALIGNED}.{task.key[:16]}.{role}"
            ctx.add_entries(side.model, side.language, SideEntry(name, inputs, "alignment", stem, (task.key,)))


def _alignment(rt: Runtime, key: str, done: dict[str, Any]) -> dict[str, Any]:
    """An align task's output: from this run, else the store (a worker reading a finished dependency). It is
    never computed here: the extraction that reads it depends on its task, which every executor runs first."""
    if key in done:
        return done[key]

    def missing() -> dict[str, Any]:
        raise InterlinguaError(
            f"word alignment {key[:12]} is neither in this run nor in the store, although the extraction that reads "
            "it depends on it: an executor ran the extraction before its alignment; report this as a bug"
        )

    return rt.stored(rt.plan.task(key), missing, valid=lambda v: isinstance(v, dict) and "sentences" in v)


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


def read_entries(
    rt: Runtime, task: ExtractTask, entries: list[tuple[str, str]], done: dict[str, Any]
) -> dict[str, WordSide]:
    """Word-aligned entries of one side: from the store, or pooled from the model (one pass per alignment)."""
    from interlingua.alignment.links import from_json, linked_words
    from interlingua.alignment.simalign import word_states

    settings = rt.plan.run_settings()
    inputs = dict(task.entry_inputs)
    out: dict[str, WordSide] = {}
    for name, key in entries:
        align_key, role = parse_word_entry(name)  # type: ignore[misc]
        opts = _options_of(rt.plan.task(align_key))
        expected = {
            **inputs,
            "pooling": "word_aligned",
            "alignment": align_key,
            "role": role,
            "first_position": opts.first_position,
        }
        got = rt.store.get_arrays(rt.namespace("extract"), rt.entry_path(task, name), key, expected)
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
        states = word_states(
            rt.handle(task.model).loaded,
            sentences,
            words,
            batch_size=settings.batch_size,
            max_length=settings.max_length,
            first_position=opts.first_position == "include",
        )
        d = int(next((v.shape[-1] for v in states.vectors if v.shape[1]), 0))
        reps = np.concatenate([v.reshape(v.shape[0], v.shape[1], d) for v in states.vectors], axis=1)
        arrays = {
            "representations": np.ascontiguousarray(reps, dtype=np.float32),
            "n_tokens": np.concatenate(states.n_tokens).astype(np.int64),
            "n_chars": np.array([w.end - w.start for ws in words for w in ws], dtype=np.int64),
        }
        rt.store.put_arrays(rt.entry_path(task, name), key, arrays, expected)
        out[name] = WordSide(arrays["representations"], arrays["n_tokens"], arrays["n_chars"])
        rt._count("extract")
    return out


def word_sides(
    rt: Runtime, align_key: str, pair: Pair, a: ExtractOutput, b: ExtractOutput, done: dict[str, Any]
) -> tuple[SideData, SideData, Any]:
    """The two sides of a word-aligned comparison: one row per aligned word both sides cover.

    Lengths are each word's sub-word count and characters (the length control regresses them out);
    no special token is ever pooled, so the special share is 0.
    """
    from interlingua.alignment.links import from_json, word_rows
    from interlingua.contract.pairs import SideData

    align = rt.plan.task(align_key)
    assert isinstance(align, AlignTask)
    ws_a: WordSide = a.data[word_entry(align.key, align.role(pair.a.language))]
    ws_b: WordSide = b.data[word_entry(align.key, align.role(pair.b.language))]
    alignments = from_json(_alignment(rt, align.key, done)["sentences"])
    if align.role(pair.a.language) == "b":  # the pair lists the alignment's languages the other way round
        from interlingua.alignment.simalign import SentenceAlignment

        alignments = [
            SentenceAlignment(al.words_b, al.words_a, tuple(sorted((j, i) for i, j in al.links))) for al in alignments
        ]
    rows = word_rows(alignments, ws_a.covered, ws_b.covered)

    def side(ws: WordSide, index: np.ndarray) -> SideData:
        lengths = np.stack([ws.n_tokens[index], ws.n_chars[index]], axis=1).astype(np.float64)
        return SideData(ws.reps[:, index], lengths, np.zeros(ws.reps.shape[0]))

    return side(ws_a, rows.index_a), side(ws_b, rows.index_b), rows


def run(rt: Runtime, task: AlignTask, done: dict[str, Any]) -> dict[str, Any]:
    """One language pair's word alignment (JSON: words with spans and links per sentence), stored."""
    return rt.stored(task, lambda: _align(rt, task), valid=lambda v: isinstance(v, dict) and "sentences" in v)


def _align(rt: Runtime, task: AlignTask) -> dict[str, Any]:
    import time

    from interlingua.alignment.links import identity_alignments, to_json
    from interlingua.alignment.simalign import AlignOptions, align

    corpus, opts, settings = rt.plan.corpus, _options_of(task), rt.plan.run_settings()
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
        options = AlignOptions.from_spec(opts, layer=layer, batch_size=settings.batch_size)
        alignments = align(loaded, sents_a, sents_b, language_a=la, language_b=lb, options=options)
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
    return payload


def tables(plan: Plan, done: dict[str, Any], built: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``alignments``: one row per aligned language pair."""
    from interlingua.alignment.columns import ALIGNMENT_COLUMNS
    from interlingua.core.schema import result_table

    tasks = plan.of_kind("alignment")
    if not tasks:
        return {}
    rows = []
    for t in tasks:
        out = done[t.key]
        rows.append(
            {
                "languages": "-".join(out["languages"]),
                "identity": bool(out["identity"]),
                "encoder": out["encoder"] or "",
                "layer": -1 if out["layer"] is None else int(out["layer"]),
                "method": out["method"] or "",
                "sentences": int(out["n"]),
                **{k: out[k] for k in ("words_a", "words_b", "links", "unaligned_sentences", "seconds")},
            }
        )
    return {"alignments": result_table(rows, ALIGNMENT_COLUMNS)}


ALIGNMENT = Capability(
    "alignment",
    section=AlignmentSpec,
    description="word alignment for word_aligned pooling (defaults when the pooling is listed)",
    kinds=(
        Kind(
            "alignment",
            ("alignments",),
            runner=run,
            holds_model=True,
            group="model",
            label=lambda t: f"alignment {'-'.join(t.languages)}",
            phase=EXTRACTION,
            cost=align_cost,
            example=align_example,
        ),
    ),
    stage="before",
    check=check,
    plan=plan,
    read_entries=read_entries,
    extra_models=extra_models,
    preflight=preflight,
    tables=tables,
    columns={"alignments": ALIGNMENT_COLUMNS},
)
