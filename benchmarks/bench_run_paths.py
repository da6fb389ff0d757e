"""What the in-process pipeline saves over plain ``dvc repro``: ``make run`` both ways, first and second run.

Two ways run the same DVC pipeline and write the same outputs and ``dvc.lock``:

* ``in_process``: ``veilbench run`` (what ``make run`` runs): DVC plans, the stale stages run as one
  graph of tasks in one process (:mod:`flows.pipeline`, through DVC's planner internals);
* ``per_stage_processes``: ``veilbench run --per-stage-processes``: ``dvc repro``, one Python
  process per stage instance (``python -m flows.<stage>``, the commands in ``dvc.yaml``).

For each, the repository's code, ``dvc.yaml``, ``.dvcignore`` and ``params.yaml`` (no ``data/``:
every stage is computed) are copied into a fresh git + DVC folder, and the command runs there
twice: a first run that computes everything, then a second one with nothing changed (a no-op).
Each run's wall time and CPU time (user + system of the command and every process it waited for:
``getrusage(RUSAGE_CHILDREN)``, so DVC's stage processes and the local Prefect server count) are
recorded, with what the second run wrote (files under ``data/`` and ``reports/sweeps/`` whose
modification time changed, and whether ``dvc.lock`` changed) and whether both ways gave the same
per-cell metrics (``reports/sweeps/<sweep>/metrics.json``).

Writes ``reports/bench/run_paths.json`` (or ``--out PATH``)::

    {"benchmark": "run_paths", "quick", "params", "git_rev", "cpu_count", "cell_threads",
     "paths": {"in_process" | "per_stage_processes": {"command", "stages", "first": {"wall_s", "cpu_s",
               "returncode"}, "second": {"wall_s", "cpu_s", "returncode", "files_written", "lock_changed"}}},
     "per_stage_over_in_process": {"first_wall", "first_cpu", "second_wall", "second_cpu"},
     "same_metrics", "load_average": [start, end], and the machine's speed unit before and after
     (:mod:`measure`'s fields, as bench_test_suite.py)}

``--quick`` runs the first sweep of ``params.yaml`` cut to one cell and one seed (7 stages): it checks
the machinery in minutes and writes ``reports/bench/quick/run_paths.json``; its numbers are not the
measurement. The measurement is the full ``params.yaml`` on an otherwise idle machine::

    nice -n 0 .venv/bin/python benchmarks/bench_run_paths.py
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
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure.py beside this script

from bench_eta import quick_params as family_quick_params  # noqa: E402  the same cut-down params
from bench_test_suite import git_rev, speed_unit  # noqa: E402  the same machine-speed unit and revision
from measure import drift_summary, first_checkpoint, unit_checkpoint  # noqa: E402

#: way → the ``veilbench`` arguments that run it
PATHS: dict[str, list[str]] = {"in_process": ["run"], "per_stage_processes": ["run", "--per-stage-processes"]}

#: What a run copies into its fresh folder: the code and the pipeline, never ``data/`` or ``dvc.lock``.
COPIED = ("veilbench", "tasks", "flows", "dvc.yaml", ".dvcignore")


def quick_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` cut to its first sweep with one cell and one seed (:func:`bench_eta.quick_params`)."""
    first = next(iter(params["sweeps"]))
    return family_quick_params({**params, "sweeps": {first: params["sweeps"][first]}})


def fresh_project(root: Path, params: dict[str, Any]) -> None:
    """A git + DVC project at ``root`` (new) holding :data:`COPIED` and ``params``, committed."""
    root.mkdir(parents=True)
    for item in COPIED:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, root / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, root / item)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / ".gitignore").write_text("mlflow.db\nmlruns/\n.prefect/\n__pycache__/\n")
    env = _env(root)
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"], ["git", "add", "-A"],
                ["git", "commit", "-qm", "bench"]):
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DVC_ROOT", "PYTHONPATH", "PREFECT_API_URL")}
    return {**env, "VEILBENCH_ROOT": str(root), "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
            "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(root: Path, args: list[str]) -> dict[str, Any]:
    """Wall and CPU seconds (this command and every process it waited for) of ``veilbench <args>`` in ``root``."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=root, env=_env(root), capture_output=True,
                          text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "returncode": proc.returncode}


def output_times(root: Path) -> dict[str, int]:
    """Modification time of every file under ``data/`` and ``reports/sweeps/``."""
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for top in ("data", "reports/sweeps")
            for p in (root / top).rglob("*") if p.is_file()}


def locked_stages(root: Path) -> int:
    """Stage instances recorded in ``dvc.lock``."""
    lock = root / "dvc.lock"
    return len((yaml.safe_load(lock.read_text()) or {}).get("stages", {})) if lock.is_file() else 0


def measure_path(root: Path, args: list[str]) -> dict[str, Any]:
    """The first run (everything computed) and the second (nothing changed) of ``veilbench <args>``."""
    first = timed_run(root, args)
    before, lock = output_times(root), (root / "dvc.lock").read_bytes() if (root / "dvc.lock").is_file() else b""
    second = timed_run(root, args)
    after = output_times(root)
    second["files_written"] = sorted(p for p, t in after.items() if before.get(p) != t)
    second["lock_changed"] = (root / "dvc.lock").read_bytes() != lock if (root / "dvc.lock").is_file() else True
    return {"command": "veilbench " + " ".join(args), "stages": locked_stages(root), "first": first, "second": second}


def sweep_metrics(root: Path) -> dict[str, Any]:
    """sweep → its per-cell metrics table (``reports/sweeps/<sweep>/metrics.json``)."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((root / "reports" / "sweeps").glob("*/metrics.json"))}


def ratios(paths: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """per-stage-processes / in-process, for the wall and CPU times of both runs."""
    a, b = paths["in_process"], paths["per_stage_processes"]
    return {f"{run}_{kind}": (round(b[run][f"{kind}_s"] / a[run][f"{kind}_s"], 3) if a[run][f"{kind}_s"] else None)
            for run in ("first", "second") for kind in ("wall", "cpu")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one sweep, one cell, one seed (checks the machinery)")
    parser.add_argument("--params", type=Path, default=REPO / "params.yaml")
    parser.add_argument("--out", type=Path, default=None,
                        help="output JSON (default reports/bench/run_paths.json; --quick: reports/bench/quick/run_paths.json)")
    parser.add_argument("--keep", type=Path, default=None, help="build the projects in this (new) folder and keep them")
    args = parser.parse_args()
    out = args.out or REPO / "reports" / "bench" / ("quick/run_paths.json" if args.quick else "run_paths.json")
    params = yaml.safe_load(args.params.read_text())
    if args.quick:
        params = quick_params(params)
    unit_before, unit_samples, unit_calls = first_checkpoint(speed_unit, 5)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="veilbench-run-paths-") as tmp:
        base = args.keep or Path(tmp)
        paths, metrics = {}, {}
        for name, command in PATHS.items():
            root = base / name
            fresh_project(root, params)
            paths[name] = measure_path(root, command)
            metrics[name] = sweep_metrics(root)
    unit_after, more = unit_checkpoint(speed_unit, unit_calls)
    ok = all(p[run]["returncode"] == 0 for p in paths.values() for run in ("first", "second"))
    result = {"benchmark": "run_paths", "quick": args.quick, "params": args.params.name, "git_rev": git_rev(),
              "cpu_count": os.cpu_count(), "cell_threads": int(os.environ.get("VEILBENCH_CELL_THREADS", "2")),
              "ok": ok, "paths": paths, "per_stage_over_in_process": ratios(paths) if ok else None,
              "same_metrics": metrics["in_process"] == metrics["per_stage_processes"] and bool(metrics["in_process"]),
              "load_average": [list(load_start), list(os.getloadavg())],
              **drift_summary([unit_before, unit_after], unit_samples + more)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "paths"}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
