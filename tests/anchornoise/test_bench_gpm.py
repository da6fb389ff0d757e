"""The GPM benchmark script writes the schema the issue asks for (quick mode)."""

from __future__ import annotations

import sys

import pytest

from tests.benchmark_run import ROOT, run_quick


@pytest.mark.slow  # the benchmark script in a subprocess
def test_quick_benchmark_schema(tmp_path):
    report = run_quick("bench_gpm.py", "--out", tmp_path / "gpm.json", timeout=120, extra=("--seed", "3"))
    assert report["benchmark"] == "gpm" and report["mode"] == "quick" and report["seed"] == 3
    rows = report["rows"]
    assert rows and all(set(r) == {"solver", "m", "r", "d", "v", "iterations", "seconds", "objective"} for r in rows)
    assert {r["solver"] for r in rows} == {"gpm", "alternating"}
    # the two solvers see the same inputs: rows come in (gpm, alternating) pairs per cell
    for g, a in zip(rows[::2], rows[1::2], strict=True):
        assert (g["solver"], a["solver"]) == ("gpm", "alternating")
        assert (g["m"], g["r"], g["d"], g["v"]) == (a["m"], a["r"], a["d"], a["v"])
        assert g["iterations"] >= 1 and g["seconds"] >= 0 and g["objective"] > 0
    summary = report["summary"]
    assert summary["cells"] == len(rows) // 2 == len(summary["per_cell"])
    for cell, g, a in zip(summary["per_cell"], rows[::2], rows[1::2], strict=True):
        assert cell["fewer_iterations"] == (g["iterations"] < a["iterations"])
        assert cell["same_or_better_objective"] == (g["objective"] >= a["objective"] * (1 - 1e-9))
    assert summary["both"] == sum(c["fewer_iterations"] and c["same_or_better_objective"] for c in summary["per_cell"])
    assert len(summary["failing_cells"]) == summary["cells"] - summary["both"]


def test_summary_flags_a_worse_objective_and_more_iterations():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_gpm import summarize

    def row(solver, it, f):
        return dict(solver=solver, m=2, r=10, d=3, v=1.0, iterations=it, seconds=0.1, objective=f)

    s = summarize([row("gpm", 5, 99.0), row("alternating", 1, 100.0)])
    assert s["per_cell"][0]["objective_relative_gain"] == -0.01
    assert (s["same_or_better_objective"], s["fewer_iterations"], s["both"]) == (0, 0, 0)
    assert [(c["iterations_gpm"], c["iterations_alternating"]) for c in s["failing_cells"]] == [(5, 1)]
    s = summarize([row("gpm", 2, 100.0), row("alternating", 3, 100.0 + 1e-8)])
    assert (s["same_or_better_objective"], s["fewer_iterations"], s["both"]) == (1, 1, 1)
    assert s["failing_cells"] == []
    s = summarize([row("gpm", 3, 100.0), row("alternating", 3, 100.0)])  # a tie in iterations fails
    assert (s["same_or_better_objective"], s["fewer_iterations"], len(s["failing_cells"])) == (1, 0, 1)
