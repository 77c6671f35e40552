"""``run(spec)``: parallel text -> representations -> comparisons -> outputs.

The same call backs ``interlingua run CONFIG.yaml`` and notebooks. Models are
loaded lazily: when every representation a model owes is already in the
content-addressed cache, the model is never loaded, so a rerun is fast. All
outputs are built in a temporary folder and moved into place at the end, so
an interrupted or failed run never leaves a partial output folder.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from interlingua import __version__
from interlingua.compare import (
    InferenceOptions,
    Pair,
    Side,
    compare_grid,
    compare_pair,
    enumerate_pairs,
    pair_permutation,
)
from interlingua.config import RunSpec, load_spec, parse_spec
from interlingua.corpora import ParallelCorpus, load_corpus, normalize_language
from interlingua.errors import ConfigError, CorpusError
from interlingua.measures import get_measure
from interlingua.models import ModelSpec, load_model
from interlingua.models.fingerprint import spec_fingerprint
from interlingua.report.markdown import write_report
from interlingua.representations import RepresentationCache

OUTPUT_FILES = ("results.csv", "results.parquet", "run.json", "permutations.json", "report.md")


def default_cache_dir() -> Path:
    """``$INTERLINGUA_CACHE`` or ``~/.cache/interlingua``."""
    env = os.environ.get("INTERLINGUA_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "interlingua"


@dataclass
class RunResult:
    """What a run wrote, and the table itself for notebooks."""

    output: Path
    table: pd.DataFrame
    info: dict[str, Any]
    cache_hits: int = 0
    cache_misses: int = 0
    models_loaded: list[str] = field(default_factory=list)


class LazyModel:
    """A model that loads on first use of its weights.

    The cache key needs only the fingerprint (from the spec and file hashes),
    the dtype (from the spec) and the number of hidden states (from the facts
    recorded the first time the model was loaded), so a fully cached model is
    never loaded.
    """

    def __init__(self, spec: ModelSpec, facts_root: Path) -> None:
        self.spec = spec
        self.fingerprint = spec_fingerprint(spec)
        self.dtype = spec.dtype
        self.facts_path = facts_root / f"{self.fingerprint}.json"
        self._loaded: Any = None

    @property
    def loaded(self) -> Any:
        if self._loaded is None:
            self._loaded = load_model(self.spec)
            _atomic_json(self.facts_path, self._loaded.facts.to_dict())
        return self._loaded

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    def cached_facts(self) -> dict[str, Any] | None:
        """Facts recorded when this exact model was last loaded, if any."""
        try:
            facts = json.loads(self.facts_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        return facts if isinstance(facts, dict) and isinstance(facts.get("num_layers"), int) else None

    def facts_dict(self) -> dict[str, Any]:
        if not self.is_loaded:
            cached = self.cached_facts()
            if cached is not None:
                return cached
        return self.loaded.facts.to_dict()

    @property
    def n_hidden_states(self) -> int:
        if not self.is_loaded:
            cached = self.cached_facts()
            if cached is not None:
                return int(cached["num_layers"]) + 1
        return int(self.loaded.n_hidden_states)

    def __getattr__(self, name: str) -> Any:  # model, tokenizer, facts, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.loaded, name)

    def release(self) -> None:
        self._loaded = None
        gc.collect()


def _coerce(spec: RunSpec | Mapping[str, Any] | str | Path) -> RunSpec:
    if isinstance(spec, RunSpec):
        return spec
    if isinstance(spec, (str, Path)):
        return load_spec(spec)
    return parse_spec(dict(spec))


def check_output_dir(out: Path) -> None:
    """Refuse to overwrite a folder that is not an earlier interlingua run."""
    if out.exists():
        if not out.is_dir():
            raise ConfigError(f"output {out} exists and is a file; choose another 'output' path")
        if any(out.iterdir()) and not (out / "run.json").is_file():
            raise ConfigError(
                f"output folder {out} exists, is not empty and holds no interlingua run.json; "
                "choose a new 'output' path so nothing of yours is overwritten"
            )


def _versions() -> dict[str, str]:
    out = {"interlingua": __version__, "python": platform.python_version()}
    for pkg in ("torch", "transformers", "tokenizers", "numpy", "scipy", "pandas", "datasets", "safetensors", "peft", "gguf"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


def _atomic_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    os.replace(tmp, path)


def _comparison_key(pair: Pair, ra: np.ndarray, rb: np.ndarray, pooling: str, spec: RunSpec, seed: int) -> str:
    """Content key of one pair x pooling comparison: both sides' bytes and every option that matters.

    The package version is part of the key, so an upgrade never reuses rows
    computed by other code.
    """
    h = hashlib.blake2b(digest_size=32)
    for arr in (ra, rb):
        h.update(str(arr.shape).encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    options = {
        "version": __version__,
        "pair": pair.label,
        "pooling": pooling,
        "measures": list(spec.measures),
        "inference": spec.inference.model_dump(mode="json"),
        "grid": spec.layer_grid and pair.kind == "cross_model",
        "permutation_seed": seed,
    }
    h.update(json.dumps(options, sort_keys=True).encode())
    return h.hexdigest()


def _read_rows(path: Path) -> list[dict[str, Any]] | None:
    """Cached comparison rows, or None when absent or unreadable (then recomputed)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return rows if isinstance(rows, list) and all(isinstance(r, dict) for r in rows) else None


def run(spec: RunSpec | Mapping[str, Any] | str | Path, *, progress: bool | None = None) -> RunResult:
    """Execute a run spec end to end; returns the table and what was written."""
    spec = _coerce(spec)
    show = spec.progress if progress is None else progress
    t0 = time.perf_counter()
    out = Path(spec.output).expanduser()
    check_output_dir(out)
    for mid in spec.measures:
        get_measure(mid)  # unknown measure ids fail before any model loads
    cache_root = Path(spec.cache_dir).expanduser() if spec.cache_dir else default_cache_dir()
    cache = RepresentationCache(cache_root / "representations")

    languages = [normalize_language(code) for code in spec.corpus.languages]
    corpus: ParallelCorpus = load_corpus(spec.corpus.source, languages, **spec.corpus.load_options())
    if spec.corpus.n is not None:
        corpus = corpus.sample(spec.corpus.n, spec.corpus.seed)
    if len(corpus) < 4:
        raise CorpusError(f"corpus {corpus.name} has {len(corpus)} aligned sentences; at least 4 are needed")

    explicit = [
        (Side(p.a.model, normalize_language(p.a.language)), Side(p.b.model, normalize_language(p.b.language)))
        for p in spec.pairs.explicit
    ]
    names = [m.name for m in spec.models]
    pairs = enumerate_pairs(
        names, languages, within_model=spec.pairs.within_model, cross_model=spec.pairs.cross_model, explicit=explicit
    )
    if not pairs:
        raise ConfigError("the config selects no pairs: enable pairs.within_model or pairs.cross_model, or list pairs.explicit")
    needed: dict[str, list[str]] = {m: [] for m in names}
    for p in pairs:
        for s in (p.a, p.b):
            if s.language not in needed[s.model]:
                needed[s.model].append(s.language)

    reps: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    facts: dict[str, dict[str, Any]] = {}
    loaded_names: list[str] = []
    hits0, misses0 = cache.hits, cache.misses
    for mspec in spec.models:
        lazy = LazyModel(mspec, cache_root / "facts")
        for lang in needed[mspec.name]:
            reps[(mspec.name, lang)] = cache.get_or_compute(
                lazy, corpus, lang, list(spec.pooling), max_length=spec.max_length,
                batch_size=spec.batch_size, progress=show,
            )
        facts[mspec.name] = lazy.facts_dict()
        if lazy.is_loaded:
            loaded_names.append(mspec.name)
        lazy.release()

    inference = InferenceOptions(**spec.inference.model_dump())
    comparisons = cache_root / "comparisons"
    rows: list[dict[str, Any]] = []
    perms: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for pair in tqdm(pairs, desc="comparing pairs", disable=not show):
        perm, seed = pair_permutation(pair, len(corpus), spec.shuffle_seed)
        perms[pair.label] = {"seed": seed, "permutation": perm.tolist()}
        for pooling in spec.pooling:
            ra, rb = reps[(pair.a.model, pair.a.language)][pooling], reps[(pair.b.model, pair.b.language)][pooling]
            grid = spec.layer_grid and pair.kind == "cross_model"
            key = _comparison_key(pair, ra, rb, pooling, spec, seed)
            cached = _read_rows(comparisons / f"{key}.json")
            if cached is not None:
                rows += cached
                continue
            kw = dict(pooling=pooling, measures=spec.measures, permutation=perm, permutation_seed=seed, inference=inference)
            new_rows = compare_pair(pair, ra, rb, **kw)
            if grid:
                new_rows += compare_grid(pair, ra, rb, **kw)
            _atomic_json(comparisons / f"{key}.json", new_rows)
            rows += new_rows
    for mid in spec.measures:
        meta = get_measure(mid).metadata
        if meta.requires_same_model and any(p.kind == "cross_model" for p in pairs):
            skipped.append(f"`{mid}` on cross-model pairs: it needs a shared neuron basis (same model).")
    table = pd.DataFrame(rows)

    info: dict[str, Any] = {
        "interlingua_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "spec": spec.model_dump(mode="json"),
        "command": sys.argv,
        "versions": _versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "corpus": {
            "name": corpus.name,
            "n": len(corpus),
            "languages": list(corpus.languages),
            "ids": list(corpus.ids),
            "fingerprints": {lang: corpus.fingerprint(lang) for lang in corpus.languages},
        },
        "models": facts,
        "pairs": [{"pair": p.label, "kind": p.kind, "permutation_seed": perms[p.label]["seed"]} for p in pairs],
        "cache": {"root": str(cache_root), "hits": cache.hits - hits0, "misses": cache.misses - misses0},
        "models_loaded": loaded_names,
        "skipped": skipped,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    _write_outputs(out, table, info, perms)
    return RunResult(
        output=out, table=table, info=info, cache_hits=info["cache"]["hits"],
        cache_misses=info["cache"]["misses"], models_loaded=loaded_names,
    )


def _write_outputs(out: Path, table: pd.DataFrame, info: dict[str, Any], perms: dict[str, Any]) -> None:
    """Build every output in a sibling temp folder, then move it into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-"))
    try:
        table.to_csv(tmp / "results.csv", index=False)
        table.to_parquet(tmp / "results.parquet", index=False)
        (tmp / "permutations.json").write_text(json.dumps(perms), encoding="utf-8")
        (tmp / "run.json").write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
        write_report(tmp, table, info)
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
