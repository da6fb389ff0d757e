"""The DC paper-cell benchmark: its per-seed totals count a shared release and attack once per
sweep cell, and its quick mode writes the schema on Fashion-MNIST."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_run import load_benchmark, run_quick

DATA = Path("/usr/share/datasets/fashion-mnist")


def _row(seed: int, stage: str, integrator: str, cpu: float) -> dict:
    return {"seed": seed, "stage": stage, "integrator": integrator, "cpu_seconds": cpu}


def test_a_cell_counts_the_shared_stages_once_per_sweep_and_both_sweeps_once_in_total() -> None:
    bench = load_benchmark("bench_dc_paper_cell.py")
    rows = []
    for seed, scale in ((0, 1.0), (1, 3.0)):
        rows += [_row(seed, "release", "shared", 10 * scale), _row(seed, "attack", "shared", 5 * scale),
                 _row(seed, "integrate", "nki", 4 * scale), _row(seed, "evaluate", "nki", 1 * scale),
                 _row(seed, "integrate", "lki", 0.5 * scale), _row(seed, "evaluate", "lki", 1 * scale)]
    out = bench.summarise(rows, [0, 1])
    assert out["cpu_seconds_per_seed"] == {"nki": 40.0, "lki": 33.0}  # medians of (20, 60) and (16.5, 49.5)
    assert out["cpu_seconds"] == {"nki": 200.0, "lki": 165.0}  # × the sweeps' 5 seeds
    assert out["both_sweeps_cpu_seconds_per_seed"] == 43.0  # median of (21.5, 64.5): release and attack once
    assert out["stage_share"]["release:shared"] == pytest.approx(20.0 / 43.0)


@pytest.mark.skipif(not (DATA / "train-images-idx3-ubyte.gz").is_file(),
                    reason="Fashion-MNIST IDX files absent: apt-get install dataset-fashion-mnist")
@pytest.mark.slow
def test_quick_benchmark_schema(tmp_path: Path) -> None:
    report = run_quick("bench_dc_paper_cell.py", "--out", tmp_path / "dc_paper_cell.json", timeout=1200)
    assert report["benchmark"] == "dc_paper_cell" and report["quick"] and not report["citable"]
    assert report["n_anchor"] == 2000 and set(report["cells"]) == {"pca"}
    cell = report["cells"]["pca"]
    assert set(cell["cpu_seconds_per_seed"]) == {"nki", "lki"} and all(v > 0 for v in cell["cpu_seconds_per_seed"].values())
    assert cell["nystrom"]["solver"] == "krylov" and cell["nystrom"]["ritz_residual"] <= 1e-8
    assert {(r["stage"], r["integrator"]) for r in report["rows"]} == {
        ("release", "shared"), ("attack", "shared"), ("integrate", "nki"), ("evaluate", "nki"),
        ("integrate", "lki"), ("evaluate", "lki")}
    assert {"unit_cpu_seconds", "unit_drift", "unit_drift_flagged"} <= set(report["unit"]["pca"])
