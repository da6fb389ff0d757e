r"""Why NKI under PCA falls below the DC paper's Table 5 on Fashion-MNIST: the RBF kernel's scale.

NKI maps party ``k``'s intermediate representations (IRs) through ``κ(x, Ã(k)) Γ_k`` with the
paper's ``κ(x, a) = exp(−γ‖x − a‖²)``, γ = 1 for every party (spec data-collaboration.md §1.5, §9
"Scale of γ = 1"). Whether γ = 1 suits an IR depends on the IR's distances, which the obfuscation sets.

For the releases of ``paper-dc-fmnist-rq4`` already computed in ``--root`` (one per d̃ and
obfuscation, the sweep's seeds), this probe records, per (d̃, obfuscation):

* ``nearest_anchor_sq_distance``: the median over party 0's anchors of the squared distance to the
  nearest other anchor in its IR, and ``kappa_at_nearest = exp(−that)`` (γ = 1);
* ``test_fraction_far_from_anchors``: the share of party 0's test rows whose largest kernel value
  over the anchors is below 1e-6 (such a row maps to ≈ 0, spec §9);

and, for PCA at each d̃, the analysis accuracy of NKI with the paper's γ = 1 beside NKI with the
per-party median heuristic (``kernel_gamma="median"``: γ_k = 1/(2·median‖a − a'‖²) over party
``k``'s anchor IRs, :func:`veilbench.dc.kernel.median_gamma`) on the same releases and seeds, integrated and scored exactly as the ``integrate`` and
``evaluate`` stages do (:func:`veilbench.dc.family.integrate`, the random forest of
:func:`veilbench.dc.downstream.collaboration_accuracy`). The paired difference per seed gives the
mean and a 95 % t interval (``scipy.stats.ttest_1samp``). Distances and kernel values are the
library's own (:func:`veilbench.dc.kernel.rbf_kernel`, :func:`veilbench.linalg.distances.sq_distances`).

Writes ``reports/bench/dc_pca_kernel.json``. Usage (the releases must exist, e.g. after
``make reproduce SWEEPS=paper-dc-fmnist-rq4``)::

    python benchmarks/probe_dc_pca_kernel.py --root runs/paper [--seeds 0 1 2 …]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

import tasks.numerics  # noqa: E402,F401  (the project's CPU code-path pins)

SWEEP = "paper-dc-fmnist-rq4"
OBFUSCATIONS = ("pca", "kpca", "umap")
D_TILDES = (4, 16, 64)


def release_of(root: Path, d_tilde: int, obfuscation: str, seed: int) -> dict[str, np.ndarray]:
    """Seed ``seed``'s arrays of the release cell (graph ``none``; the release does not read it)."""
    path = root / "data" / "release" / SWEEP / f"d_tilde={d_tilde}_graph=none_obfuscation={obfuscation}" / "arrays.npz"
    with np.load(path) as z:
        prefix = f"s{seed}__"
        return {k[len(prefix):]: z[k] for k in z.files if k.startswith(prefix)}


def kernel_scale(rel: dict[str, np.ndarray]) -> dict[str, float]:
    """Nearest-anchor squared distance and far-test share in party 0's IR (γ = 1)."""
    from veilbench.dc.kernel import rbf_kernel
    from veilbench.linalg.distances import sq_distances

    anchors, test = rel["ir_anchor"][0], rel["ir_test"][0]
    d2 = sq_distances(anchors, anchors)
    np.fill_diagonal(d2, np.inf)
    nearest = float(np.median(d2.min(axis=1)))
    far = float(np.mean(rbf_kernel(test, anchors, 1.0).max(axis=1) < 1e-6))
    return {"nearest_anchor_sq_distance": nearest, "kappa_at_nearest": float(np.exp(-nearest)),
            "test_fraction_far_from_anchors": far}


def nki_accuracy(rel: dict[str, np.ndarray], y_test_all: np.ndarray, d_tilde: int, gamma, seed: int) -> float:
    """NKI (no graph) integrated and scored as the pipeline's ``integrate`` and ``evaluate`` do."""
    from veilbench.dc.downstream import collaboration_accuracy, make_classifier
    from veilbench.dc.family import Params, integrate

    params = Params(method="nki", n_parties=10, n_per_party=100, n_test=1000, anchor="real", n_anchor=1000,
                    references=False, d_tilde=d_tilde, obfuscation="pca", graph="none", kernel_gamma=gamma)
    out = integrate({"release": rel, "prepare": {"y_test": y_test_all}}, params, seed)
    y_test = y_test_all[rel["test_index"]]
    acc, _ = collaboration_accuracy(out.arrays["collab_train"], rel["y"], rel["party"], out.arrays["collab_test"],
                                    y_test, make_classifier(params.classifier, seed, params.n_estimators),
                                    params.readout)
    return float(acc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=REPO / "runs" / "paper")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "dc_pca_kernel.json")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    with np.load(root / "data" / "prepare" / "fmnist-unit" / "arrays.npz") as z:
        y_test_all = z["y_test"].astype(np.int64)
    t0 = time.process_time()
    scale = {}
    for d in D_TILDES:
        for ob in OBFUSCATIONS:
            rows = [kernel_scale(release_of(root, d, ob, s)) for s in args.seeds]
            scale[f"d_tilde={d}_{ob}"] = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    gamma_rows = {}
    for d in D_TILDES:
        per_seed = []
        for s in args.seeds:
            rel = release_of(root, d, "pca", s)
            per_seed.append({"seed": s, "gamma_1": nki_accuracy(rel, y_test_all, d, 1.0, s),
                             "gamma_median": nki_accuracy(rel, y_test_all, d, "median", s)})
        diff = np.array([r["gamma_median"] - r["gamma_1"] for r in per_seed])
        ci = stats.ttest_1samp(diff, 0.0).confidence_interval(0.95)
        gamma_rows[f"d_tilde={d}"] = {
            "gamma_1_mean": float(np.mean([r["gamma_1"] for r in per_seed])),
            "gamma_median_mean": float(np.mean([r["gamma_median"] for r in per_seed])),
            "difference_mean": float(diff.mean()), "difference_ci95": [float(ci.low), float(ci.high)],
            "per_seed": per_seed}
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {"probe": "dc_pca_kernel", "sweep": SWEEP, "root": str(args.root), "seeds": args.seeds,
              "kernel_scale_party0_median_over_seeds": scale, "nki_pca_gamma": gamma_rows,
              "cpu_seconds": time.process_time() - t0, "git_rev": rev,
              "command": "python benchmarks/probe_dc_pca_kernel.py " + " ".join(argv or sys.argv[1:])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "per_seed"} for k, v in gamma_rows.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
