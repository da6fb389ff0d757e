"""Wall time of the test suite as CI runs it: ``make test`` (``--quick``: ``make test-fast``).

Runs the make target in the repository with pytest also writing a JUnit XML report (through
``PYTEST_ADDOPTS``), and writes ``reports/bench/test_suite.json`` (or ``--out PATH``)::

    {"seconds": wall time of the make command,
     "seconds_per_unit": ``seconds`` / ``unit_cpu_seconds`` (below): runs made at different machine
        speeds compared,
     "tests": tests pytest ran (passed + failed + errors; skipped ones are counted apart),
     "passed", "failed", "errors", "skipped",
     "cores": CPUs this process may use (os.sched_getaffinity), "cpu_count": os.cpu_count(),
     "cpu_seconds": user + system CPU time of the make command and the processes it started that
        were reaped (a detached process, such as a server started in a session of its own, is not),
     "load_average": [[1, 5, 15 min] at the start, at the end],
     "target", "command", "git_rev", "ok",
     "system_cpu_seconds": busy CPU time of the whole machine during the run (/proc/stat; every
        process, the detached ones too: servers, DVC's queue worker, Ray; null off Linux),
     "system_idle_cpu_seconds": idle CPU time of the whole machine during the run (/proc/stat: idle
        and iowait; null off Linux),
     "unit_cpu_seconds", "unit_drift", "unit_drift_flagged", …: the machine's speed beside the run
        (:mod:`measure`'s fields): CPU seconds of :func:`speed_unit`, a fixed piece of interpreter
        work, timed immediately before and after the suite. A shared machine's speed moves during
        a day; the unit says at which speed ``seconds`` was measured,
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
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure.py beside this script, also when loaded by path

from measure import drift_summary, first_checkpoint, unit_checkpoint  # noqa: E402


def speed_unit() -> int:
    """The unit of machine speed: 300 000 steps of a pure-Python loop (the suite is mostly
    interpreter work: imports, pytest, servers, subprocesses)."""
    total = 0
    for i in range(300_000):
        total += i * i
    return total


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


def _cpu_jiffies() -> list[int] | None:
    """user, nice, system, idle, iowait, irq, softirq, steal of /proc/stat's ``cpu`` line, or None off Linux."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    except OSError:
        return None


def busy_cpu_seconds() -> float | None:
    """Busy CPU time of the whole machine so far (user + nice + system + irq + softirq + steal
    jiffies of /proc/stat's ``cpu`` line), or None off Linux."""
    j = _cpu_jiffies()
    return None if j is None else (j[0] + j[1] + j[2] + j[5] + j[6] + j[7]) / os.sysconf("SC_CLK_TCK")


def idle_cpu_seconds() -> float | None:
    """Idle CPU time of the whole machine so far (idle + iowait jiffies), or None off Linux: what the
    cores were not given to do while the suite ran (waits on servers and subprocesses)."""
    j = _cpu_jiffies()
    return None if j is None else (j[3] + j[4]) / os.sysconf("SC_CLK_TCK")


def git_rev() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="time `make test-fast` (the tests not marked slow)")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "test_suite.json")
    parser.add_argument("--keep-times", type=Path, metavar="DIR",
                        help="also copy the per-test records (one JSON file per pytest worker) into DIR")
    parser.add_argument("make_args", nargs="*", help="extra arguments for make, after -- (e.g. -- TEST_WORKERS=1)")
    args = parser.parse_args()
    target = "test-fast" if args.quick else "test"
    with tempfile.TemporaryDirectory(prefix="veilbench-test-suite-") as tmp:
        junit, times = Path(tmp) / "junit.xml", Path(tmp) / "times"
        times.mkdir()
        env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={junit}".strip(),
               "VEILBENCH_TEST_TIMES_DIR": str(times)}
        command = ["make", "--no-print-directory", target, *args.make_args]
        unit_before, unit_samples, unit_calls = first_checkpoint(speed_unit, 5)
        load_start = os.getloadavg()
        usage, busy, idle = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_seconds(), idle_cpu_seconds()
        t0 = time.perf_counter()
        proc = subprocess.run(command, cwd=REPO, env=env)
        seconds = time.perf_counter() - t0
        after, busy_after, idle_after = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_seconds(), idle_cpu_seconds()
        unit_after, more = unit_checkpoint(speed_unit, unit_calls)
        tally = junit_tally(junit) if junit.is_file() else {}
        files = per_file([r for f in sorted(times.glob("*.json")) for r in json.loads(f.read_text())])
        if args.keep_times:
            args.keep_times.mkdir(parents=True, exist_ok=True)
            for f in times.glob("*.json"):
                shutil.copy(f, args.keep_times / f.name)
    speed = drift_summary([unit_before, unit_after], unit_samples + more)
    result = {
        "seconds": round(seconds, 1),
        "seconds_per_unit": round(seconds / speed["unit_cpu_seconds"], 1),
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
        "system_idle_cpu_seconds": None if idle is None else round(idle_after - idle, 1),
        **speed,
        "files": files,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return proc.returncode or (0 if tally else 1)


if __name__ == "__main__":
    sys.exit(main())
