"""Mutation score of the modules that carry the papers' features and the privacy maths (mutmut 3).

For each target module, a scratch copy of ``veilbench/`` and ``tests/`` gets a ``pyproject.toml``
whose ``[tool.mutmut]`` section mutates only that module (``only_mutate``) and runs only the fast
tests that exercise it (``pytest_add_cli_args_test_selection``); ``mutmut run`` then builds its
``mutants/`` tree there (never in the repository) and each mutant is run against those tests.
A mutant is *killed* when a test fails, *survived* when all pass; ``timeout``, ``suspicious`` and
``no_tests`` are mutmut's other outcomes, ``not_checked`` the mutants left when the per-module time
cap (``--budget`` seconds) stopped the run.

The known survivors of earlier runs (:data:`KNOWN_MUTANTS`) are also applied by hand and their
verdicts written to ``mutation_known.json`` beside the output.

Writes ``reports/bench/mutation.json`` (or ``--out PATH``): a list of ``{"module", "tests",
"killed", "survived", "timeout", "suspicious", "no_tests", "not_checked", "total", "score",
"complete", "survivors"}``, score = killed / (killed + survived), plus the command's limitations in
``"note"`` when a run was capped. ``--only MODULE`` re-runs one target and merges it into the file.

Usage: ``python benchmarks/bench_mutation.py [--budget 900] [--children 2] [--only veilbench/dc/kernel.py] [--keep]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MUTMUT = Path(sys.executable).with_name("mutmut")

TARGETS: dict[str, list[str]] = {
    # the default-run-size audits (tests/gca/test_audit.py and the ``default_run_size`` cases) take a
    # minute each: too slow to run per mutant; they still run in the ordinary suite
    "veilbench/privacy": [
        "tests/scoreshield/test_calibration.py",
        "tests/scoreshield/test_audit.py",
        "tests/test_ledger.py",
        "tests/privacy",
        "-k",
        "not default_run_size and not grows_with_the_run_count and not default_record",
    ],
    "veilbench/dc/kernel.py": ["tests/dc/test_kernel.py"],
    "veilbench/gca/gca.py": ["tests/gca/test_simulator.py", "tests/gca/test_gca_protocol.py",
                             "tests/gca/test_weighting.py", "tests/gca/test_vectorized_gca.py",
                             "tests/gca/test_gca_behaviour_mutants.py"],
    "veilbench/anchornoise/mechanisms.py": ["tests/anchornoise/test_anchor_and_mechanisms.py"],
}

KNOWN_MUTANTS: list[dict[str, str]] = [
    {"name": "NKI graph term with a minus sign", "module": "veilbench/dc/kernel.py",
     "find": "m = m / np.trace(m) + self.mu * b / np.trace(b)",
     "replace": "m = m / np.trace(m) - self.mu * b / np.trace(b)"},
    {"name": "GCA always uses uniform centroid weights", "module": "veilbench/gca/clustering.py",
     "find": 'if weighting == "inverse":\n        return inverse_count_weights(counts)',
     "replace": 'if weighting == "inverse":\n        return uniform_weights(counts)',
     "tests": ["tests/gca/test_weighting.py", "tests/gca/test_simulator.py"]},
]
"""Survivors of earlier runs that a test must now kill: applied by hand (exact text replacement) and
checked against the module's tests (``tests`` of the target, plus ``extra_tests`` if given)."""


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _copy_code(work: Path) -> None:
    """The packages and tests of this checkout (not an installed copy) into ``work``."""
    for name in ("veilbench", "tasks", "flows", "tests", "benchmarks"):  # some tests load a benchmark module
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))


def _scratch(module: str, tests: list[str]) -> Path:
    """A temporary tree with the package, the tests and a mutmut config for ``module``."""
    work = Path(tempfile.mkdtemp(prefix="mutation-"))
    _copy_code(work)
    only = f"{module}/*" if (REPO / module).is_dir() else module
    (work / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["veilbench"]\n'
        'also_copy = ["tasks", "flows", "benchmarks"]\n'
        f"only_mutate = {_toml_list([only])}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        'pytest_add_cli_args = ["-q", "-p", "no:cacheprovider", "-x"]\n'
        "use_git_change_detection = false\n"
    )
    return work


def _run_capped(cmd: list[str], cwd: Path, budget: float) -> tuple[bool, str]:
    """Run ``cmd`` in its own process group; stop the group after ``budget`` s. (finished, output tail)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PREFECT_HOME"] = str(cwd / ".prefect")
    with open(cwd / "mutmut.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=budget)
            finished = True
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            finished = False
    return finished, (cwd / "mutmut.log").read_text(errors="replace")[-2000:]


def run_module(module: str, tests: list[str], budget: float, children: int, keep: bool = False) -> dict:
    """Mutate ``module`` against ``tests`` for at most ``budget`` seconds; the tallies as a dict.

    With ``keep`` the scratch tree (with its ``mutants/``) is left in place and its path printed, so
    that ``mutmut show NAME`` / ``mutmut run NAME`` can be run there to triage the survivors."""
    work = _scratch(module, tests)
    start = time.perf_counter()
    try:
        finished, tail = _run_capped([str(MUTMUT), "run", "--max-children", str(children)], work, budget)
        subprocess.run([str(MUTMUT), "export-cicd-stats"], cwd=work, capture_output=True, check=False)
        stats_path = work / "mutants" / "mutmut-cicd-stats.json"
        if not stats_path.exists():
            return {"module": module, "tests": tests, "error": "mutmut produced no statistics", "log_tail": tail}
        stats = json.loads(stats_path.read_text())
        listing = subprocess.run([str(MUTMUT), "results"], cwd=work, capture_output=True, text=True, check=False)
        survivors = sorted(
            line.split(":")[0].strip() for line in listing.stdout.splitlines() if line.strip().endswith(": survived")
        )
    finally:
        if keep:
            print(f"kept the scratch tree of {module}: {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    counted = sum(int(stats.get(k, 0)) for k in ("killed", "survived", "timeout", "suspicious", "no_tests",
                                                  "skipped", "segfault"))
    if counted == 0 and int(stats.get("total", 0)) > 0:
        # mutmut stops before any mutant when the unmutated tests fail (``failed to collect stats``)
        return {"module": module, "tests": tests, "error": "no mutant was checked (do the tests pass unmutated?)",
                "log_tail": tail}
    killed, survived = int(stats["killed"]), int(stats["survived"])
    out = {
        "module": module,
        "tests": tests,
        "killed": killed,
        "survived": survived,
        "timeout": int(stats.get("timeout", 0)),
        "suspicious": int(stats.get("suspicious", 0)),
        "no_tests": int(stats.get("no_tests", 0)),
        "not_checked": max(int(stats["total"]) - counted, 0),
        "total": int(stats["total"]),
        "score": killed / (killed + survived) if killed + survived else None,
        "complete": finished,
        "survivors": survivors,
        "wall_seconds_cap": budget,
    }
    if not finished:
        out["note"] = (f"stopped at the {budget:g} s cap (shared 2-core machine); the tallies cover the mutants "
                       "checked before the cap, not_checked the rest")
    out["elapsed_seconds_rounded"] = round(time.perf_counter() - start)
    return out


def check_known(mutant: dict[str, str], tests: list[str]) -> dict:
    """Apply one hand-written mutant in a scratch copy and run ``tests``: killed when they fail."""
    work = Path(tempfile.mkdtemp(prefix="known-mutant-"))
    try:
        _copy_code(work)
        shutil.copy(REPO / "pyproject.toml", work / "pyproject.toml")
        path = work / mutant["module"]
        text = path.read_text()
        if text.count(mutant["find"]) != 1:
            return {**mutant, "killed": None, "note": "the mutated line is not in the module (code changed)"}
        path.write_text(text.replace(mutant["find"], mutant["replace"]))
        env = {**os.environ, "PYTHONPATH": str(work), "PREFECT_HOME": str(work / ".prefect")}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                              cwd=work, env=env, capture_output=True, text=True, check=False)
        failed = [line.split(" ")[1] for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
        return {**mutant, "tests": tests, "killed": proc.returncode != 0, "failing_tests": failed}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=900.0, help="seconds per module (default 900)")
    ap.add_argument("--children", type=int, default=2, help="parallel mutant runs (default 2)")
    ap.add_argument("--only", action="append", choices=sorted(TARGETS), help="run only this target (repeatable)")
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "mutation.json")
    ap.add_argument("--known-tests", nargs="*", default=[],
                    help="extra test files for the known-mutant checks (e.g. a weighting test in another file)")
    ap.add_argument("--known-only", action="store_true", help="only check the known mutants")
    ap.add_argument("--keep", action="store_true",
                    help="keep each module's scratch tree (mutmut show / mutmut run NAME there) and print its path")
    args = ap.parse_args(argv)
    previous = json.loads(args.out.read_text()) if args.out.exists() and args.only else []
    rows = {r["module"]: r for r in previous}
    for module in [] if args.known_only else args.only or list(TARGETS):
        print(f"mutating {module} …", flush=True)
        rows[module] = run_module(module, TARGETS[module], args.budget, args.children, keep=args.keep)
        print(json.dumps({k: v for k, v in rows[module].items() if k != "survivors"}), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        ordered = [rows[m] for m in TARGETS if m in rows]
        args.out.write_text(json.dumps(ordered, indent=2) + "\n")
    known = [check_known(k, (k.get("tests") or TARGETS[k["module"]]) + args.known_tests) for k in KNOWN_MUTANTS
             if not args.only or k["module"] in args.only]
    known_out = args.out.with_name(args.out.stem + "_known.json")
    previous_known = json.loads(known_out.read_text()) if known_out.exists() and args.only else []
    by_name = {k["name"]: k for k in previous_known} | {k["name"]: k for k in known}
    known_out.write_text(json.dumps(list(by_name.values()), indent=2) + "\n")
    print(json.dumps(known), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
