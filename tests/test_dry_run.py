"""`veilbench run --dry-run` on the reproduced project: the stale stages and the cells they would
compute, nothing run, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e_root import VEILBENCH_RUN, copy_project, project_env, run, workspace_snapshot


@pytest.mark.slow
def test_dry_run_lists_stale_stages_and_the_cells_to_compute(reproduced_project, prefect_server: str,
                                                             tmp_path: Path) -> None:
    root = copy_project(reproduced_project.root, tmp_path / "repo")
    env = project_env(prefect_server)
    assert "0 stage(s) would run (all up to date)" in run([*VEILBENCH_RUN, "--dry-run"], root, env)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sweeps"]["ss"]["grid"]["epsilon"] = [2.0, 8.0]  # ε = 4 → 2: one new cell
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    before = workspace_snapshot(root)
    store = (root / "mlflow.db").stat().st_mtime_ns
    out = run([*VEILBENCH_RUN, "--dry-run"], root, env)
    lines = [line.strip() for line in out.splitlines()]
    assert "dry run: 5 stage(s) would run; nothing was run or written" in lines, out
    assert "release@ss: 1 of 3 cell(s) to compute (epsilon=2.0)" in lines, out
    assert "integrate@ss: 3 cell(s); which to compute is decided after release@ss" in lines, out
    assert "report" in lines
    assert not any(line.startswith(("prepare@", "embed@")) for line in lines), "their inputs did not change"
    assert workspace_snapshot(root) == before and (root / "mlflow.db").stat().st_mtime_ns == store
    out = run([*VEILBENCH_RUN, "--dry-run", "--stage", "release@ss"], root, env)
    assert "dry run: 1 stage(s) would run" in out and "release@ss: 1 of 3" in out
