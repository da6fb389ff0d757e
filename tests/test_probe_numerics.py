"""benchmarks/probe_numerics.py: its digests are repeatable on one machine and see a changed kernel."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from tests.benchmark_run import load_benchmark


def _probe_module():
    return load_benchmark("probe_numerics.py")


@pytest.mark.slow  # three fresh interpreters importing torch
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 kernel choices")
def test_digests_repeat_and_change_with_the_kernel(tmp_path: Path) -> None:
    probe = _probe_module()
    if not probe.cpu_identity().get("avx2"):
        pytest.skip("needs AVX2 (the pinned code path)")
    first, second = probe.probe(), probe.probe()
    assert first["digests"] == second["digests"], "the same kernels on the same inputs give the same bits"
    assert len(set(first["digests"].values())) == len(first["digests"]), "each kernel hashes its own result"
    assert first["environment"]["MKL_CBWR"] == "AVX2", "the probe runs with tasks' pins"
    # the controls: another OpenBLAS kernel set (SSE, every x86-64 has it) and MKL's SSE2 path change the bits
    other = probe.probe({"OPENBLAS_CORETYPE": "Nehalem", "MKL_CBWR": "COMPATIBLE"})
    changed = {k for k in first["digests"] if first["digests"][k] != other["digests"][k]}
    assert {"openblas_gemm", "torch_mm"} <= changed, changed
    assert other["set"] == {"OPENBLAS_CORETYPE": "Nehalem", "MKL_CBWR": "COMPATIBLE"}


def test_set_takes_var_equals_value(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _probe_module().main(["--out", str(tmp_path / "x.json"), "--set", "NOEQUALS"])
