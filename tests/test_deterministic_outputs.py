"""A fresh clone reproduces the committed pipeline bit for bit: DVC outputs hold no run timings.

Every file of a DVC output is a function of params, code, data and seeds; what a run measures about
itself (seconds, wall-clock start, which cells it computed or reused) goes to ``timings.json`` and
``sweep.json`` beside the outputs, which ``.dvcignore`` hides from DVC. So a clone that recomputes
everything records the same hashes in ``dvc.lock`` as the run it was cloned from, and its
``git status`` stays clean. A timing written back into a manifest, a cell record or a metric would
break this test: the wall-clock start of two runs always differs.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import tiny_params
from tests.e2e_root import DVC, VEILBENCH_RUN, project_env
from tests.e2e_root import run as _run


def determinism_params() -> dict:
    """The tiny params plus one cell of each stage function that measures its own time: the
    ScoreShield Gram release (the mechanism's seconds) and DC's NKI integration (fit and transform
    seconds, the CPU seconds of each fit step)."""
    params = tiny_params()
    del params["sweeps"]["ss-identity"]
    params["sweeps"]["gram"] = {
        "family": "scoreshield", "embedding": "digits-pca", "seeds": [0],
        "params": {"regime": "gram", "mechanism": "aap", "adjacency": "output", "gram_sensitivity": 1.0,
                   "n_records": 60, "delta": 1e-5, "epsilon": 8.0}}
    params["sweeps"]["dc"] = {
        "family": "dc", "embedding": "digits-pca", "seeds": [0],
        "params": {"method": "nki", "n_anchor": 100, "n_smote_source": 30, "d_tilde": 5, "n_estimators": 20,
                   "attacks": ["lr", "pinv"], "references": False}}
    params["report"]["frontiers"][0]["sweeps"] = ["ss"]
    return params


#: Files beside the outputs that record the run itself (``.dvcignore`` lists them).
RUN_RECORDS = ("timings.json", "sweep.json")


def _run_stages(root: Path) -> None:
    from tasks.embed import embed
    from tasks.prepare import prepare
    from tasks.sweep import run_sweep_stage
    from veilbench.stages import STAGES

    prepare("digits", root=root)
    embed("digits-pca", root=root)
    for sweep in determinism_params()["sweeps"]:
        for stage in STAGES:
            run_sweep_stage(stage, sweep, root=root)


def _outputs(root: Path) -> dict[str, bytes]:
    """Every file the stages wrote under ``data/`` and ``reports/sweeps/``, run records excepted."""
    return {str(p.relative_to(root)): p.read_bytes() for base in ("data", "reports/sweeps")
            for p in sorted((root / base).rglob("*")) if p.is_file() and p.name not in RUN_RECORDS}


def test_two_runs_write_byte_identical_outputs_and_keep_their_timings_beside_them(
        tmp_path: Path, migrated_mlflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stages, in process, in two fresh roots: every output file is the same bytes; only the
    timings sidecars differ (the wall-clock start of two runs always does)."""
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        root.mkdir()
        (root / "params.yaml").write_text(yaml.safe_dump(determinism_params(), sort_keys=False))
        shutil.copy(migrated_mlflow_db, root / "mlflow.db")
        monkeypatch.setenv("VEILBENCH_ROOT", str(root))
        _run_stages(root)
    first, second = (_outputs(r) for r in roots)
    assert sorted(first) == sorted(second)
    assert any(name.endswith("manifest.json") for name in first) and any("/cells/" in name for name in first)
    differ = [name for name in first if first[name] != second[name]]
    assert not differ, f"outputs that differ between two runs on the same inputs: {differ}"
    for sidecar in ("data/prepare/digits", "data/embed/digits-pca", "data/release/gram/default",
                    "data/integrate/dc/default", "data/evaluate/ss/epsilon=4.0"):
        a, b = ((r / sidecar / "timings.json").read_text() for r in roots)
        assert a != b, f"{sidecar}: the timings sidecar records this run"
    dc = json.loads((roots[0] / "data/integrate/dc/default/timings.json").read_text())["per_seed"]["0"]
    assert dc["cost_fit_seconds"] > 0 and dc["seconds"] >= dc["cost_fit_seconds"]
    assert "cost_fit_seconds" not in (roots[0] / "data/integrate/dc/default/manifest.json").read_text()
    assert "mechanism_seconds" in json.loads((roots[0] / "data/release/gram/default/timings.json").read_text())["per_seed"]["0"]

    from mlflow.tracking import MlflowClient  # the stage's own timings are MLflow metrics of its run

    client = MlflowClient(f"sqlite:///{roots[0] / 'mlflow.db'}")
    exp_id = client.get_experiment_by_name("veilbench-test").experiment_id
    (integrate_run,) = client.search_runs([exp_id], "tags.stage = 'integrate' and tags.sweep = 'dc' and tags.run_kind = 'cell'")
    assert integrate_run.data.metrics["cost_fit_seconds.seed_0"] == pytest.approx(dc["cost_fit_seconds"])


def _lock(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.lock").read_text())["stages"]


@pytest.mark.slow
def test_a_fresh_clone_recomputes_the_same_dvc_hashes_and_leaves_git_clean(reproduced_project, tmp_path: Path,
                                                                          prefect_server: str) -> None:
    """The origin is the session's reproduced project (:mod:`tests.e2e_root`: ``dvc repro``, one
    process per stage); its clone recomputes everything with ``veilbench run`` (one process, cells
    in threads) and must lock the same hashes."""
    env = project_env(prefect_server)
    origin, clone = reproduced_project.root, tmp_path / "clone"
    _run(["git", "clone", "-q", str(origin), str(clone)], tmp_path, env)
    assert not (clone / "data" / "release").exists() or not any((clone / "data" / "release").rglob("manifest.json"))
    records = sorted((clone / "reports" / "sweeps").glob("*/cells/*.json"))
    assert records, "the evaluate records are committed"
    for record in records:  # without them evaluate reuses nothing either: every stage recomputes
        record.unlink()
    out = _run(VEILBENCH_RUN, clone, env)
    assert re.search(r"cells: \d+ computed, 0 reused", out), out[-2000:]

    ours, theirs = _lock(clone), _lock(origin)
    differ = sorted(s for s in set(ours) | set(theirs) if ours.get(s) != theirs.get(s))
    assert not differ, f"stages whose dvc.lock entry differs between the clone and its origin: {differ}"
    assert _run(["git", "status", "--porcelain"], clone, env).strip() == "", "the clone's run left tracked files modified"

    # the run-dependent values are there, beside the outputs, and differ between the two runs
    for sidecar in ("data/prepare/digits/timings.json", "data/release/ss/epsilon=4.0/timings.json",
                    "data/integrate/ss/epsilon=4.0/timings.json", "data/evaluate/ss/epsilon=4.0/timings.json"):
        assert (clone / sidecar).read_text() != (origin / sidecar).read_text(), sidecar
    release = json.loads((clone / "data/release/ss/epsilon=4.0/timings.json").read_text())["per_seed"]["0"]
    assert "mechanism_seconds" in release and "mechanism_seconds" not in (
        clone / "data/release/ss/epsilon=4.0/manifest.json").read_text()

    # DVC does not hash them: rewriting every run record changes no output's hash
    for path in [*(clone / "data").rglob("timings.json"), *(clone / "data").glob("*/*/sweep.json")]:
        path.write_text('{"rewritten": true}\n')
    assert "up to date" in _run([*DVC, "status"], clone, env).lower()
