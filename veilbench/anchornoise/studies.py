r"""Helpers for the anchor-noise studies (spec §10 R1–R3), independent of the pipeline.

* :func:`v_grid`: absolute anchor-noise scales v = (v/s_A)·s_A for a grid of ratios, so grids are
  comparable across r (spec §9 "anchor scale").
* :func:`synthetic_anchor_uploads`: one anchor-noise instance B_i = A O_i + 1Ψ_iᵀ + v W_i with its
  ground truth (used by the phase-transition study and the GPM benchmark).
* :func:`phase_transition`: GPM iterations, convergence, certificate, rotation error and the
  residual translation ‖b̄_i − Ψ_i‖ (predicted ≈ v√(d/r)) for each v (R3).
* :func:`balanced_accuracy_at_linkage`: read a privacy–utility curve at a matched linkage, e.g. the
  source's 12.4% operating point (R1), by linear interpolation in linkage.
* :func:`data_noise_equivalence`: claim 2 (§7) checked on data: the aligned outputs of AA-I-GDP +
  data noise and of C-GDP + data noise, each minus its best rigid fit of X, have the same law
  (two-sample Kolmogorov–Smirnov on the residual entries, and their variances ≈ σ²).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from veilbench.anchornoise.anchor import AnchorScale, anchor_scale_value, make_anchor
from veilbench.anchornoise.gpm import GeneralizedPowerMethod, rotation_error
from veilbench.anchornoise.mechanisms import GDPMechanism, gdp, sample_transform
from veilbench.linalg.procrustes import orthogonal_procrustes
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_in_range

#: The source's MNIST operating point: linkage ≈ 12.4% at 59.2% balanced accuracy (spec §8).
SOURCE_LINKAGE, SOURCE_BALANCED_ACCURACY = 0.124, 0.592


def v_grid(r: int, ratios: Sequence[float], scale: AnchorScale = "sqrt_r") -> list[float]:
    """Absolute v for each ratio v/s_A ≥ 0 at anchor size r."""
    s_a = anchor_scale_value(r, scale)
    return [check_in_range(x, "ratios", 0.0, None) * s_a for x in ratios]


def synthetic_anchor_uploads(
    m: int, r: int, d: int, v: float, seed: int, scale: AnchorScale = "sqrt_r", translation_scale: float = 5.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (B (m, r, d), O (m, d, d), Ψ (m, d)) for one anchor-noise instance."""
    rng = stream(seed, "anchornoise.synthetic-uploads")
    a = make_anchor(r, d, scale, rng)
    v = check_in_range(v, "v", 0.0, None)
    B, O, Psi = np.empty((m, r, d)), np.empty((m, d, d)), np.empty((m, d))
    for i in range(m):
        O[i], Psi[i] = sample_transform(d, translation_scale, rng)
        B[i] = gdp(a, O[i], Psi[i]) + v * rng.standard_normal((r, d))
    return B, O, Psi


def phase_transition(
    v_values: Sequence[float], m: int, r: int, d: int, seed: int = 0, max_iter: int = 1000
) -> list[dict[str, float]]:
    """One row per v: iterations, converged, certificate, rotation and translation errors (R3)."""
    rows = []
    for v in v_values:
        B, O, Psi = synthetic_anchor_uploads(m, r, d, v, seed)
        gpm = GeneralizedPowerMethod(max_iter=max_iter).fit(B)
        rows.append(
            {
                "v": float(v),
                "v_over_anchor_scale": float(v) / anchor_scale_value(r, "sqrt_r"),
                "iterations": float(gpm.n_iter_),
                "converged": float(gpm.converged_),
                "certificate": gpm.certificate_,
                "certified": float(gpm.certified_),
                "rotation_error": rotation_error(gpm.rotations_, O),
                "translation_error": float(np.mean(np.linalg.norm(gpm.offsets_ - Psi, axis=1))),
                "translation_error_predicted": float(v) * float(np.sqrt(d / r)),
            }
        )
    return rows


def balanced_accuracy_at_linkage(
    linkage: Sequence[float], balanced_accuracy: Sequence[float], target: float = SOURCE_LINKAGE
) -> float:
    """Balanced accuracy of a privacy–utility curve at linkage ``target`` (linear interpolation).

    ``linkage`` and ``balanced_accuracy`` are the curve's points (any order, e.g. one per noise
    level, seed-averaged). Raises :class:`ValidationError` when ``target`` lies outside the
    linkage range of the curve (no extrapolation).
    """
    lk = check_array(linkage, "linkage", ndim=1)
    ba = check_array(balanced_accuracy, "balanced_accuracy", ndim=1)
    if lk.shape != ba.shape:
        raise ValidationError(f"linkage and balanced_accuracy: lengths differ ({lk.size} vs {ba.size})")
    if not lk.min() <= target <= lk.max():
        raise ValidationError(
            f"target: must lie in the curve's linkage range [{lk.min():.4g}, {lk.max():.4g}], got {target}"
        )
    order = np.argsort(lk, kind="stable")
    return float(np.interp(target, lk[order], ba[order]))


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
