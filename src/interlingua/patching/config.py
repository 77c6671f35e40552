"""The ``patching:`` section: cross-model activation patching experiments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from interlingua.core.spec_base import Strict

__all__ = ["PatchCondition", "PatchExperimentSpec", "PatchFit", "PatchingSpec"]

PatchFit = Literal["sentences", "words", "probes"]
PatchCondition = Literal["none", "within", "mapped", "unprojected", "shuffled", "noise"]
_PATCH_CONDITIONS: tuple[PatchCondition, ...] = ("none", "within", "mapped", "unprojected", "shuffled", "noise")


class PatchExperimentSpec(Strict):
    """One patching experiment: the ``donor``'s residuals (read in ``donor_language``) into the ``target``."""

    target: str
    donor: str
    donor_language: str | None = Field(default=None, description="default: the first corpus language")
    target_language: str | None = Field(default=None, description="default: the donor language")
    layers: list[int] | None = Field(default=None, min_length=1, description="start layers j; default: the section's")


class PatchingSpec(Strict):
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
    the ``mean`` span rule writes the subject) or ``probes`` (the subject
    states of the probe prompts themselves, K-fold over countries); a list
    of them runs every experiment and control once per fit, side by side
    (``fit`` column; a single fit keeps the stored entries' keys).
    ``identity_control`` (on by
    default): per target side, a first task patches the target with itself
    through the map fitted from that side onto itself; the verdict is on
    every row and a failure is warned about. ``twin_control`` (on by default
    when a model of the experiment is Llama-family): the model patched into its
    rotated twin (:mod:`interlingua.patching.twin`) through the map fitted
    between their rows, whose known answer is the rotation Q, not the
    identity; a failure of either control marks the experiment's rows
    ``chain: broken``.
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
    fit: PatchFit | list[PatchFit] = Field(
        default="sentences",
        description="rows the maps are fitted on (one, or a list: every experiment and control run once per fit, "
        "side by side in one table, the `fit` column saying which): sentences (one `pooling` vector per corpus "
        "sentence), words (one per aligned word pair: the mean of each word's sub-word states, the patch site's "
        "own kind of state; the corpus sides are word-aligned with the `alignment:` options, thousands of rows "
        "from a few hundred sentences) or probes (the donor's and target's subject states on the probe prompts "
        "themselves, one row pair per relation x language pair x country, every probe relation and "
        "`probe_languages`, K-fold over countries (`probe_folds`) so each evaluated country is patched through a "
        "map that never saw it)",
    )
    probe_folds: int = Field(default=5, ge=2, description="fit: probes: folds over the countries")
    probe_languages: Literal["experiment", "all"] = Field(
        default="all",
        description="fit: probes: the language pairs whose prompts are paired: the experiment's (donor_language, "
        "target_language) only, or also every probe language with itself (more rows: 7 relations x 7 pairs x the "
        "training countries)",
    )
    identity_control: bool = Field(
        default=True,
        description="run the identity control first: each target side patched with its own residual through the "
        "map fitted from that side onto itself; mapped must equal within (else the run says the chain is broken)",
    )
    twin_control: bool | None = Field(
        default=None,
        description="run the twin control beside each experiment: a Llama-family model of the experiment (the "
        "target if it is one, else the donor) patched into its rotated twin (same function, residual stream times a "
        "random orthogonal Q) through the map fitted between them, which must be Q and must patch like within; "
        "default (null): on when the target or donor is Llama-family, true: required (an error otherwise), false: off",
    )
    twin_seed: int = Field(default=0, ge=0, description="seed of the twin's rotation Q (recorded on the rows)")
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

    @field_validator("fit")
    @classmethod
    def _fits(cls, v: Any) -> Any:
        if isinstance(v, list):
            if not v:
                raise ValueError("patching.fit is an empty list; give sentences, words, probes or a list of them")
            if len(set(v)) != len(v):
                raise ValueError(f"patching.fit {v} repeats a fit; list each once")
        return v

    @property
    def fits(self) -> list[str]:
        """The fits to run, in the order given (a single string is one fit)."""
        return [self.fit] if isinstance(self.fit, str) else list(self.fit)

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
            from interlingua.patching.probes import load_probes

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
