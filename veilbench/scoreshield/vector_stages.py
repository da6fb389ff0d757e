r"""Regime (i) stages: score-vector release, top-k retrieval, audit, evaluation (spec §3.1–3.2, §6).

Gallery = train rows, queries = the first ``n_queries`` test rows, both L2-normalised; clean
scores S = Q Gᵀ (q × n), each row one query's score vector released with Δ = 2 (Δ_m = 1 + m;
Δ·√q when ``joint_queries``).
"""

from __future__ import annotations

import math

import numpy as np

from veilbench.families.base import StageInputs, StageOutput
from veilbench.metrics.retrieval import rank_items, thresholded_topk
from veilbench.metrics.verification import pair_scores
from veilbench.privacy.audit import plan_audit
from veilbench.privacy.ledger import Release
from veilbench.privacy.noise_audit import audit_noise_arrays, noise_arrays
from veilbench.random import stream
from veilbench.scoreshield.params import DATA_FREE_MECHANISMS, EPSILON_CAP, Params, unit_rows
from veilbench.scoreshield.sensitivity import vector_sensitivity
from veilbench.scoreshield.tasks import audit_info, audit_output, privacy_from_attack, retrieval_metrics, verification_metrics
from veilbench.scoreshield.vector import GaussianScoreMechanism, audit_score_release, perturb_scores
from veilbench.validation import ValidationError, check_array, check_labels


def clean_scores(inputs: StageInputs, params: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clean cosine scores S = Q Gᵀ (q × n) with the query (q,) and gallery (n,) labels."""
    embed, prep = inputs["embed"], inputs["prepare"]
    gallery = unit_rows(embed["Z_train"], "Z_train")
    queries = unit_rows(embed["Z_test"], "Z_test")[: params.n_queries]
    if gallery.shape[1] != queries.shape[1]:
        raise ValidationError(f"Z_test: has {queries.shape[1]} columns, Z_train has {gallery.shape[1]}")
    y_gal = check_labels(prep["y_train"], "y_train", n=gallery.shape[0])
    y_q = check_labels(prep["y_test"], "y_test")[: queries.shape[0]]
    return np.clip(queries @ gallery.T, -1.0, 1.0), y_q, y_gal


def mechanism(params: Params, n_queries: int) -> GaussianScoreMechanism:
    """The cell's Gaussian mechanism for ``n_queries`` released vectors."""
    margin = params.public_margin
    base = params.sensitivity if margin is None else vector_sensitivity(margin)
    sens = base * (np.sqrt(n_queries) if params.joint_queries else 1.0)
    return GaussianScoreMechanism(params.epsilon, params.delta, sens, params.calibrator,
                                  clip=params.mechanism in ("gaussian", "identity_noise"),
                                  score_floor=-1.0 if margin is None else -margin,
                                  allow_invalid_calibration=params.allow_invalid_calibration)


def identity_noise_scores(params: Params, shape: tuple[int, int], seed: int) -> tuple[np.ndarray, float, float]:
    """(scores (q, n), σ, clipped share) of the data-free ``identity_noise`` release.

    clip(0 + σg, −1, 1): the cell's mechanism and random stream applied to all-zero scores of
    ``shape``, so it draws the same g as the Gaussian cell of the same seed and never reads the data.
    """
    rel = mechanism(params, shape[0]).release(np.zeros(shape), stream(seed, "scoreshield.release"))
    return rel.scores, rel.sigma, rel.clipped_fraction


def release(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Arrays ``scores`` (q, n) released, ``query_labels`` (q,), ``gallery_labels`` (n,); σ and clip share."""
    s, y_q, y_gal = clean_scores(inputs, params)
    info: dict = {"regime": "vector", "mechanism": params.mechanism, "calibrator": params.calibrator,
                  "n_queries": int(s.shape[0])}
    noise: dict[str, np.ndarray] = {}
    if params.mechanism == "clean":
        out, sigma, clipped = s, 0.0, 0.0
    elif params.mechanism == "identity":
        out, sigma, clipped = np.zeros_like(s), 0.0, 0.0
    elif params.mechanism == "identity_noise":
        out, sigma, clipped = identity_noise_scores(params, s.shape, seed)
    else:
        mech = mechanism(params, s.shape[0])
        rel = mech.release(s, stream(seed, "scoreshield.release"))
        out, sigma, clipped = rel.scores, rel.sigma, rel.clipped_fraction
        # the noise actually added, before clipping (white-box audit, veilbench.privacy.noise_audit)
        noise = noise_arrays(rel.unclipped - np.maximum(s, mech.score_floor))
        info.update(sensitivity=mech.sensitivity, joint_queries=params.joint_queries,
                    below_margin_fraction=float(np.mean(s < mech.score_floor)))
    info.update(sigma=sigma, clipped_fraction=clipped)
    arrays = {"scores": out, "query_labels": y_q, "gallery_labels": y_gal, **noise}
    metrics = {"release_sigma": sigma, "release_clipped_fraction": clipped}
    # privacy ledger: q vectors at (ε, δ) each, or one joint release; nothing for the references
    ledger = []
    if params.mechanism not in ("clean", *DATA_FREE_MECHANISMS):
        ledger.append(Release(params.epsilon, params.delta, 1 if params.joint_queries else s.shape[0],
                              noise_multiplier=sigma / mech.sensitivity, adjacency="record"))
    return StageOutput(arrays=arrays, metrics=metrics, info=info, ledger=ledger)


def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Arrays ``ranking`` (q, n) and (thresholded, −1-padded) ``topk`` (q, k); seeded random (default) or index tie-break."""
    scores = check_array(inputs["release"]["scores"], "release.scores", ndim=2)
    k = min(params.top_k, scores.shape[1])
    ranking = rank_items(scores, stream(seed, "scoreshield.integrate"), tiebreak=params.tiebreak)
    topk = thresholded_topk(scores, ranking, k, params.retrieval_threshold)
    boundary_tie = 0.0
    if k < scores.shape[1]:
        kth = np.take_along_axis(scores, ranking[:, k - 1 : k + 1], axis=1)
        boundary_tie = float(np.mean(kth[:, 0] == kth[:, 1]))
    info = {"k": k, "tiebreak": params.tiebreak, "boundary_tie_fraction": boundary_tie}
    return StageOutput(arrays={"topk": topk, "ranking": ranking}, info=info)


def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """The audit of the score release on the worst-case neighbours (:func:`~veilbench.scoreshield.tasks.audit_output`)."""
    separation = 0.0  # mean gap / noise std of the audited coordinate: 0 data-free, ∞ noiseless
    if params.mechanism == "identity":
        def fn(clean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return np.zeros_like(clean)
    elif params.mechanism == "clean":
        separation = math.inf

        def fn(clean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            return clean
    else:
        mech = mechanism(params, np.asarray(inputs["release"]["scores"]).shape[0])
        data_free = params.mechanism == "identity_noise"
        separation = 0.0 if data_free else (1.0 - mech.score_floor) / mech.sigma  # clean +1 vs max(−1, floor)

        def fn(clean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            # s̃ before clipping: clipping is post-processing (cannot raise ε) but hides the tails where a
            # mis-calibrated σ shows, so the Gaussian step is audited, as for the Gram; the data-free
            # release perturbs all-zero scores whatever the data
            base = np.zeros_like(clean) if data_free else np.maximum(clean, mech.score_floor)
            return perturb_scores(base, mech.sigma, rng, clip=False).scores

    plan = plan_audit(separation, params.claimed_epsilon(), params.delta, params.audit_alpha, params.audit_releases)
    res = audit_score_release(fn, params.delta, plan.n_releases, int(stream(seed, "scoreshield.attack").integers(2**31)),
                              params.audit_alpha, plan=plan)
    return audit_output(res.epsilon_lower_bound, {"audited": "noisy score before clipping, differing coordinate +1 vs -1",
                                                  **audit_info(res)}, params)


def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Verification over all (query, gallery) pairs, retrieval, score MSE, clip share, audit numbers."""
    rel = inputs["release"]
    scores = check_array(rel["scores"], "release.scores", ndim=2)
    y_q, y_gal = rel["query_labels"], rel["gallery_labels"]
    s_flat, genuine = pair_scores(scores, y_q, y_gal)
    upper = np.inf if params.mechanism == "noisy" else 1.0
    metrics = verification_metrics(s_flat, genuine, params.threshold, upper)
    integ = inputs["integrate"]
    metrics.update(retrieval_metrics(integ["topk"], integ["ranking"], y_q, y_gal))
    clean, _, _ = clean_scores(inputs, params)
    metrics["utility_score_mse"] = float(np.mean((scores - clean) ** 2))
    metrics["release_clipped_fraction"] = (
        float(np.mean(np.abs(scores) >= 1.0)) if params.mechanism in ("gaussian", "identity_noise") else 0.0
    )
    metrics.update(privacy_from_attack(inputs.get("attack", {})))
    if params.mechanism not in ("clean", *DATA_FREE_MECHANISMS):  # white-box audit of the noise the release added
        mech = mechanism(params, scores.shape[0])
        metrics.update(audit_noise_arrays(rel, mech.sigma, mech.sensitivity, params.epsilon, params.delta,
                                          alpha=params.noise_audit_alpha).metrics())
    return StageOutput(metrics=metrics, info={"tar_upper": upper if np.isfinite(upper) else None, "epsilon_cap": EPSILON_CAP})
