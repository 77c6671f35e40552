"""interlingua.core.store.Store: atomic writes, verified JSON and array entries, a checked root.

Unit tests, no models. "Old code" in the comments is the pre-store cache
(``representations/cache.py`` and the pipeline's ``_atomic_json`` /
``_read_rows``, before commit f1731ae).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import interlingua.core.store as store_module
from interlingua.core.errors import StoreError
from interlingua.core.store import Store, atomic_write
from interlingua.pipeline import registry

KEY = "a" * 64
OTHER = "b" * 64


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in _files(root))


def _warns_about(path: Path, what: str = ""):
    return pytest.warns(UserWarning, match=re.escape(f"cache entry {path}") + ".*" + what)


# ----------------------------------------------------------------------------- atomic_write


def test_atomic_write_of_bytes_and_of_a_writer_leaves_only_the_file(tmp_path: Path) -> None:
    atomic_write(tmp_path / "a" / "x.bin", b"payload")
    atomic_write(tmp_path / "a" / "y.txt", lambda tmp: tmp.write_text("written by a callable"))
    atomic_write(tmp_path / "a" / "x.bin", b"replaced")  # over an existing file
    assert _names(tmp_path) == ["a/x.bin", "a/y.txt"]
    assert (tmp_path / "a" / "x.bin").read_bytes() == b"replaced"
    assert (tmp_path / "a" / "y.txt").read_text() == "written by a callable"


@pytest.mark.parametrize(
    "error", [ValueError("bad data"), KeyboardInterrupt()], ids=["ValueError", "KeyboardInterrupt"]
)
def test_a_failing_writer_leaves_nothing_at_the_path(tmp_path: Path, error: BaseException) -> None:
    # old code: RepresentationCache.write cleaned up, but the pipeline's _atomic_json left its temp file
    def half_write(tmp: Path) -> None:
        tmp.write_bytes(b"half an entry")
        raise error

    with pytest.raises(type(error)):
        atomic_write(tmp_path / "new.json", half_write)
    (tmp_path / "old.json").write_bytes(b"earlier entry")
    with pytest.raises(type(error)):
        atomic_write(tmp_path / "old.json", half_write)
    assert _names(tmp_path) == ["old.json"]  # no temp file, no new entry
    assert (tmp_path / "old.json").read_bytes() == b"earlier entry"  # the earlier one untouched


def test_an_os_error_while_writing_is_a_store_error_and_leaves_nothing(tmp_path: Path) -> None:
    def no_space(tmp: Path) -> None:
        tmp.write_bytes(b"x")
        raise OSError(28, "No space left on device")

    with pytest.raises(StoreError, match="No space left on device"):
        atomic_write(tmp_path / "x.json", no_space)
    assert _names(tmp_path) == []


def test_atomic_write_under_a_file_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match=re.escape(str(blocker))):
        atomic_write(blocker / "sub" / "x.json", b"{}")


def test_entries_are_readable_as_any_file_the_user_creates(tmp_path: Path) -> None:
    # old code: mkstemp's 0600 stayed on every entry, so a cache shared by a group was unreadable to it
    mask = os.umask(0o022)
    os.umask(mask)
    store = Store(tmp_path)
    path = store.put_json("facts", KEY, {"num_layers": 2})
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask


# ----------------------------------------------------------------------------- JSON entries

PAYLOAD = [
    {
        "pair": "gpt2:eng_Latn|gpt2:deu_Latn",
        "layer_a": 2,
        "matched": 0.8125,
        "shuffled": float("nan"),
        "grid": False,
        "note": "",
    },
    {"pair": "gpt2:eng_Latn|gpt2:deu_Latn", "layer_a": 1, "matched": np.float64(0.25), "n": np.int64(32)},
]


def _same(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True, default=lambda o: o.item()) == json.dumps(
        b, sort_keys=True, default=lambda o: o.item()
    )


def test_json_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = store.put_json("comparisons", KEY, PAYLOAD)
    assert path == tmp_path / "comparisons" / f"{KEY}.json"
    again = Store(tmp_path).get_json("comparisons", KEY)
    assert _same(again, PAYLOAD)  # NaN, ints, bools and numpy scalars come back as written
    assert np.isnan(again[0]["shuffled"]) and isinstance(again[1]["n"], int)
    assert store.get_json("comparisons", OTHER) is None
    assert store.stats() == {"comparisons": {"hits": 0, "misses": 1, "rebuilt": 0}}


def test_an_edited_json_payload_is_refused_and_counted(tmp_path: Path) -> None:
    # old code: _read_rows served any parseable JSON, so the edited value reached the results
    store = Store(tmp_path)
    path = store.put_json("comparisons", KEY, PAYLOAD)
    text = path.read_text()
    assert text.count("0.8125") == 1
    path.write_text(text.replace("0.8125", "0.9125"))  # one number, as a user with an editor would
    fresh = Store(tmp_path)
    with _warns_about(path, "checksum"):
        assert fresh.get_json("comparisons", KEY) is None
    assert fresh.stats() == {"comparisons": {"hits": 0, "misses": 1, "rebuilt": 1}}


def test_reformatting_without_changing_a_value_is_not_damage(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = store.put_json("facts", KEY, {"num_layers": 2, "hidden_size": 32})
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4))  # an editor re-indented it
    assert Store(tmp_path).get_json("facts", KEY) == {"num_layers": 2, "hidden_size": 32}


def test_a_json_entry_of_another_key_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    src = store.put_json("comparisons", KEY, PAYLOAD)
    dst = store.json_path("comparisons", OTHER)
    dst.write_bytes(src.read_bytes())  # a valid entry, under another entry's name
    with _warns_about(dst):
        assert store.get_json("comparisons", OTHER) is None
    assert store.stats()["comparisons"] == {"hits": 0, "misses": 1, "rebuilt": 1}


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t[: len(t) // 2],  # truncated
        lambda t: "[1, 2, 3]",  # valid JSON, not an envelope
        lambda t: json.dumps(json.loads(t)["payload"]),  # the bare payload, envelope stripped
        lambda t: "\x00\x01 binary",
    ],
    ids=["truncated", "not-an-envelope", "bare-payload", "binary"],
)
def test_unreadable_json_entries_are_refused_and_counted(tmp_path: Path, damage) -> None:  # noqa: ANN001
    store = Store(tmp_path)
    path = store.put_json("comparisons", KEY, PAYLOAD)
    path.write_text(damage(path.read_text()))
    with _warns_about(path):
        assert store.get_json("comparisons", KEY) is None
    assert store.stats()["comparisons"] == {"hits": 0, "misses": 1, "rebuilt": 1}


# ----------------------------------------------------------------------------- array entries

INPUTS = {"model_fingerprint": "f" * 64, "lang": "eng_Latn", "pooling": "mean", "n": "5"}


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "representations": rng.standard_normal((3, 5, 4)).astype(np.float32),
        "n_tokens": np.array([3, 4, 5, 6, 7], dtype=np.int64),
    }


def _written(tmp_path: Path) -> tuple[Store, Path]:
    store = Store(tmp_path)
    path = store.arrays_path("representations", KEY, folder="gpt2", stem="eng_Latn.mean")
    store.put_arrays(path, KEY, _arrays(), {**INPUTS, "truncated": json.dumps(["s3"]), "effective_max_length": "64"})
    return store, path


def test_arrays_round_trip_with_metadata(tmp_path: Path) -> None:
    _, path = _written(tmp_path)
    assert path == tmp_path / "representations" / "gpt2" / f"eng_Latn.mean.{KEY[:32]}.safetensors"
    store = Store(tmp_path)
    got = store.get_arrays("representations", path, KEY, INPUTS)
    assert got is not None
    arrays, meta = got
    assert set(arrays) == {"representations", "n_tokens"}
    for name, want in _arrays().items():
        assert arrays[name].dtype == want.dtype
        np.testing.assert_array_equal(arrays[name], want)
    assert {k: meta[k] for k in INPUTS} == INPUTS
    assert json.loads(meta["truncated"]) == ["s3"] and meta["effective_max_length"] == "64"
    assert store.stats() == {"representations": {"hits": 1, "misses": 0, "rebuilt": 0}}
    absent = store.arrays_path("representations", OTHER, folder="gpt2", stem="eng_Latn.mean")
    assert store.get_arrays("representations", absent, OTHER, INPUTS) is None
    assert store.stats()["representations"] == {"hits": 1, "misses": 1, "rebuilt": 0}


def _flip_tensor_byte(path: Path, store: Store) -> None:
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # inside the tensor data, header intact
    path.write_bytes(bytes(data))


def _truncate(path: Path, store: Store) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path, store: Store) -> None:
    path.write_bytes(b"not a safetensors file at all" * 10)


def _other_inputs(path: Path, store: Store) -> None:
    # a valid entry, written for another language, under this entry's name and key
    store.put_arrays(path, KEY, _arrays(), {**INPUTS, "lang": "deu_Latn"})


def _other_key(path: Path, store: Store) -> None:
    store.put_arrays(path, OTHER, _arrays(), INPUTS)


def _edit_header_value(path: Path, store: Store) -> None:
    # old code: only the key's inputs were checked, so an edited truncation record was served
    data = path.read_bytes()
    assert data.count(b'"effective_max_length":"64"') == 1
    path.write_bytes(data.replace(b'"effective_max_length":"64"', b'"effective_max_length":"65"'))


def _reshape(path: Path, store: Store) -> None:
    # old store (f1731ae): the checksum covered the bytes only, so a reshaped tensor passed
    data = path.read_bytes()
    assert data.count(b"[3,5,4]") == 1
    path.write_bytes(data.replace(b"[3,5,4]", b"[5,3,4]"))


@pytest.mark.parametrize(
    "damage, why",
    [
        (_flip_tensor_byte, "checksum"),
        (_truncate, "unreadable"),
        (_garbage, "unreadable"),
        (_other_inputs, "lang='deu_Latn'"),
        (_other_key, "another key"),
        (_edit_header_value, "header checksum"),
        (_reshape, ""),
    ],
    ids=["flipped-tensor-byte", "truncated", "garbage", "other-inputs", "other-key", "edited-header", "reshaped"],
)
def test_damaged_or_mismatching_arrays_are_refused_and_counted(tmp_path: Path, damage, why: str) -> None:  # noqa: ANN001
    store, path = _written(tmp_path)
    damage(path, store)
    fresh = Store(tmp_path)
    with _warns_about(path, re.escape(why)):
        assert fresh.get_arrays("representations", path, KEY, INPUTS) is None
    assert fresh.stats() == {"representations": {"hits": 0, "misses": 1, "rebuilt": 1}}


def test_metadata_given_to_put_cannot_forge_the_verification_fields(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = store.arrays_path("representations", KEY, stem="x")
    store.put_arrays(path, KEY, _arrays(), {**INPUTS, "key": OTHER, "checksums": "{}"})
    assert store.get_arrays("representations", path, KEY, INPUTS) is not None


# ----------------------------------------------------------------------------- the root


def test_check_writable_creates_the_root(tmp_path: Path) -> None:
    store = Store(tmp_path / "new" / "cache")
    store.check_writable()
    assert store.root.is_dir() and _names(tmp_path) == []  # the probe is gone


def test_a_root_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.write_text("a file where the cache should be")
    with pytest.raises(StoreError, match="is a file"):
        Store(root).check_writable()
    assert root.read_text() == "a file where the cache should be"


def test_a_root_that_cannot_be_created_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="not writable"):
        Store(blocker / "cache").check_writable()


def test_a_read_only_root_is_a_store_error(tmp_path: Path) -> None:
    root = tmp_path / "ro"
    root.mkdir()
    root.chmod(0o555)
    try:
        if os.access(root, os.W_OK):
            pytest.skip("this user may write into read-only folders (root); the file cases above cover it")
        with pytest.raises(StoreError, match="not writable"):
            Store(root).check_writable()
    finally:
        root.chmod(0o755)


# ----------------------------------------------------------------------------- leftovers of killed writers


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process now
    return proc.pid


def test_temp_files_of_dead_writers_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    # old code: a run killed mid-write left its .tmp-* file in the cache forever
    host = re.sub(r"[^A-Za-z0-9]+", "", socket.gethostname())[:32] or "host"
    dead, alive = _dead_pid(), os.getpid()
    store = Store(tmp_path)
    leftovers = [
        tmp_path / "representations" / "gpt2" / f".tmp-{host}-{dead}-k2j3.part",
        tmp_path / "comparisons" / f".tmp-{host}-{dead}-x9.part",
        tmp_path / "facts" / ".tmp-0ldn4me_.part",  # any writer (mkstemp's name, before host and pid), a day old
    ]
    kept = [
        tmp_path / "comparisons" / f".tmp-{host}-{alive}-a1.part",  # a write in progress
        tmp_path / "comparisons" / ".tmp-otherhost-1-a1.part",  # another machine's, recent
        tmp_path / "comparisons" / "notes.txt",  # not ours
        tmp_path / "models" / f".tmp-{host}-{dead}-a1.part",  # models/ has its own writer
    ]
    for p in leftovers + kept:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"partial")
    old = time.time() - getattr(store_module, "STALE_TMP_SECONDS", 86400) - 60
    os.utime(leftovers[2], (old, old))
    store.check_writable(sweep=registry.entry_namespaces())  # the pipeline's namespaces, as pre-flight gives
    assert [p for p in leftovers if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


def test_json_safe_rows_read_back_equal(tmp_path: Path) -> None:
    """json_safe: numpy scalars become Python numbers and NaN None, so a stored row reads back equal."""
    from interlingua.core.store import json_safe

    row = {
        "a": np.float32(0.5),
        "b": np.int64(3),
        "c": np.bool_(True),
        "d": float("nan"),
        "e": float("inf"),
        "f": [np.float64(1.5), float("nan"), (np.int32(2), "x")],
        "g": {1: np.float16(-0.0)},
        "h": "text",
    }
    kept = json_safe(row, infinite=True)
    assert kept == {
        "a": 0.5,
        "b": 3,
        "c": True,
        "d": None,
        "e": float("inf"),
        "f": [1.5, None, [2, "x"]],
        "g": {"1": -0.0},
        "h": "text",
    }
    assert [type(kept[k]) for k in "abc"] == [float, int, bool]
    assert json_safe(row)["e"] is None  # strict JSON (build records): no infinity either
    store = Store(tmp_path)
    store.put_json("comparisons", KEY, [kept])
    assert store.get_json("comparisons", KEY) == [kept]
    store.put_json("comparisons", OTHER, [row])
    assert store.get_json("comparisons", OTHER) != [row]  # a raw NaN never equals itself: why rows are made safe
