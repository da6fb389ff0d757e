"""benchmarks/bench_test_suite.py: the tally it records is pytest's own (JUnit XML)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_run import ROOT, load_benchmark
from tests.conftest import TEST_TIMES_ENV


def _bench():
    return load_benchmark("bench_test_suite.py")


def test_tally_counts_run_tests_and_keeps_skipped_apart(tmp_path: Path) -> None:
    xml = tmp_path / "junit.xml"
    xml.write_text('<?xml version="1.0"?><testsuites>'
                   '<testsuite name="pytest" tests="10" failures="1" errors="2" skipped="3"/>'
                   '<testsuite name="more" tests="5" failures="0" errors="0" skipped="1"/></testsuites>')
    assert _bench().junit_tally(xml) == {"tests": 11, "passed": 8, "failed": 1, "errors": 2, "skipped": 4}
    xml.write_text('<testsuite name="pytest" tests="4" failures="0" errors="0" skipped="0"/>')
    assert _bench().junit_tally(xml) == {"tests": 4, "passed": 4, "failed": 0, "errors": 0, "skipped": 0}


def test_per_file_sums_each_file_and_puts_the_slowest_first() -> None:
    records = [{"test": "tests/a.py::t1", "wall": 1.0, "self": 0.5, "children": 0.25},
               {"test": "tests/b.py::t[x]", "wall": 3.0, "self": 0.0, "children": 2.5},
               {"test": "tests/a.py::t2", "wall": 1.5, "self": 1.0, "children": 0.0}]
    assert _bench().per_file(records) == [
        {"file": "tests/b.py", "tests": 1, "wall_seconds": 3.0, "cpu_self_seconds": 0.0, "cpu_children_seconds": 2.5},
        {"file": "tests/a.py", "tests": 2, "wall_seconds": 2.5, "cpu_self_seconds": 1.5, "cpu_children_seconds": 0.2}]


def test_busy_cpu_seconds_grows_with_work() -> None:
    bench = _bench()
    before = bench.busy_cpu_seconds()
    if before is None:
        pytest.skip("no /proc/stat")
    sum(i * i for i in range(3_000_000))
    assert bench.busy_cpu_seconds() > before


def test_idle_cpu_seconds_grows_while_the_cores_wait() -> None:
    """A sleep leaves the cores idle (under a busy machine, less than the sleep's length times the
    cores); busy and idle time together follow the wall clock, core for core."""
    import time

    bench = _bench()
    idle0, busy0, t0 = bench.idle_cpu_seconds(), bench.busy_cpu_seconds(), time.monotonic()
    if idle0 is None:
        pytest.skip("no /proc/stat")
    time.sleep(1.0)
    idle, busy, wall = bench.idle_cpu_seconds() - idle0, bench.busy_cpu_seconds() - busy0, time.monotonic() - t0
    cores = os.cpu_count() or 1
    assert idle >= 0.0 and idle + busy == pytest.approx(wall * cores, rel=0.25, abs=0.1)


def test_conftest_records_each_test_when_asked(tmp_path: Path) -> None:
    """With VEILBENCH_TEST_TIMES_DIR set, tests/conftest.py writes one record per test; the CPU of a
    child process the test ran and waited for counts as ``children``, the test's own as ``self``."""
    (tmp_path / "times").mkdir()
    (tmp_path / "test_child.py").write_text(
        "import subprocess, sys\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(4_000_000))'], check=True)\n"
        "def test_own():\n"
        "    sum(i * i for i in range(4_000_000))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "tests.conftest",
           "--rootdir", str(tmp_path), str(tmp_path / "test_child.py")]
    proc = subprocess.run(cmd, cwd=ROOT, env={**env, TEST_TIMES_ENV: str(tmp_path / "times")},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    child, own = json.loads((tmp_path / "times" / "main.json").read_text())
    assert child["test"].endswith("test_child") and own["test"].endswith("test_own")
    assert child["children"] > 0.1 and child["children"] > child["self"], child
    assert own["self"] > 0.1 and own["children"] < 0.05, own
    assert all(r["wall"] >= r["self"] for r in (child, own))
