"""Launch the Flower app project with ``flwr run`` and wait for its result (exit status included).

``flwr run`` (flwr 1.32.1) only submits a run: it exits 0 once the SuperLink accepted it, also with
``--stream`` and also when the run then fails (a ClientApp raising because its ``data-path`` is
not configured, say). :func:`run_app` submits the run the same way (``flwr run <app> <connection>
--format json``), follows its log with ``flwr log <id> <connection> --stream`` (one process, which
the SuperLink ends once the run has finished), then reads the run's status with ``flwr ls
<connection> --run-id <id> --format json`` (polled only if the stream ended early), and returns it
with the log; ``veilbench flower-run`` exits non-zero unless the status is ``finished:completed``,
printing the run's log on failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class FlowerRunStatus:
    """A finished (or timed-out) Flower run: its id, ``flwr ls`` status and status details, and
    the run's log as ``flwr log --stream`` printed it (empty when it was not followed)."""

    run_id: str
    status: str
    details: str
    log: str = field(default="", repr=False)

    @property
    def ok(self) -> bool:
        return self.status == "finished:completed"


def _flwr() -> list[str]:
    """The ``flwr`` CLI of this interpreter's environment."""
    exe = Path(sys.executable).parent / "flwr"
    return [str(exe)] if exe.is_file() else [shutil.which("flwr") or "flwr"]


def _bin_env(env: dict | None) -> dict:
    """``env`` (default: this process's) with this interpreter's scripts folder first on ``PATH``:
    ``flwr`` starts ``flower-superlink`` and the SuperLink its app processes by name."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _json(text: str) -> dict:
    start = text.find("{")
    if start < 0:
        raise RuntimeError(f"flwr: expected JSON output, got {text[-2000:]!r}")
    return json.loads(text[start:])


def submit(app: Path, connection: str, run_config: list[str] | None = None, env: dict | None = None,
           cwd: Path | None = None) -> str:
    """``flwr run <app> <connection> --format json [--run-config ...]`` (in ``cwd``: a local
    SuperLink that ``flwr`` starts for a ``:local:`` connection runs there); returns the run id."""
    cmd = [*_flwr(), "run", str(Path(app).resolve()), connection, "--format", "json"]
    for item in run_config or ():
        cmd += ["--run-config", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_bin_env(env), cwd=cwd, timeout=300)
    out = _json(proc.stdout)
    if proc.returncode != 0 or not out.get("success") or not out.get("run-id"):
        raise RuntimeError(f"flwr run: the run was not started: {out.get('error-message') or proc.stdout[-2000:]}"
                           f"{proc.stderr[-2000:]}")
    return str(out["run-id"])


def follow(run_id: str, connection: str, timeout: float, env: dict | None = None) -> str:
    """The run's log, streamed by ``flwr log <id> <connection> --stream`` until the SuperLink ends the
    stream (the run finished) or ``timeout`` seconds passed; what was printed until then."""
    try:
        proc = subprocess.run([*_flwr(), "log", run_id, connection, "--stream"], capture_output=True, text=True,
                              env=_bin_env(env), timeout=max(1.0, timeout))
        return proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        return "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))


def wait(run_id: str, connection: str, timeout: float, env: dict | None = None, poll: float = 2.0) -> FlowerRunStatus:
    """Poll ``flwr ls`` until the run is ``finished:*`` (or ``timeout`` seconds passed: status ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run([*_flwr(), "ls", connection, "--run-id", run_id, "--format", "json"],
                              capture_output=True, text=True, env=_bin_env(env), timeout=120)
        runs = _json(proc.stdout).get("runs", [])
        if runs and str(runs[0].get("status", "")).startswith("finished"):
            return FlowerRunStatus(run_id, runs[0]["status"], runs[0].get("status-details", ""))
        if time.monotonic() > deadline:
            return FlowerRunStatus(run_id, "timeout", f"not finished after {timeout:.0f} s")
        time.sleep(poll)


def run_log(run_id: str, connection: str, env: dict | None = None) -> str:
    """The run's log (``flwr log <id> <connection> --show``)."""
    proc = subprocess.run([*_flwr(), "log", run_id, connection, "--show"], capture_output=True, text=True,
                          env=_bin_env(env), timeout=120)
    return proc.stdout + proc.stderr


def run_app(app: Path, connection: str, run_config: list[str] | None = None, timeout: float = 3600,
            env: dict | None = None, cwd: Path | None = None) -> FlowerRunStatus:
    """Submit the app project at ``app`` to ``connection``, follow its log until the run finished
    (:func:`follow`), and return its status (:func:`wait`: at once, unless the stream ended early)
    with that log."""
    deadline = time.monotonic() + timeout
    run_id = submit(app, connection, run_config, env, cwd)
    log = follow(run_id, connection, deadline - time.monotonic(), env)
    return replace(wait(run_id, connection, max(0.0, deadline - time.monotonic()), env), log=log)


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 right now."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def write_flower_config(flwr_home: Path, control_port: int | None = None) -> Path:
    """``<flwr_home>/config.toml`` with the app project's connections (``flower/flower-config.toml``),
    the ``local-deployment`` one pointed at ``127.0.0.1:<control_port>`` when given."""
    text = (Path(__file__).resolve().parents[1] / "flower" / "flower-config.toml").read_text()
    if control_port is not None:
        text = text.replace('address = "127.0.0.1:9093"', f'address = "127.0.0.1:{control_port}"')
    flwr_home.mkdir(parents=True, exist_ok=True)
    (flwr_home / "config.toml").write_text(text)
    return flwr_home / "config.toml"


class LocalDeployment:
    """A SuperLink and ``len(data_paths)`` SuperNodes on 127.0.0.1 (``--insecure``), each in its
    own process group, stopped (SIGTERM, then SIGKILL) by :meth:`stop` or on leaving ``with``.

    SuperNode i gets ``--node-config 'partition-id=i data-path="<data_paths[i]>"'``. ``env`` is the
    environment for ``flwr`` commands (``FLWR_HOME`` whose config has the ``local-deployment``
    connection to this SuperLink)."""

    def __init__(self, data_paths: list[Path], flwr_home: Path, log_dir: Path, env: dict | None = None):
        self.data_paths, self.log_dir = [Path(p) for p in data_paths], Path(log_dir)
        fleet, control, appio, *node_ports = free_ports(3 + len(data_paths))
        self.fleet, self.control, self.appio, self.node_ports = fleet, control, appio, node_ports
        write_flower_config(Path(flwr_home), control)
        self.env = {**_bin_env(env), "FLWR_HOME": str(flwr_home), "FLWR_DISABLE_UPDATE_CHECK": "1",
                    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1"}
        self.procs: list[subprocess.Popen] = []

    def _start(self, name: str, args: list[str]) -> None:
        exe = Path(sys.executable).parent / name
        log = open(self.log_dir / f"{name}-{len(self.procs)}.log", "w")  # noqa: SIM115 - closed below
        self.procs.append(subprocess.Popen([str(exe) if exe.is_file() else name, *args], env=self.env, stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True, cwd=self.log_dir))
        log.close()  # the child holds its own descriptor

    def start(self) -> "LocalDeployment":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._start("flower-superlink", ["--insecure", "--fleet-api-address", f"127.0.0.1:{self.fleet}",
                                         "--control-api-address", f"127.0.0.1:{self.control}",
                                         "--serverappio-api-address", f"127.0.0.1:{self.appio}"])
        for i, (path, port) in enumerate(zip(self.data_paths, self.node_ports)):
            self._start("flower-supernode", ["--insecure", "--superlink", f"127.0.0.1:{self.fleet}",
                                             "--clientappio-api-address", f"127.0.0.1:{port}",
                                             "--node-config", f'partition-id={i} data-path="{path}"'])
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        for proc in self.procs:  # children left in a group (SuperExec, app processes)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> "LocalDeployment":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
