r"""Benchmark: projecting a noisy cosine Gram onto the elliptope (ScoreShield issue 3).

For each n, unit embeddings of rank ≤ 16 (10 Gaussian clusters in d = 16) give G = X Xᵀ; the
release G̃ = G + sym(Z) uses the output-space mechanism Δ = 1, ε = 1, δ = 1e-5 (analytic σ,
spec §9 E2). Every solver projects the same G̃; rows report

* ``seconds``: wall time of the solver call;
* ``eigh_units``: seconds / seconds of one ``numpy.linalg.eigh`` of G̃ (median of 3) in this run;
* ``dist_to_exact``: ‖X − X*‖_F / ‖X*‖_F with X* the Newton (Qi–Sun) projection;
* ``min_eig`` and ``max_diag_err``: feasibility residuals λ_min(X), max |X_ii − 1|;
* extras: ``iter_cap`` (the solver's iteration cap, ``null`` for Newton/one-shot solvers),
  ``iterations`` and ``converged`` where the solver reports them, ``eigh_seconds`` (the unit).

Solvers: ``newton`` (exact), ``dykstra`` and ``aap`` (iteration caps below), ``clip``,
``eigclip`` and statsmodels' ``corr_nearest`` (Higham's alternating projections, one
eigendecomposition per iteration, no convergence test other than "no eigenvalue clipped"; its
cap n_fact·n is set to the iteration cap). A capped ``corr_nearest`` that has not reached
Newton's residual gives a *lower bound* on Newton's speed-up (``speedup_newton_lower_bound``
in ``summary``). The caps shrink with n so the full run fits in well under an hour on one core.
BLAS is pinned to one thread (set before numpy loads) so the ratio to ``eigh`` is like for like.

Usage: ``python benchmarks/bench_projection.py [--quick]`` → ``reports/bench/projection.json``
(rewritten after every solver, so an interrupted run keeps what it finished; ``--sizes 2000``
reruns one size and keeps the other sizes' rows already in the output).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from veilbench.io import read_json, write_json  # noqa: E402
from veilbench.scoreshield.gram import GaussianGramMechanism, symmetric_gaussian  # noqa: E402
from veilbench.scoreshield.newton import nearest_correlation_newton  # noqa: E402
from veilbench.scoreshield.projectors import aap, clip_only, dykstra, eigclip_rescale, feasibility  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "reports" / "bench" / "projection.json"
SIZES = {"quick": (100, 200), "full": (200, 500, 1000, 2000)}
CAPPED = ("dykstra", "aap", "corr_nearest")


def iteration_caps(mode: str, n: int) -> dict[str, int]:
    """Iteration caps of the iterative solvers at size n (each iteration costs about one eigh).

    quick: 300. full: 500 up to n = 500; n = 1000: corr_nearest 200, dykstra/aap 100; n ≥ 2000:
    corr_nearest 150 (≈ 10× Newton's cost, enough to bound the speed-up), dykstra/aap 20.
    """
    if mode == "quick" or n <= 500:
        cap = 300 if mode == "quick" else 500
        return dict.fromkeys(CAPPED, cap)
    if n <= 1000:
        return {"dykstra": 100, "aap": 100, "corr_nearest": 200}
    return {"dykstra": 20, "aap": 20, "corr_nearest": 150}


def noisy_gram(n: int, seed: int = 0) -> np.ndarray:
    """G̃ (n × n) for rank-deficient clustered unit embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((10, 16))
    x = centres[rng.integers(10, size=n)] + 0.5 * rng.standard_normal((n, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sigma = GaussianGramMechanism(1.0, 1e-5, adjacency="output", sensitivity=1.0).sigma_for(n)
    return x @ x.T + symmetric_gaussian(n, sigma, rng)


def eigh_seconds(g: np.ndarray, repeats: int = 3) -> float:
    """Median wall time of ``numpy.linalg.eigh(g)`` over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        np.linalg.eigh(g)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def corr_nearest_capped(g: np.ndarray, cap: int) -> np.ndarray:
    """statsmodels ``corr_nearest`` with at most ``cap`` iterations (threshold 1e-15)."""
    from statsmodels.stats.correlation_tools import corr_nearest

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # IterationLimitWarning when the cap is hit: recorded by the residuals
        return corr_nearest(g, threshold=1e-15, n_fact=cap / g.shape[0])


def _solvers(caps: dict[str, int]) -> dict:
    """Newton first (the exact reference), then the cheap ones, corr_nearest, and the capped iterations."""
    return {
        "newton": nearest_correlation_newton,
        "clip": clip_only,
        "eigclip": eigclip_rescale,
        "corr_nearest": lambda g: corr_nearest_capped(g, caps["corr_nearest"]),
        "dykstra": lambda g: dykstra(g, max_iter=caps["dykstra"]),
        "aap": lambda g: aap(g, max_iter=caps["aap"]),
    }


def bench_size(n: int, caps: dict[str, int], rows: list[dict], done: Callable[[], None]) -> None:
    """Append one row per solver for the G̃ of size n to ``rows``, calling ``done()`` after each."""
    g = noisy_gram(n)
    unit = eigh_seconds(g)
    exact = None
    for name, fn in _solvers(caps).items():
        t = time.perf_counter()
        out = fn(g)
        seconds = time.perf_counter() - t
        x = out if isinstance(out, np.ndarray) else out.gram
        exact = x if exact is None else exact
        f = feasibility(x)
        row = {
            "n": n,
            "solver": name,
            "seconds": seconds,
            "eigh_units": seconds / unit,
            "eigh_seconds": unit,
            "dist_to_exact": float(np.linalg.norm(x - exact) / np.linalg.norm(exact)),
            "min_eig": f.min_eig,
            "max_diag_err": f.max_diag_err,
            "iter_cap": caps.get(name),
        }
        if not isinstance(out, np.ndarray):
            row.update(iterations=out.iterations, n_eigh=out.n_eigh, converged=out.converged)
        rows.append(row)
        done()
        print(f"n={n:5d} {name:13s} {seconds:8.3f}s {row['eigh_units']:8.1f} eigh  dist={row['dist_to_exact']:.2e} "
              f"min_eig={f.min_eig:.1e} diag={f.max_diag_err:.1e}", flush=True)


def summarise(rows: list[dict]) -> list[dict]:
    """Per n: Newton's eigh-units and its speed-up over corr_nearest (a lower bound when the capped
    corr_nearest ended less feasible than Newton, i.e. never reached Newton's residual)."""
    out = []
    for n in sorted({r["n"] for r in rows}):
        by = {r["solver"]: r for r in rows if r["n"] == n}
        if "newton" not in by or "corr_nearest" not in by:
            continue
        nt, cn = by["newton"], by["corr_nearest"]
        reached = cn["min_eig"] >= nt["min_eig"] and cn["max_diag_err"] <= max(nt["max_diag_err"], 1e-12)
        ratio = cn["seconds"] / nt["seconds"]
        out.append({
            "n": n,
            "newton_eigh_units": nt["eigh_units"],
            # a corr_nearest that ran to its cap did one n × n eigh per iteration, so it cost ≥ cap
            # eigh-units: a bound that does not depend on the load while corr_nearest ran
            "speedup_eigh_count_lower_bound": None if reached else cn["iter_cap"] / nt["eigh_units"],
            "corr_nearest_iter_cap": cn["iter_cap"],
            "corr_nearest_reached_newton_residual": bool(reached),
            "speedup_newton_vs_corr_nearest": ratio,
            "speedup_is_lower_bound": not reached,
            "target_eigh_units_le_20": nt["eigh_units"] <= 20.0,
            "target_speedup_ge_10": ratio >= 10.0,
        })
    return out


def run(mode: str, cap_override: int | None = None, out: Path | None = OUT, sizes: tuple[int, ...] | None = None,
        keep_rows: list[dict] | None = None) -> dict:
    """The sizes of ``mode`` (or ``sizes``); rows of ``keep_rows`` at other sizes are kept (an earlier
    run's); the JSON is rewritten after every solver when ``out`` is given."""
    sizes = tuple(sizes or SIZES[mode])
    rows = [r for r in keep_rows or [] if r["n"] not in sizes]
    load_before = os.getloadavg()
    result: dict = {}

    def done() -> None:
        result.update({
            "benchmark": "projection",
            "rows": sorted(rows, key=lambda r: r["n"]),
            "summary": summarise(rows),
            "meta": {
                "mode": mode,
                "sizes_done": sorted({r["n"] for r in rows}),
                "sizes_planned": list(SIZES[mode]),
                "iteration_caps": {str(n): iteration_caps(mode, n) for n in SIZES[mode]},
                "blas_threads": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                                   "OPENBLAS_NUM_THREADS")},
                "numpy": np.__version__,
                "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                "loadavg_1_5_15_at_start": load_before,
                "loadavg_1_5_15_now": os.getloadavg(),
                "note": "shared 2-core machine with other jobs running: absolute seconds are inflated and noisy; "
                        "eigh_units divides by an eigh timed in the same run at the same n",
                "input": "noisy Gram of 10-cluster rank-16 unit embeddings, output adjacency Δ=1, ε=1, δ=1e-5, "
                         "analytic σ, seed 0",
            },
        })
        if out is not None:
            write_json(out, result)

    for n in sizes:
        caps = dict.fromkeys(CAPPED, cap_override) if cap_override else iteration_caps(mode, n)
        bench_size(n, caps, rows, done)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n ∈ {100, 200} (< 60 s)")
    parser.add_argument("--iter-cap", type=int, default=None,
                        help="one iteration cap for dykstra/aap/corr_nearest (default: iteration_caps)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output JSON (default {OUT})")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="run only these n, keeping the other sizes' rows already in --out")
    args = parser.parse_args()
    keep = read_json(args.out)["rows"] if args.sizes and args.out.is_file() else None
    run("quick" if args.quick else "full", args.iter_cap, args.out, tuple(args.sizes) if args.sizes else None, keep)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
