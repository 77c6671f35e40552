"""An unreachable Ray address is one clear error within a stated timeout, never a silent wait.

Issue 40: ``interlingua run CONFIG --executor ray --address HOST:PORT`` with nothing listening waited
with no message (still waiting at 300 s): ``ray.init`` retries the cluster's GCS without bound. The
executor now opens the address first and gives up after ``connect_timeout`` seconds (default 30,
``$INTERLINGUA_RAY_CONNECT_TIMEOUT``); an address that answers but is not a Ray head (no HTTP/2 SETTINGS
frame in reply to the preface, as every gRPC server sends) fails within the same limit, and so does a
gRPC server that is not Ray's GCS (Ray's native GCS client asks it for the cluster id, ``GetClusterId``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fixtures.runs import spec_for
from fixtures.tiny_models import parallel_sentences
from interlingua.pipeline.executors.ray import (
    CONNECT_TIMEOUT,
    RayExecutorError,
    _host_port,
    connect_timeout,
    probe_address,
)

SRC = Path(__file__).resolve().parents[1] / "src"


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ray
@pytest.mark.pipeline
def test_run_with_an_address_nothing_listens_on_fails_with_one_line(tmp_path, tiny_gpt2_path):
    pytest.importorskip("ray")
    sents = parallel_sentences(16, seed=2)
    corpus = tmp_path / "c.tsv"
    pd.DataFrame({"id": range(16), "eng_Latn": sents["eng"], "deu_Latn": sents["deu"]}).to_csv(
        corpus, sep="\t", index=False
    )
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(spec_for(tmp_path, corpus, tiny_gpt2_path)))
    port = closed_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "INTERLINGUA_RAY_CONNECT_TIMEOUT")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    # the subprocess limit only keeps a regression from hanging the suite; the error comes at once here
    done = subprocess.run(
        [sys.executable, "-m", "interlingua", "run", str(cfg), "--executor", "ray", "--address", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=CONNECT_TIMEOUT + 240,
        env=env,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.startswith("interlingua: error:")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port} within 30 s" in lines[0]
    assert not (tmp_path / "out").exists()


def test_a_silent_address_fails_after_the_timeout(monkeypatch):
    seen = []

    def silent(where, timeout):
        seen.append((where, timeout))
        raise TimeoutError("timed out")

    monkeypatch.setattr("socket.create_connection", silent)
    with pytest.raises(RayExecutorError, match=r"ray://10\.0\.0\.9:10001 within 2\.5 s \(no answer\)"):
        probe_address("ray://10.0.0.9:10001", 2.5)
    assert seen == [(("10.0.0.9", 10001), 2.5)]


def test_ray_address_from_the_environment_is_probed_too(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_port()}")
    with pytest.raises(RayExecutorError, match="cannot reach a Ray cluster"):
        probe_address(None, 5)


@pytest.mark.ray
def test_a_real_ray_head_passes_the_probe():
    """A local Ray instance's GCS answers the HTTP/2 preface (it is a gRPC server)."""
    ray = pytest.importorskip("ray")
    import logging

    if ray.is_initialized():
        pytest.skip("Ray is already initialized in this process")
    ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
    try:
        probe_address(ray.get_runtime_context().gcs_address, 10)  # no error
    finally:
        ray.shutdown()


def test_an_http2_server_passes_the_ray_client_probe():
    """What the probe asks of a ``ray://`` address (Ray Client's server, not the GCS): an HTTP/2 SETTINGS
    frame (type 4, stream 0) after the preface."""
    srv, held = _serving(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64")
    try:
        probe_address(f"ray://127.0.0.1:{srv.getsockname()[1]}", 5)  # no error
    finally:
        srv.close()
        for c in held:
            c.close()


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame (RFC 9113, section 4.1): 24-bit length, type, flags, 31-bit stream id."""
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _header(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing, new name, no Huffman coding (RFC 7541, 6.2.2)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def _grpc_server(answer: bool):
    """A tiny gRPC server that is not Ray: it speaks HTTP/2 (SETTINGS, their ACKs, PING replies) and answers
    every call with gRPC status 12, UNIMPLEMENTED ("unknown service"), as a gRPC server without the
    called service does (``answer=False``: it takes the call and never replies)."""
    trailers = (
        b"\x88"  # :status 200 (static table index 8)
        + _header("content-type", "application/grpc")
        + _header("grpc-status", "12")
        + _header("grpc-message", "unknown service")
    )
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def talk(conn: socket.socket) -> None:
        buf = b""

        def take(k: int) -> bytes:
            nonlocal buf
            while len(buf) < k:
                got = conn.recv(65536)
                if not got:
                    raise OSError("closed")
                buf += got
            out, buf = buf[:k], buf[k:]
            return out

        try:
            take(24)  # the client's preface
            conn.sendall(_frame(4, 0, 0))
            while True:
                head = take(9)
                kind, flags = head[3], head[4]
                stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                payload = take(int.from_bytes(head[:3], "big"))
                if kind == 4 and not flags & 1:  # SETTINGS: acknowledge
                    conn.sendall(_frame(4, 1, 0))
                elif kind == 6 and not flags & 1:  # PING: echo with ACK
                    conn.sendall(_frame(6, 1, 0, payload))
                elif kind == 1 and answer:  # HEADERS of a call: trailers only, END_STREAM | END_HEADERS
                    conn.sendall(_frame(1, 0x5, stream, trailers))
        except OSError:
            pass

    def loop() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=talk, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return srv, held


@pytest.mark.parametrize(("answer", "said"), [(True, "unknown service"), (False, "")])
def test_a_grpc_server_that_is_not_ray_fails_within_the_timeout(answer, said):
    """Issue 40: a gRPC server that is not Ray answered the HTTP/2 preface like a Ray head and passed the probe;
    now Ray's GCS client asks it for the cluster id, and one error says what answered, within the limit."""
    pytest.importorskip("ray._raylet")
    srv, held = _grpc_server(answer)
    port = srv.getsockname()[1]
    t0 = time.monotonic()
    try:
        with pytest.raises(
            RayExecutorError, match=f"127.0.0.1:{port} answers gRPC but is not a Ray cluster's GCS"
        ) as err:
            probe_address(f"127.0.0.1:{port}", 2.0)
    finally:
        srv.close()
        for c in held:
            c.close()
    assert said in str(err.value)
    assert time.monotonic() - t0 < 2.0 + 5  # the limit plus slack for a loaded machine; never unbounded


def _serving(reply: bytes | None):
    """A local TCP server that accepts and then sends ``reply`` (None: says nothing, keeps the connection)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held = []

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if reply is not None:
                conn.recv(1024)
                conn.sendall(reply)
                conn.close()

    threading.Thread(target=loop, daemon=True).start()
    return srv, held


@pytest.mark.parametrize(
    "reply, said",
    [
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "it replied b'HTTP/1.1 400 Bad Request"),
        (b"-ERR unknown command\r\n", "it replied b'-ERR unknown command"),  # e.g. a Redis port
        pytest.param(None, "said nothing within 1.5 s", marks=pytest.mark.slow),  # waits out the timeout
    ],
)
def test_a_port_that_answers_but_is_not_ray_fails_within_the_timeout(reply, said):
    """Issue 40: a port that accepts but is not Ray (a web server, a silent listener) made ``ray.init`` retry
    the GCS without bound; now one error names the address and what came back, within the timeout."""
    srv, held = _serving(reply)
    port = srv.getsockname()[1]
    t0 = time.monotonic()
    try:
        with pytest.raises(RayExecutorError, match=f"127.0.0.1:{port} answers but is not a Ray cluster") as err:
            probe_address(f"127.0.0.1:{port}", 1.5)
    finally:
        srv.close()
        for c in held:
            c.close()
    assert said in str(err.value)
    assert time.monotonic() - t0 < 1.5 + 5  # the limit plus slack for a loaded machine; never unbounded


def test_the_timeout_is_configurable_and_checked(monkeypatch):
    monkeypatch.delenv("INTERLINGUA_RAY_CONNECT_TIMEOUT", raising=False)
    assert connect_timeout() == CONNECT_TIMEOUT == 30.0
    assert connect_timeout(4) == 4.0
    monkeypatch.setenv("INTERLINGUA_RAY_CONNECT_TIMEOUT", "7.5")
    assert connect_timeout() == 7.5
    for bad in ("soon", "0", "-3", "inf", "nan"):
        monkeypatch.setenv("INTERLINGUA_RAY_CONNECT_TIMEOUT", bad)
        with pytest.raises(RayExecutorError):
            connect_timeout()


def test_address_forms():
    assert _host_port("127.0.0.1:6379") == ("127.0.0.1", 6379)
    assert _host_port("ray://head:10001") == ("head", 10001)
    assert _host_port("[::1]:6379") == ("::1", 6379)
    assert _host_port("auto") is None and _host_port("head:99999") is None and _host_port("head:") is None
