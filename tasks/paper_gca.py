"""GCA on Fashion-MNIST at the paper's setting, for the methods and pairs 2 CPU cores can afford.

``python -m tasks.paper_gca [--root runs/paper-gca] [--sweep paper-gca-fmnist-2v8] [--method gca
--method fedavg]`` writes ``<root>/params.yaml``: the chosen sweep of ``params.paper.yaml`` with only
the chosen methods (every other setting is the paper's: R = 100 rounds, 5 + 5 epochs, 20 clients,
the conv AE, the attack's full budget), and runs it through the pipeline (``veilbench run --no-dvc
--workers N`` with the root as ``VEILBENCH_ROOT``: every cell in its own worker process, N = the
number of methods by default). The release stage saves each
cell's state after every round (``data/checkpoints/`` under the root), so the same command, run
again after a kill, resumes every cell at its last finished round and ends with the results of an
uninterrupted run. ``python -m tasks.paper_gca --status`` prints how far each cell has got.

A GPU box or a Dask cluster runs all seven methods of the three pairs with ``make reproduce``
(README, "Paper-scale reproduction"; ``device: auto`` trains on the GPU).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import yaml

DEFAULT_SWEEP = "paper-gca-fmnist-2v8"
DEFAULT_METHODS = ("gca", "fedavg")


def gca_params(paper: dict[str, Any], sweep: str, methods: list[str]) -> dict[str, Any]:
    """``paper`` (the parsed ``params.paper.yaml``) cut to ``sweep`` with the grid's methods restricted to
    ``methods`` (in the paper file's order)."""
    if sweep not in paper["sweeps"] or paper["sweeps"][sweep]["family"] != "gca":
        gca = sorted(k for k, v in paper["sweeps"].items() if v["family"] == "gca")
        raise SystemExit(f"error: --sweep: {sweep!r} is not a GCA sweep of the paper params ({', '.join(gca)})")
    spec = copy.deepcopy(paper["sweeps"][sweep])
    known = spec["grid"]["method"]
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise SystemExit(f"error: --method: {unknown} not in the sweep's methods {known}")
    spec["grid"]["method"] = [m for m in known if m in methods]
    out = copy.deepcopy(paper)
    out["sweeps"] = {sweep: spec}
    out["tracking"] = {"experiment": "veilbench-paper-gca"}
    out["report"] = {"title": "veilbench — GCA on Fashion-MNIST at the paper's setting"}
    return out


def status(root: Path) -> list[str]:
    """One line per cell: finished, or the last round its checkpoint holds."""
    from veilbench.checkpoints import RoundCheckpoints

    lines = []
    done = sorted((root / "reports" / "sweeps").glob("*/cells/*.json"))
    lines += [f"{p.parent.parent.name}/{p.stem}: evaluated" for p in done]
    for folder in sorted((root / "data" / "checkpoints").glob("release/*/*/*/seed*")):
        saved = RoundCheckpoints(folder).load()
        cell = f"{folder.parents[2].name}/{folder.parents[1].name} seed {folder.name[4:]}"
        lines.append(f"{cell}: round {saved[0] if saved else 0} saved")
    return lines or ["nothing run yet"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.paper_gca", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.paper.yaml")
    parser.add_argument("--root", default="runs/paper-gca")
    parser.add_argument("--sweep", default=DEFAULT_SWEEP)
    parser.add_argument("--method", action="append", help="a method of the sweep's grid (default: gca, fedavg)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per method)")
    parser.add_argument("--status", action="store_true", help="print how far each cell has got and stop")
    args = parser.parse_args(argv)
    import os
    import subprocess

    root = Path(args.root).resolve()
    if args.status:
        print("\n".join(status(root)))
        return 0
    root.mkdir(parents=True, exist_ok=True)
    params = gca_params(yaml.safe_load(Path(args.params).read_text()), args.sweep, args.method or list(DEFAULT_METHODS))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
    workers = args.workers or len(params["sweeps"][args.sweep]["grid"]["method"])
    cmd = [str(Path(sys.executable).with_name("veilbench")), "run", "--no-dvc", "--params", str(root / "params.yaml"),
           "--workers", str(workers)]
    return subprocess.call(cmd, env={**os.environ, "VEILBENCH_ROOT": str(root)})


if __name__ == "__main__":
    sys.exit(main())
