"""The one reader of a safetensors header: 8 bytes of little-endian length, then that many bytes of JSON.

Model folders (pre-flight, weight comparability, the tokenizer audit) and the store's own entries (the store,
the ownership check of a cache folder) are safetensors files; every reader of their headers calls
:func:`read_safetensors_header` (the GGUF header's reader is :func:`interlingua.data.models.gguf.read_gguf_header`).
It lives in ``core`` because the store, below the models' package, reads its entries with it.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SafetensorsHeaderError", "read_safetensors_header"]


class SafetensorsHeaderError(ValueError):
    """A header that cannot be read. ``reason``: ``"short"`` (under 8 bytes), ``"limit"`` (longer than the
    caller allows), ``"size"`` (longer than the file), ``"json"`` (not UTF-8 JSON) or ``"object"`` (JSON, not an
    object); ``total``: the file's bytes; ``size``: the length the header claims (0 when not read)."""

    def __init__(self, reason: str, message: str, *, total: int, size: int = 0) -> None:
        super().__init__(message)
        self.reason = reason
        self.total = total
        self.size = size


def read_safetensors_header(
    source: str | os.PathLike[str] | bytes, *, limit: int | None = None
) -> tuple[dict[str, Any], int]:
    """(the header's JSON object, its length in bytes) of a safetensors file at a path, or of its bytes.

    Reads 8 + length bytes of a file (never its tensors). ``limit``: the longest header accepted. Raises
    :class:`SafetensorsHeaderError` (a ValueError) saying why it cannot be read; OSError for a file that cannot be
    opened or read.
    """
    if isinstance(source, bytes):
        data = source
        return _parse(data[:8], len(data), lambda size: data[8 : 8 + size], limit)
    with Path(source).open("rb") as fh:
        return _parse(fh.read(8), os.fstat(fh.fileno()).st_size, fh.read, limit)


def _parse(head: bytes, total: int, rest: Callable[[int], bytes], limit: int | None) -> tuple[dict[str, Any], int]:
    if len(head) < 8:
        raise SafetensorsHeaderError("short", f"file has {total} bytes, shorter than a safetensors header", total=total)
    (size,) = struct.unpack("<Q", head)
    if limit is not None and size > limit:
        raise SafetensorsHeaderError("limit", f"header of {size} bytes", total=total, size=size)
    if size > total - 8:
        raise SafetensorsHeaderError(
            "size", f"header claims {size} bytes but the file has {total - 8}", total=total, size=size
        )
    try:
        header = json.loads(rest(size).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SafetensorsHeaderError("json", f"header is not valid JSON ({exc})", total=total, size=size) from None
    if not isinstance(header, dict):
        raise SafetensorsHeaderError("object", "header is not a JSON object", total=total, size=size)
    return header, size
