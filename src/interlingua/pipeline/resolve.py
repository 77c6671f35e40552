"""Model specs that name things in the store -> specs of plain local folders.

A run config may name the project's own artefacts instead of folders: a zoo
piece (``zoo: eng@step64``, ``adapter: zoo:eng+deu-lora``, ``tokenizer:
zoo:eng-deu/tokenizer``), a tokenwise merge to rebuild (``tokenwise_merge:``)
or a weight merge to build (``merge:``, into ``models/merges/<recipe key>``).
:func:`resolve_model` turns each into the folder it stands for, building a
tokenwise merge into the store (``models/tokenwise/<recipe key>``) when it is
not there yet, so the rest of the pipeline only ever sees folders. The user's
own fields (name, dtype, sweep labels) are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from interlingua.core.errors import ConfigError
from interlingua.core.store import Store
from interlingua.data.models.spec import ModelSpec

__all__ = ["resolve_model", "resolve_models", "zoo_folder"]


def zoo_folder(name: str, store: Store, *, what: str) -> str:
    """The folder of a ``zoo:`` tokenizer or model name; other values are returned as given."""
    if not name.startswith("zoo:"):
        return name
    from interlingua.zoo import resolve_zoo

    return str(resolve_zoo(name[4:], store.root))


def _zoo_adapter(name: str, store: Store) -> str:
    from interlingua.zoo import zoo_model_fields

    fields = zoo_model_fields(name[4:], store.root)
    if "adapter" not in fields:
        raise ConfigError(f"`adapter: {name}` names a zoo model, not an adapter; use e.g. zoo:eng+deu-lora")
    return fields["adapter"]


def _zoo_model_path(name: str, store: Store) -> str:
    """A model folder from a ``zoo:`` model name (an adapter name is refused) or a folder as given."""
    if not name.startswith("zoo:"):
        return name
    from interlingua.zoo import zoo_model_fields

    fields = zoo_model_fields(name[4:], store.root)
    if "adapter" in fields:
        raise ConfigError(f"{name} is an adapter; a tokenwise merge takes model folders (zoo:eng, zoo:deu)")
    return fields["path"]


def resolve_model(
    spec: ModelSpec, store: Store, *, build: bool = True, log: Callable[[str], None] | None = None
) -> ModelSpec:
    """``spec`` with zoo names replaced by folders and a tokenwise merge replaced by its built folder.

    ``build=False`` checks a merge's inputs but builds nothing (``validate``);
    the spec then keeps ``tokenwise_merge`` with resolved input folders.
    """
    fields = spec.model_dump()
    if spec.zoo is not None:
        from interlingua.zoo import zoo_model_fields

        zoo = zoo_model_fields(spec.zoo.removeprefix("zoo:"), store.root)
        fields.update(zoo=None, path=zoo["path"], adapter=zoo.get("adapter"), name=spec.name)
    if spec.tokenizer is not None:
        fields["tokenizer"] = zoo_folder(spec.tokenizer, store, what="tokenizer")
    if spec.adapter is not None and spec.adapter.startswith("zoo:"):
        fields["adapter"] = _zoo_adapter(spec.adapter, store)
    if spec.merge is not None:
        return _resolve_merge(spec, fields, store, build=build, log=log)
    tm = spec.tokenwise_merge
    if tm is not None:
        english = Path(_zoo_model_path(tm.english, store)).expanduser()
        l2 = Path(_zoo_model_path(tm.l2, store)).expanduser()
        tokenizer = Path(zoo_folder(tm.tokenizer, store, what="tokenizer")).expanduser()
        for what, folder in (("english", english), ("l2", l2), ("tokenizer", tokenizer)):
            if not folder.is_dir():
                raise ConfigError(f"model {spec.label!r}: tokenwise_merge.{what} {folder} is not a folder")
        if not build:
            fields["tokenwise_merge"] = tm.model_copy(
                update={"english": str(english), "l2": str(l2), "tokenizer": str(tokenizer)}
            ).model_dump()
            return ModelSpec(**fields)
        from interlingua.data.models.loading import hf_progress
        from interlingua.mergeability.tokenwise import build_tokenwise_merge, tokenwise_recipe_key

        top_k = _top_k(float(tm.top_k))  # type: ignore[arg-type]
        key = tokenwise_recipe_key(english, l2, tokenizer, alpha=float(tm.alpha), top_k=top_k)  # type: ignore[arg-type]
        out = store.folder("models") / "tokenwise" / key[:32]
        if _needs_build(out, "tokenwise_merge.json", key, f"tokenwise merge {spec.label}"):
            if log is not None:
                log(f"rebuilding tokenwise merge {spec.label} (alpha={tm.alpha:g}, top_k={tm.top_k:g}) into {out}")
            with _disk_full_names(out, _weights_bytes(english)), hf_progress():  # its own bars: our log line
                build_tokenwise_merge(english, l2, tokenizer, out, alpha=float(tm.alpha), top_k=top_k)  # type: ignore[arg-type]
        fields.update(tokenwise_merge=None, path=str(out))
    return ModelSpec(**fields)


def _resolve_merge(
    spec: ModelSpec, fields: dict, store: Store, *, build: bool, log: Callable[[str], None] | None
) -> ModelSpec:
    """A ``merge:`` spec -> its built folder in the store (inputs checked first: headers only)."""
    from interlingua.data.models.loading import hf_progress
    from interlingua.mergeability.errors import WeightsError
    from interlingua.mergeability.merge import _aligned_names, _prepare, build_merge, merge_recipe_key

    ms = spec.merge
    assert ms is not None
    models = [str(Path(_zoo_model_path(m, store)).expanduser()) for m in ms.models]
    base = str(Path(_zoo_model_path(ms.base, store)).expanduser()) if ms.base is not None else None
    for what, folder in [*((f"models[{i}]", m) for i, m in enumerate(models)), ("base", base)]:
        if folder is not None and not Path(folder).is_dir():
            raise ConfigError(f"model {spec.label!r}: merge.{what} {folder} is not a folder")
    try:
        params = ms.params()
    except ValueError as err:  # a sweep left unexpanded (a run config expands it: config.expand_sweeps)
        raise ConfigError(f"model {spec.label!r}: {err}") from None
    try:
        _, ckpts, cbase = _prepare(models, base, {"method": ms.method, **params})
        _aligned_names(ckpts, cbase)  # refuses inputs that are not native with every tensor shared
        key = merge_recipe_key(models, method=ms.method, base=base, **params)
    except WeightsError as err:
        raise ConfigError(f"model {spec.label!r}: merge cannot be built: {err}") from None
    if not build:
        fields["merge"] = ms.model_copy(update={"models": models, "base": base}).model_dump(by_alias=True)
        return ModelSpec(**fields)
    out = store.folder("models") / "merges" / key[:32]
    if _needs_build(out, "merge.json", key, f"merge {spec.label}"):
        if log is not None:
            log(f"building merge {spec.label} ({ms.method} of {len(models)} models) into {out}")
        try:
            with _disk_full_names(out, _weights_bytes(Path(models[0]))), hf_progress():
                build_merge(models, out, method=ms.method, base=base, **params)
        except WeightsError as err:
            raise ConfigError(f"model {spec.label!r}: merge cannot be built: {err}") from None
    fields.update(merge=None, path=str(out))
    return ModelSpec(**fields)


def _weights_bytes(folder: Path) -> int | None:
    """Bytes of a model folder's weight files: about what a merge of it writes (None when unreadable)."""
    from interlingua.data.models.hashing import weight_files

    try:
        return sum(p.stat().st_size for p in weight_files(folder)) or None
    except OSError:
        return None


@contextmanager
def _disk_full_names(out: Path, size: int | None) -> Iterator[None]:
    """A build into the store that meets a full disk (any library's words for it) is a
    :class:`~interlingua.core.store.DiskFullError` naming the folder and about how much the build needs."""
    from interlingua.core.errors import InterlinguaError
    from interlingua.core.store import DiskFullError, full_reason, is_disk_full

    try:
        yield
    except Exception as exc:
        if isinstance(exc, InterlinguaError) or not is_disk_full(exc):
            raise
        raise DiskFullError(out.parent, out, size, full_reason(exc)) from None


def _needs_build(out: Path, record_file: str, key: str, what: str) -> bool:
    """Whether the store's build folder ``out`` must be (re)built: absent, or damaged (warned, then discarded).

    Intact means its record names ``key`` and every file it lists has its recorded sha256
    (:func:`interlingua.core.builds.build_problem`, hashes cached per process and in the store).
    """
    import warnings

    from interlingua.core.builds import build_problem, discard_damaged_build

    if not out.exists():
        return True
    record, problem = build_problem(out, record_file, key)
    if record is not None:
        return False
    warnings.warn(
        f"the stored {what} in {out} is damaged or incomplete ({problem}); it is rebuilt", UserWarning, stacklevel=3
    )
    discard_damaged_build(out)
    return True


def _top_k(value: float) -> float | int:
    """A share of the L2 vocabulary when <= 1, a count when larger."""
    return value if value <= 1.0 else int(value)


def resolve_models(
    models: list[ModelSpec], store: Store, *, build: bool = True, log: Callable[[str], None] | None = None
) -> list[ModelSpec]:
    """:func:`resolve_model` of each (specs without store names come back unchanged)."""
    return [resolve_model(m, store, build=build, log=log) for m in models]
