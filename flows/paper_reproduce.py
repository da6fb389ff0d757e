"""``make reproduce``: the sweeps of ``params.paper.yaml`` one at a time, each measured in CPU time.

``python -m flows.paper_reproduce [--params params.paper.yaml] [--root runs/paper] [--family F]…
[--sweep S]… [--workers N] [--dask-address tcp://…]`` runs, under one local Prefect server,
``python -m flows.benchmark --params P --root R --sweep S`` for each selected sweep in the params
file's order (all by default; ``--family``/``--sweep`` select), its cells on a local Dask cluster of
``N`` worker processes (or on the cluster at ``--dask-address``). After each run it appends to
``<root>/cpu.json`` one record: the sweep, its start (Unix time), wall seconds, the CPU seconds
(user + system) of the benchmark process and of every process it waited for — the local Dask
workers included (``os.wait4``); ``null`` with an external cluster, whose workers are not ours —
the exit status, and the cells each stage computed and reused (its ``sweep.json``). A rerun is a
resume: cells whose input keys are unchanged are reused (:mod:`tasks.sweep`), so a sweep's CPU
hours are the sum of its records (:func:`tasks.paper_report.cpu_hours`). ``--dry-run`` prints the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tasks.paper_report import CPU_FILE


def selected_sweeps(params: Path, families: list[str], sweeps: list[str]) -> list[str]:
    """The sweeps to run, in the params file's order: those named, else those of ``families``, else all."""
    from veilbench.config import load_config

    cfg = load_config(params)
    unknown = sorted(set(sweeps) - set(cfg.sweeps))
    if unknown:
        raise KeyError(f"--sweep: {unknown} not in {params.name} ({', '.join(cfg.sweeps)})")
    known = {s.family for s in cfg.sweeps.values()}
    if set(families) - known:
        raise KeyError(f"--family: {sorted(set(families) - known)} has no sweep in {params.name} ({sorted(known)})")
    return [n for n, s in cfg.sweeps.items() if (n in sweeps) or (not sweeps and (not families or s.family in families))]


def benchmark_command(params: Path, root: Path, sweep: str, workers: int, dask_address: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "flows.benchmark", "--params", str(params), "--root", str(root), "--sweep", sweep]
    return cmd + (["--dask-address", dask_address] if dask_address else ["--workers", str(workers)])


def run_measured(cmd: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """Run ``cmd``; return (exit status, wall seconds, CPU seconds of it and of the processes it waited for)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except KeyboardInterrupt:
        proc.terminate()
        _, status, usage = os.wait4(proc.pid, 0)
        raise
    finally:
        proc.returncode = 0  # reaped here
    return os.waitstatus_to_exitcode(status), time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def stage_outcomes(root: Path, sweep: str) -> dict[str, dict[str, int]]:
    """Cells each stage of ``sweep`` computed and reused in its last run (``data/<stage>/<sweep>/sweep.json``)."""
    out = {}
    for stage in ("release", "integrate", "attack"):
        path = root / "data" / stage / sweep / "sweep.json"
        if path.is_file():
            record = json.loads(path.read_text())
            out[stage] = {"computed": len(record["computed"]), "reused": len(record["reused"])}
    return out


def record_run(root: Path, entry: dict[str, Any]) -> None:
    path = root / CPU_FILE
    runs = json.loads(path.read_text()) if path.is_file() else []
    runs.append(entry)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(runs, indent=2) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.paper_reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.paper.yaml")
    parser.add_argument("--root", default="runs/paper")
    parser.add_argument("--family", action="append", default=[], help="only this family's sweeps (repeatable)")
    parser.add_argument("--sweep", action="append", default=[], help="only this sweep (repeatable)")
    parser.add_argument("--workers", type=int, default=2, help="local Dask worker processes (default 2)")
    parser.add_argument("--dask-address", default=None, help="an existing Dask scheduler (its CPU is not measured)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    args = parser.parse_args(argv)
    params, root = Path(args.params).resolve(), Path(args.root).resolve()
    try:
        sweeps = selected_sweeps(params, args.family, args.sweep)
        if args.workers < 1:
            raise KeyError(f"--workers: must be ≥ 1, got {args.workers}")
    except (KeyError, ValueError) as exc:
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    commands = [(s, benchmark_command(params, root, s, args.workers, args.dask_address)) for s in sweeps]
    if args.dry_run:
        print("\n".join(" ".join(c) for _, c in commands))
        return 0
    root.mkdir(parents=True, exist_ok=True)
    from flows.server import booting_prefect_server

    with booting_prefect_server(root) as server:
        env = {**os.environ, "PREFECT_API_URL": server.wait_until_ready()}
        for sweep, cmd in commands:
            started = time.time()
            code, wall, cpu = run_measured(cmd, env)
            record_run(root, {"sweep": sweep, "started": round(started, 1), "wall_s": round(wall, 1),
                              "cpu_s": None if args.dask_address else round(cpu, 1), "exit": code,
                              "cells": stage_outcomes(root, sweep)})
            print(f"{sweep}: exit {code}, {wall / 3600:.2f} h wall, "
                  f"{'?' if args.dask_address else f'{cpu / 3600:.2f}'} CPU h", flush=True)
            if code != 0:
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
