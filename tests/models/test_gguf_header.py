"""interlingua.data.models.gguf: the one GGUF header reader agrees with the gguf package's own reader.

The file is written by ``gguf.GGUFWriter`` (scalars of several types, a string, arrays of numbers and of
strings, tensors); every metadata value and tensor name read here must equal what ``gguf.GGUFReader`` reads,
arrays reduced to their element type and count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from interlingua.data.models.gguf import GGUF_INTEGER_TYPES, read_gguf_header

gguf = pytest.importorskip("gguf")


def _write(path: Path) -> None:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(3)
    writer.add_embedding_length(64)
    writer.add_uint8("test.small", 7)
    writer.add_int64("test.big", -(2**40))
    writer.add_float32("test.rope", 0.5)
    writer.add_bool("test.flag", True)
    writer.add_string("test.name", "Zürich")
    writer.add_array("test.numbers", [1, 2, 3, 4])
    writer.add_token_list(["<s>", "a", "bb", "ccc"])
    for name, shape in (("token_embd.weight", (4, 8)), ("blk.0.attn_q.weight", (8, 8))):
        writer.add_tensor(name, np.zeros(shape, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_every_key_and_tensor_name_agrees_with_the_gguf_package(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write(path)
    header = read_gguf_header(path)
    reference = gguf.GGUFReader(str(path))
    assert header.n_tensors == len(reference.tensors)
    assert header.tensors == [t.name for t in reference.tensors]
    expected = {}
    for field in reference.fields.values():
        if field.name.startswith("GGUF."):  # the reader's pseudo-fields: version, counts
            continue
        if field.types[0] == gguf.GGUFValueType.ARRAY:
            expected[field.name] = ("array", int(field.types[1]), len(field.data))
        elif field.types[0] == gguf.GGUFValueType.STRING:
            expected[field.name] = bytes(field.parts[field.data[0]]).decode("utf-8")
        else:
            expected[field.name] = field.parts[field.data[0]][0].item()
        assert header.types[field.name] == int(field.types[0]), field.name
    assert header.metadata == expected
    assert header.metadata["test.name"] == "Zürich" and header.metadata["tokenizer.ggml.tokens"][2] == 4
    assert header.types["llama.block_count"] in GGUF_INTEGER_TYPES


def test_reading_stops_at_max_keys_or_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write(path)
    full = list(read_gguf_header(path).metadata)
    assert list(read_gguf_header(path, max_keys=2).metadata) == full[:2]
    stopped = read_gguf_header(path, until=lambda h: h.last == "llama.block_count")
    assert list(stopped.metadata) == full[: full.index("llama.block_count") + 1] and stopped.tensors == []


@pytest.mark.parametrize(
    "data, why",
    [
        (b"<html>404</html>", "GGUF magic"),
        (b"GGUF\x03\x00", "cut short"),
        (b"GGUF\x01\x00\x00\x00" + bytes(16), "version 1 is too old"),
    ],
)
def test_what_is_not_a_whole_gguf_header_is_refused(tmp_path: Path, data: bytes, why: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=why):
        read_gguf_header(path)


def test_a_cut_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    _write(path)
    whole = path.read_bytes()
    path.write_bytes(whole[:60])
    with pytest.raises(ValueError, match="cut short"):
        read_gguf_header(path)
