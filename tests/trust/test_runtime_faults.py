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


def _edit_manifest_epsilon(path: Path) -> None:
    """The careless edit of a release manifest: ε 1 → 99 (the arrays and the seal left as they were)."""
    manifest = json.loads(path.read_text())
    manifest["params"]["family_params"]["epsilon"] = 99.0
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True))


def _drop_seal(path: Path) -> None:
    manifest = json.loads(path.read_text())
    del manifest["sha256"]
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True))


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
    ("hand-edited-release-manifest", "release", lambda r: _release(r) / "manifest.json", _edit_manifest_epsilon),
    ("release-manifest-without-its-seal", "release", lambda r: _release(r) / "manifest.json", _drop_seal),
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
    return _processes_with(f"PREFECT_HOME={root / '.prefect'}")


def _gone(find: Callable[[], list[int]], seconds: float) -> bool:
    """Wait up to ``seconds`` for ``find()`` (a process search) to come back empty; True when it did."""
    import time

    deadline = time.monotonic() + seconds
    while find() and time.monotonic() < deadline:
        time.sleep(0.2)
    return not find()


def _processes_with(entry: str) -> list[int]:
    """Processes whose environment holds ``entry`` (``NAME=value``)."""
    marker = entry.encode()
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


def test_only_transient_errors_are_retried_by_prefect() -> None:
    """A user error or a bug fails the same way again: not retried (every failing cell used to run
    twice); a timeout or a locked SQLite store is."""
    import sqlite3

    from tasks.common import _retry_transient
    from veilbench.validation import ValidationError

    class State:
        def __init__(self, exc: BaseException):
            self.exc = exc

        def result(self, raise_on_failure: bool = True) -> BaseException:
            return self.exc

    for deterministic in (ValidationError("X: bad"), ValueError("a bug"), PermissionError(13, "denied"), KeyError("k")):
        assert not _retry_transient(None, None, State(deterministic)), deterministic
    for passing in (TimeoutError("slow"), ConnectionResetError("reset"), sqlite3.OperationalError("database is locked")):
        assert _retry_transient(None, None, State(passing)), passing


def test_sources_file_names_each_data_sets_file_and_prepare_checks_it(trust_root: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``data/sources.yaml`` (dvc.yaml's vars) names the user file of ``mine`` (relative: it lies
    under the root) and the loader registry for the built-in ``digits``; a prepare stage run by DVC
    whose data set's entry names another file refuses, changing nothing, until the file is rewritten."""
    import yaml

    from tasks.prepare import prepare
    from tasks.sources import BUILTIN_SOURCE, SOURCES_FILE, write_sources
    from tests.trust.conftest import valid_user_arrays
    from veilbench.validation import UsageError

    assert write_sources(trust_root) and not write_sources(trust_root)  # written once, then up to date
    entries = yaml.safe_load((trust_root / SOURCES_FILE).read_text())["datasets"]
    assert entries == {"digits": {"source_file": BUILTIN_SOURCE}, "mine": {"source_file": "user/mine.npz"}}
    params = trust_root / "params.yaml"
    params.write_text(params.read_text().replace("user/mine.npz", "user/other.npz"))
    np.savez(trust_root / "user" / "other.npz", **valid_user_arrays(seed=3))
    monkeypatch.setenv("DVC_ROOT", str(trust_root))  # as DVC runs a stage
    before = {p: p.read_bytes() for p in (trust_root / "data" / "prepare").rglob("*") if p.is_file()}
    with pytest.raises(UsageError, match=r"sources.yaml: names 'user/mine.npz' as the file of datasets.mine, but "
                                         r"params.yaml reads 'user/other.npz'; run `python -m tasks.sources --write`"):
        prepare("mine", root=trust_root)
    assert {p: p.read_bytes() for p in (trust_root / "data" / "prepare").rglob("*") if p.is_file()} == before
    assert write_sources(trust_root)
    assert (prepare("mine", root=trust_root) / "manifest.json").is_file()


def test_dvc_gives_each_prepare_stage_its_data_sets_file(tmp_path: Path) -> None:
    """The DVC behaviour ``data/sources.yaml`` relies on (dvc is pinned; re-check on an upgrade):
    the ``datasets`` mapping of a ``vars`` file is merged into that of ``params.yaml``, so
    ``${item.source_file}`` resolves for every ``prepare@<name>``, which then depends on that file."""
    import shutil

    from dvc.repo import Repo

    from tasks.sources import BUILTIN_SOURCE, write_sources
    from tests.trust.conftest import trust_params, with_user_path, write_params

    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "dvc.yaml", root / "dvc.yaml")
    write_params(root / "params.yaml", with_user_path(trust_params(), root, "user/mine.npz"))
    write_sources(root)
    Repo.init(str(root), no_scm=True).close()
    with Repo(str(root)) as repo:
        deps = {stage.name: [d.def_path for d in stage.deps] for stage in repo.index.stages}
    assert "user/mine.npz" in deps["prepare@mine"] and BUILTIN_SOURCE not in deps["prepare@mine"], deps["prepare@mine"]
    assert BUILTIN_SOURCE in deps["prepare@digits"], deps["prepare@digits"]


def test_the_repositorys_sources_file_is_up_to_date() -> None:
    """The committed ``data/sources.yaml`` is the one ``params.yaml`` gives (``python -m tasks.sources``)."""
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "tasks.sources"], cwd=repo, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "VEILBENCH_ROOT": str(repo), "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stdout + proc.stderr


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

    class Flow:
        """A stage flow as :func:`flows._stage.main` runs it: given its task runner, then called."""

        def __init__(self, edit: bool) -> None:
            self.edit = edit

        def with_options(self, task_runner: object) -> Flow:
            return self

        def __call__(self, **kwargs: object) -> list[str]:
            return stage_flow(**kwargs, edit=self.edit)

    assert main("release", Flow(edit=False), ["--params", str(params)]) == 0  # control
    assert main("release", Flow(edit=True), ["--params", str(params), "--sweep", SWEEP]) == 2
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
