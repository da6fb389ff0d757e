"""Options of one ScoreShield pipeline cell (see :mod:`veilbench.scoreshield.family`)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from veilbench.families.base import FamilyParams
from veilbench.privacy.noise_audit import NOISE_AUDIT_ALPHA
from veilbench.validation import ValidationError, check_array

EPSILON_CAP = 1000.0
"""Finite stand-in for ε = ∞ (the clean release) in metrics and plots."""

VECTOR_MECHANISMS = ("clean", "noisy", "gaussian", "identity", "identity_noise")
GRAM_MECHANISMS = (
    "clean", "noisy", "identity", "identity_noise", "embedding_noise", "aap", "dykstra", "newton", "clip", "eigclip"
)
GRAM_PROJECTORS = ("none", "aap", "dykstra", "newton", "clip", "eigclip")

#: Mechanisms whose output never depends on the data (ε = 0, no privacy-ledger entry):
#: ``identity`` (all-zero scores / I_n) and ``identity_noise`` (the cell's noise and clip or
#: projection applied with the data replaced by the all-zero scores / I_n).
DATA_FREE_MECHANISMS = ("identity", "identity_noise")



class Params(FamilyParams):
    """One ScoreShield cell.

    Calibration: ``calibrator: classical`` is refused where its σ misses ``delta`` (ε above
    :func:`~veilbench.privacy.calibration.classical_validity_limit`) unless
    ``allow_invalid_calibration: true``; ε must be finite (ε = ∞ is ``mechanism: clean``).
    Audit: ``audit_releases`` releases per neighbour, or ``None`` (default) for the smallest count
    (≤ 256 000) at which a half-noise mechanism is flagged with ≥ 95 % probability
    (:func:`~veilbench.privacy.audit.plan_audit`); the audit states its certifiable maximum and power.
    White-box noise audit (:mod:`veilbench.privacy.noise_audit`) of every private release at
    ``noise_audit_alpha``, the probability of flagging a correct mechanism.

    ``regime="vector"`` (spec §3.1): ``mechanism`` ∈ clean | noisy (Gaussian, no clip) |
    gaussian (ScoreShield: Gaussian + clip) | identity (all scores 0, data-independent) |
    identity_noise (clip(0 + σg, −1, 1) with the cell's σ: the noise and clip alone, data-free).
    ``regime="gram"`` (spec §3.3–3.5): clean | noisy (G̃) | identity (I_n) | embedding_noise |
    aap | dykstra | newton (exact) | clip (box only) | eigclip (PSD clip + unit-diagonal rescale) |
    identity_noise (``projector``(I_n + sym(Z)) with the cell's σ for n records: the same noise and
    projection as the Gaussian releases with the data replaced by I_n, data-free; its risk
    ‖Ĝ − G‖_F² against the clean G is the data-free reference of the risk-scaling sweeps).
    ``gram_source="movielens"`` releases the item–item Gram of the ``n_records`` most-rated
    MovieLens movies instead of the embedded dataset and adds collaborative-filtering metrics;
    ``gram_source="text"`` releases the sentence Gram of the built-in paraphrase corpus
    (:mod:`veilbench.scoreshield.text`, ``text_encoder``).
    """

    regime: Literal["vector", "gram"] = "vector"
    mechanism: Literal[
        "clean", "noisy", "gaussian", "identity", "identity_noise", "embedding_noise", "aap", "dykstra", "newton",
        "clip", "eigclip",
    ] = "gaussian"
    epsilon: float = Field(1.0, gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)
    calibrator: Literal["analytic", "classical", "conservative"] = "analytic"
    # regime (i)
    sensitivity: float = Field(2.0, gt=0)
    public_margin: float | None = Field(None, ge=0, le=1)
    joint_queries: bool = False
    n_queries: int = Field(200, ge=1)
    # regime (ii)
    adjacency: Literal["record", "output"] = "record"
    gram_sensitivity: float = Field(1.0, gt=0)
    n_records: int = Field(200, ge=4)
    gram_source: Literal["embed", "movielens", "text"] = "embed"
    text_encoder: Literal["minilm", "tfidf"] = "minilm"
    cf_neighbours: int = Field(30, ge=1)
    aap_max_iter: int = Field(500, ge=1)
    aap_tol: float = Field(1e-6, gt=0)
    aap_finalize: bool = False
    dykstra_max_iter: int = Field(2000, ge=1)
    dykstra_tol: float = Field(1e-7, gt=0)
    newton_tol: float = Field(1e-7, gt=0)
    n_clusters: int | None = Field(None, ge=2)
    projector: Literal["none", "aap", "dykstra", "newton", "clip", "eigclip"] = "newton"
    # tasks
    top_k: int = Field(10, ge=1)
    tiebreak: Literal["random", "index"] = "random"
    retrieval_threshold: float | None = Field(None, ge=-1, le=1)
    threshold: float = Field(0.5, ge=-1, le=1)
    allow_invalid_calibration: bool = False
    # audit
    audit_releases: int | None = Field(None, ge=100)
    audit_alpha: float = Field(0.05, gt=0, lt=1)
    noise_audit_alpha: float = Field(NOISE_AUDIT_ALPHA, gt=0, lt=1)

    @field_validator("epsilon")
    @classmethod
    def _finite_epsilon(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(
                f"epsilon: must be a finite number in (0, ∞), got {value}; ε = ∞ is no privacy, which is "
                "mechanism: clean (the unnoised release)"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.public_margin is not None and self.sensitivity != 2.0:
            raise ValueError("sensitivity: give either sensitivity or public_margin (Δ_m = 1 + m), not both")
        allowed = VECTOR_MECHANISMS if self.regime == "vector" else GRAM_MECHANISMS
        if self.mechanism not in allowed:
            raise ValueError(f"mechanism: regime {self.regime!r} allows {list(allowed)}, got {self.mechanism!r}")
        if "projector" in self.model_fields_set and not (self.regime == "gram" and self.mechanism == "identity_noise"):
            raise ValueError(
                "projector: only the gram identity_noise release takes a projector (the Gaussian releases name it "
                f"in mechanism), got regime={self.regime!r}, mechanism={self.mechanism!r}"
            )
        if self.gram_source != "embed" and self.regime != "gram":
            raise ValueError(f"gram_source: {self.gram_source!r} needs regime='gram'")
        if self.calibrator == "classical" and self.mechanism not in ("clean", "identity"):
            self._check_classical_validity()
        return self

    def _check_classical_validity(self) -> None:
        """Refuse the classical σ where its exact δ exceeds ``delta`` (σ/Δ depends on ε, δ only)."""
        from veilbench.privacy.calibration import (
            achieved_delta,
            classical_noise_multiplier,
            classical_validity_limit,
        )

        got = achieved_delta(classical_noise_multiplier(self.epsilon, self.delta), 1.0, self.epsilon)
        if got > self.delta and not self.allow_invalid_calibration:
            raise ValueError(
                f"epsilon: calibrator 'classical' meets delta={self.delta:g} only for epsilon in "
                f"(0, {classical_validity_limit(self.delta):.4g}]; at epsilon={self.epsilon:g} it gives "
                f"δ = {got:.3g}. Use calibrator: analytic, or set allow_invalid_calibration: true (the ledger "
                "then records the δ achieved)"
            )

    def claimed_epsilon(self) -> float:
        """ε the release claims: ∞ (capped) for clean, 0 for the data-free releases."""
        if self.mechanism in DATA_FREE_MECHANISMS:
            return 0.0
        return EPSILON_CAP if self.mechanism == "clean" else self.epsilon


def unit_rows(z: np.ndarray, name: str) -> np.ndarray:
    """Rows of ``z`` (n × k) scaled to unit L2 norm (cosine geometry); zero rows are an error."""
    arr = check_array(z, name, ndim=2)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValidationError(f"{name}: {int(np.sum(norms == 0))} all-zero row(s) have no direction; cosine undefined")
    return arr / norms
