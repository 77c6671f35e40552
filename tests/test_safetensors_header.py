"""The one safetensors header reader (``interlingua.core.safetensors_header``): what the safetensors library wrote
is read back, from a path and from bytes alike, and each damaged header is refused with its reason."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from interlingua.core.safetensors_header import SafetensorsHeaderError, read_safetensors_header


def test_a_file_written_by_safetensors_is_read_back(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    tensors = {"a": np.zeros((2, 3), np.float32), "b": np.arange(5, dtype=np.int64)}
    save_file(tensors, str(path), metadata={"key": "k"})
    header, size = read_safetensors_header(path)
    assert header == read_safetensors_header(path.read_bytes())[0]
    assert header["__metadata__"] == {"key": "k"}
    assert {k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"} == {
        "a": ("F32", [2, 3]),
        "b": ("I64", [5]),
    }
    # the length prefix and the tensors' offsets account for every byte of the file
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    assert 8 + size + end == path.stat().st_size


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"\x01\x02", "short"),
        (struct.pack("<Q", 1000) + b"{}", "size"),
        (struct.pack("<Q", 4) + b"{no}", "json"),
        (struct.pack("<Q", 2) + b"[]", "object"),
    ],
)
def test_a_damaged_header_is_refused_with_its_reason(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    for source in (path, data):
        with pytest.raises(SafetensorsHeaderError) as info:
            read_safetensors_header(source)
        assert info.value.reason == reason and info.value.total == len(data)


def test_a_header_over_the_callers_limit_is_refused_unread() -> None:
    body = json.dumps({"__metadata__": {"x": "y" * 100}}).encode()
    data = struct.pack("<Q", len(body)) + body
    assert read_safetensors_header(data)[1] == len(body)
    with pytest.raises(SafetensorsHeaderError) as info:
        read_safetensors_header(data, limit=len(body) - 1)
    assert info.value.reason == "limit"
