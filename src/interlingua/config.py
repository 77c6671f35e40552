"""The run specification: one validated YAML file describes a whole run.

Every field is checked before any model is loaded, and unknown keys are
rejected (a typo such as ``poolng:`` is an error, not a silently ignored
option). :func:`load_spec` turns pydantic's messages into one
:class:`~interlingua.errors.ConfigError` that names the file and the field.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from interlingua.errors import ConfigError, InterlinguaError
from interlingua.models.spec import DeviceName, ModelSpec

POOLINGS = ("mean", "sgpt", "last")
CORPUS_SOURCES = ("bible", "flores", "local", "opus100", "tatoeba", "bouquet")
_HUB_SOURCES = ("flores", "opus100", "tatoeba", "bouquet")

Direction = Literal["a->b", "b->a"]
PairKind = Literal["within_model", "cross_model"]
PatchCondition = Literal["none", "within", "mapped", "unprojected", "shuffled", "noise"]
RunPooling = Literal["mean", "sgpt", "last", "word_aligned"]
# typed defaults for the list fields below (a bare list literal in a default_factory reads as list[str])
_DIRECTIONS: tuple[Direction, ...] = ("a->b", "b->a")
_PAIR_KINDS: tuple[PairKind, ...] = ("within_model", "cross_model")
_PATCH_CONDITIONS: tuple[PatchCondition, ...] = ("none", "within", "mapped", "unprojected", "shuffled", "noise")
_DEFAULT_POOLINGS: tuple[RunPooling, ...] = ("sgpt",)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorpusSpec(_Strict):
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
        canonical = [_canonical(code) for code in self.languages]
        if len(set(canonical)) != len(canonical):
            raise ValueError(f"languages contain duplicates (after normalising codes): {self.languages}")
        return self

    def load_options(self) -> dict[str, Any]:
        """Keyword options for :func:`interlingua.corpora.load_corpus`."""
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


class SideSpec(_Strict):
    """One side of a comparison: a model reading one language."""

    model: str
    language: str


class PairSpec(_Strict):
    a: SideSpec
    b: SideSpec


class PairsSpec(_Strict):
    """Which (model, language) sides are compared.

    ``within_model``: every language pair inside each model (cross-lingual).
    ``cross_model``: pairs of models; ``same_language`` compares the models on
    the same text, ``all`` also across languages, ``none`` skips them.
    ``explicit``: further pairs, e.g. each model on its own language.
    """

    within_model: bool = True
    cross_model: Literal["same_language", "all", "none"] = "same_language"
    explicit: list[PairSpec] = Field(default_factory=list)


class InferenceSpec(_Strict):
    """Statistical inference attached to every matched value."""

    permutations: int = Field(default=1000, ge=0, description="permutation-test draws; 0 disables")
    null_method: Literal["monte_carlo", "moments"] = Field(
        default="monte_carlo",
        description="moments: analytic permutation p of biased linear CKA (Pearson III on the exact mean, variance "
        "and skewness); other measures stay Monte-Carlo",
    )
    grid_permutations: int | None = Field(
        default=None, ge=0, description="draws for the layer-grid maximum's test; default: permutations"
    )
    layers: Literal["all", "last"] = Field(
        default="all", description="attach p-values and intervals at every layer, or only at each pair's last layer"
    )
    jackknife_groups: int = Field(default=0, ge=0, description="delete-a-group jackknife groups; 0 disables")
    bootstrap: int = Field(default=0, ge=0, description="percentile-bootstrap resamples; 0 disables")
    level: float = Field(default=0.95, gt=0, lt=1)


class MapsSpec(_Strict):
    """Maps between sides fitted on training sentences and scored on held-out ones (docs/protocol.md, "Maps").

    ``pairs``: ``cross_model`` (every cross-model pair of the run), ``all``
    (every pair of the run), or explicit pairs (which need not be compared).
    """

    estimators: list[str] = Field(default_factory=lambda: ["procrustes", "ridge"], min_length=1)
    folds: int = Field(default=5, ge=2, description="sentence-level k-fold; folds drawn with seeds.folds")
    layers: Literal["auto", "last", "grid"] = Field(
        default="auto", description="auto: one-to-one or by relative depth; last; grid: auto + Procrustes P@1 grid"
    )
    directions: list[Direction] = Field(default_factory=lambda: list(_DIRECTIONS), min_length=1)
    bootstrap: int = Field(default=1000, ge=0, description="resamples of held-out sentences for intervals")
    level: float = Field(default=0.95, gt=0, lt=1)
    csls_k: int = Field(default=10, ge=1)
    pooling: Literal["mean", "sgpt", "last"] | None = Field(default=None, description="default: the run's first")
    pairs: Literal["cross_model", "all"] | list[PairSpec] = "cross_model"
    save_maps: bool = Field(default=False, description="save each fitted A->B map (safetensors) in the store")

    @field_validator("estimators")
    @classmethod
    def _known_estimators(cls, v: list[str]) -> list[str]:
        from interlingua.mapping.estimators import list_maps

        unknown = [e for e in v if e not in list_maps()]
        if unknown:
            raise ValueError(f"unknown map estimator(s) {unknown}; choose from {list_maps()}")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicates in {v}")
        return v


class AuditSpec(_Strict):
    """The run's ``audit:`` section: every model audited before any representation is extracted.

    Adapters (identity / tiny / active), the tokenizer each model reads with
    against its embedding and its own tokenizer, mean NLL on ``language``'s
    sentences against chance, identity groups and confounds: ``audit.csv`` and a
    report section. ``strict: true`` stops the run (exit 2) when any model's
    verdict is bad.
    """

    quality: bool = Field(default=True, description="measure each model's mean NLL on the corpus side `language`")
    language: str | None = Field(
        default=None, description="the side NLL is measured on; default: the first corpus language"
    )
    tiny_threshold: float = Field(default=1e-6, ge=0, description="max|scaling*B@A| below this is a tiny adapter")
    min_agreement: float = Field(
        default=0.99, ge=0, le=1, description="tokenizer id agreement below this is a mismatch"
    )
    margin: float = Field(default=0.5, ge=0, description="NLL within this of ln V is 'not a language model'")
    strict: bool = Field(default=False, description="stop the run when any verdict is bad")


class ContrastSpec(_Strict):
    """A paired contrast of two arms (sweeps or models) over the cells they share.

    Cells are matched on the sweep values (``alpha``, ``top_k``, ...) and the
    language pair of within-model pairs, per pooling and measure, at each
    model's last layer; ``a - b`` is tested with the Wilcoxon signed-rank test and
    the paired t test (``contrasts.csv``).
    """

    a: str
    b: str


class QualitySpec(_Strict):
    """The run's ``quality:`` section: each model's mean NLL on each language side it reads.

    Teacher-forced, nats per scored token (docs/protocol.md, "Audit"), against
    chance ln V; ``quality.csv`` and a report section. The values also serve as
    predictors (``predictors:``).
    """

    languages: Literal["all"] | list[str] = Field(
        default="all", description="sides to score; all: every corpus language"
    )
    n: int | None = Field(
        default=None, ge=1, description="score the first n sentences of the run's sample (default all)"
    )


class PredictorsSpec(_Strict):
    """The run's ``predictors:`` section: what predicts alignment, with honest inference.

    One row per (result column, predictor) per pooling and measure over the
    last-layer pairs of ``kinds``: Spearman (or Pearson) rho, a permutation p
    (``permutations`` label shuffles), a bootstrap interval, Benjamini-Hochberg q
    across the table, and the smallest p the pairs' n can attain.
    Predictors: ``nll`` (mean of the two sides' NLL; needs ``quality:``),
    ``nll_gap`` (|difference|), ``length_control`` and the URIEL distances
    ``syntactic``, ``genetic``, ``geographic``, ``phonological``, ``inventory``,
    ``featural`` (the `typology` extra).
    """

    columns: list[str] = Field(default_factory=lambda: ["matched", "matched_length_removed"], min_length=1)
    predictors: list[str] = Field(default_factory=lambda: ["nll", "syntactic"], min_length=1)
    kinds: list[PairKind] = Field(default_factory=lambda: list(_PAIR_KINDS))
    method: Literal["spearman", "pearson"] = "spearman"
    permutations: int = Field(default=20000, ge=0)
    bootstrap: int = Field(default=2000, ge=0)
    level: float = Field(default=0.95, gt=0, lt=1)


class WeightPairSpec(_Strict):
    """One pair of models whose weights are compared; ``base``: their shared ancestor (a run model)."""

    a: str
    b: str
    base: str | None = None


class BarrierSpec(_Strict):
    """Loss barriers: NLL of the interpolated weights ``(1 - t) A + t B`` on corpus sides."""

    grid: list[float] = Field(
        default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0],
        min_length=1,
        description="t values in [0, 1] (0 and 1 always added)",
    )
    languages: Literal["all"] | list[str] = Field(default="all", description="corpus sides scored")
    n: int | None = Field(default=None, ge=1, description="score the first n sentences of the sample (default all)")

    @field_validator("grid")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        bad = [t for t in v if not 0.0 <= t <= 1.0]
        if bad:
            raise ValueError(f"barrier grid values must lie in [0, 1], got {bad}")
        return v


class CheckpointArmSpec(_Strict):
    """Revisions of one training run, in step order: every pair of them is compared.

    ``models``: names of run models (zoo checkpoints, local checkpoint folders
    or Hub ``revision`` s, each declared under ``models:``); ``steps``: their
    training steps (same length, increasing). Each pair gets the trajectory
    distance ``log10(step_b / step_a)`` (NaN when ``step_a`` is 0).
    """

    models: list[str] = Field(min_length=3)
    steps: list[int] = Field(min_length=3)

    @model_validator(mode="after")
    def _steps(self) -> CheckpointArmSpec:
        if len(self.models) != len(self.steps):
            raise ValueError(
                f"checkpoints: {len(self.models)} models but {len(self.steps)} steps; give one step per model"
            )
        if any(s < 0 for s in self.steps) or any(b <= a for a, b in zip(self.steps, self.steps[1:])):
            raise ValueError(f"checkpoints.steps must be non-negative and increasing, got {self.steps}")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"checkpoints.models lists a model twice: {self.models}")
        return self


class AlignmentSpec(_Strict):
    """The run's ``alignment:`` section: word alignment for ``pooling: [..., word_aligned]``.

    For each compared pair across two languages the first ``n`` corpus
    sentences (all by default) are word-aligned SimAlign-style (cosine of the
    ``encoder``'s contextual word vectors at ``layer``; ``method``); a pair on
    one language aligns every word to itself. Each model then pools its
    sub-word states within each aligned word's character span at every layer:
    rows are aligned word pairs, the shuffled control permutes word rows
    (docs/protocol.md, "Word-aligned pooling").
    """

    encoder: str | ModelSpec | None = Field(
        default=None, description="a run model's name, or a model spec; default: the run's first model"
    )
    layer: int | None = Field(default=None, ge=0, description="encoder hidden state (0 = embeddings); default: middle")
    method: Literal["inter", "argmax", "itermax", "match"] = "itermax"
    n: int | None = Field(default=None, ge=2, description="align the first n corpus sentences; default: all")
    pairs: Literal["all"] | list[PairSpec] = Field(
        default="all", description="which compared pairs get word-aligned rows: all, or these (each must be compared)"
    )
    first_position: Literal["exclude", "include"] = Field(
        default="exclude",
        description="pool the sentence's first position into its word or not: without a BOS token it is the "
        "attention sink, whose massive activation dominates word rows (a word of that token alone is dropped)",
    )


class PatchExperimentSpec(_Strict):
    """One patching experiment: the ``donor``'s residuals (read in ``donor_language``) into the ``target``."""

    target: str
    donor: str
    donor_language: str | None = Field(default=None, description="default: the first corpus language")
    target_language: str | None = Field(default=None, description="default: the donor language")
    layers: list[int] | None = Field(default=None, min_length=1, description="start layers j; default: the section's")


class PatchingSpec(_Strict):
    """The run's ``patching:`` section: cross-model activation patching on the packaged factual probes.

    The target reads a prompt about country B in ``target_language``; its
    residual at the country's tokens, at start layer j and every layer after,
    is replaced by the donor's residual for country A (prompt in
    ``donor_language``), mapped into the target's basis by per-layer maps
    (``estimator``) fitted on this run's ``pooling`` representations of the
    corpus (donor on ``donor_language``, target on ``target_language``, the
    same sentences). Conditions and controls in one table (``patching.csv``):
    none, within (the ceiling), mapped, unprojected, shuffled, noise.

    One experiment (``target``, ``donor`` and languages at the top) or
    several (``experiments:``, a list of ``{target, donor, donor_language,
    target_language, layers}``; the other keys are shared defaults and an
    experiment's ``layers`` overrides the section's). Each experiment is its
    own stored task and its own rows and figure.

    ``fit``: the maps' rows, ``sentences`` (one ``pooling`` vector per
    corpus sentence: fewer rows than a model's width unless ``corpus.n`` is
    large, and not the kind of state the patch writes) or ``words`` (one row
    per aligned word pair over the corpus sentences, aligned with the
    ``alignment:`` options; each the mean of the word's sub-word states, as
    the ``mean`` span rule writes the subject). ``identity_control`` (on by
    default): per target side, a first task patches the target with itself
    through the map fitted from that side onto itself; the verdict is on
    every row and a failure is warned about.
    """

    target: str | None = Field(default=None, description="the patched model (one experiment; or use experiments)")
    donor: str | None = Field(default=None, description="the model whose residuals are patched in")
    donor_language: str | None = Field(default=None, description="default: the first corpus language")
    target_language: str | None = Field(default=None, description="default: the donor language")
    experiments: list[PatchExperimentSpec] | None = Field(
        default=None, min_length=1, description="several donor -> target experiments (instead of target/donor)"
    )
    relations: list[str] = Field(default_factory=lambda: ["capital"], min_length=1)
    layers: list[int] = Field(default_factory=lambda: [2], min_length=1, description="start layers j (patch j..L)")
    conditions: list[PatchCondition] = Field(default_factory=lambda: list(_PATCH_CONDITIONS), min_length=1)
    estimator: str = "procrustes"
    pooling: Literal["mean", "sgpt", "last"] = "mean"
    fit: Literal["sentences", "words"] = Field(
        default="sentences",
        description="rows the maps are fitted on: sentences (one `pooling` vector per corpus sentence) or words "
        "(one per aligned word pair: the mean of each word's sub-word states, the patch site's own kind of state; "
        "the corpus sides are word-aligned with the `alignment:` options, thousands of rows from a few hundred "
        "sentences)",
    )
    identity_control: bool = Field(
        default=True,
        description="run the identity control first: each target side patched with its own residual through the "
        "map fitted from that side onto itself; mapped must equal within (else the run says the chain is broken)",
    )
    span_rule: Literal["mean", "last"] = "mean"
    countries: list[str] | None = None
    pairs: Literal["derangement", "all"] | int = Field(
        default="derangement",
        description="trials per cell: derangement (one random A per B), all (every ordered pair whose answers' "
        "first tokens differ), or N random such pairs",
    )
    batch_size: int = Field(default=64, ge=1, description="prompts per patched forward pass")
    threads: int | None = Field(
        default=None, ge=1, description="torch CPU threads for the experiment (default: torch's)"
    )

    @field_validator("countries", mode="before")
    @classmethod
    def _country_codes(cls, v: Any) -> Any:
        if isinstance(v, list) and any(isinstance(c, bool) for c in v):
            raise ValueError(f'patching.countries holds {v!r}: YAML reads NO (Norway) as false; quote it: "NO"')
        return v

    @field_validator("pairs", mode="before")
    @classmethod
    def _pairs(cls, v: Any) -> Any:
        if isinstance(v, bool) or (isinstance(v, int) and v < 1):
            raise ValueError(f"patching.pairs must be derangement, all or a positive integer; got {v!r}")
        return v

    @model_validator(mode="after")
    def _one_form(self) -> PatchingSpec:
        if self.experiments is not None:
            top = [k for k in ("target", "donor", "donor_language", "target_language") if getattr(self, k) is not None]
            if top:
                raise ValueError(
                    f"patching: give either target/donor at the top (one experiment) or experiments: [...], not both "
                    f"(found {top} beside experiments); move them into an experiment"
                )
            seen: set[tuple[Any, ...]] = set()
            for i, e in enumerate(self.experiments):
                ident = (e.donor, e.target, e.donor_language, e.target_language)
                if ident in seen:
                    raise ValueError(f"patching.experiments[{i}] repeats an earlier experiment {ident}; drop one")
                seen.add(ident)
        elif self.target is None or self.donor is None:
            missing = [k for k in ("target", "donor") if getattr(self, k) is None]
            raise ValueError(f"patching needs target and donor, or a list of experiments; missing {missing}")
        if self.countries is not None:
            from interlingua.interventions.probes import load_probes

            probes = load_probes()
            unknown = [c for c in self.countries if c not in probes.countries]
            if unknown:
                raise ValueError(
                    f"patching.countries {unknown} are not in the probe data; choose from {list(probes.countries)}"
                )
            bad = [r for r in self.relations if r not in probes.relations]
            if bad:
                raise ValueError(f"patching.relations {bad} are unknown; the probes have {list(probes.relations)}")
        return self

    def resolved(self) -> list[PatchExperimentSpec]:
        """Every experiment with the section's defaults filled in (the single form is one experiment)."""
        if self.experiments is None:
            assert self.target is not None and self.donor is not None
            return [
                PatchExperimentSpec(
                    target=self.target,
                    donor=self.donor,
                    donor_language=self.donor_language,
                    target_language=self.target_language,
                    layers=list(self.layers),
                )
            ]
        return [
            e if e.layers is not None else e.model_copy(update={"layers": list(self.layers)}) for e in self.experiments
        ]


class TransportPairSpec(_Strict):
    """One directed fusion: the ``donor``'s weights carried into the ``target``'s coordinates."""

    target: str
    donor: str
    target_language: str | None = Field(
        default=None, description="the side the target reads; default: first corpus language"
    )
    donor_language: str | None = Field(default=None, description="the side the donor reads; default: the target's")


class TransportSpec(_Strict):
    """The run's ``transport:`` section: cross-architecture fusion by optimal transport, with its control.

    Neuron correspondences from the first ``probe_n`` corpus sentences (each
    model on its own side), entropic OT plans (row-stochastic), fusion of the
    MLP and attention-output weights on a top-k mask at each ``alpha``, the same
    fusion through row-shuffled plans, and NLL of every fused target on the last
    ``eval_n`` sentences of both sides (the target's tokenizer): ``transport.csv``
    (delta NLL, ``ot_minus_rand``, plan diagnostics) and a figure.
    """

    pairs: list[TransportPairSpec] = Field(min_length=1)
    alphas: list[float] = Field(default_factory=lambda: [0.0, 0.1, 0.25, 0.5], min_length=1)
    top_k: int = Field(default=128, ge=1)
    m: int = Field(default=3, ge=1, description="donor layers per target layer (layer-level OT)")
    epsilon: Literal["auto"] | float = "auto"
    probe_n: int = Field(default=128, ge=10)
    eval_n: int = Field(default=64, ge=4)
    seed: int = Field(default=0, ge=0)
    controls: bool = Field(
        default=True,
        description="the self-plan control (the target's plan with itself must be the identity: self_match_*, "
        "self_diag_*; failed below 90% self-matched units) and the plans' stability between the even and odd probe "
        "halves beside its chance level (stability_*, stability_chance_*), one block, before any fusion",
    )
    stability_k: int = Field(
        default=1,
        ge=1,
        description="k of the stability control's top-k overlap (1: the share of target units whose argmax donor "
        "unit is the same in both probe halves)",
    )

    @field_validator("alphas")
    @classmethod
    def _unit(cls, v: list[float]) -> list[float]:
        bad = [a for a in v if not 0.0 <= a <= 1.0]
        if bad:
            raise ValueError(f"transport.alphas must lie in [0, 1], got {bad}")
        return v


class MergeabilitySpec(_Strict):
    """The run's ``mergeability:`` section (``merge:`` is the model field that builds a merged model).

    ``pairs``: ``cross_model`` (every pair of run models), ``none``, or explicit
    ``{a, b, base?}``; each pair gets a coverage table (route native /
    transport / none and why, headers only) and, when they share tensors, the
    streamed weight diagnostics (``diagnostics``; TIES agreement at
    ``density`` when a base is given). ``barriers``: loss barriers on corpus
    sides for native pairs. ``checkpoints``: the checkpoint arm (its pairs are
    added; a diagnostic x diagnostic Spearman table with permutation nulls and
    BH q, a heatmap, a redundancy summary of |rho| > ``redundant``).
    Outputs: ``coverage.csv``, ``mergeability.csv``, ``barrier_curves.csv``,
    ``checkpoint_correlations.csv`` and a report section.
    """

    pairs: Literal["cross_model", "none"] | list[WeightPairSpec] = "cross_model"
    diagnostics: bool = True
    density: float = Field(default=0.2, gt=0, le=1, description="TIES trimming density (with a base)")
    barriers: BarrierSpec | None = None
    checkpoints: CheckpointArmSpec | None = None
    permutations: int = Field(default=20000, ge=0, description="label shuffles per cell of the checkpoint table")
    redundant: float = Field(default=0.95, gt=0, le=1, description="|rho| above this: redundant diagnostics")


class SeedsSpec(_Strict):
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
    folds: int = Field(default=0, ge=0, description="held-out folds of maps (non-negative)")


class PinnedRepoSpec(_Strict):
    """One repo of a resolved model set: its id, the commit it was resolved to, its tokenizer's local folder."""

    id: str
    sha: str = Field(pattern=r"^[0-9a-f]{40}$", description="the commit hash the set was resolved to")
    tokenizer: str | None = Field(default=None, description="local folder of the repo's tokenizer (own_tokenizer)")


class ModelSetSpec(_Strict):
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


class RunSpec(_Strict):
    """A whole run: corpus, models, pairs, pooling, measures, inference, output."""

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
    maps: MapsSpec | None = Field(default=None, description="fit and score maps between sides (off when absent)")
    audit: AuditSpec | None = Field(default=None, description="audit every model first (off when absent)")
    quality: QualitySpec | None = Field(
        default=None, description="each model's NLL per language side (off when absent)"
    )
    predictors: PredictorsSpec | None = Field(default=None, description="correlation tables of results vs predictors")
    contrasts: list[ContrastSpec] = Field(default_factory=list, description="paired contrasts of arms")
    mergeability: MergeabilitySpec | None = Field(
        default=None, description="weight coverage, diagnostics, barriers, checkpoint arm (off when absent)"
    )
    patching: PatchingSpec | None = Field(default=None, description="cross-model activation patching (off when absent)")
    transport: TransportSpec | None = Field(default=None, description="OT fusion of model pairs (off when absent)")
    alignment: AlignmentSpec | None = Field(
        default=None, description="word alignment for word_aligned pooling (defaults when the pooling is listed)"
    )
    layer_grid: bool = Field(default=False, description="full layer x layer grid for cross-model pairs")
    max_length: int = Field(default=256, ge=8)
    batch_size: int = Field(default=16, ge=1)
    threads: int | Literal["auto"] | None = Field(
        default=None,
        description="torch CPU threads of every forward pass, in every process (part of the stored entries' keys): "
        "None (OMP_NUM_THREADS if set, else the driver's CPUs, resolved once: byte-identical tables from any "
        "process), a number, or auto (measured by speed: faster on shared cores, not bit-reproducible)",
    )
    cache_dir: str | None = None
    overwrite: bool = Field(
        default=False,
        description="write into an earlier run's folder next to files you added there "
        "(your files and edited outputs are never replaced)",
    )
    progress: bool = True

    @property
    def word_alignment(self) -> AlignmentSpec:
        """The ``alignment:`` section, or its defaults (word_aligned pooling without the section)."""
        return self.alignment if self.alignment is not None else AlignmentSpec()

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
        from interlingua.measures import get_measure

        for mid in v:
            try:
                get_measure(mid)
            except InterlinguaError as err:
                raise ValueError(str(err)) from None
        return v

    @model_validator(mode="after")
    def _cross_refs(self) -> RunSpec:
        names = [m.name for m in self.models if m.name is not None]  # a validated ModelSpec always has one
        bad = [n for n in names if n and (":" in n or "|" in n)]
        if bad:
            raise ValueError(
                f"model names may not contain ':' or '|' (they separate model, language and pair in "
                f"results): {bad}; set `name:` to a label without them"
            )
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"model names must be unique; repeated: {sorted(dupes)}")
        arms = set(names) | {m.sweep for m in self.models if m.sweep}
        for c in self.contrasts:
            for arm in (c.a, c.b):
                if arm not in arms:
                    raise ValueError(f"contrast arm {arm!r} is neither a model nor a sweep; known: {sorted(arms)}")
            if c.a == c.b:
                raise ValueError(f"contrast {c.a!r} vs itself compares nothing")
        if self.quality is not None and self.quality.languages != "all":
            known = [_canonical(c) for c in self.corpus.languages]
            bad = [c for c in self.quality.languages if _canonical(c) not in known]
            if bad:
                raise ValueError(f"quality.languages {bad} are not among corpus languages {self.corpus.languages}")
        if self.predictors is not None:
            from interlingua.predictors import KNOWN_PREDICTORS, RESULT_PREDICTOR_COLUMNS

            bad = [p for p in self.predictors.predictors if p not in KNOWN_PREDICTORS]
            if bad:
                raise ValueError(f"unknown predictor(s) {bad}; choose from {sorted(KNOWN_PREDICTORS)}")
            bad = [c for c in self.predictors.columns if c not in RESULT_PREDICTOR_COLUMNS]
            if bad:
                raise ValueError(
                    f"predictors.columns {bad} are not numeric result columns; choose from {RESULT_PREDICTOR_COLUMNS}"
                )
            if any(p.startswith("nll") for p in self.predictors.predictors) and self.quality is None:
                raise ValueError("predictor 'nll' needs the NLL of each side: add a `quality:` section")
        if self.transport is not None:
            for tp in self.transport.pairs:
                for role in ("target", "donor"):
                    if getattr(tp, role) not in names:
                        raise ValueError(f"transport pair {role} {getattr(tp, role)!r} is not among models {names}")
                for role in ("target_language", "donor_language"):
                    code = getattr(tp, role)
                    if code is not None and _canonical(code) not in [_canonical(c) for c in self.corpus.languages]:
                        raise ValueError(
                            f"transport {role} {code!r} is not among corpus languages {self.corpus.languages}"
                        )
            if self.corpus.n is not None and self.corpus.n < self.transport.probe_n + self.transport.eval_n:
                raise ValueError(
                    f"transport needs probe_n + eval_n = {self.transport.probe_n + self.transport.eval_n} disjoint "
                    f"sentences but corpus.n is {self.corpus.n}; raise corpus.n or lower them"
                )
        if self.patching is not None:
            pt = self.patching
            for i, exp in enumerate(pt.resolved()):
                where = "patching" if pt.experiments is None else f"patching.experiments[{i}]"
                for role, name in (("target", exp.target), ("donor", exp.donor)):
                    if name not in names:
                        raise ValueError(f"{where}.{role} {name!r} is not among models {names}")
                for role in ("donor_language", "target_language"):
                    code = getattr(exp, role)
                    if code is not None and _canonical(code) not in [_canonical(c) for c in self.corpus.languages]:
                        raise ValueError(
                            f"{where}.{role} {code!r} is not among corpus languages {self.corpus.languages}"
                        )
                if any(j < 0 for j in exp.layers or []):
                    raise ValueError(f"{where}.layers {exp.layers} must be start layers >= 0 (hidden-state indices)")
            if pt.pooling not in self.pooling:
                raise ValueError(f"patching.pooling {pt.pooling!r} is not among the run's poolings {self.pooling}")
        if (
            self.audit is not None
            and self.audit.language is not None
            and _canonical(self.audit.language) not in [_canonical(c) for c in self.corpus.languages]
        ):
            raise ValueError(
                f"audit.language {self.audit.language!r} is not among corpus languages {self.corpus.languages}"
            )
        if self.mergeability is not None:
            mg = self.mergeability
            listed = [
                (f"mergeability.pairs[{i}]", n)
                for i, p in enumerate(mg.pairs if isinstance(mg.pairs, list) else [])
                for n in (p.a, p.b, p.base)
                if n is not None
            ]
            listed += [
                ("mergeability.checkpoints.models", n) for n in (mg.checkpoints.models if mg.checkpoints else [])
            ]
            for where, n in listed:
                if n not in names:
                    raise ValueError(f"{where} names model {n!r}, which is not among models {names}")
            if mg.barriers is not None and mg.barriers.languages != "all":
                known = [_canonical(c) for c in self.corpus.languages]
                bad = [c for c in mg.barriers.languages if _canonical(c) not in known]
                if bad:
                    raise ValueError(
                        f"mergeability.barriers.languages {bad} are not among corpus languages {self.corpus.languages}"
                    )
        if "word_aligned" in self.pooling:
            if not [p for p in self.pooling if p != "word_aligned"]:
                raise ValueError(
                    "pooling [word_aligned] alone is not supported: list a sentence pooling too (e.g. "
                    "[mean, word_aligned]); maps, patching and the report's pooling comparison use it"
                )
            encoder = self.word_alignment.encoder
            if isinstance(encoder, str) and encoder not in names:
                raise ValueError(
                    f"alignment.encoder {encoder!r} is not among models {names}; name a run model or give a model spec"
                )
        elif self.patching is not None and self.patching.fit == "words":  # patching's word rows use alignment:
            encoder = self.word_alignment.encoder
            if isinstance(encoder, str) and encoder not in names:
                raise ValueError(
                    f"alignment.encoder {encoder!r} is not among models {names}; name a run model or give a model spec"
                )
        elif self.alignment is not None:
            raise ValueError(
                "an alignment: section is set but pooling has no word_aligned (nor patching.fit: words); "
                "add it to pooling or drop the section"
            )
        if self.maps is not None and self.maps.pooling is None and self.pooling[0] == "word_aligned":
            raise ValueError(
                "maps need a sentence pooling: set maps.pooling, or list word_aligned after a sentence pooling"
            )
        map_pairs = self.maps.pairs if self.maps is not None and isinstance(self.maps.pairs, list) else []
        align_pairs = (
            self.alignment.pairs if self.alignment is not None and isinstance(self.alignment.pairs, list) else []
        )
        for p in [*self.pairs.explicit, *map_pairs, *align_pairs]:
            for side in (p.a, p.b):
                if side.model not in names:
                    raise ValueError(f"pair side names model {side.model!r}, which is not among models {names}")
                if _canonical(side.language) not in [_canonical(c) for c in self.corpus.languages]:
                    raise ValueError(
                        f"pair side names language {side.language!r}, not among corpus languages "
                        f"{self.corpus.languages}"
                    )
        return self


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


def _canonical(code: str) -> str:
    """Canonical language code for duplicate checks (unknown codes compare as written)."""
    from interlingua.corpora.languages import normalize_language

    try:
        return normalize_language(code)
    except InterlinguaError:
        return code


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
