"""``veilbench run`` in a real git + DVC project, end to end (subprocesses; all slow): a user error
inside a stage reaches the user as one line (exit 2, no traceback; ``--debug`` shows it), and
SIGKILL of the run leaves no process of its Prefect server behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.trust.test_runtime_faults import _processes_of, _project, _user_params

pytestmark = pytest.mark.slow


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_error_inside_a_stage_reaches_the_user_as_one_line(tmp_path: Path, prefect_server: str,
                                                           migrated_prefect_db: Path, migrated_mlflow_db: Path) -> None:
    """A user data file rejected inside the prepare task of ``veilbench run``: exit 2, one message
    naming the file's problem, no traceback, nothing recorded, no server left behind. (The
    ``--debug`` control runs on the session's test server: it checks only what is printed.)"""
    root, env = _project(tmp_path, _user_params("user/zeros.npz"), migrated_prefect_db, migrated_mlflow_db)
    (root / "user").mkdir()
    np.savez(root / "user" / "zeros.npz", X=np.zeros((40, 5)), y=np.arange(40) % 2)
    proc = subprocess.run([sys.executable, "-m", "flows.cli", "run"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "zeros.X" in errors[0] and "constant" in errors[0], proc.stderr[-3000:]
    output = proc.stdout + proc.stderr  # the error once (not again as Prefect's task and flow failures),
    assert output.count("every feature is constant") == 1, output[-3000:]  # and no client noise after it
    assert not [n for n in ("Error logging to API", "EventsWorker", "| ERROR") if n in output], output[-3000:]
    assert not (root / "dvc.lock").exists() and not (root / "data" / "prepare" / "mine").exists()
    assert not _processes_of(root)
    debug = subprocess.run([sys.executable, "-m", "flows.cli", "--debug", "run"], cwd=root,
                           env={**env, "PREFECT_API_URL": prefect_server},
                           capture_output=True, text=True, timeout=600)
    assert debug.returncode != 0 and "Traceback" in debug.stderr  # the control: --debug shows it


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_sigkill_of_veilbench_run_leaves_no_server(tmp_path: Path, migrated_prefect_db: Path,
                                                   migrated_mlflow_db: Path) -> None:
    from tests.trust.conftest import trust_params

    params = trust_params()
    del params["datasets"]["mine"]
    root, env = _project(tmp_path, params, migrated_prefect_db, migrated_mlflow_db)
    proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "run"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:  # the server answered once a stage has run ("[k/n] <stage> …" lines)
            if line.startswith("["):
                break
        assert _processes_of(root), "the run's server was not found"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while _processes_of(root) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _processes_of(root), "a process of the killed run is left"
    finally:
        if proc.poll() is None:
            proc.kill()
