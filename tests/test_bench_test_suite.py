"""benchmarks/bench_test_suite.py: the tally it records is pytest's own (JUnit XML)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_test_suite", ROOT / "benchmarks" / "bench_test_suite.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tally_counts_run_tests_and_keeps_skipped_apart(tmp_path: Path) -> None:
    xml = tmp_path / "junit.xml"
    xml.write_text('<?xml version="1.0"?><testsuites>'
                   '<testsuite name="pytest" tests="10" failures="1" errors="2" skipped="3"/>'
                   '<testsuite name="more" tests="5" failures="0" errors="0" skipped="1"/></testsuites>')
    assert _bench().junit_tally(xml) == {"tests": 11, "passed": 8, "failed": 1, "errors": 2, "skipped": 4}
    xml.write_text('<testsuite name="pytest" tests="4" failures="0" errors="0" skipped="0"/>')
    assert _bench().junit_tally(xml) == {"tests": 4, "passed": 4, "failed": 0, "errors": 0, "skipped": 0}
