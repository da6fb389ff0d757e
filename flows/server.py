"""One local Prefect API server for a whole pipeline run, bound to 127.0.0.1.

Without ``PREFECT_API_URL`` every Prefect process boots its own temporary server (15–30 s on two
cores). :func:`local_prefect_server` starts one ``prefect server start`` on a free loopback port,
waits until ``/api/health`` answers, exports ``PREFECT_API_URL`` for child processes (the DVC
stages) and stops the server afterwards. An already-set ``PREFECT_API_URL`` is used as is.
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


@contextmanager
def local_prefect_server(
    root: Path, host: str = "127.0.0.1", timeout: float = 180.0, warmup: Callable[[], object] | None = None
) -> Iterator[str]:
    """Yield the API URL of a running Prefect server (started here unless one is configured).

    ``warmup`` (e.g. importing the pipeline's modules) runs while the server boots, with
    ``PREFECT_API_URL`` already exported, so Prefect's settings read at import time see it."""
    if os.environ.get("PREFECT_API_URL"):
        if warmup is not None:
            warmup()
        yield os.environ["PREFECT_API_URL"]
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
        if warmup is not None:
            warmup()
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Prefect server exited early (code {proc.returncode}); see {log.name}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Prefect server did not answer within {timeout:.0f} s; see {log.name}")
            time.sleep(0.5)
        yield url
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
