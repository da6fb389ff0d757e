"""``dvc repro`` end to end in a temporary git repository on tiny params.

Checks the reproducibility contract: a second ``dvc repro`` reruns nothing, and changing one ε
reruns only the stages of the sweep that holds it (plus the report), and inside them recomputes
only the cell with that ε; ``veilbench run`` plans with DVC and writes the lock ``dvc repro`` would.
One project serves both commands (each full pipeline run here costs a process per stage).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, tiny_params

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _stages_run(output: str) -> set[str]:
    """Stages that ran: DVC's "Running stage 'x'" lines, or `veilbench run`'s "[k/n] x: …" lines."""
    import re

    dvc = {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage '")}
    ours = {m.group(1) for m in re.finditer(r"^\[\d+/\d+\] (\S+?)(?::| in )", output, re.M)}
    return dvc | ours


@pytest.fixture
def dvc_repo(tmp_path: Path, prefect_server: str) -> tuple[Path, dict[str, str]]:
    for item in ("veilbench", "tasks", "flows"):
        shutil.copytree(REPO / item, tmp_path / item, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    (tmp_path / ".gitignore").write_text("mlflow.db\n__pycache__/\n")
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x", "VEILBENCH_ROOT": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # `python` in dvc.yaml
    dvc = [sys.executable, "-m", "dvc"]
    _run(["git", "init", "-q"], tmp_path, env)
    _run([*dvc, "init", "-q"], tmp_path, env)
    _run(["git", "add", "-A"], tmp_path, env)
    _run(["git", "commit", "-qm", "init"], tmp_path, env)
    return tmp_path, env


def test_dvc_repro_is_incremental_and_veilbench_run_keeps_its_lock(dvc_repo: tuple[Path, dict[str, str]]) -> None:
    """`dvc repro` runs every stage's ``cmd`` once and then nothing; `veilbench run` (stale stages in
    one process, planned by DVC) agrees that nothing is stale; after one ε changes it reruns only
    that sweep's stages and, inside them, only that cell, and locks them exactly as `dvc repro` would
    (a following `dvc repro` reruns nothing)."""
    root, env = dvc_repo
    dvc = [sys.executable, "-m", "dvc"]
    veilbench = [sys.executable, "-m", "flows.cli", "run"]
    params = yaml.safe_load((root / "params.yaml").read_text())
    del params["sweeps"]["ss-identity"]  # one sweep is enough here: every stage is its own process
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    first = _stages_run(_run([*dvc, "repro"], root, env))
    assert first == {"prepare@digits", "embed@digits-pca", "release@ss", "integrate@ss", "attack@ss", "evaluate@ss", "report"}
    assert (root / "reports/index.md").is_file() and (root / "reports/sweeps/ss/metrics.json").is_file()
    assert _stages_run(_run([*dvc, "repro"], root, env)) == set(), "a second repro must rerun nothing"

    assert _stages_run(_run(veilbench, root, env)) == set(), "veilbench run after dvc repro must rerun nothing"
    from flows.pipeline import reproduce_in_process

    assert reproduce_in_process(root, before_execute=lambda: pytest.fail("up to date: no server needed")) == []

    params["sweeps"]["ss"]["grid"]["epsilon"] = [4.0, 16.0]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert _stages_run(_run(veilbench, root, env)) == {"release@ss", "integrate@ss", "attack@ss", "evaluate@ss", "report"}
    release = json.loads((root / "data/release/ss/sweep.json").read_text())
    assert release["computed"] == ["epsilon=16.0"] and sorted(release["reused"]) == ["epsilon=4.0", "mechanism=clean"]
    assert set(json.loads((root / "reports/sweeps/ss/metrics.json").read_text())) == {
        "epsilon=4.0", "epsilon=16.0", "mechanism=clean"}
    assert "up to date" in _run([*dvc, "status"], root, env).lower()
    assert _stages_run(_run([*dvc, "repro"], root, env)) == set(), "dvc repro after veilbench run must rerun nothing"
    shown = json.loads(_run([*dvc, "metrics", "show", "--json"], root, env))
    (workspace,) = shown.values()
    assert workspace["data"]["reports/sweeps/ss/summary.json"]["data"]["cells"] == 3
