"""Pre-flight: every check that needs no model weights, before any model runs.

The output folder (writable, nothing of the user's replaced), the cache folder
(writable), measures, the corpus (readable, languages present, enough
sentences), and every model (path exists, config and tokenizer readable,
architecture known, packages installed), so that a mistake in the second
model surfaces before the first one is extracted. ``interlingua validate`` runs
the same checks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from interlingua.config import RunSpec
from interlingua.corpora import ParallelCorpus, load_corpus, normalize_language
from interlingua.errors import CorpusError
from interlingua.measures import get_measure
from interlingua.models.spec import ModelSpec
from interlingua.outputs import OutputTarget, prepare_output
from interlingua.store import Store

__all__ = ["Checked", "preflight"]


@dataclass
class Checked:
    """What pre-flight established: the sampled corpus, the output target, the store, model facts."""

    spec: RunSpec
    corpus: ParallelCorpus
    target: OutputTarget
    store: Store
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    fingerprints: dict[str, str] = field(default_factory=dict)


def load_run_corpus(spec: RunSpec) -> ParallelCorpus:
    """The run's corpus: its languages, sampled with ``seeds.sample``; at least 4 sentences."""
    languages = [normalize_language(code) for code in spec.corpus.languages]
    corpus = load_corpus(spec.corpus.source, languages, **spec.corpus.load_options())
    if spec.corpus.n is not None:
        corpus = corpus.sample(spec.corpus.n, spec.seeds.sample)
    if len(corpus) < 4:
        raise CorpusError(f"corpus {corpus.name} has {len(corpus)} aligned sentences; at least 4 are needed")
    return corpus


def word_aligned_languages(spec: RunSpec) -> list[str]:
    """Canonical codes of the languages on a word-aligned pair (the pairs ``plan`` builds; torch-free)."""
    if "word_aligned" not in spec.pooling:
        return []
    listed = spec.word_alignment.pairs
    if listed != "all":
        sides = [(p.a.language, p.b.language) for p in listed]
    else:
        languages = [normalize_language(code) for code in spec.corpus.languages]
        sides = [(p.a.language, p.b.language) for p in spec.pairs.explicit]
        several_models = len(spec.models) > 1 and spec.pairs.cross_model != "none"
        if (spec.pairs.within_model and len(languages) > 1) or several_models:
            sides.append(tuple(languages))
    return sorted({normalize_language(code) for side in sides for code in side})


def check_stages(spec: RunSpec, corpus: ParallelCorpus) -> None:
    """What each stage needs of the sampled corpus, before any model runs: a word segmenter (known, installed,
    able to split the text's script) for every language of word-aligned pooling."""
    import importlib.util

    from interlingua.alignment.words import check_segmentable, missing_segmenter_error

    n = len(corpus) if spec.word_alignment.n is None else min(spec.word_alignment.n, len(corpus))
    for lang in word_aligned_languages(spec):
        if lang not in corpus.languages:
            continue  # the corpus check names it
        name = check_segmentable(lang, corpus.sentences(lang)[:n])
        if name != "spaced" and importlib.util.find_spec(name) is None:
            raise missing_segmenter_error(name, lang)


def resolve_run_models(spec: RunSpec, store: Store, *, build: bool = True) -> RunSpec:
    """Every zoo name and tokenwise merge of the run replaced by its folder (merges built when ``build``)."""
    from interlingua.resolve import resolve_models

    log = (lambda message: print(f"interlingua: {message}", file=sys.stderr)) if spec.progress else None
    return spec.model_copy(update={"models": resolve_models(spec.models, store, build=build, log=log)})


def preflight(spec: RunSpec, *, fingerprints: bool = True) -> Checked:
    """Run every check that needs no weights; raise the matching :class:`InterlinguaError` on the first problem.

    ``fingerprints=False`` skips hashing the weight files (``validate`` needs no keys).
    """
    from interlingua.models.fingerprint import spec_fingerprint
    from interlingua.models.hashing import use_hash_cache
    from interlingua.models.preflight import preflight_model

    target = prepare_output(spec.output, overwrite=spec.overwrite)
    store = Store(spec.cache_dir)
    store.check_writable()
    use_hash_cache(store.folder("hashes"))  # file hashes (fingerprints, merge keys) kept in the run's store
    spec = resolve_run_models(spec, store, build=fingerprints)
    for mid in spec.measures:
        get_measure(mid)
    corpus = load_run_corpus(spec)
    check_stages(spec, corpus)
    checked = Checked(spec, corpus, target, store)
    model_cache = store.folder("models")
    for m in spec.models:
        name = m.name or m.label
        if m.tokenwise_merge is not None:  # validate only: its inputs were checked, it is built by a run
            checked.models[name] = {"name": name, "kind": "tokenwise_merge", **m.tokenwise_merge.model_dump()}
            continue
        if m.merge is not None:  # validate only: its inputs were checked (headers), it is built by a run
            checked.models[name] = {"name": name, "kind": "merge", **m.merge.model_dump()}
            continue
        checked.models[name] = preflight_model(m, cache_dir=model_cache)
    encoder = spec.word_alignment.encoder if "word_aligned" in spec.pooling else None
    if isinstance(encoder, ModelSpec):  # the word aligner's own encoder: checked and keyed like a run model
        from interlingua.plan import ALIGNMENT_ENCODER
        from interlingua.resolve import resolve_models

        (encoder,) = resolve_models([encoder], store, build=fingerprints)
        spec = spec.model_copy(update={"alignment": spec.word_alignment.model_copy(update={"encoder": encoder})})
        checked.spec = spec
        preflight_model(encoder, cache_dir=model_cache)
        if fingerprints:
            checked.fingerprints[ALIGNMENT_ENCODER] = spec_fingerprint(encoder, cache_dir=model_cache)
    if fingerprints:
        for m in spec.models:
            checked.fingerprints[m.name or m.label] = spec_fingerprint(m, cache_dir=model_cache)
    return checked
