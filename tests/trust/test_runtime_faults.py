"""Runtime faults: damaged outputs are recomputed, never reused; the Prefect server dies with the run.

Output cases (one row each) damage one stored output of a populated work folder, then run the
cell again: the damaged output must be recomputed (``run_cell`` returns ``"computed"``) and end
equal to the undamaged one; the undamaged control is ``"reused"``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.trust.conftest import SWEEP
from veilbench.io import read_bundle, read_json

CELL = "default"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF
    path.write_bytes(bytes(data))


def _edit_metric(path: Path) -> None:
    record = json.loads(path.read_text())
    name = sorted(record["summary"])[0]
    record["summary"][name]["mean"] = 123456.0
    path.write_text(json.dumps(record))


def _garbage(path: Path) -> None:
    path.write_text("{not json")


def _release(root: Path) -> Path:
    return root / "data" / "release" / SWEEP / CELL


def _evaluate(root: Path) -> Path:
    return root / "reports" / "sweeps" / SWEEP / "cells" / f"{CELL}.json"


#: case → (stage, file to damage, damage)
FAULTS: list[tuple[str, str, Callable[[Path], Path], Callable[[Path], None]]] = [
    ("truncated-release-arrays", "release", lambda r: _release(r) / "arrays.npz", _truncate),
    ("bit-flip-in-release-arrays", "release", lambda r: _release(r) / "arrays.npz", _flip_last_byte),
    ("unreadable-release-manifest", "release", lambda r: _release(r) / "manifest.json", _garbage),
    ("missing-release-arrays", "release", lambda r: _release(r) / "arrays.npz", lambda p: p.unlink()),
    ("truncated-evaluate-json", "evaluate", _evaluate, _truncate),
    ("hand-edited-evaluate-metric", "evaluate", _evaluate, _edit_metric),
]


def _state(stage: str, root: Path) -> object:
    if stage == "evaluate":
        record = read_json(_evaluate(root))
        return record["summary"], record["input_key"]
    arrays, manifest = read_bundle(_release(root))
    return {k: v.tobytes() for k, v in arrays.items()}, manifest["input_key"]


@pytest.mark.parametrize("case", [c[0] for c in FAULTS])
def test_damaged_outputs_are_recomputed_not_reused(case: str, trust_root: Path) -> None:
    from tasks.sweep import run_cell

    _, stage, target, damage = next(c for c in FAULTS if c[0] == case)
    assert run_cell(stage, SWEEP, CELL, root=trust_root) == "reused"  # the control: intact → reused
    clean = _state(stage, trust_root)
    damage(target(trust_root))
    assert run_cell(stage, SWEEP, CELL, root=trust_root) == "computed"
    assert _state(stage, trust_root) == clean
    assert run_cell(stage, SWEEP, CELL, root=trust_root) == "reused"


# ------------------------------------------------------------------------------------------------
# the Prefect server's lifetime is the run's
# ------------------------------------------------------------------------------------------------


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


_HOLDER = """
import sys, time
from pathlib import Path
from flows.server import booting_prefect_server
with booting_prefect_server(Path(sys.argv[1])) as server:
    server.wait_until_ready()
    print(server.url, flush=True)
    time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_the_run_stops_its_prefect_server(how: int, tmp_path: Path) -> None:
    """A process holding the server is killed; within 10 s nothing listens on the server's port."""
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["PYTHONPATH"] = str(repo)
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        port = int(url.split(":")[2].split("/")[0])
        assert _listening(port)
        proc.send_signal(how)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _listening(port) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _listening(port), f"the Prefect server still listens on {port} after {how!r} of its parent"
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (tmp_path / ".prefect" / "server.log").is_file(), "PREFECT_HOME must live under the project"
