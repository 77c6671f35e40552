"""A converted copy of a GGUF checkpoint, so that only the first load pays for dequantisation.

transformers parses a GGUF file four times per load (config and weights for
the model, config and vocabulary for the tokenizer) and dequantises every
tensor: tens of seconds for a 135M model on two cores (:func:`parse_gguf_once`
makes those parses share one reader). After the first float32
load, the base model is written once as safetensors + config + tokenizer under
``<model cache>/gguf-converted/<sha256 of the GGUF>/`` and later loads read
that folder. The key is the GGUF file's content hash, so a changed file is
never served from a stale copy; the facts and fingerprint still name the GGUF.

The marker file, written last, records the sha256 of every file of the copy.
Every reuse checks them (:func:`interlingua.core.builds.build_problem`; hashes are
cached per process and in the store by path, size, mtime, inode and ctime): a
copy with a changed tensor or a missing ``tokenizer.json`` is warned about and
converted again from the GGUF, never used.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlingua.core.errors import StoreError
from interlingua.data.models.cachefiles import publish_dir, store_error, sweep_stale, writable_dir
from interlingua.data.models.packaged import model_cache_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel

MARKER = "interlingua-gguf.json"
WHAT = "converted copy of the GGUF"


def converted_folder(gguf_sha256: str, cache_dir: str | Path | None = None) -> Path:
    """Where the converted copy of the GGUF with this sha256 lives."""
    return model_cache_dir(cache_dir) / "gguf-converted" / gguf_sha256


def find_converted(gguf_sha256: str, cache_dir: str | Path | None = None) -> Path | None:
    """The complete, verified converted folder for this GGUF, or None (absent, or damaged: warned about)."""
    from interlingua.core.builds import build_problem

    folder = converted_folder(gguf_sha256, cache_dir)
    if not folder.exists():
        return None
    record, problem = build_problem(folder, MARKER)
    if record is not None and record.get("gguf_sha256") != gguf_sha256:
        record, problem = None, f"{MARKER} names another GGUF"
    if record is None:
        warnings.warn(
            f"the {WHAT} in {folder} is damaged or incomplete ({problem}); it is converted again",
            UserWarning,
            stacklevel=2,
        )
        return None
    return folder


def save_converted(
    model: PreTrainedModel, tokenizer: Any, gguf_sha256: str, gguf_name: str, cache_dir: str | Path | None = None
) -> Path | None:
    """Write the base model (float32) and tokenizer atomically into the model cache.

    The copy is built in a temporary folder next to its final place and
    renamed into place, with the marker written last, so a reader never sees
    a partial copy. A cache folder that cannot be written raises
    :class:`~interlingua.core.errors.StoreError` naming it; a model or tokenizer
    that cannot be serialised only warns (None: the next load dequantises the
    GGUF again).
    """
    from safetensors.torch import save_file

    from interlingua.core.builds import build_folder, files_record

    final = converted_folder(gguf_sha256, cache_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the caller's find_converted already said why it rebuilds
        if find_converted(gguf_sha256, cache_dir) is not None:
            return final
    try:
        writable_dir(final.parent, WHAT)  # probed, and what killed conversions left swept, before any work
        sweep_stale(final.parent)
        with build_folder(final, lambda parent, exc: store_error(parent, WHAT, exc)) as tmp:
            state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
            save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
            model.config.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            record = {"gguf_sha256": gguf_sha256, "gguf_file": gguf_name, "files": files_record(tmp)}
            (tmp / MARKER).write_text(json.dumps(record, indent=1, sort_keys=True))  # last: the copy is complete
            publish_dir(tmp, final, WHAT)
    except StoreError:
        raise
    except OSError as exc:
        raise store_error(final.parent, WHAT, exc) from exc
    except (RuntimeError, ValueError, TypeError) as exc:
        warnings.warn(
            f"could not write the converted GGUF to {final} ({exc}); the next load will dequantise the GGUF again",
            stacklevel=3,
        )
        return None
    return final


@contextmanager
def parse_gguf_once() -> Iterator[None]:
    """Within this block, every ``gguf.GGUFReader(path)`` of the same file returns one parsed reader.

    One transformers load of a GGUF builds a new reader for the config, the
    weights and the tokenizer, and each parses every metadata field in Python:
    for Gemma 3's 262,144-token vocabulary that is tens of seconds per parse.
    The readers are read-only memory maps, so sharing one changes nothing but
    the time. ``gguf.GGUFReader`` is restored on exit; nested blocks share the
    outer block's readers.
    """
    try:
        import gguf
    except ImportError:  # transformers refuses GGUF without it; nothing to share
        yield
        return
    original = gguf.GGUFReader
    if getattr(original, "_interlingua_shared", False):  # an outer block is active
        yield
        return
    readers: dict[tuple[str, str], Any] = {}

    class SharedReader(original):  # type: ignore[misc, valid-type]
        _interlingua_shared = True

        def __new__(cls, path: Any, mode: str = "r") -> Any:
            key = (os.path.realpath(os.fspath(path)), mode)
            if key not in readers:
                readers[key] = super().__new__(cls)
            return readers[key]

        def __init__(self, path: Any, mode: str = "r") -> None:
            if getattr(self, "_interlingua_parsed", False):
                return
            super().__init__(path, mode)
            self._interlingua_parsed = True

    # transformers looks the reader class up on the module, so the block swaps the class itself
    gguf.GGUFReader = SharedReader  # type: ignore[misc]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]
        readers.clear()
