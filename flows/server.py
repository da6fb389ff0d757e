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

Quiet end. Before the server stops, Prefect's client workers of this process (the log and event
batches it sends to the API in background threads) are drained, so none of them tries a stopped
server afterwards ("Error logging to API", "EventsWorker failed", seconds after the run's last line).

Shared server. A stage process that DVC runs on its own (``dvc repro``, ``dvc exp run`` including
queued experiments, whose stages run one process each) and that finds no ``PREFECT_API_URL`` uses the
project's one shared server (:func:`shared_prefect_server`), instead of Prefect's temporary server
per process, whose database would be ``~/.prefect/prefect.db`` (outside the project) and whose
start-ups time out when several run at once. It lives in the project's ``.prefect/`` (the parent
workspace's, for an experiment's copy), is started by the first process that needs it and stops
:data:`SHARED_IDLE_S` seconds after the last process using it has exited.
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
        if url and _healthy(url, timeout=1.0):  # a loaded machine may take a moment to answer
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
        self.url, self._proc, self.log_name, self._timeout = url, proc, log_name, timeout
        self._ready = proc is None
        self.died = False

    def death(self) -> PrefectServerDied | None:
        """The error of a server that died during the run (None while it lives): an
        :attr:`flows.interrupt.Interrupt.causes` entry, since its monitor signals the run as Ctrl-C would."""
        if not self.died:
            return None
        code = None if self._proc is None else self._proc.returncode
        return PrefectServerDied(f"the run's Prefect server ({self.url}) stopped during the run (exit code {code}); "
                                 f"see {self.log_name}")

    def wait_until_ready(self) -> str:
        deadline = time.monotonic() + self._timeout
        while not self._ready:
            if self._proc.poll() is not None:
                raise PrefectServerDied(f"the Prefect server exited early (code {self._proc.returncode}); "
                                        f"see {self.log_name}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    self._ready = resp.status == 200
            except OSError:
                pass
            if not self._ready:
                if time.monotonic() > deadline:
                    raise PrefectServerDied(f"the Prefect server did not answer within {self._timeout:.0f} s; "
                                            f"see {self.log_name}")
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
            raise server.death() from None
        raise
    finally:
        if not server.died:
            drain_prefect_clients()  # while the server still answers
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


def drain_prefect_clients(timeout: float = 10.0) -> None:
    """Send what Prefect's background client workers of this process still hold (logs, events) and
    stop them (nothing when Prefect was never imported)."""
    if "prefect" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        try:
            service.drain_all(timeout=timeout)
        except Exception:  # noqa: BLE001 - best effort: the run's own result is decided already
            pass


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


# ------------------------------------------------------------------------------------------------
# the project's shared server, for stage processes run by DVC without PREFECT_API_URL
# ------------------------------------------------------------------------------------------------

#: Seconds the shared server waits, after the last process using it has exited, before it stops
#: (``$VEILBENCH_SHARED_IDLE_S``): DVC starts the next stage's process within a few seconds.
SHARED_IDLE_S = 30.0
#: Files of the shared server in the project's Prefect home.
_SHARED_INFO, _SHARED_LOCK, _SHARED_USERS = "shared-server.json", "shared-server.lock", "shared-server-users"

#: The shared server's keeper, leader of its own process group: runs ``argv[5:]`` (the server) while a
#: process registered in the folder ``argv[1]`` (one file per process id) is alive, and for ``argv[4]``
#: seconds after the last one; then, under the lock file ``argv[2]``, removes the info file ``argv[3]``
#: (the server's URL) and stops its group. See :func:`shared_prefect_server`.
_KEEPER = r"""
import fcntl, os, signal, subprocess, sys, time
users, lock, info, idle = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
server = subprocess.Popen(sys.argv[5:], stdin=subprocess.DEVNULL)
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
last = time.monotonic()
while server.poll() is None:
    time.sleep(1)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        for name in os.listdir(users):
            if name.isdigit() and alive(int(name)):
                last = time.monotonic()
            else:
                os.unlink(os.path.join(users, name))
        if time.monotonic() - last > idle:
            if os.path.exists(info):
                os.unlink(info)  # under the lock: no process can register with a server about to stop
            break
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.killpg(os.getpgrp(), signal.SIGTERM)
time.sleep(2)
os.killpg(os.getpgrp(), signal.SIGKILL)
"""


def shared_prefect_server(home: Path, host: str = "127.0.0.1", timeout: float = 180.0) -> str:
    """The API URL of the shared Prefect server whose home (database, log) is ``home`` (a project's
    ``.prefect``): the running one, or one started here (detached, under a keeper process that stops
    it :data:`SHARED_IDLE_S` seconds after its last user exited). This process is registered as a
    user until it exits; concurrent callers (an ``fcntl`` lock in ``home``) get the same server."""
    import fcntl
    import json

    home = Path(home)
    users = home / _SHARED_USERS
    users.mkdir(parents=True, exist_ok=True)
    info = home / _SHARED_INFO
    with open(home / _SHARED_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            url = json.loads(info.read_text())["url"] if info.is_file() else None
        except (OSError, ValueError, KeyError):
            url = None
        if url is None or not _healthy(url, timeout=2):
            url = _start_shared(home, host, timeout)
            info.write_text(json.dumps({"url": url}))
        (users / str(os.getpid())).touch()  # a user until this process is gone
    return url


def _start_shared(home: Path, host: str, timeout: float) -> str:
    port = _free_port(host)
    url = f"http://{host}:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.pop("PREFECT_API_URL", None)
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    idle = os.environ.get("VEILBENCH_SHARED_IDLE_S", str(SHARED_IDLE_S))
    with open(home / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _KEEPER, str(home / _SHARED_USERS), str(home / _SHARED_LOCK), str(home / _SHARED_INFO),
             idle, sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not _healthy(url, timeout=2):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            raise PrefectServerDied(f"the project's shared Prefect server did not start; see {home / 'server.log'}")
        time.sleep(0.25)
    return url


def use_shared_server(module: str, args: list[str]) -> None:
    """In a stage process started without ``PREFECT_API_URL`` (by ``dvc repro`` or a DVC
    experiment): export the URL of the project's shared server (:func:`shared_prefect_server`, in
    ``$PREFECT_HOME``) and run this process again as ``python -m <module> <args>`` (Prefect reads its
    settings when imported, which the stage's module already did), its ``PREFECT_HOME`` the server's
    (the project's ``.prefect``, the parent workspace's for an experiment's copy, unless set), so it
    writes nothing under ``~/.prefect``. Nothing to do when ``PREFECT_API_URL`` is set."""
    if os.environ.get("PREFECT_API_URL"):
        return
    from tasks.paths import tracking_root

    home = Path(os.environ.get("PREFECT_HOME") or tracking_root() / ".prefect")
    os.environ["PREFECT_API_URL"] = shared_prefect_server(home)
    os.environ["PREFECT_HOME"] = str(home)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", module, *args])
