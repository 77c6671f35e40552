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

from interlingua.analysis.measures import get_measure
from interlingua.contract.capability import ExtraModel
from interlingua.core.errors import ConfigError, CorpusError
from interlingua.core.outputs import OutputTarget, prepare_output
from interlingua.core.store import Store
from interlingua.data.corpora import ParallelCorpus, load_corpus, normalize_language
from interlingua.pipeline.config import RunSpec

__all__ = ["Checked", "preflight"]


@dataclass
class Checked:
    """What pre-flight established: the sampled corpus, the output target, the store, model facts."""

    spec: RunSpec
    corpus: ParallelCorpus
    target: OutputTarget | None  # None: an in-memory run writes no output folder
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


def check_stages(spec: RunSpec, corpus: ParallelCorpus, *, placeholder: bool = False) -> None:
    """What each stage needs of the sampled corpus and the machine, before any model runs (``validate`` too):
    jackknife counts against n, CUDA where a model asks for it, and each capability's own checks (its
    ``preflight``: word segmenters, fold counts, the probes' languages, URIEL coverage)."""
    from interlingua.pipeline import registry

    _check_counts(spec, len(corpus))
    _check_devices(spec)
    for cap in registry.capabilities():
        if cap.preflight is not None:
            cap.preflight(spec, corpus, placeholder=placeholder)


def _check_counts(spec: RunSpec, n: int) -> None:
    """Jackknife counts the sample's n sentences can hold (else NaN columns or a failure after models ran)."""
    groups = spec.inference.jackknife_groups
    if groups > n and spec.sentence_poolings():
        raise ConfigError(
            f"inference.jackknife_groups: {groups} groups exceed the run's n={n} sentences (every group needs one) "
            f"; use at most {n} (n gives the leave-one-out jackknife) or 0 to disable it"
        )


def cuda_device_count() -> int:
    """How many CUDA devices torch sees (0 without CUDA); asked in a subprocess when torch is not imported
    (``validate`` stays torch-free)."""
    if "torch" in sys.modules:
        cuda = sys.modules["torch"].cuda
        return int(cuda.device_count()) if cuda.is_available() else 0
    import subprocess

    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else 0
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (see :func:`cuda_device_count`)."""
    return cuda_device_count() > 0


def _extra_models(spec: RunSpec) -> list[ExtraModel]:
    """Models the run loads beside its own, as each capability declares them (the word aligner's encoder given
    as a model spec)."""
    from interlingua.pipeline import registry

    return [e for cap in registry.capabilities() if cap.extra_models is not None for e in cap.extra_models(spec)]


def _check_devices(spec: RunSpec) -> None:
    """A model on ``device: cuda`` needs a CUDA device on this machine."""
    extra = _extra_models(spec)
    models = [*spec.models, *(e.spec for e in extra)]
    on_cuda = [(i, m) for i, m in enumerate(models, start=1) if str(m.device).startswith("cuda")]
    if not on_cuda:
        return
    count = cuda_device_count()

    def where(i: int) -> str:
        if i <= len(spec.models):
            return f"models.{i}.device"
        e = extra[i - len(spec.models) - 1]
        return f"{e.section}.{e.field}.device"

    if count == 0:
        i, m = on_cuda[0]
        raise ConfigError(
            f"{where(i)}: model {m.label!r} asks for {m.device}, but torch sees no CUDA device on this machine ; "
            "use device: cpu, or auto (cuda when there is one)"
        )
    for i, m in on_cuda:
        if str(m.device).startswith("cuda:") and int(str(m.device)[5:]) >= count:
            raise ConfigError(
                f"{where(i)}: model {m.label!r} asks for {m.device}, but torch sees {count} CUDA "
                f"device(s) (cuda:0 to cuda:{count - 1}) ; choose one of them, or cuda / auto"
            )


def resolve_run_models(spec: RunSpec, store: Store, *, build: bool = True) -> RunSpec:
    """Every zoo name and tokenwise merge of the run replaced by its folder (merges built when ``build``)."""
    from interlingua.pipeline.resolve import resolve_models

    log = (lambda message: print(f"interlingua: {message}", file=sys.stderr)) if spec.progress else None
    return spec.model_copy(update={"models": resolve_models(spec.models, store, build=build, log=log)})


def check_store_read_only(store: Store) -> None:
    """What :meth:`Store.check_writable` checks, writing nothing: the root is a folder (or can be made) and the
    nearest existing folder on its path is writable; ``validate`` creates, probes and sweeps nothing."""
    import os

    from interlingua.core.errors import StoreError
    from interlingua.core.store import CACHE_ENV

    root = store.root
    if root.exists() and not root.is_dir():
        raise StoreError(
            f"cache folder {root} exists and is a file; give a folder with --cache-dir (or cache_dir: / ${CACHE_ENV})"
        )
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise StoreError(
            f"cache folder {root} is not writable ({existing} is not a writable folder); give a writable "
            f"folder with --cache-dir (or cache_dir: / ${CACHE_ENV})"
        )


def preflight(spec: RunSpec, *, fingerprints: bool = True, output: bool = True, read_only: bool = False) -> Checked:
    """Run every check that needs no weights; raise the matching :class:`InterlinguaError` on the first problem.

    ``fingerprints=False`` skips hashing the weight files (``validate`` needs no keys); ``output=False``
    (an in-memory run) neither checks nor touches ``spec.output``. ``read_only`` (``validate``): nothing is
    built or written, in the store or elsewhere (file hashes are read from the store's ``hashes/``, never
    written; merges are checked, not built).
    """
    from interlingua.core.hashing import use_hash_cache
    from interlingua.data.models.fingerprint import spec_fingerprint
    from interlingua.data.models.preflight import preflight_model
    from interlingua.pipeline import registry

    if read_only and fingerprints:
        raise ValueError("a read-only pre-flight hashes no weights: pass fingerprints=False")
    target = prepare_output(spec.output, overwrite=spec.overwrite) if output else None
    store = Store(spec.cache_dir)
    if read_only:
        check_store_read_only(store)
    else:
        store.check_writable(sweep=registry.entry_namespaces())
    # file hashes (fingerprints, merge keys) kept in the run's store; validate reads them only
    use_hash_cache(store.folder("hashes"), write=not read_only)
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
    for extra in _extra_models(spec):  # e.g. the word aligner's own encoder: checked and keyed like a run model
        from interlingua.pipeline.resolve import resolve_models

        (resolved,) = resolve_models([extra.spec], store, build=fingerprints)
        section = getattr(spec, extra.section).model_copy(update={extra.field: resolved})
        spec = spec.model_copy(update={extra.section: section})
        checked.spec = spec
        preflight_model(resolved, cache_dir=model_cache)
        if fingerprints:
            checked.fingerprints[extra.name] = spec_fingerprint(resolved, cache_dir=model_cache)
    if fingerprints:
        for m in spec.models:
            checked.fingerprints[m.name or m.label] = spec_fingerprint(m, cache_dir=model_cache)
    return checked


def pending_builds(spec: RunSpec, store: Store) -> list[str]:
    """The merges a run of ``spec`` (as resolved by a read-only pre-flight) would build first: one line each, with
    the store folder it would fill. Their keys hash the input files (read-only here: hashes are not kept)."""
    out = []
    models = store.folder("models")
    for m in spec.models:
        if m.merge is not None:  # the merge modules are imported only where there is a merge (they import torch)
            from interlingua.mergeability.merge import merge_recipe_key

            ms = m.merge
            key = merge_recipe_key(list(ms.models), method=ms.method, base=ms.base, **ms.params())
            folder, what = models / "merges" / key[:32], f"merge {m.label} ({ms.method} of {len(ms.models)} models)"
            record = "merge.json"
        elif m.tokenwise_merge is not None:
            from interlingua.mergeability.tokenwise import tokenwise_recipe_key
            from interlingua.pipeline.resolve import _top_k

            tm = m.tokenwise_merge
            key = tokenwise_recipe_key(
                tm.english,
                tm.l2,
                tm.tokenizer,
                alpha=float(tm.alpha),  # type: ignore[arg-type]
                top_k=_top_k(float(tm.top_k)),  # type: ignore[arg-type]
            )
            folder, what = models / "tokenwise" / key[:32], f"tokenwise merge {m.label} (alpha={tm.alpha:g})"
            record = "tokenwise_merge.json"
        else:
            continue
        if not (folder / record).is_file():
            out.append(f"{what} into {folder}")
    return out
