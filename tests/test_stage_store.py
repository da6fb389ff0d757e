"""A cell stage is keyed on what it reads, and each key is computed once (tasks/stage_reads.py, tasks/store.py).

A DC sweep of three integrators on one obfuscation: the release and the attack (which do not read
the integrator) are computed once and reused by the other two cells; the results equal those of
each cell computed on its own. The same cells under another params file and output root are
reused from the store. A stage that reads an option or input its family did not declare fails.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from tasks.embed import embed
from tasks.prepare import prepare
from tasks.sweep import run_sweep_stage
from tests.conftest import tiny_params
from tests.e2e_root import copy_project
from veilbench.io import read_bundle, read_json
from veilbench.stages import STAGES as CELL_STAGES

DC = {"n_estimators": 20, "attacks": ["lr", "pinv"], "n_anchor": 120, "n_smote_source": 40, "d_tilde": 4}
METHODS = ["lki", "nki", "mpp"]


def _params(sweep: str = "dcs", **dc: object) -> dict:
    params = tiny_params()
    params["sweeps"] = {sweep: {"family": "dc", "embedding": "digits-pca", "seeds": [0, 1],
                                "params": {**DC, **dc}, "grid": {"method": METHODS}}}
    params["report"] = {"title": "t"}
    return params


def _sweep_record(root: Path, stage: str, sweep: str = "dcs") -> dict:
    return read_json(root / "data" / stage / sweep / "sweep.json")


def _run_all(root: Path, params: dict, params_name: str = "params.yaml", sweep: str = "dcs") -> None:
    path = root / params_name
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    prepare("digits", path, root)
    embed("digits-pca", path, root)
    for stage in CELL_STAGES:
        run_sweep_stage(stage, sweep, path, root)


@pytest.fixture(scope="module")
def dc_built(tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path) -> Path:
    """The DC sweep run once per module (read only; tests that change it take a copy: ``dc_run``)."""
    root = tmp_path_factory.mktemp("dc-store")
    shutil.copy(migrated_mlflow_db, root / "mlflow.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VEILBENCH_ROOT", str(root))
        mp.delenv("DVC_ROOT", raising=False)
        _run_all(root, _params())
    return root


@pytest.fixture
def dc_run(dc_built: Path, workdir: Path) -> Path:
    """A private copy of :func:`dc_built` in ``workdir`` (the stages' root), its store included."""
    return copy_project(dc_built, workdir)


def test_three_integrators_compute_one_release_and_one_attack(dc_built: Path) -> None:
    dc_run = dc_built
    cells = [f"method={m}" for m in METHODS]
    for stage in ("release", "attack"):
        record = _sweep_record(dc_run, stage)
        assert len(record["computed"]) == 1 and sorted(record["computed"] + record["reused"]) == sorted(cells), stage
    assert sorted(_sweep_record(dc_run, "integrate")["computed"]) == sorted(cells)
    bundles = {c: read_bundle(dc_run / "data" / "release" / "dcs" / c) for c in cells}
    first = bundles[cells[0]][0]
    for cell, (arrays, manifest) in bundles.items():
        assert arrays.keys() == first.keys() and all(np.array_equal(arrays[k], first[k]) for k in first), cell
        assert manifest["cell"] == cell and manifest["params"]["family_params"]["method"] == cell.split("=")[1]
    keys = {read_json(dc_run / "data" / "release" / "dcs" / c / "manifest.json")["input_key"] for c in cells}
    assert len(keys) == 1
    from tasks.store import lookup, store_dir

    entry = lookup(store_dir(dc_run), "release", keys.pop())
    assert entry is not None and all(os.path.samefile(entry / "arrays.npz", dc_run / "data/release/dcs" / c / "arrays.npz")
                                     for c in cells), "one file, hard-linked into every cell"


def test_shared_results_equal_each_cell_computed_alone(dc_built: Path) -> None:
    """Results unchanged: every cell's evaluate metrics equal the four stage functions run for that
    cell alone, with all its options, on the same prepared inputs."""
    from veilbench.dc import family

    dc_run = dc_built
    base = {"prepare": read_bundle(dc_run / "data/prepare/digits")[0], "embed": read_bundle(dc_run / "data/embed/digits-pca")[0]}
    for method in METHODS:
        params = family.Params(**{**DC, "method": method})
        record = read_json(dc_run / "reports/sweeps/dcs/cells" / f"method={method}.json")
        for seed in (0, 1):
            state = dict(base)
            for name in ("release", "integrate", "attack", "evaluate"):
                out = getattr(family, name)(state, params, seed)
                state[name] = out.arrays
            stored = record["per_seed"][str(seed)]
            assert {k: stored[k] for k in out.metrics} == pytest.approx(out.metrics, rel=0, abs=0), (method, seed)


def test_another_params_file_and_root_reuse_the_same_cells(dc_run: Path) -> None:
    """A second params file (another sweep name, output root ``runs/paper``) reuses every cell from the store."""
    other = dc_run / "runs" / "paper"
    other.mkdir(parents=True)
    (other / "mlflow.db").write_bytes((dc_run / "mlflow.db").read_bytes())
    _run_all(other, _params("paper-dc"), "params.paper.yaml", "paper-dc")
    for stage in ("release", "integrate", "attack"):
        assert _sweep_record(other, stage, "paper-dc")["computed"] == [], stage
    for method in METHODS:
        a = read_json(dc_run / "reports/sweeps/dcs/cells" / f"method={method}.json")
        b = read_json(other / "reports/sweeps/paper-dc/cells" / f"method={method}.json")
        assert a["per_seed"] == b["per_seed"] and b["sweep"] == "paper-dc" and b["cell"] == f"method={method}"


def test_an_option_the_stage_reads_still_separates_cells(dc_run: Path) -> None:
    """d̃ is read by the release: another d̃ is another release, computed, not reused."""
    _run_all(dc_run, _params(d_tilde=3))
    assert len(_sweep_record(dc_run, "release")["computed"]) == 1
    assert read_bundle(dc_run / "data/release/dcs/method=lki")[0]["s0__ir_anchor"].shape[2] == 3


def test_a_damaged_store_entry_is_recomputed_not_copied(dc_run: Path) -> None:
    from tasks.store import lookup, store_dir

    cell = dc_run / "data/release/dcs/method=nki"
    key = read_json(cell / "manifest.json")["input_key"]
    entry = lookup(store_dir(dc_run), "release", key)
    assert entry is not None
    for c in METHODS:  # every cell's copy, and (hard links) the entry's, are damaged
        path = dc_run / f"data/release/dcs/method={c}/arrays.npz"
        path.unlink()
    (entry / "arrays.npz").write_bytes(b"damaged")
    assert lookup(store_dir(dc_run), "release", key) is None
    run_sweep_stage("release", "dcs", root=dc_run)
    record = _sweep_record(dc_run, "release")
    assert len(record["computed"]) == 1 and len(record["reused"]) == 2
    assert lookup(store_dir(dc_run), "release", key) is not None, "the recomputed output replaced the damaged entry"


@pytest.mark.parametrize(("table", "stage", "drop", "message"), [
    ("STAGE_OPTIONS", "release", "d_tilde", "reads option 'd_tilde'"),
    ("STAGE_OPTIONS", "attack", "target_party", "reads option 'target_party'"),
    ("STAGE_INPUTS", "integrate", "release", "reads the arrays of stage 'release'"),
])
def test_an_undeclared_read_fails_the_cell(dc_run: Path, monkeypatch: pytest.MonkeyPatch, table: str, stage: str,
                                           drop: str, message: str) -> None:
    """Without the declaration the stage would be keyed without the option (and reused for cells
    that differ in it); instead the stage sees no such option and the cell fails."""
    from tasks.stage_reads import UndeclaredRead
    from tasks.sweep import run_cell
    from veilbench.dc import family

    declared = getattr(family, table)
    monkeypatch.setitem(declared, stage, tuple(n for n in declared[stage] if n != drop))
    with pytest.raises(UndeclaredRead, match=message):
        run_cell(stage, "dcs", "method=lki", root=dc_run)


def test_undeclared_families_keep_the_full_key(workdir: Path) -> None:
    """A family without declarations (here ScoreShield) is keyed on every option, as before."""
    from tasks.stage_reads import key_options, stage_reads
    from veilbench.scoreshield import family

    reads = stage_reads(family, "release")
    params = family.Params(mechanism="gaussian", epsilon=2.0)
    assert reads.options is None and key_options(params, reads) == params.model_dump()
    assert json.dumps(key_options(params, reads), default=str)
