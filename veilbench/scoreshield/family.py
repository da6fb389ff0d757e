r"""ScoreShield family: DP release of cosine score vectors (regime i) and Gram matrices (regime ii).

Follows the ScoreShield preprint as reconstructed in ``shared/specs/scoreshield.md``.

Regime (i) (:mod:`veilbench.scoreshield.vector_stages`, spec §3.1–3.2, §6):

* ``release``: L2-normalise the encoder output, gallery = train rows, queries = the first
  ``n_queries`` test rows, S = Q Gᵀ (q × n); each row released as ŝ = clip(s + σg, −1, 1),
  σ = calib(Δ, ε, δ), Δ = 2 (Δ_m = 1 + m under a public margin);
* ``integrate``: (thresholded) top-k per query, ties broken by a seeded random key
  (``tiebreak="index"`` reproduces the paper's smaller-index rule and its clipping pitfall);
* ``attack``: empirical ε lower bound from releases of the worst-case neighbours (+1 vs −1, the
  noisy score before clipping), with what the run count can decide: the certifiable maximum, the
  power against a half-noise release and whether it reaches 95 % (:mod:`veilbench.privacy.audit`);
* ``evaluate``: verification (accuracy, AUC, EER, TAR@FAR strict/non-strict), recall@k, mAP,
  kNN accuracy, score MSE, clipped fraction, and the audit numbers: the black-box audit's and the
  white-box audit's of the noise the release added before clipping (``privacy_noise_audit_*``,
  :mod:`veilbench.privacy.noise_audit`; the release keeps Σ e², the count and a sample of e as
  ``dp_noise_*`` arrays), decidable at every ε.

Regime (ii) (:mod:`veilbench.scoreshield.gram_stages`, spec §3.3–3.5, §5.3): G = X Xᵀ of
``n_records`` train rows, G̃ = G + sym(Z) with record (Δ_F = 2√(2(n − 1))) or output-space
(user Δ) adjacency, a projector onto the elliptope, and Gram tasks (pair verification,
leave-one-out retrieval / kNN, spectral clustering NMI/ARI, Frobenius error; the identity
release's error is reported beside it).

Assumptions (the paper's values are lost, spec §10): regime-(i) privacy is per query vector
(``joint_queries=True`` scales Δ by √q); thresholds, k, AAP T_max/tol are parameters with the
spec's suggested defaults; the vector ``identity`` release is all-zero scores (the off-diagonal
of I); ``identity_noise`` (both regimes) is the Gaussian release with the data replaced by the
all-zero scores / I_n (same σ, same noise draw as the Gaussian cells of the seed, then the clip or
the cell's ``projector``): data-free, ε = 0, the reference a release must beat (spec §8);
``clean`` has ε = ∞, reported as :data:`EPSILON_CAP`; the Gram audit runs on the
unprojected G̃ of a small worst-case collection (projection is post-processing), and the white-box
audit reads the n(n + 1)/2 independent entries of G̃ − G (:func:`~veilbench.scoreshield.gram.gram_noise_entries`).
"""

from __future__ import annotations

from veilbench.families.base import StageInputs, StageOutput
from veilbench.scoreshield import gram_stages, vector_stages
from veilbench.scoreshield.params import EPSILON_CAP, Params

__all__ = ["ADVANTAGE_METRICS", "DATA_FREE", "EPSILON_CAP", "METHOD_KEY", "TORCH_OPTIONS", "USES_TORCH", "Params", "attack",
           "evaluate", "integrate", "release"]

#: The option naming a cell's method (:func:`veilbench.families.base.method_of`).
METHOD_KEY = "mechanism"
#: Cells load torch only to encode sentences (the text Gram's sentence-transformers encoder).
USES_TORCH = False
TORCH_OPTIONS = {"gram_source": "text"}

#: Data-free reference cells (:mod:`veilbench.families.base`): all-zero scores / I_n, and the
#: cell's noise and clip/projection applied to them.
DATA_FREE = ({"mechanism": "identity"}, {"mechanism": "identity_noise"})

#: The cross-family linkage attack and its control (:mod:`veilbench.crossfamily`, Gram regime).
#: The audit's ε lower bound has no control: a distinguisher without the release certifies ε̂ = 0,
#: so its advantage would be ε̂ itself.
ADVANTAGE_METRICS = {
    "xfam_linkage_rate": ("xfam_linkage_control", "xfam_linkage_advantage"),
    "xfam_relative_error": ("xfam_relative_error_control", "xfam_relative_error_advantage"),
}


def _stages(params: Params):
    return vector_stages if params.regime == "vector" else gram_stages


def release(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Release the score matrix (regime i) or the (projected) Gram (regime ii)."""
    return _stages(params).release(inputs, params, seed)


def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Top-k retrieval on the release (and spectral clustering for the Gram)."""
    return _stages(params).integrate(inputs, params, seed)


def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Privacy audit: empirical ε lower bound beside the claimed ε (spec §6)."""
    return _stages(params).attack(inputs, params, seed)


def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Every headline utility metric of the release plus the audit's privacy numbers."""
    return _stages(params).evaluate(inputs, params, seed)
