"""An unreachable Ray address is one clear error within a stated timeout, never a silent wait.

Issue 40: ``interlingua run CONFIG --executor ray --address HOST:PORT`` with nothing listening waited
with no message (still waiting at 300 s): ``ray.init`` retries the cluster's GCS without bound. The
executor now opens the address first and gives up after ``connect_timeout`` seconds (default 30,
``$INTERLINGUA_RAY_CONNECT_TIMEOUT``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
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


def test_a_listening_address_passes_the_probe():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        probe_address(f"127.0.0.1:{s.getsockname()[1]}", 5)  # no error


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
