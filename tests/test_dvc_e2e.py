"""``dvc repro`` end to end in a git repository on tiny params.

Checks the reproducibility contract: ``dvc repro`` runs every stage once, a second ``dvc repro``
reruns nothing, and changing one ε reruns only the stages of the sweep that holds it (plus the
report), and inside them recomputes only the cell with that ε; ``veilbench run`` plans with DVC and
writes the lock ``dvc repro`` would. The project is the session's reproduced project
(:mod:`tests.e2e_root`: built by ``dvc repro``), in a private copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.e2e_root import ALL_STAGES, DVC, VEILBENCH_RUN, copy_project, project_env, run, stages_run

pytestmark = pytest.mark.slow

_stages_run = stages_run  # the name other test modules import


def test_dvc_repro_is_incremental_and_veilbench_run_keeps_its_lock(reproduced_project, prefect_server: str,
                                                                   tmp_path: Path) -> None:
    """`dvc repro` runs every stage's ``cmd`` once and then nothing (the bytecode caches its stage
    processes wrote beside the code change no dependency's hash); `veilbench run` (stale stages in
    one process, planned by DVC) agrees that nothing is stale; after one ε changes it reruns only
    that sweep's stages and, inside them, only that cell, and locks them exactly as `dvc repro` would
    (a following `dvc repro` reruns nothing)."""
    assert stages_run(reproduced_project.repro_output) == ALL_STAGES, reproduced_project.repro_output[-3000:]
    root, env = copy_project(reproduced_project.root, tmp_path / "repo"), project_env(prefect_server)
    assert (root / "reports/index.md").is_file() and (root / "reports/sweeps/ss/metrics.json").is_file()
    assert any((root / "veilbench").rglob("__pycache__/*.pyc")), "the stages ran without writing bytecode"
    assert stages_run(run([*DVC, "repro"], root, env)) == set(), "a second repro must rerun nothing"

    assert stages_run(run(VEILBENCH_RUN, root, env)) == set(), "veilbench run after dvc repro must rerun nothing"
    from flows.pipeline import reproduce_in_process

    assert reproduce_in_process(root, before_execute=lambda: pytest.fail("up to date: no server needed")) == []

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sweeps"]["ss"]["grid"]["epsilon"] = [4.0, 16.0]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert stages_run(run(VEILBENCH_RUN, root, env)) == {"release@ss", "integrate@ss", "attack@ss", "evaluate@ss",
                                                         "report"}
    release = json.loads((root / "data/release/ss/sweep.json").read_text())
    assert release["computed"] == ["epsilon=16.0"] and sorted(release["reused"]) == ["epsilon=4.0", "mechanism=clean"]
    assert set(json.loads((root / "reports/sweeps/ss/metrics.json").read_text())) == {
        "epsilon=4.0", "epsilon=16.0", "mechanism=clean"}
    assert "up to date" in run([*DVC, "status"], root, env).lower()
    assert stages_run(run([*DVC, "repro"], root, env)) == set(), "dvc repro after veilbench run must rerun nothing"
    shown = json.loads(run([*DVC, "metrics", "show", "--json"], root, env))
    (workspace,) = shown.values()
    assert workspace["data"]["reports/sweeps/ss/summary.json"]["data"]["cells"] == 3
