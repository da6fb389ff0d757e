r"""Regime (ii) stages: Gram release + projection, retrieval/clustering, audit, evaluation.

Records: ``n_records`` train rows drawn by the cell seed (the same rows for every mechanism at a
given seed), L2-normalised; G = X Xᵀ. Releases (spec §3.3–3.5): clean G, noisy G̃ = G + sym(Z),
a projector applied to G̃ (aap | dykstra | newton | clip | eigclip), embedding noise, or I_n.
Tasks (spec §5.3.2): pair verification over i < j, leave-one-out retrieval / kNN from the
rows of Ĝ, spectral clustering with oracle k (the number of labels), Frobenius error vs G.
With ``gram_source="movielens"`` the records are MovieLens items (:mod:`veilbench.scoreshield.cf`,
labels = first genre, ratings split by the cell seed) and item-based CF RMSE / NDCG@10 are added;
with ``gram_source="text"`` the records are the paraphrase corpus of :mod:`veilbench.scoreshield.text`
(labels = paraphrase group). Every source reports the Spearman correlation between released and
clean off-diagonal similarities (``utility_similarity_spearman``; 0 when the release is constant).
"""

from __future__ import annotations

import math
import time
from functools import lru_cache

import numpy as np

from veilbench.crossfamily import CrossFamilyArrays, LinkageArrays, UtilityArrays
from veilbench.families.base import StageInputs, StageOutput
from veilbench.metrics.clustering import clustering_agreement, spectral_clustering_from_gram
from veilbench.metrics.retrieval import rank_items, thresholded_topk
from veilbench.metrics.verification import pair_scores
from veilbench.privacy.audit import AuditResult, plan_audit
from veilbench.privacy.calibration import calibrate_sigma
from veilbench.privacy.ledger import Release
from veilbench.privacy.noise_audit import audit_noise_arrays, noise_arrays
from veilbench.random import stream
from veilbench.scoreshield.baselines import (EMBEDDING_SENSITIVITY, embedding_gram, embedding_noise_sigma, identity_gram,
                                             noisy_embeddings)
from veilbench.scoreshield.cf import Ratings, cf_metrics, item_embeddings, load_movielens
from veilbench.scoreshield.gram import (
    PROJECTORS,
    GaussianGramMechanism,
    audit_gram_release,
    cosine_gram,
    gram_noise_entries,
    spectral_embedding,
    symmetric_gaussian,
)
from veilbench.scoreshield.params import DATA_FREE_MECHANISMS, Params, unit_rows
from veilbench.scoreshield.projectors import feasibility
from veilbench.scoreshield.risk import noisy_expected_frobenius_sq, predicted_frobenius_sq
from veilbench.scoreshield.sensitivity import gram_record_sensitivity
from veilbench.scoreshield.tasks import (
    audit_info,
    audit_output,
    privacy_from_attack,
    retrieval_metrics,
    similarity_spearman,
    verification_metrics,
)
from veilbench.scoreshield.text import encode, paraphrase_corpus
from veilbench.scoreshield.vector import audit_score_release
from veilbench.validation import check_array, check_labels

AUDIT_RECORDS = 6
XFAM_TRAIN_FRACTION = 0.7
GAUSSIAN_RELEASES = ("noisy", *PROJECTORS)


def _ratings(arrays: dict) -> Ratings:
    train, test = np.asarray(arrays["ratings_train"]), np.asarray(arrays["ratings_test"])
    n_users = int(max(train[:, 0].max(), test[:, 0].max())) + 1
    n_items = int(max(train[:, 1].max(), test[:, 1].max())) + 1
    lo, hi = np.asarray(arrays["rating_range"], dtype=float)
    return Ratings(n_users, n_items, train, test, (float(lo), float(hi)))


def records(inputs: StageInputs, params: Params, seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Unit rows X (n × k), labels (n,) and the arrays identifying the records.

    ``embed``: ``n_records`` train rows drawn by the seed (``record_index``, sorted).
    ``movielens``: the items' rating split (``ratings_train``, ``ratings_test``, ``rating_range``).
    ``text``: the first ``n_records`` corpus sentences (``sentence_index``).
    """
    rng = stream(seed, "scoreshield.subsample")
    if params.gram_source == "text":
        sentences, labels = paraphrase_corpus()
        n = min(params.n_records, len(sentences))
        return encode(sentences[:n], params.text_encoder), labels[:n], {"sentence_index": np.arange(n)}
    if params.gram_source == "movielens":
        r = load_movielens(params.n_records, seed=int(rng.integers(2**31)))
        ids = {"ratings_train": r.train, "ratings_test": r.test, "rating_range": np.array(r.rating_range)}
        return item_embeddings(r), r.item_labels, ids
    z = unit_rows(inputs["embed"]["Z_train"], "Z_train")
    y = check_labels(inputs["prepare"]["y_train"], "y_train", n=z.shape[0])
    n = min(params.n_records, z.shape[0])
    idx = np.sort(rng.choice(z.shape[0], size=n, replace=False))
    return z[idx], y[idx], {"record_index": idx}


def clean_records(inputs: StageInputs, release_arrays: dict, params: Params) -> np.ndarray:
    """The unit rows behind a release (for its error against the clean Gram)."""
    if "ratings_train" in release_arrays:
        return item_embeddings(_ratings(release_arrays))
    if "sentence_index" in release_arrays:
        sentences, _ = paraphrase_corpus()
        return encode([sentences[i] for i in np.asarray(release_arrays["sentence_index"])], params.text_encoder)
    return unit_rows(inputs["embed"]["Z_train"], "Z_train")[np.asarray(release_arrays["record_index"])]


def mechanism(params: Params) -> GaussianGramMechanism:
    """The cell's Gaussian Gram mechanism (adjacency, Δ, calibrator)."""
    return GaussianGramMechanism(params.epsilon, params.delta, params.adjacency, params.gram_sensitivity,
                                 params.calibrator, params.allow_invalid_calibration)


def projector_name(params: Params) -> str:
    """The projector a cell applies to its noisy Gram ("none" for noisy and the non-Gaussian releases)."""
    if params.mechanism == "identity_noise":
        return params.projector
    return params.mechanism if params.mechanism in PROJECTORS else "none"


def _projector_options(params: Params) -> dict:
    return {
        "aap": {"max_iter": params.aap_max_iter, "tol": params.aap_tol, "finalize": params.aap_finalize},
        "dykstra": {"max_iter": params.dykstra_max_iter, "tol": params.dykstra_tol},
        "newton": {"tol": params.newton_tol},
    }.get(projector_name(params), {})


def identity_noise_gram(params: Params, n: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """(released Gram (n × n), σ) of the data-free ``identity_noise`` release.

    P(I_n + sym(Z)) with Z i.i.d. N(0, σ²), σ the cell's calibration for n records and P the cell's
    ``projector`` ("none": no projection): the Gaussian release with the data replaced by I_n. It
    draws Z exactly as :meth:`GaussianGramMechanism.release` does from the same generator, so it is
    paired with the Gaussian cells of the same seed, and it reads only n.
    """
    sigma = mechanism(params).sigma_for(n)
    g = identity_gram(n) + symmetric_gaussian(n, sigma, rng)
    if params.projector != "none":
        g = PROJECTORS[params.projector](g, **_projector_options(params)).gram
    return g, sigma


def release(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Arrays ``gram`` (n, n) released, ``labels`` (n,) and the record identifiers; σ, residuals, solver stats."""
    x, y, ids = records(inputs, params, seed)
    n = x.shape[0]
    rng = stream(seed, "scoreshield.release")
    info: dict = {"regime": "gram", "source": params.gram_source, "mechanism": params.mechanism,
                  "calibrator": params.calibrator, "n_records": n}
    sigma = 0.0
    noise: dict[str, np.ndarray] = {}  # the noise actually added, before any projection (white-box audit)
    start = time.perf_counter()
    if params.mechanism == "clean":
        g = cosine_gram(x)
    elif params.mechanism == "identity":
        g = identity_gram(n)
    elif params.mechanism == "identity_noise":
        g, sigma = identity_noise_gram(params, n, rng)
        info.update(adjacency=params.adjacency, sensitivity=mechanism(params).sensitivity_for(n),
                    projector=params.projector, data_free=True)
    elif params.mechanism == "embedding_noise":
        sigma = embedding_noise_sigma(params.epsilon, params.delta, params.calibrator, params.allow_invalid_calibration)
        x_noisy = noisy_embeddings(x, sigma, rng)
        g = embedding_gram(x_noisy)
        noise = noise_arrays(x_noisy - x)
        info.update(embedding_sensitivity=EMBEDDING_SENSITIVITY)
        noise_multiplier, adjacency = sigma / EMBEDDING_SENSITIVITY, "record"
    else:
        mech = mechanism(params)
        rel = mech.release(x, rng)
        sigma, g = rel.sigma, rel.noisy
        noise = noise_arrays(gram_noise_entries(rel.noisy - cosine_gram(x)))
        noise_multiplier, adjacency = sigma / rel.sensitivity, params.adjacency
        info.update(adjacency=params.adjacency, sensitivity=rel.sensitivity)
        if params.mechanism != "noisy":
            proj = PROJECTORS[params.mechanism](g, **_projector_options(params))
            g = proj.gram
            info["projection"] = proj.info()
    seconds = time.perf_counter() - start
    feas = feasibility(g)
    info.update(sigma=sigma, **feas.as_dict())
    metrics = {"release_sigma": sigma, **{f"release_{k}": v for k, v in feas.as_dict().items()}}
    if "projection" in info:
        metrics["release_iterations"] = float(info["projection"]["iterations"])
        metrics["release_n_eigh"] = float(info["projection"]["n_eigh"])
    ledger = []
    if params.mechanism not in ("clean", *DATA_FREE_MECHANISMS):  # privacy ledger: one (ε, δ) release of the Gram
        # a Gaussian Gram release: the same σ under record adjacency at this n
        record = sigma / gram_record_sensitivity(n) if params.mechanism in GAUSSIAN_RELEASES else None
        ledger.append(Release(params.epsilon, params.delta, noise_multiplier=noise_multiplier, adjacency=adjacency,
                              record_noise_multiplier=record))
    return StageOutput(arrays={"gram": g, "labels": y, **ids, **noise}, metrics=metrics, info=info,
                       timings={"mechanism_seconds": seconds}, ledger=ledger)


def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Leave-one-out ``ranking`` (n, n − 1), ``topk`` (n, k) and spectral ``clusters`` (n,) from Ĝ."""
    rel = inputs["release"]
    g = check_array(rel["gram"], "release.gram", ndim=2)
    y = check_labels(rel["labels"], "release.labels", n=g.shape[0])
    k = min(params.top_k, g.shape[0] - 1)
    rng = stream(seed, "scoreshield.integrate")
    ranking = rank_items(g, rng, tiebreak=params.tiebreak, exclude_self=True)
    topk = thresholded_topk(g, ranking, k, params.retrieval_threshold)
    n_clusters = params.n_clusters or int(np.unique(y).size)
    clusters = spectral_clustering_from_gram(g, min(n_clusters, g.shape[0]), seed=int(rng.integers(2**31)))
    info = {"k": k, "tiebreak": params.tiebreak, "n_clusters": n_clusters, "affinity": "(1 + G)/2 clipped to [0, 1]"}
    xfam = crossfamily_arrays(g, clean_records(inputs, rel, params), y, seed)
    info["xfam_embedding_dim"] = int(xfam.attack.rep.shape[1])
    return StageOutput(arrays={"topk": topk, "ranking": ranking, "clusters": clusters}, info=info, crossfamily=xfam)


def crossfamily_arrays(gram: np.ndarray, x: np.ndarray, labels: np.ndarray, seed: int) -> CrossFamilyArrays:
    """The cross-family view of a released Gram ``gram`` (n × n) of unit records ``x`` (n × d).

    Attack: E = :func:`spectral_embedding` (Ĝ, d) (n × min(d, n)), group 0, index 0..n − 1, pool x.
    Utility: E's rows and ``labels`` split into a seeded ⌊0.7 n⌉ train / rest test.
    """
    n = gram.shape[0]
    emb = spectral_embedding(gram, x.shape[1])
    order = stream(seed, "scoreshield.xfam").permutation(n)
    n_train = int(round(XFAM_TRAIN_FRACTION * n))
    tr, te = np.sort(order[:n_train]), np.sort(order[n_train:])
    y = np.asarray(labels, dtype=np.int64)
    return CrossFamilyArrays(
        LinkageArrays(emb, np.zeros(n, dtype=np.int64), np.arange(n, dtype=np.int64), np.asarray(x, dtype=np.float64)),
        UtilityArrays(emb[tr], y[tr], emb[te], y[te]),
    )


@lru_cache(maxsize=256)
def _noisy_gram_audit(epsilon: float, delta: float, adjacency: str, sensitivity: float, calibrator: str,
                      allow_invalid: bool, n_releases: int | None, seed: int, alpha: float) -> AuditResult:
    """The audit of G̃ (a pure function of these options): cells that differ only in the projector
    (post-processing) share it instead of recomputing it. The statistic's gap is Δ_F and its noise
    std σ, so the audit's separation is Δ_F/σ = 1/z (:func:`~veilbench.privacy.audit.plan_audit`)."""
    mech = GaussianGramMechanism(epsilon, delta, adjacency, sensitivity, calibrator, allow_invalid)
    plan = plan_audit(1.0 / calibrate_sigma(1.0, epsilon, delta, calibrator, allow_invalid), epsilon, delta, alpha,
                      n_releases)
    return audit_gram_release(mech, AUDIT_RECORDS, plan.n_releases, seed, alpha, plan=plan)


def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """The audit on worst-case neighbours of the noisy Gram (projections are post-processing;
    :func:`~veilbench.scoreshield.tasks.audit_output`)."""
    audit_seed = int(stream(seed, "scoreshield.attack").integers(2**31))
    if params.mechanism in DATA_FREE_MECHANISMS:
        return audit_output(0.0, {"audited": f"none: the {params.mechanism} output does not depend on the data"}, params)
    if params.mechanism in ("clean", "embedding_noise"):
        sigma = 0.0 if params.mechanism == "clean" else embedding_noise_sigma(
            params.epsilon, params.delta, params.calibrator, params.allow_invalid_calibration)

        def fn(clean: np.ndarray, r: np.random.Generator) -> np.ndarray:
            return clean + sigma * r.standard_normal(clean.shape)

        plan = plan_audit(2.0 / sigma if sigma else math.inf, params.claimed_epsilon(), params.delta, params.audit_alpha,
                          params.audit_releases)
        res = audit_score_release(fn, params.delta, plan.n_releases, audit_seed, params.audit_alpha, plan=plan)
        what = "embedding coordinate along the flipped row, +1 vs -1" if sigma else "clean Gram entry +1 vs -1"
    else:
        res = _noisy_gram_audit(params.epsilon, params.delta, params.adjacency, params.gram_sensitivity,
                                params.calibrator, params.allow_invalid_calibration, params.audit_releases,
                                audit_seed, params.audit_alpha)
        what = f"noisy Gram of {AUDIT_RECORDS}+ worst-case records, statistic <G~, dG>/|dG|_F"
    return audit_output(res.epsilon_lower_bound, {"audited": what, **audit_info(res)}, params)


def risk_metrics(released: np.ndarray, clean: np.ndarray, params: Params) -> dict[str, float]:
    """``risk_frobenius_sq`` = ‖Ĝ − G‖_F² and, for Gaussian releases, the spec's predictions at the cell's σ, n."""
    n = clean.shape[0]
    out = {"risk_frobenius_sq": float(np.sum((released - clean) ** 2))}
    if params.mechanism in GAUSSIAN_RELEASES:
        sigma = mechanism(params).sigma_for(n)
        out["risk_noisy_expected_frobenius_sq"] = noisy_expected_frobenius_sq(sigma, n)
        predicted = predicted_frobenius_sq(params.mechanism, sigma, n)
        if predicted is not None:
            out["risk_predicted_frobenius_sq"] = predicted
    return out


def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Pair verification (i < j), retrieval / kNN, clustering, Spearman, Frobenius error, CF, audit numbers."""
    rel, integ = inputs["release"], inputs["integrate"]
    g = check_array(rel["gram"], "release.gram", ndim=2)
    y = check_labels(rel["labels"], "release.labels", n=g.shape[0])
    s_flat, genuine = pair_scores(g, y, y, exclude_diagonal=True)
    unprojected = params.mechanism == "noisy" or (params.mechanism == "identity_noise" and params.projector == "none")
    upper = np.inf if unprojected else 1.0
    metrics = verification_metrics(s_flat, genuine, params.threshold, upper)
    metrics.update(retrieval_metrics(integ["topk"], integ["ranking"], y, y))
    agree = clustering_agreement(y, integ["clusters"])
    metrics.update(utility_clustering_nmi=agree["nmi"], utility_clustering_ari=agree["ari"])
    clean = cosine_gram(clean_records(inputs, rel, params))
    metrics["utility_similarity_spearman"] = similarity_spearman(g, clean)
    metrics["utility_gram_mse"] = float(np.mean((g - clean) ** 2))
    metrics.update(risk_metrics(g, clean, params))
    metrics["reference_identity_gram_mse"] = float(np.mean((np.eye(g.shape[0]) - clean) ** 2))
    metrics.update({f"release_{k}": v for k, v in feasibility(g).as_dict().items()})
    if "ratings_train" in rel:
        metrics.update(cf_metrics(g, _ratings(rel), params.cf_neighbours))
    metrics.update(privacy_from_attack(inputs.get("attack", {})))
    metrics.update(noise_audit_metrics(rel, params, g.shape[0]))
    return StageOutput(metrics=metrics, info={"tar_upper": upper if np.isfinite(upper) else None})


def noise_audit_metrics(release_arrays: dict, params: Params, n: int) -> dict[str, float]:
    """``privacy_noise_audit_*`` of a private release of n records (:mod:`veilbench.privacy.noise_audit`):
    the independent entries of G̃ − G against the cell's σ and Δ_F(n), or X̃ − X against σ_e and Δ = 2
    (embedding noise); nothing for the clean and data-free releases."""
    if params.mechanism in GAUSSIAN_RELEASES:
        mech = mechanism(params)
        sigma, sens = mech.sigma_for(n), mech.sensitivity_for(n)
    elif params.mechanism == "embedding_noise":
        sigma = embedding_noise_sigma(params.epsilon, params.delta, params.calibrator, params.allow_invalid_calibration)
        sens = EMBEDDING_SENSITIVITY
    else:
        return {}
    return audit_noise_arrays(release_arrays, sigma, sens, params.epsilon, params.delta,
                              alpha=params.noise_audit_alpha).metrics()
