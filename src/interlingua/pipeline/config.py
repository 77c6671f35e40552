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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model, field_validator, model_validator

from interlingua.analysis.inference.config import InferenceSpec
from interlingua.core.errors import ConfigError, InterlinguaError
from interlingua.core.spec_base import PairSpec, SideSpec, Strict, canonical_language, known_languages
from interlingua.data.models.spec import DeviceName, ModelSpec
from interlingua.pipeline import registry

if TYPE_CHECKING:
    from interlingua.pipeline.capability import Capability

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
        default=None, ge=4, description="sentences sampled without replacement (seeds.sample); all if omitted"
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
        if self.versions:
            opts["versions"] = dict(self.versions)
        if self.books:
            opts["books"] = list(self.books)
        return opts


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


def parse_spec(data: dict[str, Any], source: str = "<dict>") -> RunSpec:
    """Validate a mapping into a :class:`RunSpec`, raising :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a mapping of keys to values, got {type(data).__name__}")
    try:
        return RunSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{_describe(err, data)} (in {source})") from None


def load_spec(path: str | Path) -> RunSpec:
    """Read and validate a YAML run config."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist; `interlingua init -o FILE` writes a template")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{p} is not valid YAML: {err}") from None
    return parse_spec(data, source=str(p))
