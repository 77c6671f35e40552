"""Writes under the model cache are atomic, and an unusable cache folder is a StoreError."""

from __future__ import annotations

import errno
import hashlib
import importlib
import os
import re
import tempfile
import textwrap
from pathlib import Path

import pytest

from interlingua.core.errors import ModelError, StoreError
from interlingua.data.models import PACKAGED_MODELS, resolve_packaged
from interlingua.data.models.cachefiles import check_writable, publish_dir, writable_dir
from interlingua.data.models.gguf_cache import MARKER, converted_folder, find_converted, save_converted
from interlingua.data.models.packaged import PackagedModel, check_packaged

PAYLOAD = b"GGUF" + bytes(range(256)) * 8

FAKE_PACKAGE = textwrap.dedent(
    '''
    """A stand-in for a package that ships a GGUF in parts and joins them (like gemma3-270m)."""
    import hashlib
    from pathlib import Path

    MODEL_NAME = "fake.gguf"
    PAYLOAD = PAYLOAD_BYTES
    EXPECTED_SHA256 = hashlib.sha256(PAYLOAD).hexdigest()
    FAIL = {"mode": None}
    CALLS = []

    def verify_chunks():
        pass

    def assemble(output_path, overwrite=False):
        CALLS.append(str(output_path))
        target = Path(output_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and not overwrite:  # like the real package
            if hashlib.sha256(target.read_bytes()).hexdigest() != EXPECTED_SHA256:
                raise FileExistsError(f"{target} already exists with an unexpected sha256")
            return target
        with target.open("wb") as fh:
            fh.write(PAYLOAD[:100])
            if FAIL["mode"] == "disk full":
                raise OSError(28, "No space left on device")
            if FAIL["mode"] == "bad parts":
                raise ValueError("Assembled file sha256 did not match expected value")
            fh.write(PAYLOAD[100:])
        return target
    '''
).replace("PAYLOAD_BYTES", repr(PAYLOAD))


@pytest.fixture()
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "site"
    (root / "interlingua_fake_gguf").mkdir(parents=True)
    (root / "interlingua_fake_gguf" / "__init__.py").write_text(FAKE_PACKAGE)
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    monkeypatch.delitem(__import__("sys").modules, "interlingua_fake_gguf", raising=False)
    module = importlib.import_module("interlingua_fake_gguf")
    monkeypatch.setitem(
        PACKAGED_MODELS, "fake", PackagedModel("fake", "interlingua_fake_gguf", "pip install fake", "a fake")
    )
    return module


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) if folder.is_dir() else []


def test_assembly_is_written_once_and_atomically(fake_package, tmp_path: Path) -> None:
    folder, name = resolve_packaged("fake", tmp_path / "cache")
    assert folder == tmp_path / "cache" / "fake" and name == "fake.gguf"
    assert (folder / name).read_bytes() == PAYLOAD
    assert _leftovers(folder) == []
    assert Path(fake_package.CALLS[0]).name != name  # built under a temporary name
    assert resolve_packaged("fake", tmp_path / "cache") == (folder, name)
    assert len(fake_package.CALLS) == 1  # a verified copy is reused
    assert check_packaged("fake", tmp_path / "cache")["ready"] is True


def test_interrupted_assembly_leaves_nothing_behind(fake_package, tmp_path: Path) -> None:
    fake_package.FAIL["mode"] = "disk full"
    with pytest.raises(StoreError, match=r"cache/fake is full \(No space left on device\): could not write fake.gguf"):
        resolve_packaged("fake", tmp_path / "cache")
    assert not (tmp_path / "cache" / "fake" / "fake.gguf").exists()
    assert _leftovers(tmp_path / "cache" / "fake") == []
    fake_package.FAIL["mode"] = "bad parts"
    with pytest.raises(
        ModelError, match=r"could not assemble 'fake'.*Reinstall with `pip install fake --force-reinstall`"
    ):
        resolve_packaged("fake", tmp_path / "cache")
    assert not (tmp_path / "cache" / "fake" / "fake.gguf").exists()


def test_a_killed_assembly_is_swept(fake_package, tmp_path: Path) -> None:
    from interlingua.data.models import cachefiles

    folder = tmp_path / "cache" / "fake"
    folder.mkdir(parents=True)
    dead = folder / ".tmp-otherhost-1-abc.part"  # another host's, a day old
    dead.write_bytes(PAYLOAD[:10])
    os.utime(dead, (1, 1))
    mine_dead = folder / f".tmp-{cachefiles.host_tag()}-999999999-x.part"  # this host, no such process
    mine_dead.write_bytes(PAYLOAD[:10])
    live = folder / f".tmp-{cachefiles.host_tag()}-{os.getpid()}-y.part"  # a running writer's
    live.write_bytes(PAYLOAD[:10])
    resolve_packaged("fake", tmp_path / "cache")
    assert not dead.exists() and not mine_dead.exists() and live.exists()


def test_a_partial_file_from_an_older_version_is_replaced(fake_package, tmp_path: Path) -> None:
    target = tmp_path / "cache" / "fake" / "fake.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(PAYLOAD[:50])  # what a non-atomic writer leaves when interrupted
    folder, name = resolve_packaged("fake", tmp_path / "cache")
    assert (folder / name).read_bytes() == PAYLOAD
    assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == fake_package.EXPECTED_SHA256


def test_a_file_in_the_way_of_the_cache(fake_package, tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    pattern = (
        rf"under {re.escape(str(blocker))}/fake: {re.escape(str(blocker))} is a file, not a folder\. Remove or rename"
    )
    with pytest.raises(StoreError, match=pattern):
        resolve_packaged("fake", blocker)
    with pytest.raises(StoreError, match=r"is a file, not a folder"):
        check_packaged("fake", blocker)
    assert blocker.read_text() == "not a folder"


def test_an_unwritable_cache_folder(fake_package, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(
        StoreError,
        match=(
            r"cannot write the assembled GGUF of 'fake' under .*: Permission denied; make it "
            r"writable.*INTERLINGUA_MODEL_CACHE"
        ),
    ):
        resolve_packaged("fake", tmp_path / "cache")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores folder permissions")
def test_a_read_only_cache_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(StoreError, match=r"ro.*make it writable"):
            writable_dir(folder / "x", "test files")
        with pytest.raises(StoreError, match=r"is not writable"):
            check_writable(folder / "x", "test files")
    finally:
        folder.chmod(0o755)


def test_converted_copy_into_a_file_in_the_way(tiny_gpt2_loaded, tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("x")
    with pytest.raises(StoreError, match=r"converted copy of the GGUF .*is a file, not a folder"):
        save_converted(tiny_gpt2_loaded.model, tiny_gpt2_loaded.tokenizer, "ab" * 32, "x.gguf", blocker)


def test_converted_copy_interrupted_leaves_nothing(
    tiny_gpt2_loaded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = tiny_gpt2_loaded.tokenizer

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tokenizer, "save_pretrained", disk_full)
    with pytest.raises(StoreError, match=r"the disk is full"):
        save_converted(tiny_gpt2_loaded.model, tokenizer, "ab" * 32, "x.gguf", tmp_path)
    assert not converted_folder("ab" * 32, tmp_path).exists()
    assert _leftovers(tmp_path / "gguf-converted") == []


def test_converted_copy_that_cannot_be_serialised_only_warns(
    tiny_gpt2_loaded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = tiny_gpt2_loaded.tokenizer

    def broken(*args, **kwargs):
        raise RuntimeError("cannot serialise")

    monkeypatch.setattr(tokenizer, "save_pretrained", broken)
    with pytest.warns(UserWarning, match=r"could not write the converted GGUF .*dequantise the GGUF again"):
        assert save_converted(tiny_gpt2_loaded.model, tokenizer, "cd" * 32, "x.gguf", tmp_path) is None
    assert find_converted("cd" * 32, tmp_path) is None


def test_a_stale_converted_folder_is_replaced(tiny_gpt2_loaded, tmp_path: Path) -> None:
    stale = converted_folder("ef" * 32, tmp_path)
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"half")
    assert find_converted("ef" * 32, tmp_path) is None
    folder = save_converted(tiny_gpt2_loaded.model, tiny_gpt2_loaded.tokenizer, "ef" * 32, "x.gguf", tmp_path)
    assert folder == stale and find_converted("ef" * 32, tmp_path) == stale
    assert (stale / MARKER).is_file() and (stale / "model.safetensors").stat().st_size > 4
    assert _leftovers(stale.parent) == []


def test_publish_dir_moves_a_finished_folder_into_place(tmp_path: Path) -> None:
    final = tmp_path / "final"
    mine = tmp_path / ".tmp-mine"
    mine.mkdir()
    (mine / "f").write_text("mine")
    assert publish_dir(mine, final, "test") == final and (final / "f").read_text() == "mine"
    assert not mine.exists()
    newer = tmp_path / ".tmp-newer"
    newer.mkdir()
    (newer / "f").write_text("newer")
    publish_dir(newer, final, "test")  # replaces the older folder
    assert (final / "f").read_text() == "newer" and sorted(p.name for p in tmp_path.iterdir()) == ["final"]


def test_parse_gguf_once_shares_one_reader_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside the block a file is parsed once, whoever opens it; outside, every open parses again."""
    gguf = pytest.importorskip("gguf")
    from interlingua.data.models.gguf_cache import parse_gguf_once

    paths = []
    for name in ("a.gguf", "b.gguf"):
        path = tmp_path / name
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_block_count(3)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.close()
        paths.append(path)
    parses: list[str] = []
    original_build = gguf.GGUFReader._build_fields

    def counting(self, *args, **kwargs):
        parses.append("x")
        return original_build(self, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFReader, "_build_fields", counting)
    original = gguf.GGUFReader
    with parse_gguf_once():
        first = gguf.GGUFReader(str(paths[0]))
        again = gguf.GGUFReader(tmp_path / "." / "a.gguf")  # the same file by another spelling
        other = gguf.GGUFReader(paths[1])
        with parse_gguf_once():  # nested: the outer block's readers
            inner = gguf.GGUFReader(paths[0])
        assert first is again is inner and other is not first
        assert isinstance(first, original) and int(first.fields["llama.block_count"].parts[-1][0]) == 3
        assert len(parses) == 2
    assert gguf.GGUFReader is original  # restored
    assert gguf.GGUFReader(paths[0]) is not first and len(parses) == 3
