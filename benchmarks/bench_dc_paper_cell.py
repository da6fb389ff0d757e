"""CPU time of the DC paper sweeps' largest cell, n_a = 20 000, stage by stage as the pipeline runs it.

Data: Fashion-MNIST as ``params.paper.yaml`` prepares it (``fmnist-unit``: pixels/255, the seeded
stratified 60 000 / 10 000 split), made by the ``prepare`` stage in a temporary root from the
installed IDX files (Debian's ``dataset-fashion-mnist``; nothing is downloaded). The cell is
``n_anchor=20000`` of ``paper-dc-fmnist-anchors`` (NKI by Nyström, rank 1 000) and of
``paper-dc-fmnist-anchors-lki`` (exact LKI): K = 10 parties of n = 100, d̃ = 10, SMOTE anchors
from 100 sources, nK = 1 000 test records, under each obfuscation (UMAP, PCA, K-PCA).

Per obfuscation and seed the stages run as the pipeline runs the two sweeps' cells: ``release``
and ``attack`` once (neither reads the integrator, so both cells share them: ``tasks/stage_reads.py``),
``integrate`` and ``evaluate`` once per integrator. Each call is timed by process CPU time (BLAS
on one thread: ``tasks.numerics`` is imported, as every stage does) with the wall time beside it.
Numba compiles UMAP's functions on their first call in a process; a small UMAP fit runs first,
untimed, so the rows time the work and not the compilation (a pipeline worker pays it once).

JSON (``reports/bench/dc_paper_cell.json``): ``rows`` (obfuscation, seed, stage, integrator,
``cpu_seconds``, ``wall_seconds``); per obfuscation ``cells``: ``cpu_seconds_per_seed`` (median over
seeds of release + attack + integrate + evaluate of one sweep's cell — the cell computed alone),
``cpu_seconds`` (that × the sweep's 5 seeds), and ``both_sweeps_cpu_seconds_per_seed`` (the two
sweeps' cells of one seed, release and attack computed once); ``stage_share`` (each stage's share of
the per-seed CPU time); the Nyström solver and its Ritz residual; ``unit`` (one ``eigh`` of a fixed
500 × 500 matrix, timed before and after each obfuscation: ``unit_drift`` as ``measure.py``;
a drift above 20 % flags the run as not citable); ``load_average`` at the start and end.
With ``--profile`` one more seed of the UMAP cell runs under :mod:`cProfile` (untimed) and
``profile`` lists each stage's functions with the largest cumulative share of that stage's time.

Run alone on the machine: ``python benchmarks/bench_dc_paper_cell.py --profile`` (about an hour
of CPU); ``--quick`` (n_a = 2 000, one seed, PCA only, a schema check) writes under
``reports/bench/quick/``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tasks  # noqa: E402,F401  (pins one BLAS thread and the CPU code paths, as every stage)
from measure import drift_summary, unit_checkpoint  # noqa: E402

UNIT_SIZE = 500
SWEEP_SEEDS = 5
STAGES = ("release", "integrate", "attack", "evaluate")
CELL = {"n_parties": 10, "n_per_party": 100, "n_test": 1000, "d_tilde": 10, "anchor": "smote",
        "n_smote_source": 100, "references": False}
INTEGRATORS = {"nki": {"method": "nki", "nystrom_rank": 1000}, "lki": {"method": "lki"}}
PARAMS = """seed: 0
tracking: {experiment: bench-dc-paper-cell}
datasets:
  fmnist-unit: {source: fashion_mnist, options: {features: unit}, test_size: 0.142857, n_parties: 10, scheme: iid}
embeddings:
  fmnist-unit-raw: {dataset: fmnist-unit, encoder: raw}
sweeps: {}
"""


def prepared_inputs(folder: Path) -> dict[str, dict[str, np.ndarray]]:
    """``prepare`` and ``embed`` arrays of ``fmnist-unit`` made by the pipeline's own stages under ``folder``."""
    from tasks.embed import embed
    from tasks.prepare import prepare
    from veilbench.io import read_bundle

    (folder / "params.yaml").write_text(PARAMS)
    prepare("fmnist-unit", folder / "params.yaml", folder)
    embed("fmnist-unit-raw", folder / "params.yaml", folder)
    return {"prepare": read_bundle(folder / "data/prepare/fmnist-unit")[0],
            "embed": read_bundle(folder / "data/embed/fmnist-unit-raw")[0]}


def eigh_unit():
    g = np.random.default_rng(0).standard_normal((UNIT_SIZE, UNIT_SIZE))
    g = g + g.T
    return lambda: np.linalg.eigh(g)


def warm_umap() -> None:
    """One small UMAP fit and transform: numba compiles UMAP's functions here, untimed."""
    from veilbench.dc.obfuscation import make_obfuscator

    x = np.random.default_rng(0).random((60, 20))
    make_obfuscator("umap", 4, 60, 20, seed=0).fit(x).transform(x[:10])


def run_seed(base: dict, obfuscation: str, n_anchor: int, seed: int) -> tuple[list[dict], dict[str, Any]]:
    """One seed of the cell under ``obfuscation``: rows of (stage, integrator, CPU s, wall s) and diagnostics."""
    from veilbench.dc import family

    rows, info = [], {}
    params = {name: family.Params(**CELL, **opts, n_anchor=n_anchor, obfuscation=obfuscation)
              for name, opts in INTEGRATORS.items()}
    state = dict(base)

    def timed(stage: str, integrator: str, p: Any, inputs: dict) -> Any:
        c, w = time.process_time(), time.perf_counter()
        out = getattr(family, stage)(inputs, p, seed)
        rows.append({"obfuscation": obfuscation, "n_anchor": n_anchor, "seed": seed, "stage": stage,
                     "integrator": integrator, "cpu_seconds": time.process_time() - c,
                     "wall_seconds": time.perf_counter() - w})
        return out

    state["release"] = timed("release", "shared", params["nki"], state).arrays
    state["attack"] = timed("attack", "shared", params["nki"], state).arrays
    for name, p in params.items():
        integ = timed("integrate", name, p, state)
        info[name] = {k: integ.info[k] for k in ("integrator",) if k in integ.info}
        timed("evaluate", name, p, {**state, "integrate": integ.arrays})
    return rows, info


def nystrom_diagnostics(base: dict, obfuscation: str, n_anchor: int, seed: int) -> dict[str, Any]:
    """The solver the Nyström fit chose and its Ritz residual (untimed refit on the seed's release)."""
    from veilbench.dc import family

    p = family.Params(**CELL, **INTEGRATORS["nki"], n_anchor=n_anchor, obfuscation=obfuscation)
    rel = family.release(base, p, seed).arrays
    integ = family.make_integrator(p, seed).fit(list(rel["ir_anchor"]))
    return {"solver": integ.solver_, "ritz_residual": float(integ.residual_)}


def profile_cell(base: dict, n_anchor: int, seed: int, top: int = 8) -> dict[str, list[dict]]:
    """Each stage of one UMAP seed under cProfile: its functions with the largest cumulative share."""
    from veilbench.dc import family

    out, state = {}, dict(base)
    for stage, integrator in (("release", "nki"), ("attack", "nki"), ("integrate", "nki"), ("evaluate", "nki"),
                              ("integrate", "lki")):
        p = family.Params(**CELL, **INTEGRATORS[integrator], n_anchor=n_anchor, obfuscation="umap")
        prof = cProfile.Profile()
        prof.enable()
        result = getattr(family, stage)(state, p, seed)
        prof.disable()
        stats = pstats.Stats(prof)
        total = max(stats.total_tt, 1e-12)
        entries = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)
        shown = []
        for (file, line, name), (_, _, _, cum, _) in entries:
            if "site-packages" in file or "/veilbench/" in file:
                shown.append({"function": f"{Path(file).name}:{line}({name})", "cumulative_share": cum / total})
            if len(shown) == top:
                break
        out[f"{stage}:{integrator}"] = shown
        if integrator == "nki" and stage != "evaluate":
            state[stage] = result.arrays
    return out


def summarise(rows: list[dict], seeds: list[int]) -> dict[str, Any]:
    per_seed = {}
    for s in seeds:
        r = [x for x in rows if x["seed"] == s]
        shared = sum(x["cpu_seconds"] for x in r if x["integrator"] == "shared")
        own = {i: sum(x["cpu_seconds"] for x in r if x["integrator"] == i) for i in INTEGRATORS}
        per_seed[s] = {"cell": {i: shared + own[i] for i in INTEGRATORS}, "both": shared + sum(own.values())}
    cell = {i: float(np.median([per_seed[s]["cell"][i] for s in seeds])) for i in INTEGRATORS}
    stage_cpu = {f"{st}:{i}": float(np.median([sum(x["cpu_seconds"] for x in rows if x["seed"] == s and x["stage"] == st
                                                   and x["integrator"] == i) for s in seeds]))
                 for st in STAGES for i in ("shared", *INTEGRATORS)
                 if any(x["stage"] == st and x["integrator"] == i for x in rows)}
    both = float(np.median([per_seed[s]["both"] for s in seeds]))
    return {"cpu_seconds_per_seed": cell, "cpu_seconds": {i: v * SWEEP_SEEDS for i, v in cell.items()},
            "both_sweeps_cpu_seconds_per_seed": both, "stage_cpu_seconds_per_seed": stage_cpu,
            "stage_share": {k: v / both for k, v in stage_cpu.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n_a = 2 000, one seed, PCA only (a schema check)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--obfuscation", nargs="+", default=["umap", "pca", "kpca"])
    parser.add_argument("--profile", action="store_true", help="also profile one UMAP seed (untimed)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--notes", default="", help="free text stored in the JSON")
    args = parser.parse_args(argv)
    n_anchor, seeds, obfuscations = (2000, [0], ["pca"]) if args.quick else (20000, args.seeds, args.obfuscation)
    out = args.out or ROOT / "reports" / "bench" / ("quick" if args.quick else "") / "dc_paper_cell.json"
    load_start = os.getloadavg()
    unit = eigh_unit()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["VEILBENCH_ROOT"] = tmp
        base = prepared_inputs(Path(tmp))
        warm_umap()
        rows, cells, units = [], {}, {}
        for obf in obfuscations:
            checkpoints, samples = [], []
            c, s = unit_checkpoint(unit, 5)
            checkpoints.append(c)
            samples += s
            obf_rows = []
            for seed in seeds:
                r, _ = run_seed(base, obf, n_anchor, seed)
                obf_rows += r
                print(f"{obf} seed {seed}: " + ", ".join(f"{x['stage']}:{x['integrator']} {x['cpu_seconds']:.1f}"
                                                          for x in r), flush=True)
            c, s = unit_checkpoint(unit, 5)
            checkpoints.append(c)
            samples += s
            units[obf] = drift_summary(checkpoints, samples)
            cells[obf] = {**summarise(obf_rows, seeds), "nystrom": nystrom_diagnostics(base, obf, n_anchor, seeds[0])}
            rows += obf_rows
        profile = profile_cell(base, n_anchor, seeds[-1] + 1) if args.profile and not args.quick else {}
    result = {
        "benchmark": "dc_paper_cell", "quick": args.quick, "citable": not args.quick and not any(
            u["unit_drift_flagged"] for u in units.values()),
        "n_anchor": n_anchor, "seeds": seeds, "sweep_seeds": SWEEP_SEEDS, "cell": {**CELL, "integrators": INTEGRATORS},
        "cells": cells, "unit": units, "profile": profile, "rows": rows,
        "load_average": [list(load_start), list(os.getloadavg())], "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "notes": args.notes,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
