"""Run a benchmark script in quick mode in a subprocess (single-threaded BLAS) and read its JSON, or
load a benchmark script as a module to test its functions."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_quick(script: str, out_flag: str, out: Path, timeout: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``python benchmarks/<script> --quick <out_flag> <out> <extra…>``; returns the parsed JSON it wrote."""
    env = os.environ | {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", out_flag, str(out), *extra],
                   check=True, cwd=ROOT, env=env, capture_output=True, timeout=timeout)
    return json.loads(out.read_text())


def load_benchmark(script: str) -> ModuleType:
    """``benchmarks/<script>`` imported as a module (``benchmarks/`` is no package), its
    ``__main__`` block not run."""
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / "benchmarks" / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
