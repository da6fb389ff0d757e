"""How right a first run's ETA is: ``make run`` in a fresh clone, its ETA at a quarter of the stages
against the time the run then still took.

Clones the repository's ``HEAD`` (committed files only) into a temporary folder, runs ``make run``
there (``make`` first creates the clone's own ``.venv``, as on a new machine; ``--venv PATH`` uses an
existing environment instead and runs ``python -m flows.cli run``) with ``VEILBENCH_ETA_LOG`` set, so
the run records its ETA at every finished stage (:class:`tasks.progress.RunProgress`), and writes
``reports/bench/eta.json`` (or ``--out PATH``)::

    {"fraction": 0.25, "stages": stages of the run, "stage_at": the first stage count ≥ fraction · stages,
     "elapsed_at": seconds into the run then, "predicted_remaining": the ETA printed then (null: still
     estimating), "actual_remaining": wall seconds of the run − elapsed_at, "ratio": predicted / actual,
     "within_2x": 0.5 ≤ ratio ≤ 2, "wall_seconds", "install_seconds" (make's install, before the run),
     "events": every stage's (elapsed, stages done, ETA), "command", "git_rev", "quick", "ok",
     "cpu_count", "load_average": [[1, 5, 15 min] at the start, at the end], and the machine's speed
     unit before and after (:mod:`measure`'s fields, as bench_test_suite.py)}

``--quick`` replaces the clone's ``params.yaml`` by a small one (each family's first sweep, the first
value of each grid axis, one explicit cell, one seed; the report section cut to those sweeps): it
checks the machinery in minutes and writes to ``reports/bench/quick/eta.json``; its numbers are not
the measurement. The measurement is the full ``make run`` on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure.py beside this script

from bench_test_suite import git_rev, speed_unit  # noqa: E402  the same machine-speed unit and revision
from measure import drift_summary, first_checkpoint, unit_checkpoint  # noqa: E402


def quick_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` cut to each family's first sweep, the first value of each grid axis, at most one
    explicit cell and one seed; datasets, embeddings and the report keep only what those use."""
    first: dict[str, str] = {}
    for name, sweep in params["sweeps"].items():
        first.setdefault(sweep["family"], name)
    sweeps = {}
    for name in first.values():
        sweep = dict(params["sweeps"][name])
        sweep["seeds"] = sweep.get("seeds", [0])[:1]
        sweep["grid"] = {axis: values[:1] for axis, values in (sweep.get("grid") or {}).items()}
        sweep["cells"] = (sweep.get("cells") or [])[:1]
        sweeps[name] = sweep
    embeddings = {e: params["embeddings"][e] for e in {s["embedding"] for s in sweeps.values()}}
    datasets = {d: params["datasets"][d] for d in {e["dataset"] for e in embeddings.values()}}
    report = dict(params.get("report") or {})
    report["frontiers"] = [f for f in report.get("frontiers", []) if set(f.get("sweeps") or []) <= set(sweeps)]
    report["crossfamily_sweeps"] = [s for s in report.get("crossfamily_sweeps", []) if s in sweeps]
    report["data_free"], report["claims"] = [], []
    return {**params, "datasets": datasets, "embeddings": embeddings, "sweeps": sweeps, "report": report}


def at_fraction(log: dict[str, Any], fraction: float = 0.25) -> dict[str, Any]:
    """The ETA at the first finished stage that brings the run to ``fraction`` of its stages, the
    time the run actually had left then, and their ratio."""
    need = math.ceil(fraction * log["stages"])
    event = next((e for e in log["events"] if e["stages_done"] >= need), None)
    if event is None:
        return {"fraction": fraction, "stage_at": None, "predicted_remaining": None, "actual_remaining": None,
                "ratio": None, "within_2x": False}
    actual = log["wall_seconds"] - event["elapsed"]
    predicted = event["eta"]
    ratio = None if predicted is None or actual <= 0 else predicted / actual
    return {"fraction": fraction, "stage_at": event["stages_done"], "elapsed_at": event["elapsed"],
            "predicted_remaining": predicted, "actual_remaining": round(actual, 3),
            "ratio": None if ratio is None else round(ratio, 3),
            "within_2x": ratio is not None and 0.5 <= ratio <= 2.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small params.yaml (checks the machinery)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output JSON (default reports/bench/eta.json; --quick: reports/bench/quick/eta.json)")
    parser.add_argument("--venv", type=Path, default=None,
                        help="use this environment instead of the clone's own `make install`")
    parser.add_argument("--keep", type=Path, default=None, help="clone into this (new) folder and keep it")
    args = parser.parse_args()
    out = args.out or REPO / "reports" / "bench" / ("quick/eta.json" if args.quick else "eta.json")
    with tempfile.TemporaryDirectory(prefix="veilbench-eta-") as tmp:
        clone = args.keep or Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], check=True)
        if args.quick:
            params = yaml.safe_load((clone / "params.yaml").read_text())
            (clone / "params.yaml").write_text(yaml.safe_dump(quick_params(params), sort_keys=False))
        log_path = Path(tmp) / "eta_log.json"
        env = {k: v for k, v in os.environ.items() if k not in ("VEILBENCH_ROOT", "DVC_ROOT", "PYTHONPATH")}
        env["VEILBENCH_ETA_LOG"] = str(log_path)
        install_seconds = 0.0
        if args.venv:
            python = str(args.venv.resolve() / "bin" / "python")
            env["PATH"] = f"{args.venv.resolve() / 'bin'}{os.pathsep}{env.get('PATH', '')}"
            command = [python, "-m", "flows.cli", "run"]
        else:
            t0 = time.perf_counter()
            subprocess.run(["make", "--no-print-directory", "install"], cwd=clone, env=env, check=True)
            install_seconds = time.perf_counter() - t0
            command = ["make", "--no-print-directory", "run"]
        unit_before, unit_samples, unit_calls = first_checkpoint(speed_unit, 5)
        load_start = os.getloadavg()
        t0 = time.perf_counter()
        proc = subprocess.run(command, cwd=clone, env=env)
        wall = time.perf_counter() - t0
        unit_after, more = unit_checkpoint(speed_unit, unit_calls)
        log = json.loads(log_path.read_text()) if log_path.is_file() else {"stages": 0, "events": [], "wall_seconds": 0}
    result = {**at_fraction(log), "stages": log["stages"], "wall_seconds": log["wall_seconds"],
              "command_seconds": round(wall, 1), "install_seconds": round(install_seconds, 1),
              "events": log["events"], "command": " ".join(command), "git_rev": git_rev(), "quick": args.quick,
              "ok": proc.returncode == 0 and bool(log.get("finished")), "cpu_count": os.cpu_count(),
              "load_average": [list(load_start), list(os.getloadavg())],
              **drift_summary([unit_before, unit_after], unit_samples + more)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "events"}))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
