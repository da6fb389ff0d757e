"""What DVC records stays true through ``veilbench run`` in a real git + DVC project.

* ``params.yaml`` edited while a run is in progress: the run ends with one line naming the file
  (exit 2); every stage in ``dvc.lock`` names the params its outputs were made from (no manifest
  disagrees with the lock); the stage that was running when the file changed stays stale; the
  next run brings everything up to date.
* A user data file replaced (same path): ``dvc status`` calls ``prepare`` changed (the file is its
  DVC dependency, ``data/sources.yaml``); the next run recomputes ``prepare`` and everything
  downstream, with the results of a clean run on the new file; ``veilbench run
  --per-stage-processes``, ``dvc repro`` and ``dvc exp run`` prepare the new file too.

The edit lands at a fixed point of the run, not after a sleep: the run is started through a small
wrapper (:data:`_EDITING_RUN`) whose ``load_params`` edits the file right after the named stage
function has read it, so that stage goes on computing from the old version.

Every run uses the session's Prefect test server (:func:`_on_test_server`): that a run ended by an
error, as these interrupted runs are, leaves no server of its own behind is
``tests/trust/test_run_in_dvc_project.py``'s check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from tests.e2e_root import stages_run as _stages_run
from tests.trust.conftest import SWEEP, valid_user_arrays
from tests.trust.test_runtime_faults import _project, _user_params

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")]

#: ``python -c`` body: ``veilbench run`` whose ``load_params`` replaces ``OLD`` with ``NEW`` in
#: params.yaml just after the function ``FILE:NAME`` (a stage task) has read it, once.
#: Arguments: FILE:NAME OLD NEW.
_EDITING_RUN = r"""
import os, sys
from pathlib import Path
import tasks.common as common

where, old, new = sys.argv[1:4]
del sys.argv[1:4]
file, name = where.split(":")
original, edited = common.load_params, []

def _in_caller():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == name and frame.f_code.co_filename.endswith(file):
            return True
        frame = frame.f_back
    return False

def load_params(*args, **kwargs):
    cfg = original(*args, **kwargs)
    if not edited and _in_caller():
        edited.append(True)
        path = Path(os.environ["VEILBENCH_ROOT"]) / "params.yaml"
        text = path.read_text()
        assert text.count(old) == 1, (old, text)
        path.write_text(text.replace(old, new))
        print(f"edited params.yaml in {where}", file=sys.stderr, flush=True)
    return cfg

common.load_params = load_params  # before any stage module imports it
from flows.cli import app
app(["run"], prog_name="veilbench")
"""


def _run(cmd: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)


def _veilbench_run(root: Path, env: dict[str, str]) -> str:
    proc = _run([sys.executable, "-m", "flows.cli", "run"], root, env)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout + proc.stderr


def _on_test_server(env: dict[str, str], prefect_server: str) -> dict[str, str]:
    """``env`` with the session's Prefect test server: the run starts no server of its own."""
    return {**env, "PREFECT_API_URL": prefect_server}


def _dvc_stale(root: Path, env: dict[str, str]) -> set[str]:
    """The stage addresses ``dvc status`` reports as changed (empty: up to date)."""
    proc = _run([sys.executable, "-m", "dvc", "status", "--json"], root, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout or "{}"))


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _cell_records(root: Path, stage: str, sweep: str) -> list[dict[str, Any]]:
    if stage == "evaluate":
        return [_read(p) for p in sorted((root / "reports" / "sweeps" / sweep / "cells").glob("*.json"))]
    return [_read(p) for p in sorted((root / "data" / stage / sweep).glob("*/manifest.json"))]


def _read_lock(root: Path) -> dict[str, Any]:
    """``dvc.lock`` as DVC reads it (YAML 1.2: ``1e-05`` is a number, not PyYAML's string)."""
    from ruamel.yaml import YAML

    return YAML(typ="safe").load((root / "dvc.lock").read_text())


def lock_disagreements(root: Path) -> list[str]:
    """Every place where a stage's ``dvc.lock`` params differ from the params recorded with its
    outputs (prepare/embed manifests, every cell's manifest or evaluate record, the report's title)."""
    lock = _read_lock(root)
    problems = []

    def expect(address: str, what: str, recorded: Any, made_from: Any) -> None:
        if recorded != made_from:
            problems.append(f"{address}: {what}: dvc.lock has {recorded!r}, its outputs were made from {made_from!r}")

    for address, entry in lock["stages"].items():
        recorded = entry.get("params", {}).get("params.yaml", {})
        stage, _, key = address.partition("@")
        if stage in ("prepare", "embed"):
            section = "datasets" if stage == "prepare" else "embeddings"
            made = _read(root / "data" / stage / key / "manifest.json")["params"]
            expect(address, "seed", recorded["seed"], made["seed"])
            for name, value in recorded[f"{section}.{key}"].items():
                expect(address, f"{section}.{key}.{name}", value, made.get(name))
        elif stage == "report":
            title = recorded["report"]["title"]
            assert title in (root / "reports" / "index.md").read_text(), f"report: title {title!r} not in index.md"
        else:
            sweep = recorded[f"sweeps.{key}"]
            cells = _cell_records(root, stage, key)
            assert cells, f"{address}: in dvc.lock without cells"
            for cell in cells:
                made = cell["params"]
                for name in ("family", "embedding", "seeds"):
                    expect(address, f"{cell['cell']}.{name}", sweep[name], made[name])
                for name, value in sweep.get("params", {}).items():
                    expect(address, f"{cell['cell']}.params.{name}", value, made["family_params"].get(name))
    return problems


def _gaussian_params(path: str) -> dict:
    """The user-file project of :func:`_user_params` with a Gaussian release at ε = 4 (one cell)."""
    params = _user_params(path)
    params["sweeps"][SWEEP]["params"] = {"mechanism": "gaussian", "epsilon": 4.0, "delta": 1e-5,
                                         "n_queries": 30, "audit_releases": 400}
    return params


#: case → (the stage function that reads params.yaml just before the edit, the edit, the stages
#: recorded before it, the stage running when the file changed), in the order the test makes them
EDITS = {
    # a one-task stage: prepare read the file, then it changed; prepare goes on with the old version
    "during-prepare": ("tasks/prepare.py:prepare", ("test_size: 0.3", "test_size: 0.4"), set(), "prepare@mine"),
    # a cell stage: release read ε = 4 while closing its sweep, then the file says ε = 8
    "during-release": ("tasks/sweep.py:finish_stage", ("epsilon: 4.0", "epsilon: 8.0"),
                       {"prepare@mine", "embed@mine-pca"}, f"release@{SWEEP}"),
}


def test_params_edited_mid_run_leave_no_manifest_disagreeing_with_the_lock(tmp_path: Path, prefect_server: str,
                                                                          migrated_mlflow_db: Path) -> None:
    """The cases of :data:`EDITS` in turn on one project, each ending its run with exit 2 and the
    lock as it should be; the next run (the next case's, then a complete one) reruns the stage that
    was running and none recorded before it, and leaves dvc status clean."""
    root, env = _project(tmp_path, _gaussian_params("user/mine.npz"), mlflow_db=migrated_mlflow_db)
    env = _on_test_server(env, prefect_server)
    (root / "user").mkdir()
    np.savez(root / "user" / "mine.npz", **valid_user_arrays())

    previous: tuple[str, str, set[str]] | None = None  # (case, running, recorded before) of the last edit
    for case, (where, (old, new), recorded_before, running) in EDITS.items():
        proc = _run([sys.executable, "-c", _EDITING_RUN, where, old, new], root, env)
        assert f"edited params.yaml in {where}" in proc.stderr, (case, proc.stderr[-3000:])
        assert proc.returncode == 2, (case, proc.returncode, proc.stderr[-3000:])
        assert "Traceback" not in proc.stdout + proc.stderr, (case, proc.stderr[-3000:])
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "params.yaml" in errors[0] and "changed while the run" in errors[0], (
            case, proc.stderr[-3000:])
        if previous is not None:  # this run, the one after the last edit, redid what that edit stopped
            ran = _stages_run(proc.stdout + proc.stderr)
            assert previous[1] in ran and not ran & previous[2], (previous[0], ran)

        locked = set(_read_lock(root)["stages"]) if (root / "dvc.lock").exists() else set()
        if locked:
            assert lock_disagreements(root) == []
        assert locked == recorded_before, f"{case}: the stages recorded before the edit, and only they, are in dvc.lock"
        stale = _dvc_stale(root, env)
        assert running in stale and not stale & recorded_before, (case, stale)
        previous = (case, running, recorded_before)

    second = _stages_run(_veilbench_run(root, env))
    assert previous[1] in second and not second & previous[2], second
    assert _dvc_stale(root, env) == set(), "after a complete run dvc status is clean"
    assert lock_disagreements(root) == []
    text = (root / "params.yaml").read_text()
    assert all(new in text for _, (_, new), _, _ in EDITS.values())


def test_lock_disagreements_sees_a_lock_entry_from_other_params(tmp_path: Path) -> None:
    """The control of the check above: a lock entry whose ε differs from the cells' is reported
    (the lock written as DVC writes it: ``1e-05`` without a dot is a number)."""
    root = tmp_path
    (root / "dvc.lock").write_text(f"""schema: '2.0'
stages:
  release@{SWEEP}:
    params:
      params.yaml:
        sweeps.{SWEEP}:
          family: scoreshield
          embedding: e
          seeds: [0]
          params: {{epsilon: 8.0, delta: 1e-05}}
""")
    cell = root / "data" / "release" / SWEEP / "default"
    cell.mkdir(parents=True)
    made = {"family": "scoreshield", "embedding": "e", "seeds": [0], "family_params": {"epsilon": 4.0, "delta": 1e-5}}
    (cell / "manifest.json").write_text(json.dumps({"cell": "default", "params": made}))
    problems = lock_disagreements(root)
    assert len(problems) == 1 and "epsilon" in problems[0], problems
    made["family_params"]["epsilon"] = 8.0
    (cell / "manifest.json").write_text(json.dumps({"cell": "default", "params": made}))
    assert lock_disagreements(root) == []


def _clean_run(root: Path, migrated_mlflow_db: Path) -> None:
    """Every stage of the project at ``root`` run directly (no DVC, no server) into a fresh folder."""
    import shutil

    from tasks.embed import embed
    from tasks.prepare import prepare
    from tasks.sweep import run_sweep_stage
    from veilbench.stages import STAGES

    shutil.copy(migrated_mlflow_db, root / "mlflow.db")
    prepare("mine", root=root)
    embed("mine-pca", root=root)
    for stage in STAGES:
        run_sweep_stage(stage, SWEEP, root=root)


def _results(root: Path) -> dict[str, Any]:
    """The embedding, the release arrays of the one cell and its evaluate summary."""
    from veilbench.io import read_bundle

    def arrays(folder: Path) -> dict[str, tuple[tuple[int, ...], bytes]]:
        return {k: (np.shape(v), np.asarray(v).tobytes()) for k, v in read_bundle(folder)[0].items()}

    return {"embed": arrays(root / "data" / "embed" / "mine-pca"),
            "release": arrays(root / "data" / "release" / SWEEP / "default"),
            "evaluate": _read(root / "reports" / "sweeps" / SWEEP / "cells" / "default.json")["summary"]}


def test_a_replaced_user_file_is_recomputed_as_a_clean_run(tmp_path: Path, migrated_mlflow_db: Path,
                                                          monkeypatch: pytest.MonkeyPatch, prefect_server: str) -> None:
    root, env = _project(tmp_path, _user_params("user/mine.npz"), mlflow_db=migrated_mlflow_db)
    env = _on_test_server(env, prefect_server)
    (root / "user").mkdir()
    np.savez(root / "user" / "mine.npz", **valid_user_arrays(seed=0))
    _veilbench_run(root, env)
    before = _results(root)
    assert _stages_run(_veilbench_run(root, env)) == set()  # the control: an unchanged file reruns nothing

    np.savez(root / "user" / "mine.npz", **valid_user_arrays(n=72, seed=1))  # same path, other records
    assert "prepare@mine" in _dvc_stale(root, env), "dvc status sees the replaced file itself"
    out = _veilbench_run(root, env)
    assert _stages_run(out) == {"prepare@mine", "embed@mine-pca", f"release@{SWEEP}", f"integrate@{SWEEP}",
                                f"attack@{SWEEP}", f"evaluate@{SWEEP}", "report"}
    for stage in ("release", "integrate", "attack"):
        assert _read(root / "data" / stage / SWEEP / "sweep.json")["computed"] == ["default"], stage
    after = _results(root)
    assert after["embed"] != before["embed"] and after["release"] != before["release"], "made from the new file"
    assert _dvc_stale(root, env) == set()
    assert lock_disagreements(root) == []

    clean = tmp_path / "clean"
    (clean / "user").mkdir(parents=True)
    np.savez(clean / "user" / "mine.npz", **valid_user_arrays(n=72, seed=1))
    (clean / "params.yaml").write_text(yaml.safe_dump(_user_params(str(clean / "user" / "mine.npz")), sort_keys=False))
    monkeypatch.setenv("VEILBENCH_ROOT", str(clean))
    monkeypatch.delenv("DVC_ROOT", raising=False)
    monkeypatch.delenv("VEILBENCH_TRACKING_URI", raising=False)
    _clean_run(clean, migrated_mlflow_db)
    assert _results(clean) == after, "a replaced file gives the results of a clean run on the new file"

    # every other way DVC runs the stage sees a replaced file too, and runs it (no stale output restored)
    from tasks.sources import source_digest

    user_file = root / "user" / "mine.npz"
    for i, cmd in enumerate(([sys.executable, "-m", "flows.cli", "run", "--per-stage-processes", "--stage", "prepare"],
                             [sys.executable, "-m", "dvc", "repro", "prepare@mine"],
                             [sys.executable, "-m", "dvc", "exp", "run", "prepare@mine"]), start=2):
        np.savez(user_file, **valid_user_arrays(n=60 + 6 * i, seed=i))
        assert "prepare@mine" in _dvc_stale(root, env), cmd
        proc = _run(cmd, root, env)
        assert proc.returncode == 0, (cmd, proc.stdout[-3000:], proc.stderr[-3000:])
        made_from = _read(root / "data" / "prepare" / "mine" / "manifest.json")["params"]["source_sha256"]
        assert made_from == source_digest(user_file), f"{cmd}: the prepared output is not made from the new file"
        assert "prepare@mine" not in _dvc_stale(root, env), cmd
