"""The integration-scaling benchmark writes the issue's schema (quick mode) and explains NKI's exponent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"mpp", "gep", "odc", "lki", "nki", "nki_tsl", "nki_tsl_center", "nki_nystrom"}


def test_quick_benchmark_schema(tmp_path):
    out = tmp_path / "integration_scaling.json"
    env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_integration_scaling.py"), "--quick", "--output", str(out)],
        check=True, cwd=ROOT, env=env, capture_output=True, timeout=300,
    )
    report = json.loads(out.read_text())
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
