"""The GPM benchmark script writes the schema the issue asks for (quick mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_schema(tmp_path):
    out = tmp_path / "gpm.json"
    env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_gpm.py"), "--quick", "--out", str(out)],
        check=True, cwd=ROOT, env=env, capture_output=True, timeout=120,
    )
    report = json.loads(out.read_text())
    assert report["benchmark"] == "gpm"
    rows = report["rows"]
    assert rows and all(set(r) == {"solver", "m", "r", "d", "v", "iterations", "seconds", "objective"} for r in rows)
    assert {r["solver"] for r in rows} == {"gpm", "alternating"}
    # the two solvers see the same inputs: rows come in (gpm, alternating) pairs per cell
    for g, a in zip(rows[::2], rows[1::2], strict=True):
        assert (g["solver"], a["solver"]) == ("gpm", "alternating")
        assert (g["m"], g["r"], g["d"], g["v"]) == (a["m"], a["r"], a["d"], a["v"])
        assert g["iterations"] >= 1 and g["seconds"] >= 0 and g["objective"] > 0
