"""One local Prefect API server for a whole pipeline run, bound to 127.0.0.1, living only as long as the run.

Without ``PREFECT_API_URL`` every Prefect process boots its own temporary server (tens of seconds on two
cores). :func:`local_prefect_server` starts one ``prefect server start`` on a free loopback port,
waits until ``/api/health`` answers, exports ``PREFECT_API_URL`` for child processes (the DVC
stages) and stops the server afterwards. :func:`booting_prefect_server` yields while the server is still
booting, for callers with work to do that needs no API (``veilbench run`` plans the DVC stages meanwhile).

Reuse. No server is started when one is already there (:func:`configured_server`): the
``PREFECT_API_URL`` of the environment, else that of the active profile of the user's Prefect
(``prefect config set PREFECT_API_URL=…``, in ``$PREFECT_HOME/profiles.toml``) when it answers,
else a server answering at Prefect's own default address (:data:`DEFAULT_API_URL`, what a bare
``prefect server start`` serves). The run then uses it (and exports its URL for child processes)
and leaves it running.

Lifetime. The server runs under a small *watchdog* process (:data:`_WATCHDOG`) in a session and
process group of its own, so a Ctrl-C in the terminal reaches only the run, which then stops the
server itself. The watchdog reads a pipe from the run; the pipe closes when the run ends by any
means (a normal exit, an exception, SIGTERM, or a SIGKILL that runs no clean-up at all), and the
watchdog then terminates the server's whole process group (``prefect server start`` starts
uvicorn as a further child) and, after :data:`STOP_GRACE_S`, kills what is left. Conversely, a
server that dies during the run interrupts the run at once (:class:`PrefectServerDied`) instead
of leaving Prefect's client retrying for minutes.

Home. ``PREFECT_HOME`` (the server's database, its log and Prefect's result storage, where a
failed task's exception is written) is ``<root>/.prefect`` for the server *and* this process,
unless already set; it is exported before Prefect is imported, since Prefect reads its settings
at import.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

#: Seconds the watchdog waits after SIGTERM before it kills the server's process group.
STOP_GRACE_S = 2.0

#: The watchdog: runs ``argv[1:]`` in its own process group and stops that group when its stdin
#: (a pipe from the run) reaches end of file, or when it is asked to (SIGTERM).
_WATCHDOG = r"""
import os, signal, subprocess, sys, threading, time
grace = float(os.environ.pop("VEILBENCH_STOP_GRACE_S", "5"))
child = None
stopping = threading.Event()
def stop(*_):
    if stopping.is_set():
        return
    stopping.set()  # from here on, the SIGTERM this sends to its own group is ignored (see below)
    try:
        os.killpg(os.getpgrp(), signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while child is not None and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(os.getpgrp(), signal.SIGKILL)
def watch():
    try:
        sys.stdin.buffer.read()
    finally:
        stop()
signal.signal(signal.SIGTERM, lambda *_: None if stopping.is_set() else threading.Thread(target=stop).start())
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
threading.Thread(target=watch, daemon=True).start()
code = child.wait()
if stopping.is_set():
    time.sleep(grace + 5)  # stop() ends this whole group, this process included
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.killpg(os.getpgrp(), signal.SIGTERM)  # the server exited by itself: take its helpers with it
sys.exit(code or 1)
"""


#: The API of a server started by a bare ``prefect server start`` (Prefect's default host and port).
DEFAULT_API_URL = "http://127.0.0.1:4200/api"


def _healthy(url: str, timeout: float = 0.5) -> bool:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def _profile_api_url() -> str | None:
    """``PREFECT_API_URL`` of the active profile of the user's Prefect (``$PREFECT_PROFILES_PATH``,
    else ``$PREFECT_HOME/profiles.toml``, else ``~/.prefect/profiles.toml``; profile
    ``$PREFECT_PROFILE``, else the file's ``active``), read without importing Prefect."""
    import tomllib

    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or data.get("active")
    profile = (data.get("profiles") or {}).get(active) or {}
    url = profile.get("PREFECT_API_URL") if isinstance(profile, dict) else None
    return url if isinstance(url, str) and url else None


def configured_server() -> str | None:
    """The API URL of a Prefect server this run should use instead of starting one (module
    docstring): the environment's, else the profile's or :data:`DEFAULT_API_URL` when it answers."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    for url in (_profile_api_url(), DEFAULT_API_URL):
        if url and _healthy(url, timeout=0.3):
            return url
    return None


class PrefectServerDied(RuntimeError):
    """The run's Prefect server exited while the run still needed it."""


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
        self.died = False

    def wait_until_ready(self) -> str:
        deadline = time.monotonic() + self._timeout
        while not self._ready:
            if self._proc.poll() is not None:
                raise PrefectServerDied(f"the Prefect server exited early (code {self._proc.returncode}); "
                                        f"see {self._log_name}")
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


def _interrupt_on_death(server: BootingServer, proc: subprocess.Popen, stopping: threading.Event) -> None:
    """Wait for the watchdog; if it exits before the run stops it, interrupt the main thread."""
    proc.wait()
    if not stopping.is_set():
        server.died = True
        os.kill(os.getpid(), signal.SIGINT)  # a real signal: it also wakes a main thread blocked on a lock


@contextmanager
def booting_prefect_server(root: Path, host: str = "127.0.0.1", timeout: float = 180.0) -> Iterator[BootingServer]:
    """Start ``prefect server start`` on a free loopback port (unless a server is configured or
    running, :func:`configured_server`) and yield at once, so the caller can work while it boots (much of it the
    database migrations of a new ``PREFECT_HOME``). ``PREFECT_API_URL`` and ``PREFECT_HOME`` are
    exported from the start, so Prefect's settings read at import time see them; the server is
    stopped on exit, and stops by itself when this process dies (see the module docstring).
    A server that dies while the caller works raises :class:`PrefectServerDied` here."""
    reuse = configured_server()
    if reuse:
        saved_url = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = reuse
        try:
            yield BootingServer(reuse, None, "", timeout)
        finally:
            if saved_url is None:
                os.environ.pop("PREFECT_API_URL", None)
        return
    port = _free_port(host)
    saved = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    os.environ.setdefault("PREFECT_HOME", str(Path(root) / ".prefect"))
    home = Path(os.environ["PREFECT_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    env["VEILBENCH_STOP_GRACE_S"] = str(STOP_GRACE_S)
    log = open(home / "server.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, sys.executable, "-m", "prefect", "server", "start", "--host", host,
         "--port", str(port)],
        env=env, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://{host}:{port}/api"
    os.environ["PREFECT_API_URL"] = url
    server = BootingServer(url, proc, log.name, timeout)
    stopping = threading.Event()
    monitor = threading.Thread(target=_interrupt_on_death, args=(server, proc, stopping), daemon=True)
    monitor.start()
    try:
        yield server
    except KeyboardInterrupt:
        if server.died:
            raise PrefectServerDied(f"the Prefect server stopped during the run (exit code {proc.returncode}); "
                                    f"see {log.name}") from None
        raise
    finally:
        stopping.set()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        proc.stdin.close()  # the watchdog stops the server's process group
        try:
            proc.wait(timeout=STOP_GRACE_S + 10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
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
