"""The one GGUF header reader: metadata keys and tensor names, without reading tensor data or the gguf package.

A GGUF file starts with the magic ``GGUF``, a version (2 or 3 here), the
tensor count and the metadata count, then each metadata entry as a
length-prefixed key, a value type and the value, then each tensor's
name, dimensions, type and offset. Arrays are not materialised: an array
value is ``("array", element type, count)`` and its elements are skipped
(strings by their lengths), so a 262k-token vocabulary costs a seek per
token, not a Python object per token.

Pre-flight reads only the first keys (:func:`read_gguf_header` with
``max_keys`` and ``until``); the mergeability coverage reads all of them and
the tensor names.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["GGUF_INTEGER_TYPES", "GGUFHeader", "read_gguf_header"]

#: struct format of each scalar value type (GGUF spec: uint8 .. float64; 8 is a string, 9 an array).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: The 32- and 64-bit integer value types (counts such as ``block_count`` are stored as one of these).
GGUF_INTEGER_TYPES = frozenset({4, 5, 10, 11})


class GGUFHeader:
    """What :func:`read_gguf_header` read: ``version``, ``n_tensors``, ``metadata`` (key -> value),
    ``types`` (key -> GGUF value type) and ``tensors`` (names, when asked for)."""

    def __init__(self, version: int, n_tensors: int) -> None:
        self.version = version
        self.n_tensors = n_tensors
        self.metadata: dict[str, Any] = {}
        self.types: dict[str, int] = {}
        self.tensors: list[str] = []
        self.last = ""  # the key read last (what ``until`` looks at)


class _Reader:
    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh

    def read(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        data = self.fh.read(size)
        if len(data) != size:
            raise ValueError("the GGUF header is cut short")
        return struct.unpack(fmt, data)[0]

    def string(self) -> str:
        return self.fh.read(self.read("<Q")).decode("utf-8", "replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.read(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.read("<I"), self.read("<Q")
            if etype == _STRING:
                for _ in range(count):
                    self.fh.seek(self.read("<Q"), 1)
            elif etype in _SCALARS:
                self.fh.seek(struct.calcsize(_SCALARS[etype]) * count, 1)
            else:
                for _ in range(count):
                    self.value(etype)
            return ("array", etype, count)
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf_header(
    path: str | os.PathLike[str],
    *,
    max_keys: int | None = None,
    tensors: bool = True,
    until: Callable[[GGUFHeader], bool] | None = None,
    old: str = "raise",
) -> GGUFHeader:
    """Read the header of the GGUF file ``path``: every metadata entry (the first ``max_keys``; stopping early
    once ``until(header)`` holds after a key) and, with ``tensors`` and every key read, the tensor names.

    Raises ValueError (the file is not GGUF, cut short, of an unknown value type, or of version 1 unless
    ``old="empty"``, which returns a header with no keys for it) and OSError.
    """
    with open(Path(path), "rb") as fh:
        if fh.read(4) != b"GGUF":
            raise ValueError("it does not start with the GGUF magic bytes")
        r = _Reader(fh)
        version = r.read("<I")
        if version < 2:
            if old == "empty":
                return GGUFHeader(version, 0)
            raise ValueError(f"GGUF version {version} is too old")
        n_tensors, n_kv = r.read("<Q"), r.read("<Q")
        header = GGUFHeader(version, n_tensors)
        wanted = n_kv if max_keys is None else min(n_kv, max_keys)
        for _ in range(wanted):
            key = r.string()
            vtype = r.read("<I")
            header.metadata[key] = r.value(vtype)
            header.types[key] = vtype
            header.last = key
            if until is not None and until(header):
                return header
        if tensors and wanted == n_kv:
            for _ in range(n_tensors):
                header.tensors.append(r.string())
                fh.seek(8 * r.read("<I") + 4 + 8, 1)  # dims, type, offset
    return header
