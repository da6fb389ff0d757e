"""Crash and resume: a sweep killed with SIGKILL mid-stage and started again.

The release stage of a three-cell sweep (ScoreShield Gram release with the Dykstra projection,
about a second per cell) runs as a subprocess
``python -c "from tasks.sweep import run_sweep_stage; run_sweep_stage('release', '<sweep>')"`` with ``VEILBENCH_ROOT``
set. As soon as the first cell's ``manifest.json`` exists the process is killed (SIGKILL), then
the same stage runs again (in this process). The result must equal an uninterrupted run of the
same sweep, only the cells without output are recomputed (``sweep.json``), nothing half-written is
left, and the MLflow run the kill interrupted is FAILED, not RUNNING.
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
from veilbench.io import ARRAYS, MANIFEST, TIMINGS, read_bundle, read_json

SLOW = "slow"
CELLS = ["epsilon=1.0", "epsilon=2.0", "epsilon=4.0"]
EXPERIMENT = trust_params()["tracking"]["experiment"]
pytestmark = pytest.mark.slow  # subprocess stage runs on a copy of the populated root

def _slow_params(root: Path) -> dict:
    params = with_user_path(trust_params(), root, "user/mine.npz")
    params["sweeps"][SLOW] = {
        "family": "scoreshield", "embedding": "digits-pca", "seeds": [0],
        "params": {"regime": "gram", "mechanism": "dykstra", "n_records": 60},
        "grid": {"epsilon": [1.0, 2.0, 4.0]},
    }
    return params


def _root(populated_root: Path, dest: Path) -> Path:
    shutil.copytree(populated_root, dest)
    write_params(dest / "params.yaml", _slow_params(dest))
    return dest


def _release_cmd(root: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "VEILBENCH_ROOT": str(root)}
    env.pop("DVC_ROOT", None)
    return [sys.executable, "-c", f"from tasks.sweep import run_sweep_stage; run_sweep_stage('release', {SLOW!r})"], env


def _runs(root: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    return client, exp.experiment_id, client.search_runs(
        [exp.experiment_id], filter_string=f"tags.stage = 'release' and tags.sweep = '{SLOW}' and tags.run_kind = 'cell'")


def _complete_cells(out: Path) -> list[str]:
    return [c for c in CELLS if (out / c / MANIFEST).is_file()]


@pytest.fixture(scope="module")
def uninterrupted(populated_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: the same sweep released in one go, in-process (once per module; read only)."""
    from tasks.sweep import run_sweep_stage

    root = _root(populated_root, tmp_path_factory.mktemp("crash") / "reference")
    run_sweep_stage("release", SLOW, root=root)
    return root / "data" / "release" / SLOW


def test_killed_sweep_resumes_to_the_uninterrupted_result(populated_root: Path, tmp_path: Path, uninterrupted: Path) -> None:
    root = _root(populated_root, tmp_path / "crashed")
    out = root / "data" / "release" / SLOW
    cmd, env = _release_cmd(root)

    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (out / CELLS[0] / MANIFEST).is_file():
        assert proc.poll() is None, f"release ended before the first cell was written: {proc.stderr.read()[-2000:]!r}"
        assert time.monotonic() < deadline, "the first cell never appeared"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    finished = _complete_cells(out)
    assert CELLS[0] in finished and len(finished) < len(CELLS), f"the kill did not land mid-sweep: {finished}"
    for child in out.iterdir():  # atomic writes: a visible cell folder is complete or absent
        if child.is_dir() and not child.name.startswith("."):
            assert {p.name for p in child.iterdir()} == {ARRAYS, MANIFEST, TIMINGS}, child
    assert not (out / "sweep.json").exists(), "sweep.json was written although the stage never finished"
    *_, runs = _runs(root)
    interrupted = {r.info.run_id for r in runs if r.info.status == "RUNNING"}  # almost always one (cell 1's)

    from tasks.sweep import run_sweep_stage

    run_sweep_stage("release", SLOW, root=root)  # the resume: the same stage again (in-process; only the kill needs a process)

    sweep = read_json(out / "sweep.json")
    assert sweep["reused"] == finished, f"a cell finished before the kill was recomputed: {sweep}"
    assert sweep["computed"] == [c for c in CELLS if c not in finished], "an unfinished cell was not recomputed"
    assert not [p for p in out.rglob(".*")], "a temporary (dot-prefixed) leftover remains"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(CELLS)
    for cell in CELLS:
        assert {p.name for p in (out / cell).iterdir()} == {ARRAYS, MANIFEST, TIMINGS}, cell
        got, got_manifest = read_bundle(out / cell)
        want, want_manifest = read_bundle(uninterrupted / cell)
        assert got.keys() == want.keys(), cell
        for key in want:
            assert np.array_equal(got[key], want[key]) and got[key].dtype == want[key].dtype, (cell, key)
        assert got_manifest == want_manifest, cell  # timings are in the sidecar, not the manifest

    *_, runs = _runs(root)
    status = {r.info.run_id: r.info.status for r in runs}
    cell_of = {r.info.run_id: r.data.tags["cell"] for r in runs}
    finished_ok = [r for r in runs if r.info.status == "FINISHED" and r.data.tags["reused"] == "false"]
    left = [r for r, s in status.items() if s == "RUNNING"]
    assert not left, f"runs left RUNNING after the rerun: {status}"
    assert all(status[r] == "FAILED" for r in interrupted), {r: status[r] for r in interrupted}
    # one FINISHED run per cell, except a cell reused after its run was interrupted while logging
    no_finished_run = {cell_of[r] for r in interrupted} & set(finished)
    assert sorted(r.data.tags["cell"] for r in finished_ok) == sorted(set(CELLS) - no_finished_run), status


def test_run_interrupted_after_its_output_was_written_is_marked_failed(populated_root: Path, tmp_path: Path,
                                                                        uninterrupted: Path) -> None:
    """Deterministic version of the kill landing in a cell's MLflow logging: the cell's files are
    complete, its run is still RUNNING."""
    root = tmp_path / "reference"
    shutil.copytree(uninterrupted.parents[2], root)
    write_params(root / "params.yaml", _slow_params(root))
    client, experiment_id, _ = _runs(root)
    stale = client.create_run(experiment_id, tags={"stage": "release", "sweep": SLOW, "cell": CELLS[0],
                                                   "dataset": "digits", "embedding": "digits-pca"})
    from tasks.sweep import run_sweep_stage

    run_sweep_stage("release", SLOW, root=root)
    assert read_json(root / "data" / "release" / SLOW / "sweep.json")["reused"] == CELLS
    assert client.get_run(stale.info.run_id).info.status == "FAILED"
