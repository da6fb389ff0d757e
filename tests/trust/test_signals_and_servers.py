"""Signals, servers and entry points: a run stops the same way whatever stops it, says what
happened once, and leaves nothing running or written outside the project.

* SIGTERM is handled as Ctrl-C (status 143, the same orderly stop); a child pipeline (``dvc repro``,
  the Dask path's ``flows.benchmark`` and its workers) is stopped with its whole process group.
* A Prefect server that dies during a run is named as such (status 1), not reported as "interrupted".
* Stage processes without ``PREFECT_API_URL`` (``dvc repro``, queued DVC experiments) share one
  project server, which writes nothing under ``~/.prefect`` and stops after its last user.
* Every ``python -m flows.…`` entry point ends an error as one line; telemetry is off in every entry point.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.trust.test_runtime_faults import _gone

REPO = Path(__file__).resolve().parents[2]


def _marked(marker: str) -> list[int]:
    """Processes whose environment holds ``VEILBENCH_TEST_MARK=<marker>``."""
    from tests.trust.test_runtime_faults import _processes_with

    return _processes_with(f"VEILBENCH_TEST_MARK={marker}")


# ------------------------------------------------------------------------------------------------
# telemetry and the entry points' error boundary
# ------------------------------------------------------------------------------------------------


def test_telemetry_is_off_in_every_entry_point() -> None:
    """A process that imports an entry point (the ``veilbench`` command, a stage flow, a ``tasks``
    module run with ``-m``) with none of the variables set has every telemetry switch off, and so
    do its child processes."""
    TELEMETRY_OFF = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "DVC_NO_ANALYTICS": "1",  # noqa: N806
                     "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env = {k: v for k, v in os.environ.items() if k not in TELEMETRY_OFF}
    env["PYTHONPATH"] = str(REPO)
    for module in ("flows.cli", "tasks.codedeps"):
        code = f"import json, os, {module}; print(json.dumps({{k: os.environ.get(k) for k in {sorted(TELEMETRY_OFF)!r}}}))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout.splitlines()[-1]) == TELEMETRY_OFF, (module, proc.stdout)


def test_entry_points_end_every_error_as_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """:func:`flows.errors.run_entry`: a user error exits 2, a bug 1, Ctrl-C 130, each as one line."""
    from flows.errors import run_entry
    from veilbench.validation import UsageError

    def raising(exc: BaseException):  # noqa: ANN202
        def body() -> None:
            raise exc
        return body

    cases = ((UsageError("x.y: must be > 0"), 2, "error: x.y: must be > 0"),
             (ValueError("boom"), 1, "error: ValueError: boom (an internal error"),
             (KeyboardInterrupt(), 130, "interrupted"))
    for exc, status, line in cases:
        assert run_entry(raising(exc), debug=False) == status
        err = capsys.readouterr().err
        assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err
    assert run_entry(lambda: None, debug=False) == 0


def test_the_dask_paths_entry_point_ends_a_bug_as_one_line(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m flows.benchmark`` (what ``veilbench run --no-dvc`` runs): an error that is not a
    user error is one ``error:`` line and status 1, not a traceback."""
    import flows.benchmark as benchmark

    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError("the Dask scheduler went away")

    monkeypatch.setattr(benchmark, "run_benchmark", broken)
    assert benchmark.main(["--params", str(workdir / "params.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "the Dask scheduler went away" in err and "Traceback" not in err, err


# ------------------------------------------------------------------------------------------------
# SIGTERM as Ctrl-C, with the child pipeline's whole process group
# ------------------------------------------------------------------------------------------------

#: A run holding a child pipeline: the child starts a grandchild (a Dask worker, a DVC stage) and
#: says ready; the run ends through flows.interrupt as ``veilbench run`` does.
_HOLDER = """
import signal, sys
from flows.interrupt import Interrupt, end_run, run_child
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a background job ignores it)
interrupt = Interrupt(grace_s=5.0)
child = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
         "time.sleep(0.5); print('ready', flush=True); time.sleep(300)")
try:
    with interrupt.installed():
        run_child([sys.executable, "-c", child], interrupt)
except KeyboardInterrupt as exc:
    end_run(interrupt, exc, "interrupted: the run stopped")
"""


@pytest.mark.slow  # processes and signals
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_stops_a_run_as_ctrl_c_does_with_its_child_pipeline(how: int) -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO), "VEILBENCH_TEST_MARK": marker}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-2000:]
        assert len(_marked(marker)) == 3, "the run, its child and the grandchild"
        started = time.monotonic()
        proc.send_signal(how)
        proc.wait(timeout=30)
        stopped = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert proc.returncode == 128 + how, (proc.returncode, err[-2000:])
    assert stopped < 10, f"took {stopped:.1f} s to stop"
    name = "" if how == signal.SIGINT else " (SIGTERM)"
    assert f"interrupted{name}: stopping" in err and "Traceback" not in err, err[-2000:]
    assert _gone(lambda: _marked(marker), 10), "a process of the child pipeline is left"


# ------------------------------------------------------------------------------------------------
# a dead server is named
# ------------------------------------------------------------------------------------------------

#: A run on its own Prefect server (in the home ``argv[1]``), ending through flows.interrupt as
#: ``veilbench run`` does; it prints the server's URL once it answers.
_SERVED = """
import signal, sys, time
from pathlib import Path
from flows.interrupt import Interrupt, end_run
from flows.server import PrefectServerDied, booting_prefect_server
signal.signal(signal.SIGINT, signal.default_int_handler)
interrupt = Interrupt()
try:
    with interrupt.installed(), booting_prefect_server(Path(sys.argv[1])) as server:
        interrupt.causes.append(server.death)
        print(server.wait_until_ready(), flush=True)
        time.sleep(300)
except (KeyboardInterrupt, PrefectServerDied) as exc:
    end_run(interrupt, exc, "interrupted: the run stopped")
"""


@pytest.mark.slow  # a Prefect server
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_a_server_that_dies_during_the_run_is_named_not_called_an_interrupt(tmp_path: Path,
                                                                           migrated_prefect_db: Path) -> None:
    from tests.e2e_root import seed_prefect_home
    from tests.trust.test_runtime_faults import _processes_of

    seed_prefect_home(tmp_path, migrated_prefect_db)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-c", _SERVED, str(tmp_path)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()[-2000:]
        server = [pid for pid in _processes_of(tmp_path) if pid != proc.pid]
        assert server, "the server's processes were not found"
        os.killpg(os.getpgid(server[0]), signal.SIGKILL)  # the server and its watchdog die
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert proc.returncode == 1, (proc.returncode, err[-2000:])
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Prefect server" in errors[0] and "stopped during the run" in errors[0], err[-2000:]
    assert "interrupted" not in err, err[-2000:]


# ------------------------------------------------------------------------------------------------
# one shared server for stage processes without PREFECT_API_URL
# ------------------------------------------------------------------------------------------------

#: A stage process asking for the shared server of the home ``argv[1]``; it prints the URL and
#: exits when the file ``argv[2]`` appears.
_USER = """
import sys, time
from pathlib import Path
from flows.server import shared_prefect_server
print(shared_prefect_server(Path(sys.argv[1])), flush=True)
while not Path(sys.argv[2]).exists():
    time.sleep(0.1)
"""


@pytest.mark.slow  # a Prefect server
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_stage_processes_without_a_server_share_one_that_stops_after_them(tmp_path: Path,
                                                                        migrated_prefect_db: Path) -> None:
    """Two stage processes at once (two queued DVC experiments) get the same server, started in the
    project's home; ``~`` is left untouched; the server stops a few seconds after both exit."""
    from tests.e2e_root import seed_prefect_home

    seed_prefect_home(tmp_path, migrated_prefect_db)
    home, fake_user_home, done = tmp_path / ".prefect", tmp_path / "user-home", tmp_path / "done"
    fake_user_home.mkdir()
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env.update(PYTHONPATH=str(REPO), HOME=str(fake_user_home), VEILBENCH_SHARED_IDLE_S="2", VEILBENCH_TEST_MARK=marker)
    users = [subprocess.Popen([sys.executable, "-c", _USER, str(home), str(done)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        urls = [u.stdout.readline().strip() for u in users]
        assert urls[0].startswith("http://127.0.0.1:") and urls[0] == urls[1], (urls, users[0].stderr.read()[-2000:])
        servers = [p for p in _marked(marker) if p not in {u.pid for u in users}]
        assert len({os.getpgid(p) for p in servers}) == 1, "one server (one process group) for both"
        done.touch()
        for u in users:
            u.wait(timeout=30)
        assert _gone(lambda: _marked(marker), 30), "the shared server outlived its users"
    finally:
        done.touch()
        for u in users:
            if u.poll() is None:
                u.kill()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)
    assert (home / "server.log").is_file() and not (fake_user_home / ".prefect").exists()


def test_a_stage_process_writes_nothing_under_the_users_home(tmp_path: Path) -> None:
    """``python -m flows.<stage>`` loads Prefect, which creates its home when imported: that home is
    the project's ``.prefect``, never ``~/.prefect``."""
    home, project = tmp_path / "user-home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_HOME", "PREFECT_API_URL", "DVC_ROOT")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), VEILBENCH_ROOT=str(project))
    proc = subprocess.run([sys.executable, "-m", "flows.release", "--help"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (home / ".prefect").exists() and (project / ".prefect").is_dir()


def test_a_stage_process_without_a_server_reruns_itself_on_the_shared_one(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`flows.server.use_shared_server`: no ``PREFECT_API_URL`` → the shared server's URL and the
    project's home exported, the process run again with the same arguments; with it set, nothing."""
    import flows.server as server

    calls: list[tuple] = []
    monkeypatch.setattr(server, "shared_prefect_server", lambda home: calls.append(("server", home)) or "http://x/api")
    monkeypatch.setattr(os, "execv", lambda exe, args: calls.append(("exec", exe, args)))
    monkeypatch.setenv("PREFECT_API_URL", "http://mine/api")
    server.use_shared_server("flows.release", ["--sweep", "s"])
    assert calls == []
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / ".prefect"))
    server.use_shared_server("flows.release", ["--sweep", "s"])
    assert calls == [("server", tmp_path / ".prefect"), ("exec", sys.executable, [sys.executable, "-m", "flows.release",
                                                                                  "--sweep", "s"])]
    assert os.environ["PREFECT_API_URL"] == "http://x/api"
