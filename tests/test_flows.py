"""Prefect flows under one session-scoped test server (the scheduled deployments: tests/test_deploy.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest




@pytest.mark.slow
def test_benchmark_flow_runs_every_stage(prefect_server: str, workdir: Path, mlflow_store: Path) -> None:
    from flows.benchmark import benchmark

    out = benchmark(params_path=str(workdir / "params.yaml"), sweeps=["ss-identity"])
    assert Path(out) == workdir / "reports/index.md"
    metrics = json.loads((workdir / "reports/sweeps/ss-identity/cells/default.json").read_text())
    assert set(metrics["per_seed"]) == {"0"}
    assert not (workdir / "reports/sweeps/ss").exists(), "only the named sweep runs"


@pytest.mark.slow
def test_stage_flow_cli_rejects_bad_params_before_work(prefect_server: str, workdir: Path) -> None:
    from flows.release import release_flow
    from flows._stage import main

    (workdir / "params.yaml").write_text("seed: -1\ndatasets: {}\nembeddings: {}\ncells: {}\n")
    assert main("release", release_flow, ["--params", str(workdir / "params.yaml")]) == 2
    assert not (workdir / "data").exists()


def test_local_prefect_server_binds_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server the pipeline starts listens on 127.0.0.1 only (checked on the command it runs)."""
    import subprocess

    import flows.server as server

    seen: dict = {}

    import threading

    class FakeServer:  # the server's watchdog: it runs until its stdin pipe is closed
        returncode = None
        pid = 0

        def __init__(self, cmd, **kwargs):
            seen["cmd"] = cmd
            closed = threading.Event()
            self.stdin = type("Pipe", (), {"close": lambda _: (seen.update(terminated=True), closed.set())})()
            self._closed = closed

        def poll(self):
            return 0 if self._closed.is_set() else None

        def wait(self, timeout=None):
            self._closed.wait(timeout)
            return 0

    class Healthy:
        status = 200

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setattr(server, "configured_server", lambda: None)  # every URL answers here: none is reused
    monkeypatch.setattr(subprocess, "Popen", FakeServer)
    monkeypatch.setattr(server.urllib.request, "urlopen", lambda url, timeout: Healthy())
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    with server.local_prefect_server(tmp_path) as url:
        assert url.startswith("http://127.0.0.1:")
    cmd = seen["cmd"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and seen["terminated"]


def test_a_booting_server_is_waited_for_and_an_early_exit_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import flows.server as server

    answers = iter([OSError("refused"), OSError("refused"), 200])

    class Health:
        def __init__(self, status):
            self.status = status

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def urlopen(url, timeout):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return Health(answer)

    class Running:
        returncode = None

        def poll(self):
            return None

    monkeypatch.setattr(server.urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(server.time, "sleep", lambda s: None)
    booting = server.BootingServer("http://127.0.0.1:1/api", Running(), "log", timeout=60)
    assert booting.wait_until_ready() == "http://127.0.0.1:1/api"
    assert booting.wait_until_ready() == "http://127.0.0.1:1/api", "ready stays ready (no second health check)"

    class Exited:
        returncode = 3

        def poll(self):
            return 3

    with pytest.raises(RuntimeError, match="exited early"):
        server.BootingServer("http://127.0.0.1:1/api", Exited(), "server.log", timeout=60).wait_until_ready()
