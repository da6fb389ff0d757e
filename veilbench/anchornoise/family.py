"""Pipeline stages of the anchor-noise family (AA-I-GDP with anchor noise and its baselines).

Follows ``shared/specs/anchor-noise.md`` (from an Italian summary of a paper on one-shot
representation sharing; only Y_i = X_i O_i + 1Ψ_iᵀ and B_i = A O_i + 1Ψ_iᵀ + v W_i are from the
source). Assumptions (spec [assume] items, all configurable through :class:`Params`):

* mechanisms (``Params.mechanism``): ``cgdp``, ``igdp`` (σ optional), ``dc`` (no noise),
  ``aa_data_noise`` (σ), ``aa_anchor_noise`` (v), the rows of the spec §3 table, and the
  data-free reference ``random`` (N(0, 1) uploads of the right shapes, :data:`DATA_FREE`);
* features are the generic ``embed`` output ``Z_train``/``Z_test`` (standardised or PCA), d = k,
  optionally reduced to ``max_dim`` principal axes (a public PCA, spec §2;
  :mod:`~veilbench.anchornoise.participants`);
* participants are the ``prepare`` parties, or with ``n_participants`` a seeded re-deal of the
  training records (``records_per_participant`` fixes n_i); test records are dealt round-robin to
  participants after a seeded permutation and go through their participant's (O_i, Ψ_i) and
  alignment map;
* anchor A: centered, orthogonal columns of norm s_A = √r (``anchor_scale="sqrt_r"``), r = 200;
  Ψ_i ~ N(0, 5² I); Haar O_i; each participant's randomness is its own stream;
* alignment: anchor centering then the GPM (hollowed spectral start, adaptive Jacobi / over-relaxed
  block-coordinate schedule with the staircase escape step, full template, relative objective
  tolerance 1e-10, rotation step 1e-8, 1000 iterations, certificate with threshold
  max(1e-9, 100·tol), see :mod:`~veilbench.anchornoise.gpm`); C-GDP / I-GDP are not aligned;
* attacks: colluders are participants 0 … n_colluders−1; MP, OP, AMC (two variants each for MP
  and AMC, the better one reported) on anchor mechanisms, the colluder's own inverse otherwise;
* linkage pool: all non-colluders' training features, exact duplicates merged (``dedup_pool``);
  per-target relative reconstruction error averaged over targets;
* control attack (:func:`control_reconstruction`): the colluders' side knowledge without the
  uploads; every target is guessed as the mean of the colluders' records and scored like the
  attacks: ``privacy_linkage_max_control`` / ``privacy_relative_error_min_control`` and the
  advantages (:mod:`veilbench.metrics.advantage`) ``privacy_linkage_max_advantage`` =
  (max − control)/(1 − control) and ``privacy_relative_error_min_advantage`` = 1 − min/control;
* utility: standardisation + multinomial ``LogisticRegression(max_iter=2000)`` (or an MLP) trained on the aligned
  uploads, balanced accuracy on the aligned test records under both test protocols; the
  headline ``utility_balanced_accuracy`` uses ``test_protocol`` (noisy-test by default);
* data-noise equivalence (spec §7 claim 2), in ``aa_data_noise`` cells with σ > 0 (the
  ``cgdp`` cell of the same σ would repeat the same comparison): both mechanisms are released on
  the cell's training records with the cell's σ, r and seed, each output minus its best rigid
  fit of X; the metrics are the two residual variances (claim: both ≈ σ² less the fit's
  d(d+1)/2 degrees of freedom out of n·d) and the two-sample Kolmogorov–Smirnov statistic and
  p-value between the residual entries (:func:`~veilbench.anchornoise.equivalence.data_noise_equivalence`).

Cross-family view (:class:`~veilbench.crossfamily.CrossFamilyArrays`): ``release`` emits the
attack side, each participant's private upload Y_i rows (group = participant, index = row of the
pool = the records X_i in the feature space the mechanism reads; the pool, saved as ``xfam_pool``,
is also the private ground truth that ``evaluate`` scores linkage against); ``integrate`` emits
the utility side, the analyst's aligned uploads of the training and test records (test records
under ``test_protocol``) with their class labels.

Stages: ``release`` (participants) → ``integrate`` (analyst, public uploads only) → ``attack``
(analyst + colluders) → ``evaluate``. The release stage also saves the simulation's private
ground truth as ``private_*`` arrays; the analyst never reads them, the attack reads only the
colluders' rows and A (:class:`~veilbench.anchornoise.attacks.CollusionBundle`), and evaluate uses
O_i for the rotation error.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from veilbench.anchornoise.anchor import anchor_scale_value
from veilbench.anchornoise.attacks import CollusionBundle, attack_name, run_attacks
from veilbench.anchornoise.equivalence import data_noise_equivalence
from veilbench.anchornoise.gpm import GeneralizedPowerMethod, rotation_error
from veilbench.anchornoise.linkage import deduplicated_linkage
from veilbench.anchornoise.mechanisms import ANALYST_STREAM, PARTITION_STREAM, TEST_SPLIT_STREAM, GDPMechanism
from veilbench.anchornoise.participants import assign_participants, reduce_dimension
from veilbench.crossfamily import CrossFamilyArrays, LinkageArrays, UtilityArrays
from veilbench.families.base import FamilyParams, StageInputs, StageOutput
from veilbench.metrics.advantage import error_advantage, success_advantage
from veilbench.metrics.linkage import linkage_rate, relative_reconstruction_error
from veilbench.random import stream
from veilbench.validation import ValidationError, check_labels

RECON_PREFIX = "recon__"
#: The option naming a cell's method (:func:`veilbench.families.base.method_of`).
METHOD_KEY = "mechanism"
#: No cell loads torch.
USES_TORCH = False


#: Cell mechanism → release kind (spec §3 table): DC is AA-I-GDP without any noise.
MECHANISMS: dict[str, str] = {
    "cgdp": "cgdp",
    "igdp": "igdp",
    "dc": "aa",
    "aa_data_noise": "aa",
    "aa_anchor_noise": "aa",
    "random": "random",
}

#: Data-free reference cells (:mod:`veilbench.families.base`): every upload is an independent
#: N(0, 1) draw of the right shape (:class:`~veilbench.anchornoise.mechanisms.GDPMechanism` kind
#: ``random``), never reading the records.
DATA_FREE = ({"mechanism": "random"},)

#: Privacy metric → (control, advantage): the control attacker holds the colluders' bundle
#: (their records X_c, transforms and A) but not the uploads, and guesses every target as the mean
#: of X_c (:func:`control_reconstruction`).
ADVANTAGE_METRICS = {
    "privacy_linkage_max": ("privacy_linkage_max_control", "privacy_linkage_max_advantage"),
    "privacy_relative_error_min": ("privacy_relative_error_min_control", "privacy_relative_error_min_advantage"),
    "xfam_linkage_rate": ("xfam_linkage_control", "xfam_linkage_advantage"),
    "xfam_relative_error": ("xfam_relative_error_control", "xfam_relative_error_advantage"),
}


class Params(FamilyParams):
    """One anchor-noise cell (defaults: DC alignment, r = 200; set ``v`` for anchor noise).

    ``mechanism`` names the spec §3 row, so one privacy–utility curve per mechanism is a sweep of
    ``v`` (``aa_anchor_noise``) or ``sigma`` (``cgdp``, ``igdp``, ``aa_data_noise``).
    """

    mechanism: Literal["cgdp", "igdp", "dc", "aa_data_noise", "aa_anchor_noise", "random"] = "aa_anchor_noise"
    v: float = Field(0.0, ge=0.0, description="anchor noise scale (absolute; v/s_A is reported)")
    sigma: float = Field(0.0, ge=0.0, description="data noise scale on the private representations")
    r: int = Field(200, ge=2, description="anchor rows, must be ≥ d + 1")
    anchor_scale: Literal["sqrt_r", "unit"] = "sqrt_r"
    translation_scale: float = Field(5.0, ge=0.0)
    n_colluders: int = Field(1, ge=1)
    test_protocol: Literal["noisy", "clean"] = "noisy"
    classifier: Literal["logreg", "mlp"] = "logreg"
    gpm_init: Literal["spectral", "random"] = "spectral"
    gpm_template: Literal["full", "leave_one_out"] = "full"
    gpm_update: Literal["adaptive", "jacobi"] = "adaptive"
    gpm_escape: bool = True
    gpm_tol: float = Field(1e-10, gt=0.0, lt=1.0)
    gpm_tol_rotation: float = Field(1e-8, ge=0.0)
    gpm_max_iter: int = Field(1000, ge=1, le=100_000)
    gpm_certify: bool = True
    dedup_pool: bool = True
    n_participants: int | None = Field(
        None, ge=2, description="re-deal the training records to m participants (seeded); default: prepare's parties"
    )
    records_per_participant: int | None = Field(
        None, ge=1, description="use exactly n_i training records per participant (seeded subset)"
    )
    max_dim: int | None = Field(
        None, ge=1, description="reduce features with more columns to this many principal axes (public PCA)"
    )

    @model_validator(mode="after")
    def _noise_matches_mechanism(self) -> Params:
        if self.v > 0 and self.mechanism != "aa_anchor_noise":
            raise ValueError(f"v: anchor noise needs mechanism 'aa_anchor_noise', got v = {self.v} with {self.mechanism!r}")
        if self.sigma > 0 and self.mechanism in ("dc", "aa_anchor_noise", "random"):
            raise ValueError(f"sigma: data noise is not part of mechanism {self.mechanism!r}, got sigma = {self.sigma}")
        return self


def _labels(inputs: StageInputs, train_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class labels (as int64 codes 0 … K−1) of the used training records and of the test records."""
    prep = inputs["prepare"]
    y = check_labels(prep["y_train"], "y_train")[train_rows]
    y_test = check_labels(prep["y_test"], "y_test")
    _, codes = np.unique(np.concatenate([y, y_test]), return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    return codes[: y.size], codes[y.size :]


def release(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Participants: Haar (O_i, Ψ_i), uploads Y_i (train and both test protocols) and anchors B_i (§3)."""
    z_all, z_test = reduce_dimension(inputs["embed"]["Z_train"], inputs["embed"]["Z_test"], params.max_dim)
    rows, party = assign_participants(
        inputs["prepare"]["party_train"],
        stream(seed, PARTITION_STREAM),
        params.n_participants,
        params.records_per_participant,
    )
    z = z_all[rows]
    m = int(party.max()) + 1
    party_test = np.empty(z_test.shape[0], dtype=np.int64)
    party_test[stream(seed, TEST_SPLIT_STREAM).permutation(z_test.shape[0])] = np.arange(z_test.shape[0]) % m
    mech = GDPMechanism(
        MECHANISMS[params.mechanism], params.v, params.sigma, params.r, params.anchor_scale, params.translation_scale
    )
    rel = mech.release(z, party, z_test, party_test, seed)
    arrays = {
        "Y_train": rel.Y_train,
        "Y_test_noisy": rel.Y_test_noisy,
        "Y_test_clean": rel.Y_test_clean,
        "party_index_train": party,
        "party_index_test": party_test,
        "train_rows": rows,
        "private_O": rel.O,
        "private_Psi": rel.Psi,
    }
    xfam = LinkageArrays(np.asarray(rel.Y_train, dtype=np.float64), party.astype(np.int64),
                         np.arange(rows.size, dtype=np.int64), np.asarray(z, dtype=np.float64))
    if rel.B is not None:
        arrays |= {"B": rel.B, "private_A": rel.A}
    s_a = anchor_scale_value(params.r, params.anchor_scale)
    info = {
        "mechanism": params.mechanism,
        "participants": m,
        "records": int(rows.size),
        "d": int(z.shape[1]),
        "r": params.r if rel.B is not None else None,
        "anchor_scale": s_a if rel.B is not None else None,
        "v_over_anchor_scale": params.v / s_a,
        "test_protocol": params.test_protocol,
    }
    return StageOutput(arrays=arrays, info=info, crossfamily=CrossFamilyArrays(attack=xfam))


def _utility_arrays(inputs: StageInputs, params: Params, aligned: dict[str, np.ndarray]) -> CrossFamilyArrays:
    """The cross-family utility side: the analyst's aligned train/test records and their labels."""
    y, y_test = _labels(inputs, np.asarray(inputs["release"]["train_rows"]))
    return CrossFamilyArrays(utility=UtilityArrays(
        np.asarray(aligned["Yhat_train"], dtype=np.float64), y,
        np.asarray(aligned[f"Yhat_test_{params.test_protocol}"], dtype=np.float64), y_test))


def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Analyst: centre anchors, solve GOPP by the GPM and align every upload (§4); identity without anchors."""
    rel = inputs["release"]
    names = ("Y_train", "Y_test_noisy", "Y_test_clean")
    parties = (rel["party_index_train"], rel["party_index_test"], rel["party_index_test"])
    if "B" not in rel:
        m, d = int(np.max(rel["party_index_train"])) + 1, int(rel["Y_train"].shape[1])
        arrays = {"Yhat" + n[1:]: np.asarray(rel[n]) for n in names}
        arrays |= {"R": np.broadcast_to(np.eye(d), (m, d, d)).copy(), "offsets": np.zeros((m, d))}
        return StageOutput(arrays=arrays, metrics={"gpm_iterations": 0.0}, info={"aligned": False},
                           crossfamily=_utility_arrays(inputs, params, arrays))
    gpm = GeneralizedPowerMethod(
        tol=params.gpm_tol,
        tol_rotation=params.gpm_tol_rotation,
        max_iter=params.gpm_max_iter,
        init=params.gpm_init,
        template=params.gpm_template,
        update=params.gpm_update,
        escape=params.gpm_escape,
        certify=params.gpm_certify,
        seed=stream(seed, ANALYST_STREAM),
    ).fit(rel["B"])
    arrays = {"Yhat" + n[1:]: gpm.transform(rel[n], p) for n, p in zip(names, parties, strict=True)}
    xfam = _utility_arrays(inputs, params, arrays)
    arrays |= {
        "R": gpm.rotations_,
        "offsets": gpm.offsets_,
        "template": gpm.template_,
        "gpm_objective_trace": gpm.objective_trace_,
    }
    metrics = {"gpm_iterations": float(gpm.n_iter_), "gpm_converged": float(gpm.converged_)}
    if params.gpm_certify:
        metrics |= {"gpm_certificate": gpm.certificate_, "gpm_certified": float(gpm.certified_)}
    arrays |= {k: np.asarray(v) for k, v in metrics.items()}  # evaluate reads the diagnostics from arrays
    return StageOutput(arrays=arrays, metrics=metrics, info={"aligned": True, "converged": gpm.converged_},
                       crossfamily=xfam)


def control_reconstruction(colluder_records: np.ndarray, n_targets: int) -> np.ndarray:
    """The control attack's reconstructions (n_targets × d): the mean of the colluders' own records
    X_c (n_c × d) for every target, the best constant guess (in squared error) from the collusion
    bundle alone; it never reads an upload."""
    x = np.asarray(colluder_records, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValidationError(f"colluder_records: expected a non-empty 2-d array, got shape {x.shape}")
    return np.repeat(x.mean(axis=0, keepdims=True), int(n_targets), axis=0)


def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Analyst + colluders 0 … n_colluders−1: reconstruct every non-colluder's training records (§5),
    and the control attack's guess from the colluders' records alone (:func:`control_reconstruction`)."""
    rel, integ = inputs["release"], inputs["integrate"]
    bundle = CollusionBundle.from_private(
        np.arange(params.n_colluders), rel["private_O"], rel["private_Psi"], rel.get("private_A")
    )
    recon, target_rows = run_attacks(
        rel["Y_train"], rel["party_index_train"], bundle, rel.get("B"), integ["R"], integ.get("template")
    )
    colluder_rows = np.isin(np.asarray(rel["party_index_train"]), bundle.colluders)
    control = control_reconstruction(np.asarray(rel["xfam_pool"])[colluder_rows], target_rows.size)
    arrays = {RECON_PREFIX + k: v for k, v in recon.items()} | {"target_rows": target_rows,
                                                                "control_reconstructions": control}
    return StageOutput(arrays=arrays, info={"colluders": bundle.colluders.tolist(), "variants": sorted(recon),
                                            "control": "mean of the colluders' records, no upload"})


def _classifier(kind: str, seed: int):
    """Downstream model (§6.2): multinomial logistic regression, or a one-hidden-layer MLP, each
    after per-feature standardisation fitted on the training uploads (the aligned uploads keep the
    translation Ψ_i ~ N(0, 5²), whose scale otherwise makes L-BFGS take thousands of steps)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "mlp":
        from sklearn.neural_network import MLPClassifier

        return make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(64,), max_iter=300, random_state=seed))
    from sklearn.linear_model import LogisticRegression

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def _privacy(inputs: StageInputs, params: Params) -> tuple[dict[str, float], dict[str, float]]:
    """Linkage and relative error per attack variant, aggregated per attack and over attacks (§6.1)."""
    att = inputs["attack"]
    rows = np.asarray(att["target_rows"])
    pool = np.asarray(inputs["release"]["xfam_pool"], dtype=float)[rows]
    party = np.asarray(inputs["release"]["party_index_train"])[rows]
    shares = [party == j for j in np.unique(party)]
    link = deduplicated_linkage if params.dedup_pool else linkage_rate
    rate, own, err = {}, {}, {}
    for key in sorted(k for k in att if k.startswith(RECON_PREFIX)):
        variant, xhat = key[len(RECON_PREFIX) :], np.asarray(att[key])
        whole = link(xhat, pool, np.arange(rows.size))
        rate[variant] = whole.rate
        own[variant] = sum(link(xhat[s], pool[s], np.arange(s.sum())).rate * s.sum() for s in shares) / rows.size
        err[variant] = float(np.mean([relative_reconstruction_error(xhat[s], pool[s]) for s in shares]))
    control = np.asarray(att["control_reconstructions"])
    control_rate = link(control, pool, np.arange(rows.size)).rate
    control_err = float(np.mean([relative_reconstruction_error(control[s], pool[s]) for s in shares]))
    attacks = sorted({attack_name(v) for v in rate})
    metrics = {f"privacy_linkage_{a}": max(r for v, r in rate.items() if attack_name(v) == a) for a in attacks}
    metrics |= {f"privacy_relative_error_{a}": min(e for v, e in err.items() if attack_name(v) == a) for a in attacks}
    metrics |= {
        "privacy_linkage_max": max(rate.values()),
        "privacy_linkage_own_pool_max": float(max(own.values())),
        "privacy_relative_error_min": min(err.values()),
        "linkage_chance": whole.chance,
        "n_pool": float(whole.n_pool),
        "privacy_linkage_max_control": control_rate,
        "privacy_relative_error_min_control": control_err,
    }
    metrics["privacy_linkage_max_advantage"] = success_advantage(metrics["privacy_linkage_max"], control_rate)
    metrics["privacy_relative_error_min_advantage"] = error_advantage(
        metrics["privacy_relative_error_min"], control_err
    )
    return metrics, rate


def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Utility (balanced accuracy, both test protocols), linkage per attack and max, alignment errors (§6)."""
    from sklearn.metrics import balanced_accuracy_score

    rel, integ = inputs["release"], inputs["integrate"]
    y_train, y_test = _labels(inputs, np.asarray(rel["train_rows"]))
    clf = _classifier(params.classifier, seed).fit(integ["Yhat_train"], y_train)
    bacc = {
        p: float(balanced_accuracy_score(y_test, clf.predict(integ[f"Yhat_test_{p}"]))) for p in ("noisy", "clean")
    }
    metrics = {
        "utility_balanced_accuracy": bacc[params.test_protocol],
        "utility_balanced_accuracy_noisy_test": bacc["noisy"],
        "utility_balanced_accuracy_clean_test": bacc["clean"],
    }
    privacy, per_variant = _privacy(inputs, params)
    metrics |= privacy
    metrics["participants"] = float(np.max(rel["party_index_train"]) + 1)
    metrics["gpm_rotation_error"] = rotation_error(integ["R"], rel["private_O"])
    metrics["gpm_iterations"] = 0.0
    if "B" in rel:
        diagnostics = ("gpm_iterations", "gpm_converged", "gpm_certificate", "gpm_certified")
        metrics |= {k: float(integ[k]) for k in diagnostics if k in integ}
        s_a = anchor_scale_value(params.r, params.anchor_scale)
        d = rel["Y_train"].shape[1]
        metrics |= {
            "gpm_translation_error": float(np.mean(np.linalg.norm(integ["offsets"] - rel["private_Psi"], axis=1))),
            "gpm_translation_error_predicted": params.v * float(np.sqrt(d / params.r)),
            "v_over_anchor_scale": params.v / s_a,
        }
    if params.sigma > 0 and params.mechanism == "aa_data_noise":
        equivalence = data_noise_equivalence(
            np.asarray(rel["xfam_pool"]), np.asarray(rel["party_index_train"]), params.sigma, params.r, seed
        )
        metrics |= {f"equivalence_{k}": v for k, v in equivalence.items()}
        metrics["equivalence_sigma_squared"] = params.sigma**2
    info = {"test_protocol": params.test_protocol, "linkage_per_variant": per_variant}
    return StageOutput(metrics=metrics, info=info)

