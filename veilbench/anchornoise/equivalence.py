r"""Claim 2 of the anchor-noise spec (§7) checked on data: data noise after AA-I-GDP is C-GDP's.

The analyst-side output of AA-I-GDP + data noise σ (aligned by the GPM) and that of C-GDP + data
noise σ, each minus its best rigid fit of the records X (n × d), should have the same law: entries
of variance ≈ σ² (less the fit's d(d + 1)/2 degrees of freedom out of n·d). The check compares the
two residuals' variances and their entries by a two-sample Kolmogorov–Smirnov test
(:func:`scipy.stats.ks_2samp`).
"""

from __future__ import annotations

import numpy as np

from veilbench.anchornoise.gpm import GeneralizedPowerMethod
from veilbench.anchornoise.mechanisms import GDPMechanism
from veilbench.linalg.procrustes import orthogonal_procrustes


def rigid_fit_residual(X: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out − (X Q̂ + 1 t̂) with (Q̂, t̂) the least-squares orthogonal map + translation; X, out (n, d)."""
    xc, oc = X - X.mean(axis=0), out - out.mean(axis=0)
    return oc - xc @ orthogonal_procrustes(xc, oc)


def data_noise_equivalence(
    X: np.ndarray, party: np.ndarray, sigma: float, r: int = 200, seed: int = 0
) -> dict[str, float]:
    """Compare the analyst-side outputs of AA-I-GDP + data noise (GPM-aligned) and C-GDP + data noise.

    X (n, d) with party (n,) in 0 … m−1. Returns the residual variances of both mechanisms (each
    ≈ σ² if claim 2 holds) and the KS statistic and p-value between their residual entries.
    """
    from scipy.stats import ks_2samp

    residuals = {}
    for kind in ("aa", "cgdp"):
        rel = GDPMechanism(kind, sigma=sigma, r=r).release(X, party, X[:1], party[:1], seed)
        out = rel.Y_train
        if rel.B is not None:
            out = GeneralizedPowerMethod(certify=False).fit(rel.B).transform(out, party)
        residuals[kind] = rigid_fit_residual(X, out).ravel()
    ks = ks_2samp(residuals["aa"], residuals["cgdp"])
    return {
        "residual_variance_aa": float(residuals["aa"].var()),
        "residual_variance_cgdp": float(residuals["cgdp"].var()),
        "ks_statistic": float(ks.statistic),
        "ks_pvalue": float(ks.pvalue),
    }
