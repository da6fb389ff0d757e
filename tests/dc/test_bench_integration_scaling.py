"""The integration-scaling benchmark writes the issue's schema (quick mode, Fashion-MNIST) and explains NKI's exponent."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from tests.benchmark_run import ROOT, run_quick

METHODS = {"mpp", "gep", "odc", "lki", "nki", "nki_tsl", "nki_tsl_center", "nki_nystrom"}
DATA = Path("/usr/share/datasets/fashion-mnist")
TIMING = {"fit_seconds", "fit_seconds_range", "transform_seconds_per_record", "unit_cpu_seconds", "fit_units",
          "unit_drift", "unit_drift_flagged", "load_average"}


@pytest.mark.skipif(not (DATA / "train-images-idx3-ubyte.gz").is_file(),
                    reason="Fashion-MNIST IDX files absent: apt-get install dataset-fashion-mnist")
@pytest.mark.slow
def test_quick_benchmark_schema(tmp_path):
    report = run_quick("bench_integration_scaling.py", "--output", tmp_path / "integration_scaling.json", timeout=300,
                       extra=("--repeats", "2"))  # the schema, not the timing: 2 timed fits (min/median/max over > 1), not 3
    assert report["benchmark"] == "integration_scaling" and report["mode"] == "quick"
    assert {r["method"] for r in report["rows"]} == METHODS
    for row in report["rows"]:
        assert {"method", "n_anchor", "repeats", *TIMING} <= set(row)
        assert row["fit_seconds"] >= 0 and row["transform_seconds_per_record"] >= 0
        assert row["fit_seconds_range"][0] <= row["fit_seconds"] <= row["fit_seconds_range"][1]
        assert row["unit_cpu_seconds"] > 0 and row["unit_drift_flagged"] == (row["unit_drift"] > 0.2)
    assert set(report["exponents"]) == METHODS
    assert all(set(e) == {"fit", "transform"} for e in report["exponents"].values())
    assert set(report["paper_table4"]) <= METHODS
    steps = [r for r in report["nki_steps"]["rows"] if r["method"] == "nki"]
    assert [r["n_anchor"] for r in steps] == [200, 400]
    assert all(r["inverse_gflops_per_second"] > 0 for r in steps)
    assert "Exact NKI fit exponent" in report["nki_exponent_explained"]
    # Nyström rows: every size with rank and traced peak; exact NKI beside it where it ran
    ny = report["nystrom"]
    assert [r["n_anchor"] for r in ny] == [200, 400, 800]
    for row in ny:
        assert row["rank"] == report["setting"]["nystrom_rank"] == 100
        assert {"peak_memory_mb", "accuracy_nystrom", *TIMING} <= set(row)
        assert row["peak_memory_mb"] > 0 and 0 <= row["accuracy_nystrom"] <= 1
    for row in ny[:2]:
        assert row["accuracy_loss_vs_exact"] == pytest.approx(row["accuracy_exact"] - row["accuracy_nystrom"])
        assert row["exact_peak_memory_mb"] > 0
    assert "accuracy_loss_vs_exact" not in ny[2]
    # the traced peak grows with n_a (the na × r kernel block and the na × Σr stack are traced)
    assert ny[0]["peak_memory_mb"] < ny[1]["peak_memory_mb"] < ny[2]["peak_memory_mb"]
    assert set(report["nystrom_exponents"]) == {"fit", "transform"}


def test_missing_data_names_the_package(tmp_path, monkeypatch):
    """In-process ``main()`` of the script: its ``sys.exit(message)`` is what the shell would print on
    stderr with exit status 1."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_integration_scaling")
    monkeypatch.setattr(sys, "argv", ["bench_integration_scaling.py", "--quick", "--data", str(tmp_path),
                                      "--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    message = exit_.value.code
    assert isinstance(message, str), "sys.exit(<message>) exits with status 1 and prints it on stderr"
    assert "apt-get install dataset-fashion-mnist" in message and str(tmp_path) in message
    assert not (tmp_path / "x.json").exists()
