"""Integration time vs anchor size for every DC method (issue 5 "Performance"; spec §6 Table 4).

For ``n_a`` ∈ {400, 800, 1600, 3200} (``--quick``: {200, 400}) a SMOTE anchor is built from 100
class-balanced digits records, ``K`` parties each fit PCA (``d̃ = 10``) on their own digits shard, and
every integrator is timed:

* ``fit_seconds``: building all ``g_k`` from the anchor IRs (spec "function" time), best of up to 5
  repeats within 1 s;
* ``transform_seconds_per_record``: mapping the shared test IRs of every party, divided by the
  number of mapped rows (spec "representation" time per sample).

Both are CPU seconds of the process (``time.process_time``; BLAS single-threaded), so other processes
on a shared machine do not inflate them; ``fit_wall_seconds`` / ``transform_wall_seconds_per_record``
hold the wall-clock times of the same runs, and ``load_average_1_5_15`` the machine load.

``exponents[method]`` are least-squares slopes of log time vs log ``n_a`` over all sizes and
``exponents_800_1600`` the two-point slopes over the paper's own interval, both shown beside the
paper's Table 4 (slope 800 → 1600 on MNIST, ``paper_table4``, the paper's numbers). ``nki_steps``
splits each exact-NKI fit into the steps of the paper's Table 1 (``NKI.step_seconds_``: kernel, inverse
(Cholesky ``S_k`` and ``M``), graph, eigen (``Z*``), gamma) with per-step exponents and the
achieved GFLOP/s of the inverse step (``K·(7/3)·n_a³`` flops: Cholesky ``n³/3`` + the two triangular
solves against ``I``, ``2n³``), which tells what sets the NKI fit exponent (``nki_exponent_explained``, written from these numbers).
``nystrom_vs_exact`` compares
Nyström NKI (fixed rank) with exact NKI at every size (fit time, downstream RF accuracy, subspace
agreement of the test features) and, in full mode, runs Nyström alone at ``n_a = 20 000``.

Run: ``python benchmarks/bench_integration_scaling.py [--quick]`` → ``reports/bench/integration_scaling.json``.
BLAS is pinned to one thread (spec §9).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402

from veilbench.dc.anchors import select_sources, smote_anchor  # noqa: E402
from veilbench.dc.kernel import NKI  # noqa: E402
from veilbench.dc.linear import GEP, LKI, MPP, ODC, orth  # noqa: E402
from veilbench.dc.nystrom import NystromNKI  # noqa: E402
from veilbench.dc.obfuscation import obfuscate_parties  # noqa: E402
from veilbench.io import write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAPER_TABLE4 = {
    "mpp": {"fit": 0.7455, "transform": 0.0105},
    "gep": {"fit": 0.8273, "transform": 0.0801},
    "odc": {"fit": 0.3528, "transform": 0.1152},
    "lki": {"fit": 0.9317, "transform": -0.0248},
    "nki": {"fit": 2.8156, "transform": 1.2898},
    "nki_tsl": {"fit": 2.6308, "transform": 1.2315},
}


def methods(rank: int, seed: int) -> dict:
    return {
        "mpp": MPP,
        "gep": GEP,
        "odc": ODC,
        "lki": LKI,
        "nki": NKI,
        "nki_tsl": lambda: NKI(graph="tsl"),
        "nki_tsl_center": lambda: NKI(graph="tsl", center=True),
        "nki_nystrom": lambda: NystromNKI(rank=rank, seed=seed),
    }


def setting(n_parties: int, n_per_party: int, d_tilde: int, seed: int) -> dict:
    """Digits split into a 100-record source pool, K party shards and a test set, each party's PCA IRs."""
    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    rng = np.random.default_rng(seed)
    src = select_sources(y, 100, rng)
    rest = rng.permutation(np.setdiff1d(np.arange(y.size), src))
    shards = [rest[k * n_per_party : (k + 1) * n_per_party] for k in range(n_parties)]
    test = rest[n_parties * n_per_party :]
    return {"x": x, "y": y, "src": src, "shards": shards, "test": test, "d_tilde": d_tilde, "seed": seed}


def ir_for_anchor(s: dict, n_anchor: int) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray], list[np.ndarray]]:
    anchor = smote_anchor(s["x"][s["src"]], s["y"][s["src"]], n_anchor, k_nn=10, seed=s["seed"] + n_anchor)
    own, shared, _ = obfuscate_parties("pca", s["d_tilde"], [s["x"][i] for i in s["shards"]],
                                       [anchor.X, s["x"][s["test"]]], s["seed"])
    return [sh[0] for sh in shared], anchor.y, [sh[1] for sh in shared], own


def time_method(factory, anchor_irs, labels, test_irs, budget: float = 1.0, max_repeats: int = 5):
    """Best-of-repeats fit and transform times; repeats while under ``budget`` CPU seconds.

    Returns ``(integrator, {"fit_seconds", "transform_seconds_per_record"}`` in CPU seconds of this
    process (``time.process_time``; BLAS is single-threaded, so this is the compute time and is not
    inflated by other processes on a shared machine) ``and the same in wall seconds, mapped test IRs)``.
    """
    cpu, wall, spent = [], [], 0.0
    n_rows = sum(t.shape[0] for t in test_irs)
    while not cpu or (spent < budget and len(cpu) < max_repeats):
        integ = factory()
        c0, w0 = time.process_time(), time.perf_counter()
        integ.fit(anchor_irs, labels)
        c1, w1 = time.process_time(), time.perf_counter()
        mapped = [integ.transform(t, k) for k, t in enumerate(test_irs)]
        c2, w2 = time.process_time(), time.perf_counter()
        cpu.append((c1 - c0, (c2 - c1) / n_rows))
        wall.append((w1 - w0, (w2 - w1) / n_rows))
        spent += c2 - c0
    best = lambda pairs: {"fit_seconds": min(p[0] for p in pairs),  # noqa: E731
                          "transform_seconds_per_record": min(p[1] for p in pairs)}
    return integ, best(cpu), best(wall), mapped


def accuracy(integ, own: list[np.ndarray], mapped_test: list[np.ndarray], s: dict) -> float:
    train = np.vstack([integ.transform(o, k) for k, o in enumerate(own)])
    rf = RandomForestClassifier(n_estimators=50, random_state=s["seed"], n_jobs=1)
    rf.fit(train, np.concatenate([s["y"][i] for i in s["shards"]]))
    return float(np.mean([np.mean(rf.predict(t) == s["y"][s["test"]]) for t in mapped_test]))


def slope(n: list[int], t: list[float]) -> float:
    return float(np.polyfit(np.log(n), np.log(np.maximum(t, 1e-12)), 1)[0])


def exponents_of(rows: list[dict], keys: tuple[str, ...], sizes: list[int] | None = None) -> dict[str, float]:
    """Log-log slope of each ``keys`` column vs ``n_anchor`` over ``rows`` (restricted to ``sizes``)."""
    sel = [r for r in rows if sizes is None or r["n_anchor"] in sizes]
    if len({r["n_anchor"] for r in sel}) < 2:
        return {}
    n = [r["n_anchor"] for r in sel]
    return {k: slope(n, [r[k] for r in sel]) for k in keys}


def explain_nki(steps: list[dict], exponents: dict, step_exponents: dict, wall_exponents: dict) -> str:
    """One paragraph, from the measured numbers, on which step dominates exact NKI and what sets its exponent."""
    rows = sorted((r for r in steps if r["method"] == "nki"), key=lambda r: r["n_anchor"])
    if len(rows) < 2:
        return ""
    lo, hi = rows[0], rows[-1]
    names = [k.removesuffix("_seconds") for k in hi if k.endswith("_seconds") and hi[k] >= 1e-3]
    total = sum(hi[f"{k}_seconds"] for k in names)
    share = {k: hi[f"{k}_seconds"] / total for k in names}
    top = max(share, key=share.get)
    rate_lo, rate_hi = lo["inverse_gflops_per_second"], hi["inverse_gflops_per_second"]
    excess = float(np.log(rate_lo / rate_hi) / np.log(hi["n_anchor"] / lo["n_anchor"]))
    per_step = ", ".join(f"{k} {step_exponents['nki'][k + '_seconds']:.2f}" for k in names)
    why = ("the flop rate falls as the 8·n_a² -byte matrices outgrow the CPU caches (single-threaded BLAS on a shared, "
           "loaded machine), so this step grows faster than n_a^3" if excess > 0 else
           "the flop rate rises with size (BLAS overheads amortised), so this step grows slower than n_a^3")
    return (
        f"Exact NKI fit exponent {exponents['nki']['fit']:.2f} (least squares over n_a = {lo['n_anchor']}..{hi['n_anchor']}). "
        f"At n_a = {hi['n_anchor']} the '{top}' step takes {100 * share[top]:.0f}% of the fit "
        f"(shares: {', '.join(f'{k} {100 * v:.0f}%' for k, v in share.items())}); per-step exponents: "
        f"{per_step}. "
        f"The inverse step (K Cholesky factorisations and solves against I, (7/3)·K·n_a^3 flops) ran at "
        f"{rate_lo:.2f} GFLOP/s at n_a = {lo['n_anchor']} and {rate_hi:.2f} GFLOP/s at n_a = {hi['n_anchor']}: "
        f"{why} (by {excess:+.2f} in the exponent). The same fits timed by the wall clock on this shared machine give "
        f"an exponent of {wall_exponents['nki']['fit']:.2f}: other processes' load, not the algorithm, moves wall-clock "
        "exponents. The paper's 2.82 is its two-point 800→1600 slope on an Apple M4 "
        "(see exponents_800_1600 for ours over the same interval)."
    )


def nki_step_row(name: str, n_a: int, n_parties: int, integ: NKI) -> dict:
    """Step seconds of one exact-NKI fit and the GFLOP/s of its inverse step."""
    steps = dict(integ.step_seconds_)
    flops = n_parties * (7.0 / 3.0) * float(n_a) ** 3
    return {"method": name, "n_anchor": n_a, **{f"{k}_seconds": v for k, v in steps.items()},
            "inverse_gflops_per_second": flops / max(steps["inverse"], 1e-12) / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n_a ∈ {200, 400}, no n_a = 20 000 run")
    parser.add_argument("--parties", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", "--output", dest="output", type=Path, default=ROOT / "reports" / "bench" / "integration_scaling.json")
    parser.add_argument("--notes", default="", help="free text stored in the JSON (contention, interpretation)")
    args = parser.parse_args()
    sizes = [200, 400] if args.quick else [400, 800, 1600, 3200]
    rank = 100 if args.quick else 200
    s = setting(args.parties, 50, 10, args.seed)
    rows, comparison, steps = [], [], []
    load_before = os.getloadavg()
    for n_a in sizes:
        anchor_irs, labels, test_irs, own = ir_for_anchor(s, n_a)
        fitted = {}
        for name, factory in methods(rank, args.seed).items():
            integ, t_cpu, t_wall, mapped = time_method(factory, anchor_irs, labels, test_irs)
            fit_s, tr_s = t_cpu["fit_seconds"], t_cpu["transform_seconds_per_record"]
            fitted[name] = (integ, fit_s, mapped)
            if isinstance(integ, NKI):
                steps.append(nki_step_row(name, n_a, args.parties, integ))
            rows.append({"method": name, "n_anchor": n_a, **t_cpu, "fit_wall_seconds": t_wall["fit_seconds"],
                         "transform_wall_seconds_per_record": t_wall["transform_seconds_per_record"]})
            print(f"{name:15s} n_a={n_a:5d} fit {fit_s:8.3f} s  transform {tr_s * 1e6:9.2f} µs/record", flush=True)
        (ex, ex_fit, ex_map), (ny, ny_fit, ny_map) = fitted["nki"], fitted["nki_nystrom"]
        cos = min(
            np.linalg.svd(orth(a).T @ orth(b), compute_uv=False).min() for a, b in zip(ex_map, ny_map, strict=True)
        )
        acc_exact, acc_ny = accuracy(ex, own, ex_map, s), accuracy(ny, own, ny_map, s)
        comparison.append({"n_anchor": n_a, "rank": rank, "fit_seconds_exact": ex_fit, "fit_seconds_nystrom": ny_fit,
                           "accuracy_exact": acc_exact, "accuracy_nystrom": acc_ny, "accuracy_loss": acc_exact - acc_ny,
                           "min_principal_cosine_test_features": float(cos)})
    if not args.quick:
        anchor_irs, labels, test_irs, own = ir_for_anchor(s, 20_000)
        ny, ny_t, _, ny_map = time_method(methods(rank, args.seed)["nki_nystrom"], anchor_irs, labels, test_irs)
        comparison.append({"n_anchor": 20_000, "rank": rank, "fit_seconds_exact": None,
                           "fit_seconds_nystrom": ny_t["fit_seconds"],
                           "transform_seconds_per_record_nystrom": ny_t["transform_seconds_per_record"],
                           "accuracy_exact": None,
                           "accuracy_nystrom": accuracy(ny, own, ny_map, s), "accuracy_loss": None})
    columns = {"fit_seconds": "fit", "transform_seconds_per_record": "transform"}
    wall_columns = {"fit_wall_seconds": "fit", "transform_wall_seconds_per_record": "transform"}
    exponents, exponents_paper_interval, step_exponents, wall_exponents = {}, {}, {}, {}
    for name in methods(rank, args.seed):
        sel = [r for r in rows if r["method"] == name]
        exponents[name] = {columns[k]: v for k, v in exponents_of(sel, tuple(columns)).items()}
        wall_exponents[name] = {wall_columns[k]: v for k, v in exponents_of(sel, tuple(wall_columns)).items()}
        mid = exponents_of(sel, tuple(columns), [800, 1600])
        if mid:
            exponents_paper_interval[name] = {columns[k]: v for k, v in mid.items()}
        step_rows = [r for r in steps if r["method"] == name]
        if step_rows:
            keys = tuple(k for k in step_rows[0] if k.endswith("_seconds") and max(r[k] for r in step_rows) >= 1e-3)
            step_exponents[name] = exponents_of(step_rows, keys)
    write_json(args.output, {
        "benchmark": "integration_scaling",
        "rows": rows,
        "exponents": exponents,
        "exponents_800_1600": exponents_paper_interval,
        "exponents_wall_clock": wall_exponents,
        "paper_table4": PAPER_TABLE4,
        "paper_table4_note": "the paper's numbers (spec §6 Table 4: slope from n_a = 800 to 1600 on MNIST, Apple M4)",
        "nki_steps": {"rows": steps, "exponents": step_exponents},
        "nystrom_vs_exact": comparison,
        "notes": args.notes,
        "nki_exponent_explained": explain_nki(steps, exponents, step_exponents, wall_exponents),
        "load_average_1_5_15": {"before": list(load_before), "after": list(os.getloadavg())},
        "setting": {"quick": args.quick, "n_parties": args.parties, "n_per_party": 50, "d_tilde": 10,
                    "obfuscation": "pca", "anchor": "smote from 100 digits records", "nystrom_rank": rank,
                    "seed": args.seed, "blas_threads": os.environ.get("OMP_NUM_THREADS"),
                    "python": platform.python_version(), "machine": platform.machine(),
                    "cpu_count": os.cpu_count(), "command": " ".join(sys.argv)},
    })
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
