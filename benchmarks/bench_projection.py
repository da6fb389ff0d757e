r"""Benchmark: projecting a noisy cosine Gram onto the elliptope (ScoreShield issue 3).

For each n, unit embeddings of rank ≤ 16 (10 Gaussian clusters in d = 16) give G = X Xᵀ; the
release G̃ = G + sym(Z) uses the output-space mechanism Δ = 1, ε = 1, δ = 1e-5 (analytic σ,
spec §9 E2). Every solver projects the same G̃; rows report

* ``seconds``: wall time of the solver call;
* ``eigh_units``: seconds / seconds of one ``numpy.linalg.eigh`` of G̃ (median of 3) in this run;
* ``dist_to_exact``: ‖X − X*‖_F / ‖X*‖_F with X* the Newton (Qi–Sun) projection;
* ``min_eig`` and ``max_diag_err``: feasibility residuals λ_min(X), max |X_ii − 1|.

Solvers: ``newton`` (exact), ``dykstra`` and ``aap`` (iteration caps below), ``clip``,
``eigclip`` and statsmodels' ``corr_nearest`` (Higham alternating projections; its iteration
cap n_fact·n is set to the same cap). Set BLAS threads (``OMP_NUM_THREADS`` …) before running;
the ratio to ``eigh`` is meaningful only when both use the same threads.

Usage: ``python benchmarks/bench_projection.py [--quick]`` → ``reports/bench/projection.json``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

from veilbench.io import write_json
from veilbench.scoreshield.gram import GaussianGramMechanism, symmetric_gaussian
from veilbench.scoreshield.newton import nearest_correlation_newton
from veilbench.scoreshield.projectors import aap, clip_only, dykstra, eigclip_rescale, feasibility

OUT = Path(__file__).resolve().parents[1] / "reports" / "bench" / "projection.json"
SIZES = {"quick": (100, 200), "full": (200, 500, 1000, 2000)}
ITER_CAP = {"quick": 300, "full": 500}


def noisy_gram(n: int, seed: int = 0) -> np.ndarray:
    """G̃ (n × n) for rank-deficient clustered unit embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((10, 16))
    x = centres[rng.integers(10, size=n)] + 0.5 * rng.standard_normal((n, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sigma = GaussianGramMechanism(1.0, 1e-5, adjacency="output", sensitivity=1.0).sigma_for(n)
    return x @ x.T + symmetric_gaussian(n, sigma, rng)


def eigh_seconds(g: np.ndarray, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.linalg.eigh(g)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def corr_nearest_capped(g: np.ndarray, cap: int) -> np.ndarray:
    from statsmodels.stats.correlation_tools import corr_nearest

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # IterationLimitWarning when the cap is hit: recorded by the residuals
        return corr_nearest(g, threshold=1e-15, n_fact=cap / g.shape[0])


def run(mode: str, cap: int) -> dict:
    solvers = {
        "newton": nearest_correlation_newton,
        "dykstra": lambda g: dykstra(g, max_iter=cap),
        "aap": lambda g: aap(g, max_iter=cap),
        "clip": clip_only,
        "eigclip": eigclip_rescale,
        "corr_nearest": lambda g: corr_nearest_capped(g, cap),
    }
    rows = []
    for n in SIZES[mode]:
        g = noisy_gram(n)
        unit = eigh_seconds(g)
        exact = None
        for name, fn in solvers.items():
            t = time.perf_counter()
            out = fn(g)
            seconds = time.perf_counter() - t
            x = out if isinstance(out, np.ndarray) else out.gram
            if exact is None:
                exact = x
            f = feasibility(x)
            rows.append({
                "n": n,
                "solver": name,
                "seconds": seconds,
                "eigh_units": seconds / unit,
                "dist_to_exact": float(np.linalg.norm(x - exact) / np.linalg.norm(exact)),
                "min_eig": f.min_eig,
                "max_diag_err": f.max_diag_err,
            })
            print(f"n={n:5d} {name:13s} {seconds:8.3f}s {seconds / unit:8.1f} eigh  "
                  f"dist={rows[-1]['dist_to_exact']:.2e} min_eig={f.min_eig:.1e} diag={f.max_diag_err:.1e}", flush=True)
    return {"benchmark": "projection", "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n ∈ {100, 200} (< 60 s)")
    parser.add_argument("--iter-cap", type=int, default=None,
                        help=f"iteration cap of dykstra/aap/corr_nearest (default {ITER_CAP})")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    write_json(OUT, run(mode, args.iter_cap or ITER_CAP[mode]))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
