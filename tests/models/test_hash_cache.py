"""File sha256s are cached like a build system caches them: by path, size, mtime, inode and ctime, in memory
and in the store's hashes/ folder; a changed file is hashed again, an unsettled one is kept in memory only."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from interlingua.core import hashing


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "store" / "hashes"
    monkeypatch.setattr(hashing, "_DISK_FOLDER", folder)
    monkeypatch.setattr(hashing, "_HASH_CACHE", {})
    return folder


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a later process sees: an empty memory cache."""
    monkeypatch.setattr(hashing, "_HASH_CACHE", {})


def _never_read(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    opener = Path.open

    def guarded(self: Path, *args, **kwargs):
        if self == path:
            raise AssertionError(f"{path} was read and hashed again")
        return opener(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded)


def test_a_settled_file_is_hashed_once_across_processes(cache: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hashing, "SETTLED_SECONDS", 0.0)
    f = tmp_path / "w.bin"
    f.write_bytes(b"weights" * 1000)
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    assert hashing.file_sha256(f) == want
    assert len(list(cache.glob("*.json"))) == 1
    _new_process(monkeypatch)
    _never_read(monkeypatch, f)
    assert hashing.file_sha256(f) == want


def test_a_rewritten_file_is_hashed_again_even_with_its_mtime_set_back(
    cache: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(hashing, "SETTLED_SECONDS", 0.0)
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 4096)
    first = hashing.file_sha256(f)
    before = f.stat()
    time.sleep(0.05)
    f.write_bytes(b"b" * 4096)  # same size
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime restored; the ctime moves anyway
    if hashing._key(f)[4] == before.st_ctime_ns:
        pytest.skip("this file system's ctime is coarser than 50 ms")
    _new_process(monkeypatch)
    second = hashing.file_sha256(f)
    assert second == hashlib.sha256(b"b" * 4096).hexdigest() != first


def test_a_file_modified_just_before_hashing_stays_in_memory_only(cache: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hashing, "SETTLED_SECONDS", 3600.0)
    f = tmp_path / "fresh.bin"
    f.write_bytes(b"x" * 100)
    hashing.file_sha256(f)
    hashing.remember_sha256(f, hashing.file_sha256(f))
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_a_damaged_entry_is_ignored(cache: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hashing, "SETTLED_SECONDS", 0.0)
    f = tmp_path / "w.bin"
    f.write_bytes(b"weights")
    want = hashing.file_sha256(f)
    (entry,) = cache.glob("*.json")
    entry.write_text('{"key": [], "sha256": "0"}')
    _new_process(monkeypatch)
    assert hashing.file_sha256(f) == want
    entry.write_text("{not json")
    _new_process(monkeypatch)
    assert hashing.file_sha256(f) == want


def test_an_unwritable_cache_folder_only_costs_the_speed_up(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    monkeypatch.setattr(hashing, "_DISK_FOLDER", blocker / "hashes")
    monkeypatch.setattr(hashing, "_HASH_CACHE", {})
    monkeypatch.setattr(hashing, "SETTLED_SECONDS", 0.0)
    f = tmp_path / "w.bin"
    f.write_bytes(b"weights")
    assert hashing.file_sha256(f) == hashlib.sha256(b"weights").hexdigest()
