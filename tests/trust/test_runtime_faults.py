"""Runtime faults: damaged outputs are recomputed, never reused; errors cross the command line's
boundary as one line; a params file edited mid-run stops the run (the run's processes dying with
it, end to end: ``test_run_lifetime.py``).

Output cases (one row each) damage one stored output of a populated work folder, then run the
cell again: the damaged output must be recomputed (``run_cell`` returns ``"computed"``) and end
equal to the undamaged one; the undamaged control is ``"reused"``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
def test_damaged_outputs_are_recomputed_not_reused(case: str, trust_root: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.sweep import run_cell

    # an empty output store: the cell's own output is under test (tests/test_stage_store.py: the store's)
    monkeypatch.setenv("VEILBENCH_STORE", str(tmp_path / "store"))

    _, stage, target, damage = next(c for c in FAULTS if c[0] == case)
    assert run_cell(stage, SWEEP, CELL, root=trust_root) == "reused"  # the control: intact → reused
    clean = _state(stage, trust_root)
    damage(target(trust_root))
    assert run_cell(stage, SWEEP, CELL, root=trust_root) == "computed"
    assert _state(stage, trust_root) == clean
    assert run_cell(stage, SWEEP, CELL, root=trust_root) == "reused"


# ------------------------------------------------------------------------------------------------
# `veilbench run` in a real DVC project (helpers of test_run_lifetime.py and test_integrity_e2e.py)
# ------------------------------------------------------------------------------------------------


def _project(tmp_path: Path, params: dict, prefect_db: Path | None = None,
             mlflow_db: Path | None = None) -> tuple[Path, dict[str, str]]:
    """A git + DVC project holding a copy of the code, ``dvc.yaml`` and ``params``
    (:func:`tests.e2e_root.init_project`), committed; with ``prefect_db`` (the
    :func:`migrated_prefect_db` fixture) its Prefect home holds a copy of that migrated database
    (:func:`tests.e2e_root.seed_prefect_home`), with ``mlflow_db`` (the ``migrated_mlflow_db``
    fixture) its (git-ignored) MLflow store is a copy of that migrated store."""
    import shutil

    from tests.e2e_root import init_project, run, seed_prefect_home

    root = tmp_path / "project"
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME", "DVC_ROOT")}
    env.update({"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@x", "VEILBENCH_ROOT": str(root), "PYTHONPATH": str(root),
                "COLUMNS": "200", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"})
    init_project(root, params, env)
    run(["git", "add", "-A"], root, env)
    run(["git", "commit", "-qm", "init"], root, env)
    if prefect_db is not None:
        seed_prefect_home(root, prefect_db)
    if mlflow_db is not None:
        shutil.copy(mlflow_db, root / "mlflow.db")
    return root, env


def _processes_of(root: Path) -> list[int]:
    """Processes whose environment names ``root``'s Prefect home (the run's server and watchdog)."""
    marker = f"PREFECT_HOME={root / '.prefect'}".encode()
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker in (p / "environ").read_bytes().split(b"\0"):
                    found.append(int(p.name))
            except OSError:
                continue
    return found


def _user_params(path: str) -> dict:
    from tests.trust.conftest import trust_params

    params = trust_params()
    params["datasets"] = {"mine": {"source": "file", "options": {"path": path}, "test_size": 0.3, "n_parties": 2}}
    params["embeddings"] = {"mine-pca": {"dataset": "mine", "encoder": "pca", "dim": 3}}
    params["sweeps"][SWEEP]["embedding"] = "mine-pca"
    return params


# ------------------------------------------------------------------------------------------------
# the command line's error boundary: environment errors and bugs
# ------------------------------------------------------------------------------------------------


def test_environment_error_is_one_line_with_exit_1(trust_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``reports/`` replaced by a file: ``veilbench report`` cannot write; exit 1, one line naming it."""
    import shutil

    from typer.testing import CliRunner

    from flows.cli import app

    monkeypatch.chdir(trust_root)
    shutil.rmtree(trust_root / "reports")
    (trust_root / "reports").write_text("not a folder\n")
    result = CliRunner().invoke(app, ["report"])
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "reports" in errors[0] and "Traceback" not in result.output, result.output


@pytest.mark.parametrize(("exc", "code", "fragment"), [
    (ValueError("x"), 1, "internal error"),
    (PermissionError(13, "Permission denied", "/r/reports/index.md"), 1, "/r/reports/index.md: Permission denied"),
    (type("ConnectError", (Exception,), {})("refused"), 1, "Prefect server stopped answering"),
])
def test_the_boundary_classifies_errors(exc: BaseException, code: int, fragment: str) -> None:
    from flows.errors import classify
    from veilbench.validation import UsageError, ValidationError

    assert classify(exc)[0] == code and fragment in classify(exc)[1]
    assert classify(ValidationError("y: bad"))[0] == 2 and classify(UsageError("z"))[0] == 2
    assert classify(ValidationError("a\n" * 100))[1].count("\n") <= 13, "long messages are cut"


def test_user_errors_are_not_retried_by_prefect() -> None:
    from tasks.common import _retry_unless_user_error
    from veilbench.validation import ValidationError

    class State:
        def __init__(self, exc: BaseException):
            self.exc = exc

        def result(self, raise_on_failure: bool = True) -> BaseException:
            return self.exc

    assert not _retry_unless_user_error(None, None, State(ValidationError("X: bad")))
    assert _retry_unless_user_error(None, None, State(OSError("disk")))


def test_a_replaced_user_file_invalidates_its_prepared_output(trust_root: Path) -> None:
    """The user's ``user/mine.npz`` replaced after a run: its prepare output is removed (DVC then
    rebuilds it); the unchanged file and the built-in dataset leave their outputs alone."""
    from tasks.sources import invalidate_replaced_sources
    from tests.trust.conftest import valid_user_arrays

    assert invalidate_replaced_sources(trust_root) == []  # the control: nothing changed
    assert (trust_root / "data" / "prepare" / "mine").is_dir()
    np.savez(trust_root / "user" / "mine.npz", **valid_user_arrays(seed=1))
    assert invalidate_replaced_sources(trust_root) == ["mine"]
    assert not (trust_root / "data" / "prepare" / "mine").exists()
    assert (trust_root / "data" / "prepare" / "digits" / "manifest.json").is_file()


def test_params_edited_mid_run_stop_the_next_stage(trust_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run pinned to the params file's bytes: a stage that reads an edited file refuses to run."""
    from tasks.common import snapshot_params
    from tasks.sweep import run_cell
    from veilbench.validation import UsageError

    params = trust_root / "params.yaml"
    for key, value in snapshot_params(params).items():
        monkeypatch.setenv(key, value)
    assert run_cell("release", SWEEP, CELL, root=trust_root) == "reused"  # the control: same bytes
    before = {p: p.read_bytes() for p in (trust_root / "data").rglob("*") if p.is_file()}
    params.write_text(params.read_text().replace("audit_releases: 400", "audit_releases: 500"))
    with pytest.raises(UsageError, match="changed while the run was in progress"):
        run_cell("release", SWEEP, CELL, root=trust_root)
    assert {p: p.read_bytes() for p in (trust_root / "data").rglob("*") if p.is_file()} == before


class _FakeStage:
    """A DVC stage stand-in that counts saves and commits."""

    def __init__(self) -> None:
        self.saved = self.committed = 0

    def save(self, run_cache: bool = True) -> None:
        self.saved += 1

    def commit(self) -> None:
        self.committed += 1


def test_a_stage_finished_after_a_params_edit_is_not_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DVC reads params.yaml when it saves a stage: a stage that finishes after the file changed
    is neither saved nor committed (no lock entry naming params it was not made from); one that
    finished before keeps its entry."""
    from flows.pipeline import PlannedRun
    from tasks.common import snapshot_params
    from veilbench.validation import UsageError

    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    for key, value in snapshot_params(params).items():
        monkeypatch.setenv(key, value)
    before, after = _FakeStage(), _FakeStage()
    run = PlannedRun({"prepare@a": before, "embed@a": after}, {"prepare@a": [], "embed@a": ["prepare@a"]})
    run.record("prepare@a")  # the control: same bytes, recorded
    assert (before.saved, before.committed) == (1, 1) and run._unlocked == [before]
    params.write_text("seed: 1\n")
    with pytest.raises(UsageError, match="params.yaml: changed while the run was in progress"):
        run.record("embed@a")
    assert after.committed == 0 and run._unlocked == [before] and run.executed == ["prepare@a"]


def test_pinned_params_pins_a_stage_process_and_restores_the_environment(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage process under plain ``dvc repro`` pins the file it reads; an outer run's pin wins."""
    from tasks.common import SNAPSHOT_FILE, SNAPSHOT_SHA256, pinned_params, snapshot_params, verify_snapshot
    from veilbench.validation import UsageError

    monkeypatch.delenv(SNAPSHOT_FILE, raising=False)
    monkeypatch.delenv(SNAPSHOT_SHA256, raising=False)
    params = tmp_path / "params.yaml"
    params.write_text("seed: 0\n")
    verify_snapshot()  # nothing pinned: nothing to check
    with pinned_params(params):
        verify_snapshot()
        params.write_text("seed: 1\n")
        with pytest.raises(UsageError, match="changed while the run"):
            verify_snapshot()
    assert SNAPSHOT_SHA256 not in os.environ and SNAPSHOT_FILE not in os.environ
    outer = snapshot_params(params)  # a run pinned "seed: 1"; the file now says "seed: 2"
    monkeypatch.setenv(SNAPSHOT_FILE, outer[SNAPSHOT_FILE])
    monkeypatch.setenv(SNAPSHOT_SHA256, outer[SNAPSHOT_SHA256])
    params.write_text("seed: 2\n")
    with pinned_params(params), pytest.raises(UsageError):
        verify_snapshot()
    assert os.environ[SNAPSHOT_SHA256] == outer[SNAPSHOT_SHA256]


def test_a_stage_process_whose_params_changed_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Under ``dvc repro`` a stage is one process and DVC saves it after the process exits 0,
    reading params.yaml then: a process whose file changed meanwhile must not exit 0."""
    import yaml

    from flows._stage import main
    from tasks.common import SNAPSHOT_FILE, SNAPSHOT_SHA256
    from tests.trust.conftest import trust_params, write_params

    monkeypatch.delenv(SNAPSHOT_FILE, raising=False)
    monkeypatch.delenv(SNAPSHOT_SHA256, raising=False)
    params = write_params(tmp_path / "params.yaml", trust_params())
    ran = []

    def stage_flow(keys: list[str] | None = None, params_path: str | None = None, edit: bool = True) -> list[str]:
        ran.append(keys)
        if edit:
            params.write_text(params.read_text().replace("audit_releases: 400", "audit_releases: 500"))
        return []

    assert main("release", lambda **kw: stage_flow(**kw, edit=False), ["--params", str(params)]) == 0  # control
    assert main("release", stage_flow, ["--params", str(params), "--sweep", SWEEP]) == 2
    assert ran == [None, [SWEEP]] and "changed while the run" in capsys.readouterr().err
    assert yaml.safe_load(params.read_text())["sweeps"][SWEEP]["params"]["audit_releases"] == 500
    assert SNAPSHOT_SHA256 not in os.environ


def test_run_outside_a_dvc_repository_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from flows.cli import app
    from tests.trust.conftest import trust_params, write_params

    write_params(tmp_path / "params.yaml", trust_params())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VEILBENCH_ROOT", str(tmp_path))
    result = CliRunner().invoke(app, ["run"])
    assert result.exit_code == 2, result.output
    assert "not a DVC repository" in result.output and str(tmp_path) in " ".join(result.output.split())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"], "nothing may be created"
