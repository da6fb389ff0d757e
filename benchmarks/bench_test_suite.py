"""Wall time of the test suite as CI runs it: ``make test`` (``--quick``: ``make test-fast``).

Runs the make target in the repository with pytest also writing a JUnit XML report (through
``PYTEST_ADDOPTS``), and writes ``reports/bench/test_suite.json`` (or ``--out PATH``)::

    {"seconds": wall time of the make command,
     "tests": tests pytest ran (passed + failed + errors; skipped ones are counted apart),
     "passed", "failed", "errors", "skipped",
     "cores": CPUs this process may use (os.sched_getaffinity), "cpu_count": os.cpu_count(),
     "cpu_seconds": user + system CPU time of the make command and the processes it started that
        were reaped (a detached process, such as a server started in a session of its own, is not),
     "load_average": [[1, 5, 15 min] at the start, at the end],
     "target", "command", "git_rev", "ok",
     "system_cpu_seconds": busy CPU time of the whole machine during the run (/proc/stat; every
        process, the detached ones too: servers, DVC's queue worker, Ray; null off Linux),
     "files": [{"file", "tests", "wall_seconds", "cpu_self_seconds", "cpu_children_seconds"}, …]
        slowest first: each test file's summed wall time and CPU, the pytest process's own and its
        reaped child processes' (tests/conftest.py records them when VEILBENCH_TEST_TIMES_DIR is set)}

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


def per_file(records: list[dict]) -> list[dict]:
    """Per-test records (``{"test": nodeid, "wall", "self", "children"}``) summed per test file,
    slowest (summed wall time) first."""
    files: dict[str, dict] = {}
    for r in records:
        name = r["test"].split("::")[0]
        f = files.setdefault(name, {"file": name, "tests": 0, "wall_seconds": 0.0, "cpu_self_seconds": 0.0,
                                    "cpu_children_seconds": 0.0})
        f["tests"] += 1
        f["wall_seconds"] += r["wall"]
        f["cpu_self_seconds"] += r["self"]
        f["cpu_children_seconds"] += r["children"]
    rows = sorted(files.values(), key=lambda f: -f["wall_seconds"])
    return [{k: round(v, 1) if isinstance(v, float) else v for k, v in f.items()} for f in rows]


def busy_cpu_seconds() -> float | None:
    """Busy CPU time of the whole machine so far (user + nice + system + irq + softirq + steal
    jiffies of /proc/stat's ``cpu`` line), or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


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
        junit, times = Path(tmp) / "junit.xml", Path(tmp) / "times"
        times.mkdir()
        env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={junit}".strip(),
               "VEILBENCH_TEST_TIMES_DIR": str(times)}
        command = ["make", "--no-print-directory", target, *args.make_args]
        load_start = os.getloadavg()
        usage, busy = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_seconds()
        t0 = time.perf_counter()
        proc = subprocess.run(command, cwd=REPO, env=env)
        seconds = time.perf_counter() - t0
        after, busy_after = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_seconds()
        tally = junit_tally(junit) if junit.is_file() else {}
        files = per_file([r for f in sorted(times.glob("*.json")) for r in json.loads(f.read_text())])
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
        "system_cpu_seconds": None if busy is None else round(busy_after - busy, 1),
        "files": files,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return proc.returncode or (0 if tally else 1)


if __name__ == "__main__":
    sys.exit(main())
