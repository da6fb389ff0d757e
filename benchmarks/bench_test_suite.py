"""Wall time of the test suite as CI runs it: ``make test`` (``--quick``: ``make test-fast``).

Runs the make target in the repository with pytest also writing a JUnit XML report (through
``PYTEST_ADDOPTS``), and writes ``reports/bench/test_suite.json`` (or ``--out PATH``)::

    {"seconds": wall time of the make command,
     "tests": tests pytest ran (passed + failed + errors; skipped ones are counted apart),
     "passed", "failed", "errors", "skipped",
     "cores": CPUs this process may use (os.sched_getaffinity), "cpu_count": os.cpu_count(),
     "cpu_seconds": user + system CPU time of the make command and everything it started,
     "load_average": [[1, 5, 15 min] at the start, at the end],
     "target", "command", "git_rev", "ok"}

The suite's own tally is the truth about coverage: a faster run with fewer tests is no faster run.
``seconds`` includes pytest's start-up and collection, the workers' start-up and ``make``'s
install check (nothing to install once ``.venv`` exists). Exit status: make's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def junit_tally(path: Path) -> dict[str, int]:
    """tests / passed / failed / errors / skipped summed over the ``<testsuite>`` elements of a
    JUnit XML report (pytest writes one)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tally = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    ran = tally["tests"] - tally["skipped"]
    return {"tests": ran, "passed": ran - tally["failures"] - tally["errors"], "failed": tally["failures"],
            "errors": tally["errors"], "skipped": tally["skipped"]}


def git_rev() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="time `make test-fast` (the tests not marked slow)")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "test_suite.json")
    parser.add_argument("make_args", nargs="*", help="extra arguments for make, after -- (e.g. -- TEST_WORKERS=1)")
    args = parser.parse_args()
    target = "test-fast" if args.quick else "test"
    with tempfile.TemporaryDirectory(prefix="veilbench-test-suite-") as tmp:
        junit = Path(tmp) / "junit.xml"
        env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={junit}".strip()}
        command = ["make", "--no-print-directory", target, *args.make_args]
        load_start = os.getloadavg()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(command, cwd=REPO, env=env)
        seconds = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        tally = junit_tally(junit) if junit.is_file() else {}
    result = {
        "seconds": round(seconds, 1),
        **tally,
        "cores": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_seconds": round(after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime, 1),
        "load_average": [list(load_start), list(os.getloadavg())],
        "target": target,
        "command": " ".join(command),
        "git_rev": git_rev(),
        "ok": proc.returncode == 0 and bool(tally),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return proc.returncode or (0 if tally else 1)


if __name__ == "__main__":
    sys.exit(main())
