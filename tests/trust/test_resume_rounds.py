"""A long GCA cell killed mid-run resumes at its last finished round through the pipeline.

The release stage of a one-cell GCA sweep (digits, 3 clients, 40 rounds) runs as a subprocess with
``VEILBENCH_ROOT`` set; as soon as its per-round checkpoint (``data/checkpoints/release/<sweep>/
<cell>/<input key>/seed0``) holds round 2, the process is killed (SIGKILL). The same stage, run
again, must continue from that checkpoint (it is there, and the second run's CPU time of the
federation, carried in the checkpoint, includes the killed session's), end with the arrays of an
uninterrupted run to the bit, and remove the cell's checkpoints once its outputs are written.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.trust.conftest import trust_params, with_user_path, write_params
from veilbench.checkpoints import RoundCheckpoints
from veilbench.io import read_bundle, read_json

SWEEP, CELL = "gca-resume", "method=gca"
pytestmark = pytest.mark.slow  # subprocess stage runs on a copy of the populated root


def _root(populated_root: Path, dest: Path) -> Path:
    shutil.copytree(populated_root, dest)
    params = with_user_path(trust_params(), dest, "user/mine.npz")
    params["sweeps"][SWEEP] = {
        "family": "gca", "embedding": "digits-pca", "seeds": [0],
        "grid": {"method": ["gca"]},
        "params": {"rounds": 40, "recon_epochs": 3, "align_epochs": 2, "n_clusters": 3,
                   "upload_fraction": 0.5, "attack_starts": 2, "attack_max_steps": 5, "surrogate_max_epochs": 2},
    }
    write_params(dest / "params.yaml", params)
    return dest


def _checkpoints(root: Path) -> list[Path]:
    return sorted((root / "data" / "checkpoints" / "release" / SWEEP / CELL).glob("*/seed0"))


def test_a_killed_gca_cell_resumes_at_its_last_round(populated_root: Path, tmp_path: Path) -> None:
    from tasks.sweep import run_sweep_stage

    reference = _root(populated_root, tmp_path / "reference")
    run_sweep_stage("release", SWEEP, root=reference)
    assert not _checkpoints(reference)  # removed once the outputs were written

    root = _root(populated_root, tmp_path / "killed")
    env = {**os.environ, "VEILBENCH_ROOT": str(root)}
    env.pop("DVC_ROOT", None)
    proc = subprocess.Popen([sys.executable, "-c", f"from tasks.sweep import run_sweep_stage; run_sweep_stage('release', {SWEEP!r})"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved, deadline = None, time.monotonic() + 240
    while saved is None or saved[0] < 2:
        assert proc.poll() is None, "the stage finished before it could be killed"
        assert time.monotonic() < deadline, "no checkpoint of round 2 within 240 s"
        folders = _checkpoints(root)
        saved = RoundCheckpoints(folders[0]).load() if folders else None
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (folder,) = _checkpoints(root)
    killed_round, state = RoundCheckpoints(folder).load()
    assert 2 <= killed_round < 40 and state["_cpu_seconds"] > 0

    run_sweep_stage("release", SWEEP, root=root)  # the same stage again: resumes from round killed_round + 1
    got, record = read_bundle(root / "data" / "release" / SWEEP / CELL)
    want, _ = read_bundle(reference / "data" / "release" / SWEEP / CELL)
    assert got.keys() == want.keys()
    for key in want:
        assert np.array_equal(got[key], want[key], equal_nan=True), key
    assert not _checkpoints(root)
    timings = read_json(root / "data" / "release" / SWEEP / CELL / "timings.json")["per_seed"]["0"]
    assert timings["cpu_seconds"] >= state["_cpu_seconds"]  # the killed session's CPU time is counted
