"""The run-path benchmark (benchmarks/bench_run_paths.py): its quick mode runs both ways end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.benchmark_run import ROOT, load_benchmark, run_quick


def test_quick_params_keep_one_sweep_one_cell_one_seed() -> None:
    bench = load_benchmark("bench_run_paths.py")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    quick = bench.quick_params(params)
    (name, sweep), = quick["sweeps"].items()
    assert name == next(iter(params["sweeps"])) and sweep["seeds"] == params["sweeps"][name]["seeds"][:1]
    assert all(len(v) == 1 for v in (sweep.get("grid") or {}).values()) and len(sweep.get("cells") or []) <= 1
    assert set(quick["embeddings"]) == {sweep["embedding"]}


def test_ratios_are_per_stage_over_in_process() -> None:
    bench = load_benchmark("bench_run_paths.py")
    run = {"first": {"wall_s": 10.0, "cpu_s": 8.0}, "second": {"wall_s": 2.0, "cpu_s": 0.0}}
    slow = {"first": {"wall_s": 30.0, "cpu_s": 16.0}, "second": {"wall_s": 5.0, "cpu_s": 3.0}}
    assert bench.ratios({"in_process": run, "per_stage_processes": slow}) == {
        "first_wall": 3.0, "first_cpu": 2.0, "second_wall": 2.5, "second_cpu": None}


@pytest.mark.slow
def test_quick_run_measures_both_paths_with_the_same_results(tmp_path: Path) -> None:
    out = run_quick("bench_run_paths.py", "--out", tmp_path / "run_paths.json", timeout=2400)
    assert out["ok"] and out["quick"] and out["same_metrics"]
    assert set(out["paths"]) == {"in_process", "per_stage_processes"}
    for name, path in out["paths"].items():
        assert path["stages"] == 7, name  # prepare, embed, the four cell stages, report
        assert path["first"]["wall_s"] > 0 and path["first"]["cpu_s"] > 0, name
        assert path["second"]["files_written"] == [] and not path["second"]["lock_changed"], name
    assert set(out["per_stage_over_in_process"]) == {"first_wall", "first_cpu", "second_wall", "second_cpu"}
