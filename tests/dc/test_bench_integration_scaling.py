"""The integration-scaling benchmark writes the issue's schema (quick mode) and explains NKI's exponent."""

from __future__ import annotations

from tests.benchmark_run import run_quick
METHODS = {"mpp", "gep", "odc", "lki", "nki", "nki_tsl", "nki_tsl_center", "nki_nystrom"}


def test_quick_benchmark_schema(tmp_path):
    report = run_quick("bench_integration_scaling.py", "--output", tmp_path / "integration_scaling.json", timeout=300)
    assert report["benchmark"] == "integration_scaling"
    assert {r["method"] for r in report["rows"]} == METHODS
    for row in report["rows"]:
        assert {"method", "n_anchor", "fit_seconds", "transform_seconds_per_record"} <= set(row)
        assert row["fit_seconds"] >= 0 and row["transform_seconds_per_record"] >= 0
    assert set(report["exponents"]) == METHODS
    assert all(set(e) == {"fit", "transform"} for e in report["exponents"].values())
    assert set(report["paper_table4"]) <= METHODS
    steps = [r for r in report["nki_steps"]["rows"] if r["method"] == "nki"]
    assert [r["n_anchor"] for r in steps] == [200, 400]
    assert all(r["inverse_gflops_per_second"] > 0 for r in steps)
    assert "Exact NKI fit exponent" in report["nki_exponent_explained"]
