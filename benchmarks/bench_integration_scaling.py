"""Integration time vs anchor size for every DC method (issue 5 "Performance"; spec §6 Table 4).

For ``n_a`` ∈ {400, 800, 1600, 3200} (``--quick``: {200, 400}) a SMOTE anchor is built from 100
class-balanced digits records, ``K`` parties each fit PCA (``d̃ = 10``) on their own digits shard, and
every integrator is timed:

* ``fit_seconds``: building all ``g_k`` from the anchor IRs (spec "function" time), best of up to 5
  repeats within 1 s;
* ``transform_seconds_per_record``: mapping the shared test IRs of every party, divided by the
  number of mapped rows (spec "representation" time per sample).

``exponents[method]`` are least-squares slopes of log time vs log ``n_a`` over all sizes, shown beside
the paper's Table 4 (slope 800 → 1600 on MNIST, ``paper_table4``). ``nystrom_vs_exact`` compares
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
    """Best-of-repeats (fit seconds, transform seconds per record); repeats while under ``budget`` s."""
    fits, trs, spent = [], [], 0.0
    while not fits or (spent < budget and len(fits) < max_repeats):
        integ = factory()
        t0 = time.perf_counter()
        integ.fit(anchor_irs, labels)
        t1 = time.perf_counter()
        mapped = [integ.transform(t, k) for k, t in enumerate(test_irs)]
        t2 = time.perf_counter()
        fits.append(t1 - t0)
        trs.append((t2 - t1) / sum(t.shape[0] for t in test_irs))
        spent += t2 - t0
    return integ, min(fits), min(trs), mapped


def accuracy(integ, own: list[np.ndarray], mapped_test: list[np.ndarray], s: dict) -> float:
    train = np.vstack([integ.transform(o, k) for k, o in enumerate(own)])
    rf = RandomForestClassifier(n_estimators=50, random_state=s["seed"], n_jobs=1)
    rf.fit(train, np.concatenate([s["y"][i] for i in s["shards"]]))
    return float(np.mean([np.mean(rf.predict(t) == s["y"][s["test"]]) for t in mapped_test]))


def slope(n: list[int], t: list[float]) -> float:
    return float(np.polyfit(np.log(n), np.log(np.maximum(t, 1e-12)), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n_a ∈ {200, 400}, no n_a = 20 000 run")
    parser.add_argument("--parties", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=ROOT / "reports" / "bench" / "integration_scaling.json")
    args = parser.parse_args()
    sizes = [200, 400] if args.quick else [400, 800, 1600, 3200]
    rank = 100 if args.quick else 200
    s = setting(args.parties, 50, 10, args.seed)
    rows, comparison = [], []
    for n_a in sizes:
        anchor_irs, labels, test_irs, own = ir_for_anchor(s, n_a)
        fitted = {}
        for name, factory in methods(rank, args.seed).items():
            integ, fit_s, tr_s, mapped = time_method(factory, anchor_irs, labels, test_irs)
            fitted[name] = (integ, fit_s, mapped)
            rows.append({"method": name, "n_anchor": n_a, "fit_seconds": fit_s, "transform_seconds_per_record": tr_s})
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
        ny, ny_fit, ny_tr, ny_map = time_method(methods(rank, args.seed)["nki_nystrom"], anchor_irs, labels, test_irs)
        comparison.append({"n_anchor": 20_000, "rank": rank, "fit_seconds_exact": None, "fit_seconds_nystrom": ny_fit,
                           "transform_seconds_per_record_nystrom": ny_tr, "accuracy_exact": None,
                           "accuracy_nystrom": accuracy(ny, own, ny_map, s), "accuracy_loss": None})
    exponents = {}
    for name in methods(rank, args.seed):
        sel = [r for r in rows if r["method"] == name]
        n = [r["n_anchor"] for r in sel]
        exponents[name] = {"fit": slope(n, [r["fit_seconds"] for r in sel]),
                           "transform": slope(n, [r["transform_seconds_per_record"] for r in sel])}
    write_json(args.output, {
        "benchmark": "integration_scaling",
        "rows": rows,
        "exponents": exponents,
        "paper_table4": PAPER_TABLE4,
        "nystrom_vs_exact": comparison,
        "setting": {"quick": args.quick, "n_parties": args.parties, "n_per_party": 50, "d_tilde": 10,
                    "obfuscation": "pca", "anchor": "smote from 100 digits records", "nystrom_rank": rank,
                    "seed": args.seed, "blas_threads": os.environ.get("OMP_NUM_THREADS"),
                    "python": platform.python_version(), "machine": platform.machine()},
    })
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
