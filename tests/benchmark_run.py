"""Run a benchmark script in quick mode in a subprocess (single-threaded BLAS) and read its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_quick(script: str, out_flag: str, out: Path, timeout: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``python benchmarks/<script> --quick <out_flag> <out> <extra…>``; returns the parsed JSON it wrote."""
    env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", out_flag, str(out), *extra],
                   check=True, cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    return json.loads(out.read_text())
