"""The run specification: one validated YAML file describes a whole run.

Every field is checked before any model is loaded, and unknown keys are
rejected (a typo such as ``poolng:`` is an error, not a silently ignored
option). :func:`load_spec` turns pydantic's messages into one
:class:`~interlingua.core.errors.ConfigError` that names the file and the field.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model, field_validator, model_validator

from interlingua.analysis.inference.config import InferenceSpec
from interlingua.core.errors import ConfigError, InterlinguaError
from interlingua.core.spec_base import PairSpec, SideSpec, Strict, canonical_language, known_languages
from interlingua.data.models.spec import DeviceName, ModelSpec
from interlingua.pipeline import registry

if TYPE_CHECKING:
    from interlingua.contract.capability import Capability

__all__ = ["CoreSpec", "CorpusSpec", "PairSpec", "RunSpec", "SideSpec", "load_spec", "parse_spec", "spec_class"]

POOLINGS = ("mean", "sgpt", "last")
CORPUS_SOURCES = ("bible", "flores", "local", "opus100", "tatoeba", "bouquet")
_HUB_SOURCES = ("flores", "opus100", "tatoeba", "bouquet")

RunPooling = Literal["mean", "sgpt", "last", "word_aligned"]
# typed defaults for the list fields below (a bare list literal in a default_factory reads as list[str])
_DEFAULT_POOLINGS: tuple[RunPooling, ...] = ("sgpt",)


class CorpusSpec(Strict):
    """Which parallel text, which languages, how many sentences."""

    source: Literal["bible", "flores", "local", "opus100", "tatoeba", "bouquet"]
    languages: list[str] = Field(min_length=2)
    n: int | None = Field(
        default=None,
        ge=4,
        le=10_000_000,
        description="sentences sampled without replacement (seeds.sample); all if omitted (at most ten million)",
    )
    split: str | None = Field(
        default=None,
        description="flores: dev or devtest; opus100: train, validation or test; tatoeba, bouquet: test...",
    )
    min_chars: int | None = Field(
        default=None,
        ge=0,
        description="opus100/tatoeba/bouquet: minimum characters per side (default 50 for opus100/tatoeba)",
    )
    path: str | None = Field(default=None, description="local corpus: TSV/CSV/JSONL file or folder of LANG.txt")
    versions: dict[str, str] | None = Field(default=None, description="bible: language -> version code")
    books: list[int | str] | None = Field(
        default=None, description="bible: restrict to these books: numbers 1-66, USFM codes (PRO, JHN) or OT/NT"
    )

    @model_validator(mode="after")
    def _source_options(self) -> CorpusSpec:
        if self.source == "local" and not self.path:
            raise ValueError("source 'local' needs 'path' (a TSV/CSV/JSONL file or a folder of LANG.txt files)")
        if self.source != "local" and self.path:
            raise ValueError(f"'path' only applies to source 'local', not {self.source!r}")
        if self.source not in _HUB_SOURCES and self.split:
            raise ValueError(f"'split' applies to the Hub sources {_HUB_SOURCES}, not {self.source!r}")
        if self.source not in _HUB_SOURCES[1:] and self.min_chars is not None:
            raise ValueError(f"'min_chars' applies to opus100, tatoeba and bouquet, not {self.source!r}")
        if self.source != "bible" and (self.versions or self.books):
            raise ValueError(f"'versions' and 'books' only apply to source 'bible', not {self.source!r}")
        canonical = [canonical_language(code) for code in self.languages]
        if len(set(canonical)) != len(canonical):
            raise ValueError(f"languages contain duplicates (after normalising codes): {self.languages}")
        return self

    def load_options(self) -> dict[str, Any]:
        """Keyword options for :func:`interlingua.data.corpora.load_corpus`."""
        opts: dict[str, Any] = {}
        if self.split:
            opts["split"] = self.split
        if self.min_chars is not None:
            opts["min_chars"] = self.min_chars
        if self.path:
            opts["path"] = self.path
        if self.versions is not None:
            opts["versions"] = dict(self.versions)
        if self.books is not None:
            opts["books"] = list(self.books)
        return opts

    def selection(self) -> dict[str, Any]:
        """What the config selected from the source, resolved (recorded in run.json's ``corpus.selection``).

        Bible books as USFM codes (``"all"`` when none were given), versions, split, path, n and min_chars:
        what a reader of run.json needs to know which text the numbers come from.
        """
        out: dict[str, Any] = {"source": self.source, "languages": list(self.languages), "n": self.n or "all"}
        if self.source == "bible":
            from interlingua.data.corpora.bible import selected_books

            codes = selected_books(self.books)
            out["books"] = "all" if codes is None else codes
            out["versions"] = dict(self.versions) if self.versions else "default"
        for key in ("split", "min_chars", "path"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class PairsSpec(Strict):
    """Which (model, language) sides are compared.

    ``within_model``: every language pair inside each model (cross-lingual).
    ``cross_model``: pairs of models; ``same_language`` compares the models on
    the same text, ``all`` also across languages, ``none`` skips them.
    ``explicit``: further pairs, e.g. each model on its own language.
    """

    within_model: bool = True
    cross_model: Literal["same_language", "all", "none"] = "same_language"
    explicit: list[PairSpec] = Field(default_factory=list)


class SeedsSpec(Strict):
    """Every seed of a run, by purpose; the three streams never share draws.

    ``sample``: which sentences are drawn from the corpus. ``control``: the
    base of each pair's one shuffled permutation (the control), derived per
    pair from the pair's names. ``test``: the permutation test's null draws,
    jackknife groups and bootstrap resamples. ``folds``: the held-out folds of
    map fitting and their bootstrap. The shuffled control is not one of the
    test's null draws.
    """

    # numpy's default_rng takes non-negative seeds only
    sample: int = Field(default=42, ge=0, description="which sentences are drawn (a non-negative integer)")
    control: int = Field(default=1042, ge=0, description="the shuffled control's permutation (non-negative)")
    test: int = Field(default=0, ge=0, description="null draws, jackknife groups, bootstrap (non-negative)")
    folds: int = Field(default=0, ge=0, description="the draw of held-out folds (non-negative)")


class PinnedRepoSpec(Strict):
    """One repo of a resolved model set: its id, the commit it was resolved to, its tokenizer's local folder."""

    id: str
    sha: str = Field(pattern=r"^[0-9a-f]{40}$", description="the commit hash the set was resolved to")
    tokenizer: str | None = Field(default=None, description="local folder of the repo's tokenizer (own_tokenizer)")


class ModelSetSpec(Strict):
    """Models given by a Hub query: every repo of ``author`` whose name matches the glob ``match``.

    The run resolves the query once with huggingface_hub and pins each repo's commit into ``resolved``
    (recorded in run.json's spec; a rerun into the same output folder reuses it:
    :func:`interlingua.studies.hub_sets.pin_model_sets`). Only a resolved set adds models: one per repo,
    named ``NAME/<repo name>``, loaded as itself or, with ``adapter_over``, as its PEFT adapter over that base.
    """

    name: str = Field(pattern=r"^[^:|/]+$", description="prefix of the models' names (NAME/<repo name>)")
    author: str = Field(min_length=1, description="Hub user or organisation")
    match: str = Field(default="*", min_length=1, description="fnmatch glob on the repo name (after AUTHOR/)")
    adapter_over: str | None = Field(default=None, description="each repo is a PEFT adapter over this base model")
    own_tokenizer: bool = Field(default=False, description="read each model with its repo's own tokenizer files")
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    device: DeviceName = "cpu"
    resolved: list[PinnedRepoSpec] | None = Field(default=None, description="set by the run: the pinned repos")

    def model_entries(self) -> list[dict[str, Any]]:
        """The model entries a resolved set stands for (none before resolution)."""
        out = []
        for repo in self.resolved or []:
            entry: dict[str, Any] = {
                "name": f"{self.name}/{repo.id.split('/', 1)[-1]}",
                "dtype": self.dtype,
                "device": self.device,
            }
            if self.adapter_over:
                entry.update(path=self.adapter_over, adapter=repo.id, adapter_revision=repo.sha)
            else:
                entry.update(path=repo.id, revision=repo.sha)
            if self.own_tokenizer and repo.tokenizer:
                entry["tokenizer"] = repo.tokenizer
            out.append(entry)
        return out


class CoreSpec(Strict):
    """The keys of every run: corpus, models, pairs, pooling, measures, inference, output.

    Each registered capability adds its own section to :data:`RunSpec` (:func:`spec_class`); its
    cross-checks run after these (:meth:`_cross_refs`).
    """

    output: str
    corpus: CorpusSpec
    models: list[ModelSpec] = Field(min_length=1)
    model_sets: list[ModelSetSpec] = Field(
        default_factory=list, description="models from Hub queries (author + name glob), pinned when resolved"
    )
    pairs: PairsSpec = Field(default_factory=PairsSpec)
    pooling: list[RunPooling] = Field(
        default_factory=lambda: list(_DEFAULT_POOLINGS),
        min_length=1,
        description="sentence poolings (mean, sgpt, last) and word_aligned (rows are aligned words; see alignment)",
    )
    measures: list[str] = Field(default_factory=lambda: ["cka_linear_biased"], min_length=1)
    inference: InferenceSpec = Field(default_factory=InferenceSpec)
    special_tokens: Literal["include", "exclude"] = Field(
        default="exclude", description="pool over BOS/CLS/EOS and other special-token positions, or not"
    )
    standardize: bool = Field(
        default=False, description="z-score each dimension of each side's representations before measures"
    )
    seeds: SeedsSpec = Field(default_factory=SeedsSpec)
    layer_grid: bool = Field(default=False, description="full layer x layer grid for cross-model pairs")
    max_length: int = Field(default=256, ge=8)
    batch_size: int = Field(default=16, ge=1)
    threads: int | Literal["auto"] | None = Field(
        default=None,
        description="torch CPU threads of every forward pass, in every process (part of the stored entries' keys): "
        "None (OMP_NUM_THREADS if set, else 1, resolved once: byte-identical tables from any "
        "process), a number, or auto (measured by speed: faster on shared cores, not bit-reproducible)",
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="extractions of different models run at once by the local executor, each at `threads` "
        "(not in any key: the tables are the same bits for any count): None (the CPUs / threads, at most one per "
        "model with sides to extract, at most what the models' estimated memory allows; docs/threads.md), "
        "or a number (1: one after another)",
    )
    cache_dir: str | None = None
    overwrite: bool = Field(
        default=False,
        description="write into an earlier run's folder next to files you added there "
        "(your files and edited outputs are never replaced)",
    )
    progress: bool = True

    def section(self, name: str, cls: type[S]) -> S | None:
        """The capability section ``name`` (None when the config leaves it out), typed as ``cls``."""
        value = getattr(self, name, None)
        if value is not None and not isinstance(value, cls):
            raise TypeError(f"section {name!r} is a {type(value).__name__}, not a {cls.__name__}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _add_model_sets(cls, data: Any) -> Any:
        """A resolved model set's models join ``models`` (once: a run.json spec already lists them)."""
        if not isinstance(data, dict) or not data.get("model_sets"):
            return data
        try:
            sets = [ModelSetSpec.model_validate(s) if isinstance(s, dict) else s for s in data["model_sets"]]
        except ValidationError:
            return data  # the field's own validation reports it, with its location
        models = list(data.get("models") or [])
        known = {m.get("name") if isinstance(m, dict) else getattr(m, "name", None) for m in models}
        models += [e for s in sets for e in s.model_entries() if e["name"] not in known]
        return {**data, "models": models}

    @field_validator("models")
    @classmethod
    def _expand_sweeps(cls, v: list[ModelSpec]) -> list[ModelSpec]:
        return expand_sweeps(v)

    @field_validator("threads")
    @classmethod
    def _positive_threads(cls, v: int | str | None) -> int | str | None:
        if isinstance(v, int) and not isinstance(v, bool) and v < 1:
            raise ValueError(f"{v} threads cannot run anything ; give 1 or more, auto, or leave it out (torch's count)")
        if isinstance(v, int) and not isinstance(v, bool) and v > 4096:
            raise ValueError(f"{v} threads is more than any machine has ; give at most 4096, auto, or leave it out")
        return v

    @field_validator("pooling", "measures")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"duplicates in {v}")
        return v

    @field_validator("measures")
    @classmethod
    def _known_measures(cls, v: list[str]) -> list[str]:
        from interlingua.analysis.measures import get_measure

        for mid in v:
            try:
                get_measure(mid)
            except InterlinguaError as err:
                raise ValueError(str(err)) from None
        return v

    @model_validator(mode="after")
    def _cross_refs(self) -> CoreSpec:
        names = self.model_names()
        bad = [n for n in names if n and (":" in n or "|" in n)]
        if bad:
            raise ValueError(
                f"model names may not contain ':' or '|' (they separate model, language and pair in "
                f"results): {bad}; set `name:` to a label without them"
            )
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {sorted(dupes)}")
        self.check_sides(self.pairs.explicit)
        for cap in registry.capabilities():
            if cap.check is not None:
                cap.check(self)  # a RunSpec: CoreSpec plus every section
        return self

    def wants_words(self) -> bool:
        """Whether a registered capability reads word-aligned sides in this run (its ``wants_words``)."""
        return any(c.wants_words(self) for c in registry.capabilities() if c.wants_words is not None)

    def sentence_poolings(self) -> list[str]:
        """The run's poolings whose rows are sentences (``pooling`` minus rows of other units), in order."""
        return [p for p in self.pooling if p in POOLINGS]

    def model_names(self) -> list[str]:
        """The models' names, in config order."""
        return [m.name for m in self.models if m.name is not None]  # a validated ModelSpec always has one

    def check_languages(self, where: str, codes: list[str] | str | None) -> None:
        """``ValueError`` unless every code (a list, one code, None or "all": nothing) is a corpus language."""
        if codes is None or codes == "all":
            return
        listed = [codes] if isinstance(codes, str) else codes
        known = known_languages(self.corpus.languages)
        bad = [c for c in listed if canonical_language(c) not in known]
        if bad:
            what = f"{bad}" if isinstance(codes, list) else f"{codes!r}"
            verb = "are" if isinstance(codes, list) else "is"
            raise ValueError(f"{where} {what} {verb} not among corpus languages {self.corpus.languages}")

    def check_models(self, where: str, names: list[str | None]) -> None:
        """``ValueError`` unless every name given is one of the run's models."""
        known = self.model_names()
        for n in names:
            if n is not None and n not in known:
                raise ValueError(f"{where} names model {n!r}, which is not among models {known}")

    def check_sides(self, pairs: list[PairSpec]) -> None:
        """``ValueError`` unless both sides of every pair name a run model and a corpus language."""
        names, languages = self.model_names(), known_languages(self.corpus.languages)
        for p in pairs:
            for side in (p.a, p.b):
                if side.model not in names:
                    raise ValueError(f"pair side names model {side.model!r}, which is not among models {names}")
                if canonical_language(side.language) not in languages:
                    raise ValueError(
                        f"pair side names language {side.language!r}, not among corpus languages "
                        f"{self.corpus.languages}"
                    )


S = TypeVar("S", bound=BaseModel)


def spec_class(capabilities: tuple[Capability, ...]) -> type[CoreSpec]:
    """The run spec with each capability's section (absent: off), in registry order."""
    fields: dict[str, Any] = {}
    for cap in capabilities:
        if cap.section is None:
            continue
        if cap.name in CoreSpec.model_fields or cap.name in fields:
            raise ValueError(f"capability {cap.name!r}: its section name is already a key of the spec")
        if cap.default_factory is not None:
            fields[cap.name] = (cap.section, Field(default_factory=cap.default_factory, description=cap.description))
        else:
            fields[cap.name] = (cap.section | None, Field(default=None, description=cap.description))
    return create_model("RunSpec", __base__=CoreSpec, __module__=__name__, **fields)


if TYPE_CHECKING:
    RunSpec = CoreSpec
else:
    #: The run spec of the registered capabilities (a :class:`CoreSpec` with one field per section).
    RunSpec = spec_class(registry.capabilities())


def expand_sweeps(models: list[ModelSpec]) -> list[ModelSpec]:
    """Each ``tokenwise_merge`` entry with lists of ``alpha`` / ``top_k``: one model per combination.

    The expanded models are named ``NAME/alpha=A,top_k=K`` and carry
    ``sweep: NAME`` with ``sweep_values: {alpha: A, top_k: K}``, so results along
    the sweep can be told apart, contrasted and checked for degeneracy. A
    ``merge`` entry with lists (``t``, ``density``, ...; see ``MergeSpec``)
    expands the same way, into ``NAME/t=0.25`` etc.
    """
    out: list[ModelSpec] = []
    for m in models:
        if m.merge is not None and m.merge.is_sweep:
            for fields, label, values in m.merge.sweep_points():
                out.append(
                    m.model_copy(
                        update={
                            "merge": m.merge.model_copy(update=fields),
                            "name": f"{m.name}/{label}",
                            "sweep": m.sweep or m.name,
                            "sweep_values": {**m.sweep_values, **values},
                        }
                    )
                )
            continue
        tm = m.tokenwise_merge
        if tm is None:
            out.append(m)
            continue
        combos = tm.combinations()
        for alpha, top_k in combos:
            values = {"alpha": alpha, "top_k": top_k}
            update: dict[str, Any] = {"tokenwise_merge": tm.model_copy(update=values)}
            if m.sweep is None:
                update["sweep"] = m.name
            update["sweep_values"] = {**m.sweep_values, **values}
            if tm.is_sweep:
                update["name"] = f"{m.name}/alpha={alpha:g},top_k={top_k:g}"
            out.append(m.model_copy(update=update))
    return out


_MOVED = {
    "seed": "seeds live in one group now: seeds.sample (corpus), seeds.control (shuffle), seeds.test (inference)",
    "shuffle_seed": "moved to seeds.control",
}


_TYPE_TAGS = frozenset({"int", "float", "str", "bool", "none", "list", "dict", "tuple", "set", "bytes"})
_HINTS = {
    "literal_error": "use one of these values",
    "enum": "use one of these values",
    "missing": "add it to the config",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than": "use a smaller value",
    "less_than_equal": "use a smaller value",
    "too_short": "give more entries",
    "too_long": "give fewer entries",
}


def _is_union_tag(part: Any) -> bool:
    """A location part pydantic adds for a union branch (``int``, ``literal['auto']``, ``ModelSpec``), not a key."""
    return isinstance(part, str) and (part in _TYPE_TAGS or not re.fullmatch(r"[a-z_][a-z0-9_]*", part))


def _location(loc: tuple[Any, ...]) -> str:
    """Dotted config path with 1-based list positions (``models.2.package`` is the second model's package)."""
    parts = [str(p + 1) if isinstance(p, int) else str(p) for p in loc if not _is_union_tag(p)]
    return ".".join(parts) or "(top level)"


def _message(e: Any) -> str:
    """What is wrong, without pydantic's "Value error, " prefix, and what to do (`` ; `` between them)."""
    kind = e["type"]
    if kind == "extra_forbidden":
        key = str(e["loc"][-1])
        known = _known_keys(tuple(p for p in e["loc"][:-1] if not _is_union_tag(p)))
        close = difflib.get_close_matches(key, known, n=1)
        suggestion = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(sorted(known))}"
        if key in _MOVED:
            suggestion = _MOVED[key]
        return f"unknown key {key!r} ; {suggestion}"
    if kind in ("value_error", "assertion_error") and e.get("ctx", {}).get("error") is not None:
        msg = str(e["ctx"]["error"])
    else:
        msg = str(e["msg"])
        for prefix in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(prefix)
    hint = _HINTS.get(kind)
    if hint is None and kind.endswith(("_type", "_parsing")):
        hint = "give a value of that type"
    return f"{msg} ; {hint}" if hint and ";" not in msg else msg


def _describe(err: ValidationError, spec_fields: dict[str, Any]) -> str:
    """One line for the whole error: the first wrong field (the branches of a union merged), the others named."""
    errors = err.errors()
    # a misspelt key reads as an unknown key plus a missing one: the unknown key (with its suggestion) says it all
    typos = {
        (_location(tuple(e["loc"][:-1])), m[0])
        for e in errors
        if e["type"] == "extra_forbidden"
        for m in [
            difflib.get_close_matches(
                str(e["loc"][-1]), _known_keys(tuple(p for p in e["loc"][:-1] if not _is_union_tag(p))), n=1
            )
        ]
        if m
    }
    errors = sorted(
        (
            e
            for e in errors
            if not (e["type"] == "missing" and (_location(tuple(e["loc"][:-1])), str(e["loc"][-1])) in typos)
        ),
        key=lambda e: e["type"] != "extra_forbidden",
    )
    by_loc: dict[str, list[str]] = {}
    for e in errors:
        msgs = by_loc.setdefault(_location(tuple(e["loc"])), [])
        msg = _message(e)
        if msg not in msgs:
            msgs.append(msg)
    (loc, msgs), *others = by_loc.items()
    if len(msgs) > 1:  # one value, several accepted types: say what each would need
        whats = [m.split(" ; ")[0] for m in msgs]
        line = f"{loc}: {' or '.join(whats)} ; give one of those"
    else:
        line = f"{loc}: {msgs[0]}"
    if others:
        line += f" (also wrong: {', '.join(o for o, _ in others)})"
    return " ".join(line.split())


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model found at ``loc`` (list indices skipped)."""
    model: type[BaseModel] = RunSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            break
        ann = field.annotation
        inner = getattr(ann, "__args__", (ann,))
        nxt = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nxt is None:
            break
        model = nxt
    return list(model.model_fields)


def _collection_type(annotation: Any) -> bool:
    """Whether a field's annotation accepts a list, tuple, set or dict (directly or as one branch of a union)."""
    origin = get_origin(annotation)
    if origin in (list, tuple, set, frozenset, dict):
        return True
    if annotation in (list, tuple, set, frozenset, dict):
        return True
    return any(_collection_type(a) for a in get_args(annotation)) if origin is not None else False


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X``, ``X | None``, ``list[X]``, ``Literal[...] | list[X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in get_args(annotation) for m in _models_in(a)]


def _empty_by_default(field: Any) -> bool:
    """Whether the field's own default is an empty collection (then ``[]`` merely repeats it: no selection)."""
    if field.default_factory is not None:
        try:
            default = field.default_factory()
        except Exception:  # a factory that needs validated data: not an empty-collection default
            return False
    else:
        default = field.default
    return isinstance(default, (list, tuple, set, frozenset, dict)) and not default


def empty_selections(data: Any, model: type[BaseModel] | None = None, loc: tuple[Any, ...] = ()) -> list[str]:
    """Config paths (``corpus.books``) holding an empty list or mapping where the field selects something.

    An empty list there would select nothing, and some readers took it for "everything" (``books: []``
    sampled the whole Bible): it is refused instead. Fields with a minimum length are left to the schema's own
    message; fields whose default is itself empty (``pairs.explicit``,
    ``contrasts``, ``model_sets``) take ``[]`` as their default.
    """
    model = model or RunSpec
    if not isinstance(data, dict):
        return []
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        fields[name] = info
        if info.alias:
            fields[info.alias] = info
    found: list[str] = []
    for key, value in data.items():
        field = fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue  # unknown keys are the schema's to report
        where = (*loc, key)
        if isinstance(value, (list, tuple, dict)) and not value:
            has_minimum = any(getattr(m, "min_length", 0) for m in field.metadata)  # the schema says so itself
            if _collection_type(field.annotation) and not _empty_by_default(field) and not has_minimum:
                found.append(_location(where))
            continue
        for sub in _models_in(field.annotation):
            if isinstance(value, dict):
                found += empty_selections(value, sub, where)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    found += empty_selections(item, sub, (*where, i))
    return list(dict.fromkeys(found))


def parse_spec(data: dict[str, Any], source: str = "<dict>") -> RunSpec:
    """Validate a mapping into a :class:`RunSpec`, raising :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys to values, got {type(data).__name__}")
    empty = empty_selections(data)
    if empty:
        more = f" (also empty: {', '.join(empty[1:])})" if len(empty) > 1 else ""
        raise ConfigError(
            f"{empty[0]}: an empty list selects nothing (it does not mean 'all'); list at least one entry, "
            f"or leave the key out for its default{more} (in {source})"
        )
    try:
        return RunSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{_describe(err, data)} (in {source})") from None


def _at(mark: Any) -> str:
    """``line L, column C`` (1-based) of a PyYAML mark."""
    return f"line {mark.line + 1}, column {mark.column + 1}"


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader (no code tags: ``!!python/...`` is refused) that also refuses duplicate keys.

    YAML says a mapping's keys are unique; PyYAML keeps the last of repeated keys silently, so
    ``pooling: [mean]`` ... ``pooling: [sgpt]`` would run sgpt only. Here a repeated key is an error
    naming the key and both lines. Merge keys (``<<: *anchor``) keep their meaning: what they merge may
    be overridden by the mapping's own keys.
    """

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first.get(key)
                except TypeError:  # an unhashable key: the base constructor says so
                    continue
                if seen is not None:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found the key {key!r} twice: {_at(seen.start_mark)} and {_at(key_node.start_mark)} "
                        "(YAML would keep only the last one; keep one of them)",
                        key_node.start_mark,
                    )
                first[key] = key_node
        return super().construct_mapping(node, deep=deep)


StrictLoader.add_constructor("tag:yaml.org,2002:map", StrictLoader.construct_yaml_map)


def strict_yaml(text: str, source: str) -> Any:
    """The YAML document ``text`` (safe tags only, no duplicate keys); :class:`ConfigError` naming ``source``."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source} is not valid YAML: {one_line_yaml(err)}") from None


def one_line_yaml(err: yaml.YAMLError) -> str:
    """A PyYAML error on one line: its problem and where (``line L, column C``)."""
    problem = getattr(err, "problem", None)
    mark = getattr(err, "problem_mark", None)
    if problem and mark is not None:
        return problem if "line " in problem else f"{problem} ({_at(mark)})"
    return " ".join(str(err).split())


def read_config_text(path: str | Path) -> str:
    """The text of the config file ``path``; :class:`ConfigError` when it is missing, not a file or not UTF-8."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config {p} is a folder, not a file; give the path of a YAML config")
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist; `interlingua init -o FILE` writes a template")
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read the config {p} ({err.strerror or err})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"config {p} is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); save it as UTF-8"
        ) from None


def load_spec(path: str | Path) -> RunSpec:
    """Read and validate a YAML run config (UTF-8, no duplicate keys, no code tags)."""
    if not isinstance(path, (str, Path)) or (isinstance(path, str) and not path.strip()):
        raise ConfigError(
            f"load_spec takes the path of a YAML config (a str or pathlib.Path), not {path!r}; "
            "for a mapping use interlingua.pipeline.config.parse_spec"
        )
    p = Path(path)
    data = strict_yaml(read_config_text(p), str(p))
    if data is None:
        raise ConfigError(f"config {p} is empty; `interlingua init -o FILE` writes a template")
    return parse_spec(data, source=str(p))
