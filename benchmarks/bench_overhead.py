"""Orchestration overhead of the default pipeline: Prefect, MLflow and DVC bookkeeping vs work.

Copies the repository's code, ``params.yaml`` and ``dvc.yaml`` into a fresh temporary git + DVC
repository, runs ``veilbench run`` (a local Prefect server booting while DVC plans, then the stale
stages as one task graph in that process, DVC saving each as it finishes) and measures:

* ``total_seconds``: wall time of the whole command;
* ``compute_seconds``: wall time during which an algorithm ran — the union of the intervals every
  stage records in its timings sidecar (``started`` + ``seconds``; prepare, embed, and each cell × seed of
  release/integrate/attack/evaluate; cells run two at a time, so their durations overlap), plus an
  in-process re-run of the report builder. ``compute_seconds_summed`` is the plain sum of the
  durations (CPU-side work, overlaps counted twice);
* ``orchestration_seconds`` = total − compute: process start-up and imports, the Prefect server and
  flow/task runs, MLflow logging, DVC hashing and locking.

Writes ``reports/bench/overhead.json`` (or ``--out PATH``): ``{"total_seconds",
"orchestration_seconds", "compute_seconds", "share", "stages"}``. ``--params FILE`` measures
another configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _compute_intervals(root: Path) -> list[tuple[float, float]]:
    """(start, end) wall-clock interval of every computation a stage recorded: prepare, embed and
    each cell × seed of release/integrate/attack/evaluate (``started`` + ``seconds`` of the
    ``timings.json`` sidecars beside the outputs)."""
    infos = [json.loads(m.read_text()) for m in (root / "data").glob("*/*/timings.json")]
    for record in (root / "data").glob("*/*/*/timings.json"):
        infos += [v for v in json.loads(record.read_text()).get("per_seed", {}).values() if isinstance(v, dict)]
    return [(float(i["started"]), float(i["started"]) + float(i["seconds"])) for i in infos if "started" in i]


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals: wall time during which at least one computation ran
    (cells run concurrently, so summing their durations would count overlaps twice)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(REPO / "params.yaml"))
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "overhead.json")
    args = parser.parse_args()
    from veilbench.io import write_json

    with tempfile.TemporaryDirectory(prefix="veilbench-overhead-") as tmp:
        root = Path(tmp)
        for item in ("veilbench", "tasks", "flows"):
            shutil.copytree(REPO / item, root / item, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
        shutil.copy(args.params, root / "params.yaml")
        (root / ".gitignore").write_text("mlflow.db\n.prefect/\n__pycache__/\n")
        env = {**os.environ, "VEILBENCH_ROOT": str(root), "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
               "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
        env.pop("PREFECT_API_URL", None)
        for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"], ["git", "add", "-A"],
                    ["git", "commit", "-qm", "bench"]):
            subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "flows.cli", "run"], cwd=root, env=env, capture_output=True, text=True)
        total = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"pipeline failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        stages = sum(1 for line in proc.stdout.splitlines() if line.startswith("Running stage"))
        os.environ["VEILBENCH_ROOT"] = str(root)
        from tasks.report import report

        t1 = time.perf_counter()
        report(root=root)
        intervals = _compute_intervals(root)
        compute = union_seconds(intervals) + (time.perf_counter() - t1)
        summed = sum(b - a for a, b in intervals)
    out = {"benchmark": "overhead", "total_seconds": round(total, 2), "compute_seconds": round(compute, 2),
           "orchestration_seconds": round(total - compute, 2), "share": round((total - compute) / total, 4),
           "stages": stages, "cpu_count": os.cpu_count(), "cell_threads": int(os.environ.get("VEILBENCH_CELL_THREADS", "2")),
           "compute_seconds_summed": round(summed, 2), "computations": len(intervals)}
    write_json(args.out, out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
