"""One reduced cell per family of ``params.paper.yaml`` on the real data, timed.

``python -m flows.paper_reduced [--root runs/paper-reduced]`` picks, for each family, one sweep
and one cell of ``params.paper.yaml`` (:data:`REDUCED`), keeps its first seed, applies the stated
reductions (fewer rounds or epochs, smaller attack budgets), writes the result as
``<root>/params.yaml`` and runs each family's sweep in turn through :func:`flows.benchmark.run_benchmark`,
recording the wall and CPU time of each (process CPU time of all threads; the family's first run
also pays for preparing and embedding its data set) in ``<root>/timings.json``. It checks that the
paper settings run end to end on the real files; the full sweeps are ``make reproduce``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

#: family → (sweep of params.paper.yaml, the cell's settings, the reductions applied to it)
REDUCED: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "gca": ("paper-gca-fmnist-2v8", {"method": "gca", "selection": "paper"},
            {"rounds": 1, "recon_epochs": 1, "align_epochs": 1, "attack_starts": 2, "attack_max_steps": 20,
             "attack_extra_epochs": 0, "surrogate_max_epochs": 5}),
    "dc": ("paper-dc-fmnist-anchors", {"n_anchor": 20000, "obfuscation": "pca"}, {}),
    "anchornoise": ("paper-anchornoise-fmnist-v", {"v": 1.565}, {}),
    "scoreshield": ("paper-scoreshield-fmnist-risk", {"n_records": 2000, "mechanism": "newton"},
                    {"audit_releases": 100}),
}


def reduced_params(paper: dict[str, Any]) -> dict[str, Any]:
    """The paper params mapping cut to one reduced single-seed cell per family (sweeps ``<sweep>-reduced``)."""
    out = copy.deepcopy(paper)
    sweeps = {}
    for sweep, cell, reductions in REDUCED.values():
        spec = copy.deepcopy(paper["sweeps"][sweep])
        spec["seeds"] = spec["seeds"][:1]
        spec["params"] = {**spec.get("params", {}), **cell, **reductions}
        spec.pop("grid", None)
        spec.pop("cells", None)
        sweeps[f"{sweep}-reduced"] = spec
    out["sweeps"] = sweeps
    out["tracking"] = {"experiment": "veilbench-paper-reduced"}
    out["report"] = {"title": "veilbench — the papers' settings, one reduced cell per family"}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.paper_reduced", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.paper.yaml")
    parser.add_argument("--root", default="runs/paper-reduced")
    parser.add_argument("--family", action="append", choices=sorted(REDUCED), help="only these families")
    args = parser.parse_args(argv)
    import os

    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    params = reduced_params(yaml.safe_load(Path(args.params).read_text()))
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))
    os.environ["VEILBENCH_ROOT"] = str(root)
    from flows.benchmark import run_benchmark

    timings_path = root / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.is_file() else {}
    for family in args.family or list(REDUCED):
        sweep, cell, reductions = REDUCED[family]
        wall0, cpu0 = time.perf_counter(), time.process_time()
        run_benchmark(str(root / "params.yaml"), sweeps=[f"{sweep}-reduced"])
        timings[family] = {"sweep": sweep, "cell": cell, "reductions": reductions,
                           "seed": params["sweeps"][f"{sweep}-reduced"]["seeds"][0],
                           "wall_s": round(time.perf_counter() - wall0, 1), "cpu_s": round(time.process_time() - cpu0, 1)}
        timings_path.write_text(json.dumps(timings, indent=2, ensure_ascii=False))
        print(family, timings[family], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
