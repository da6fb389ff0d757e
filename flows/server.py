"""One local Prefect API server for a whole pipeline run, bound to 127.0.0.1.

Without ``PREFECT_API_URL`` every Prefect process boots its own temporary server (15–30 s on two
cores). :func:`local_prefect_server` starts one ``prefect server start`` on a free loopback port,
waits until ``/api/health`` answers, exports ``PREFECT_API_URL`` for child processes (the DVC
stages) and stops the server afterwards. An already-set ``PREFECT_API_URL`` is used as is.
:func:`booting_prefect_server` yields while the server is still booting, for callers with work
to do that needs no API (``veilbench run`` plans the DVC stages meanwhile).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class BootingServer:
    """A Prefect API server that may still be starting: :meth:`wait_until_ready` blocks until
    ``/api/health`` answers and returns the API URL (at once for a server configured elsewhere)."""

    def __init__(self, url: str, proc: subprocess.Popen | None, log_name: str, timeout: float):
        self.url, self._proc, self._log_name, self._timeout = url, proc, log_name, timeout
        self._ready = proc is None

    def wait_until_ready(self) -> str:
        deadline = time.monotonic() + self._timeout
        while not self._ready:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the Prefect server exited early (code {self._proc.returncode}); see {self._log_name}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    self._ready = resp.status == 200
            except OSError:
                pass
            if not self._ready:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Prefect server did not answer within {self._timeout:.0f} s; see {self._log_name}")
                time.sleep(0.25)
        return self.url


@contextmanager
def booting_prefect_server(root: Path, host: str = "127.0.0.1", timeout: float = 180.0) -> Iterator[BootingServer]:
    """Start ``prefect server start`` on a free loopback port (unless ``PREFECT_API_URL`` is set)
    and yield at once, so the caller can work while it boots (≈ 14 s on two cores, half of it the
    database migrations of a new ``PREFECT_HOME``). ``PREFECT_API_URL`` is exported from the start,
    so Prefect's settings read at import time see it; the server is stopped on exit."""
    if os.environ.get("PREFECT_API_URL"):
        yield BootingServer(os.environ["PREFECT_API_URL"], None, "", timeout)
        return
    port = _free_port(host)
    env = dict(os.environ)
    env.setdefault("PREFECT_HOME", str(root / ".prefect"))
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    log = open(Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True) or Path(env["PREFECT_HOME"]) / "server.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://{host}:{port}/api"
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    try:
        yield BootingServer(url, proc, log.name, timeout)
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextmanager
def local_prefect_server(
    root: Path, host: str = "127.0.0.1", timeout: float = 180.0, warmup: Callable[[], object] | None = None
) -> Iterator[str]:
    """Yield the API URL of a running Prefect server (started here unless one is configured).

    ``warmup`` (e.g. importing the pipeline's modules) runs while the server boots."""
    with booting_prefect_server(root, host, timeout) as server:
        if warmup is not None:
            warmup()
        yield server.wait_until_ready()
