"""The run's Prefect server lives and dies with it, end to end (subprocesses; all slow).

* A process holding the run's Prefect server is killed (SIGKILL, SIGTERM, SIGINT): nothing listens
  on the server's port afterwards and no process of the server is left.
* What runs before the server starts does not import Prefect (which fixes its settings at import).

``veilbench run`` itself, killed or failing in a real DVC project: ``test_run_in_dvc_project.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.trust.test_runtime_faults import _processes_of

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------------
# the Prefect server's lifetime is the run's
# ------------------------------------------------------------------------------------------------


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


#: a run holding its server. SIGINT is reset to Python's default (KeyboardInterrupt), as in a terminal:
#: a test run started as a background job (``make test &``, nohup) hands its children SIGINT ignored.
_HOLDER = """
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
from flows.server import booting_prefect_server
with booting_prefect_server(Path(sys.argv[1])) as server:
    server.wait_until_ready()
    print(server.url, flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_the_run_stops_its_prefect_server(how: int, tmp_path: Path, migrated_prefect_db: Path) -> None:
    """A process holding the server is killed; within 10 s nothing listens on the server's port.
    The SIGKILL case boots its server in a new home (the migrations of a user's first run); the
    others in a home holding a migrated database (:func:`tests.e2e_root.seed_prefect_home`)."""
    if how != signal.SIGKILL:
        from tests.e2e_root import seed_prefect_home

        seed_prefect_home(tmp_path, migrated_prefect_db)
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["PYTHONPATH"] = str(repo)
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-c", _HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        port = int(url.split(":")[2].split("/")[0])
        assert _listening(port)
        proc.send_signal(how)
        try:  # alone it exits within a second; a loaded CI worker once took over 30 s
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # -X faulthandler: its stacks go to the captured stderr
            proc.wait(timeout=30)
            raise AssertionError(f"the holder did not exit within 90 s of {how!r}; stacks above") from None
        deadline = time.monotonic() + 10
        while _listening(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _listening(port), f"the Prefect server still listens on {port} after {how!r} of its parent"
        while _processes_of(tmp_path) and time.monotonic() < deadline + 5:
            time.sleep(0.2)
        assert not _processes_of(tmp_path), f"a process of the server is left after {how!r} of its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / ".prefect" / "server.log").is_file(), "PREFECT_HOME must live under the project"


def test_what_runs_before_the_server_does_not_import_prefect() -> None:
    """Prefect fixes its settings (API URL, home) at import: ``veilbench run`` must not import it
    before its server exports them, else this process starts a second, unmanaged server."""
    code = ("import sys, flows.cli, flows.server, tasks.sources, tasks.common; "
            "sys.exit(1 if 'prefect' in sys.modules else 0)")
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
