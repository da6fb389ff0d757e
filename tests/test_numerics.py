"""The CPU code paths and thread counts that enter results are pinned before numpy/torch load."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from tasks.numerics import AVX2_CODE_PATHS, RESULT_THREADS, pin_cpu_code_paths
from tests.conftest import REPO


def test_pin_sets_what_is_unset_and_keeps_the_users_choice() -> None:
    env = {"MKL_CBWR": "COMPATIBLE"}
    added = pin_cpu_code_paths(env, machine="x86_64")
    assert env == {**RESULT_THREADS, **AVX2_CODE_PATHS, "MKL_CBWR": "COMPATIBLE"}
    assert "MKL_CBWR" not in added and added["OPENBLAS_CORETYPE"] == "Haswell"
    arm: dict[str, str] = {}
    assert pin_cpu_code_paths(arm, machine="aarch64") == RESULT_THREADS, "no x86 code paths on arm64"


@pytest.mark.slow
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 code paths")
def test_importing_tasks_pins_the_libraries_before_they_load() -> None:
    probe = ("import tasks, json, numpy, torch; from threadpoolctl import threadpool_info; "
             "blas = [i for i in threadpool_info() if i['internal_api'] == 'openblas']; "
             "print(json.dumps({'aten': torch.backends.cpu.get_cpu_capability(), "
             "'openblas': sorted({i['architecture'] for i in blas}), 'threads': sorted({i['num_threads'] for i in blas})}))")
    env = {k: v for k, v in os.environ.items() if k not in (*AVX2_CODE_PATHS, *RESULT_THREADS)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=300, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen == {"aten": "AVX2", "openblas": ["Haswell"], "threads": [1]}
