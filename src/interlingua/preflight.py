"""Pre-flight: every check that needs no model weights, before any model runs.

The output folder (writable, nothing of the user's replaced), the cache folder
(writable), measures, the corpus (readable, languages present, enough
sentences), and every model (path exists, config and tokenizer readable,
architecture known, packages installed), so that a mistake in the second
model surfaces before the first one is extracted. ``interlingua validate`` runs
the same checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from interlingua.config import RunSpec
from interlingua.corpora import ParallelCorpus, load_corpus, normalize_language
from interlingua.errors import CorpusError
from interlingua.measures import get_measure
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


def resolve_zoo_models(spec: RunSpec, store: Store) -> RunSpec:
    """Replace every ``zoo:`` model by the folder (and adapter) it names in the store; keep the user's other fields."""
    if not any(m.zoo for m in spec.models):
        return spec
    from interlingua.models.spec import ModelSpec
    from interlingua.zoo import zoo_model_fields

    models = []
    for m in spec.models:
        if m.zoo is None:
            models.append(m)
            continue
        fields = zoo_model_fields(m.zoo.removeprefix("zoo:"), store.root)
        user = m.model_dump(exclude_unset=True, exclude={"zoo"})
        models.append(ModelSpec(**{**fields, **user, "name": m.name}))  # the label the config gave (or its zoo name)
    return spec.model_copy(update={"models": models})


def preflight(spec: RunSpec, *, fingerprints: bool = True) -> Checked:
    """Run every check that needs no weights; raise the matching :class:`InterlinguaError` on the first problem.

    ``fingerprints=False`` skips hashing the weight files (``validate`` needs no keys).
    """
    from interlingua.models.fingerprint import spec_fingerprint
    from interlingua.models.preflight import preflight_model

    target = prepare_output(spec.output, overwrite=spec.overwrite)
    store = Store(spec.cache_dir)
    store.check_writable()
    spec = resolve_zoo_models(spec, store)
    for mid in spec.measures:
        get_measure(mid)
    corpus = load_run_corpus(spec)
    checked = Checked(spec, corpus, target, store)
    model_cache = store.folder("models")
    for m in spec.models:
        name = m.name or m.label
        checked.models[name] = preflight_model(m, cache_dir=model_cache)
    if fingerprints:
        for m in spec.models:
            checked.fingerprints[m.name or m.label] = spec_fingerprint(m, cache_dir=model_cache)
    return checked
