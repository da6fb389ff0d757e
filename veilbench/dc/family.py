r"""Data Collaboration (DC) family: anchors, per-party obfuscation, MPP/GEP/ODC/LKI/NKI integration,
anchor-pair reconstruction attacks (spec ``shared/specs/data-collaboration.md``, Suetake et al. 2026,
arXiv:2605.27219).

Stages (``seed`` = trial index ``r``; it seeds sources, anchors, obfuscators, attacks and every RF):

``release`` (party side, §1)
    Features: ``features="unit"`` (default) divides ``inputs["prepare"]["X_train"]`` (and ``X_test``)
    by ``max |X_train|`` — pixels/16 on digits, /255 on MNIST, the paper's [0,1] scaling (§1.3) that
    its RBF ``γ = 1`` assumes (§9); ``"embed"`` uses ``inputs["embed"]["Z_train"]`` (standardised
    features, on which ``γ = 1`` is far too large: use ``kernel_gamma="median"``); ``"raw"`` the
    unscaled ``X_train``. For ``anchor ∈ {smote, real}`` a class-balanced set of
    ``n_smote_source`` real records (``n_anchor`` for ``real``) is drawn from the *training* records
    and removed from the parties [assume: the pipeline has no separate pool]; the anchor is built
    from them. Random anchors use the statistics of the party records. Parties
    (:func:`veilbench.dc.parties.allocate_parties`): the dataset's partition, or with
    ``n_parties = K`` a seeded re-allocation into ``K`` parties (spec §1.1), so a sweep can grid over
    ``K``; with ``n_per_party = n`` each party holds ``n`` records (the remaining records are
    unused). Party ``k`` fits ``f_k`` on
    ``X(k)`` and releases ``ir_train`` rows (its ``X̃(k)``, with ``party`` and ``y``) and
    ``ir_anchor[k] = Ã(k)``; ``ir_test[k] = f_k(X_test)`` is what party ``k`` feeds ``g_k`` at
    prediction time; ``X_test`` is the whole test split, or with ``n_test`` a seeded subset of
    ``n_test`` records (spec §4: ``nK`` shared test records; rows ``test_index``). ``anchor`` (``A``), ``record_index`` and ``source_index`` are private /
    evaluation-only arrays: the analyst (``integrate``) never reads them.
    Cross-family attack side (:class:`~veilbench.crossfamily.LinkageArrays`, n_r = all parties'
    records): rep = ``X̃`` (n_r × d̃), group = party id, index = row in the pool, the parties'
    records in the feature space ``f_k`` reads (n_r × d).
``integrate`` (analyst side, §2)
    Fits ``{g_k}`` on ``ir_anchor`` (and the anchor labels for TSL) and outputs ``collab_train``
    (``X̂``, n × d̂) and ``collab_test`` (K × m × d̂); the cross-family utility side
    (:class:`~veilbench.crossfamily.UtilityArrays`): train = ``X̂`` with ``y``, test = the K mapped
    test sets stacked (K·m × d̂) with ``y_test`` repeated K times.
``method ∈ {central, local}`` (spec §2.9 references, so that a frontier grouped by ``method`` draws
    them): the same sources and parties as the integrating cells of that seed, no obfuscation, no
    integration; ``utility_accuracy`` is the Central (one RF on all parties' raw records) or Local
    (mean over parties of an RF on its own records) accuracy. Central shares raw records, so its
    "attack" ``raw`` is the record itself; Local shares nothing and has no privacy metrics.
``attack`` (§5)
    The attacker holds the anchor rows whose label is in ``leaked_labels`` (for unlabelled anchors:
    a seeded random ``|leaked_labels|/C`` fraction of rows) and the target party's IRs of them; it
    reconstructs the target party's private records whose label is *not* leaked [lit default] with
    LR, PINV and MLP, and scores the reconstructions (the privacy metrics below, kept as 0-d arrays
    ``score__<metric>``). Neither reads the integration: every integrator of one release shares the
    attack and its scores (``STAGE_INPUTS``, ``STAGE_OPTIONS``).
``evaluate`` (§3, §5)
    Utility: ``utility_accuracy`` (classifier on ``X̂``, or on ``X̂(k)`` with ``readout="own"``;
    mean over parties of the shared-test accuracy), ``utility_accuracy_central``,
    ``utility_accuracy_local``. Privacy, as the attack stage scored it, per attack (suffix ``_lr``,
    ``_pinv``, ``_mlp``) and as the worst case over attacks:

    * ``privacy_reconstruction_accuracy_best``: max over attacks of the label-match rate of an RF
      trained on at most ``evaluator_records`` (5 000, as the paper) original training records
      outside the target party [assume: the paper's evaluator images are independent];
    * ``privacy_reconstruction_mse``: min over attacks of the mean squared error per entry;
    * ``privacy_linkage_rate``: max over attacks of the unique-nearest-record linkage rate against
      all training records, with ``privacy_linkage_rate_chance`` = 1/n;
    * for each of these three, ``<metric>_control``, the same score of the control attack (same
      leaked anchor rows, no release: every target guessed as the leaked anchor records' mean,
      :func:`control_reconstruction`), and ``<metric>_advantage`` (:mod:`veilbench.metrics.advantage`):
      (main − control)/(1 − control) for the two rates, 1 − main/control for the MSE.

    Data-free reference (``obfuscation="random"``, :data:`DATA_FREE`): every party releases
    i.i.d. N(0, 1) IRs of its records, the anchor and the test set; its ``utility_accuracy`` is
    what integration and the classifier get from the labels alone.

    For a privacy–utility plot the utility number is ``utility_accuracy`` and the privacy number
    ``privacy_reconstruction_accuracy_best``.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Literal

import numpy as np
from pydantic import Field, computed_field, model_validator

from veilbench.crossfamily import CrossFamilyArrays, LinkageArrays, UtilityArrays
from veilbench.dc._base import BaseIntegrator
from veilbench.dc.anchors import random_anchor, select_sources, smote_anchor
from veilbench.dc.attacks import make_attack
from veilbench.dc.downstream import central_accuracy, collaboration_accuracy, local_accuracy, make_classifier
from veilbench.dc.kernel import NKI
from veilbench.dc.linear import GEP, LKI, MPP, ODC
from veilbench.dc.nystrom import NystromNKI
from veilbench.dc.obfuscation import obfuscate_parties
from veilbench.dc.parties import allocate_parties
from veilbench.families.base import FamilyParams, StageInputs, StageOutput
from veilbench.metrics.advantage import error_advantage, success_advantage
from veilbench.metrics.linkage import linkage_rate
from veilbench.random import stream
from veilbench.validation import ValidationError

#: Reference "methods" of the paper's roster (spec §2.9): no integration, raw records.
BASELINES = ("central", "local")
#: The option naming a cell's method (:func:`veilbench.families.base.method_of`).
METHOD_KEY = "method"
#: No cell loads torch (scikit-learn and UMAP only).
USES_TORCH = False

#: Prefix of the attack stage's privacy scores, kept as 0-d arrays for ``evaluate``.
SCORE = "score__"

#: Data-free reference cells (:mod:`veilbench.families.base`): every party releases i.i.d.
#: N(0, 1) intermediate representations of the right shapes (records, anchor, test set).
DATA_FREE = ({"obfuscation": "random"},)

#: Privacy metric → (control, advantage) (:func:`control_reconstruction`, module docstring).
ADVANTAGE_METRICS = {
    "privacy_reconstruction_accuracy_best": ("privacy_reconstruction_accuracy_best_control",
                                             "privacy_reconstruction_accuracy_best_advantage"),
    "privacy_reconstruction_mse": ("privacy_reconstruction_mse_control", "privacy_reconstruction_mse_advantage"),
    "privacy_linkage_rate": ("privacy_linkage_rate_control", "privacy_linkage_rate_advantage"),
    "xfam_linkage_rate": ("xfam_linkage_control", "xfam_linkage_advantage"),
    "xfam_relative_error": ("xfam_relative_error_control", "xfam_relative_error_advantage"),
}

#: What each stage reads besides its seed (:mod:`veilbench.families.base`): the earlier stages
#: whose arrays it reads and the options (or properties of :class:`Params`) it reads. The release
#: and the attack do not read the integration, so every integrator of one release shares them.
STAGE_INPUTS = {
    "release": ("prepare", "embed"),
    "integrate": ("prepare", "release"),
    "attack": ("prepare", "embed", "release"),
}
STAGE_OPTIONS = {
    "release": ("features", "anchor", "n_anchor", "n_smote_source", "k_nn", "n_per_party", "n_parties", "n_test",
                "obfuscation", "d_tilde", "shares"),
    "integrate": ("method", "graph", "center", "mu", "k_nn", "kernel_gamma", "lam", "nki_objective", "nystrom_rank"),
    "attack": ("features", "shares", "attacks", "leaked_labels", "target_party", "mlp_max_iter", "n_estimators",
               "evaluator_records"),
}


class Params(FamilyParams):
    """One DC cell. Defaults: PCA obfuscation, d̃ = 10, 200 SMOTE anchors from 50 sources, NKI."""

    features: Literal["unit", "embed", "raw"] = Field("unit", description="unit: X/max|X_train|; embed: Z; raw: X")
    anchor: Literal["smote", "real", "uniform", "minmax", "gaussian"] = Field("smote", description="kind (§1.2)")
    n_anchor: int = Field(200, ge=2, le=100_000, description="na; for 'real' also the number of real sources")
    n_smote_source: int = Field(50, ge=1, description="na_smote real sources (anchor='smote' only)")
    k_nn: int = Field(10, ge=1, description="SMOTE and graph neighbours (clipped to n_c − 1 in SMOTE)")
    n_per_party: int | None = Field(None, ge=2, description="seeded subsample of n records per party (None: all)")
    n_parties: int | None = Field(
        None, ge=1, le=10_000, description="K: re-allocate the records into K seeded parties (None: dataset partition)"
    )
    n_test: int | None = Field(
        None, ge=1, description="seeded subset of n_test shared test records (spec §4: nK); None: the whole test split"
    )
    obfuscation: Literal["pca", "kpca", "umap", "orthogonal", "random"] | None = Field(
        "pca", description="per-party f_k (§1.3; 'random': the data-free reference, i.i.d. N(0, 1) IRs); "
        "None (set automatically) for central/local, which share raw records"
    )
    d_tilde: int = Field(10, ge=1, description="intermediate dimension d̃ = d̂")
    method: Literal["mpp", "gep", "odc", "lki", "nki", "central", "local"] = Field(
        "nki", description="analyst's integration (§2), or the Central / Local reference (§2.9)"
    )
    graph: Literal["none", "gl", "tsl"] = Field("none", description="NKI graph regulariser (§2.6–2.7)")
    center: bool = Field(False, description="NKI centering constraint 1ᵀZ = 0 (§2.8)")
    mu: float = Field(1.0, ge=0.0, description="graph weight μ")
    kernel_gamma: float | Literal["median"] = Field(1.0, description="RBF γ > 0, or 'median' per party (§9)")
    lam: float = Field(1.0, gt=0.0, description="kernel ridge λ")
    nki_objective: Literal["paper", "residual"] = Field("paper", description="Thm 2, or residual-only ablation")
    nystrom_rank: int | None = Field(None, ge=1, description="Nyström rank for NKI (None: exact)")
    classifier: Literal["rf", "logreg"] = Field("rf", description="downstream model h (§3)")
    readout: Literal["joint", "own"] = Field("joint", description="one h on all X̂, or h_k on X̂(k) (§3, §9)")
    n_estimators: int = Field(100, ge=1, le=2000, description="trees of every random forest")
    leaked_labels: tuple[int, ...] = Field((0, 1, 2), min_length=1, description="labels of leaked anchor rows (§5)")
    attacks: tuple[Literal["lr", "pinv", "mlp"], ...] = Field(
        ("lr", "pinv", "mlp"), description="reconstruction attacks (§5); () skips the privacy evaluation"
    )
    references: bool = Field(
        True, description="also score Central and Local in this cell (off when the sweep has central/local cells)"
    )
    target_party: int = Field(0, ge=0, description="party whose records are reconstructed")
    evaluator_records: int = Field(5000, ge=10, description="cap on the reconstruction evaluator's training rows")
    mlp_max_iter: int = Field(600, ge=1, description="MLP attack iterations")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def variant(self) -> str:
        """The paper's roster name (§2.9), e.g. ``NKI+TSL+Center``, ``LKI``, ``Central``: a ``group_by`` key;
        the data-free reference is ``Random release (NKI)`` (its integration in brackets)."""
        if self.method in BASELINES:
            return self.method.capitalize()
        name = self.method.upper()
        if self.method == "nki":
            name += {"none": "", "gl": "+GL", "tsl": "+TSL"}[self.graph] + ("+Center" if self.center else "")
            name += "" if self.nystrom_rank is None else f"+Nyström{self.nystrom_rank}"
            name += "" if self.nki_objective == "paper" else "+residual"
        return f"Random release ({name})" if self.obfuscation == "random" else name

    @property
    def shares(self) -> Literal["raw", "nothing", "ir"]:
        """What the parties hand out: ``raw`` records (Central), ``nothing`` (Local), else their IRs.
        The release and the attack read this, not ``method``, so every integrator of one release shares it."""
        return {"central": "raw", "local": "nothing"}.get(self.method, "ir")

    @model_validator(mode="before")
    @classmethod
    def _baselines_do_not_obfuscate(cls, data: Any) -> Any:
        """Central/Local apply no ``f_k``: their ``obfuscation`` is recorded as None whatever the sweep sets."""
        if isinstance(data, dict) and data.get("method") in BASELINES:
            return {**data, "obfuscation": None}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Params:
        if self.obfuscation is None and self.method not in BASELINES:
            raise ValueError(f"obfuscation: None only for method central/local, got method={self.method!r}")
        nki_only = {
            "graph": self.graph != "none",
            "center": self.center,
            "nystrom_rank": self.nystrom_rank is not None,
            "nki_objective": self.nki_objective != "paper",
        }
        for name, used in nki_only.items():
            if used and self.method != "nki":
                raise ValueError(f"{name}: only applies to method='nki', got method={self.method!r}")
        if self.nystrom_rank is not None and (self.graph != "none" or self.nki_objective != "paper"):
            raise ValueError("nystrom_rank: Nyström NKI supports graph='none' and nki_objective='paper' only")
        if self.nystrom_rank is not None and self.nystrom_rank > self.n_anchor:
            raise ValueError(f"nystrom_rank: must be ≤ n_anchor = {self.n_anchor}, got {self.nystrom_rank}")
        if self.graph == "tsl" and self.anchor not in ("smote", "real"):
            raise ValueError(f"graph: 'tsl' needs labelled anchors ('smote' or 'real'), got anchor={self.anchor!r}")
        if self.anchor == "smote" and self.n_smote_source > self.n_anchor:
            raise ValueError(f"n_smote_source: must be ≤ n_anchor = {self.n_anchor}, got {self.n_smote_source}")
        if isinstance(self.kernel_gamma, float) and not self.kernel_gamma > 0:
            raise ValueError(f"kernel_gamma: must be > 0 or 'median', got {self.kernel_gamma}")
        limit = self.n_anchor - int(self.center)
        if self.d_tilde > limit:
            what = "n_anchor − 1 (centering)" if self.center else "n_anchor"
            raise ValueError(f"d_tilde: must be ≤ {what} = {limit}, got {self.d_tilde}")
        return self


def _features(inputs: StageInputs, params: Params) -> tuple[np.ndarray, np.ndarray]:
    """(train (n × d), test (m × d)) features the parties hold; ``unit`` divides by max |X_train|."""
    if params.features == "embed":
        return np.asarray(inputs["embed"]["Z_train"], float), np.asarray(inputs["embed"]["Z_test"], float)
    x_train = np.asarray(inputs["prepare"]["X_train"], float)
    x_test = np.asarray(inputs["prepare"]["X_test"], float)
    if params.features == "raw":
        return x_train, x_test
    scale = float(np.max(np.abs(x_train))) or 1.0
    return x_train / scale, x_test / scale


def release(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Party side: anchor, parties, per-party ``f_k``, and the released IRs (see module docstring)."""
    x_train, x_test = _features(inputs, params)
    y = np.asarray(inputs["prepare"]["y_train"]).astype(np.int64)
    test_index = np.arange(x_test.shape[0], dtype=np.int64)
    if params.n_test is not None:
        if params.n_test > x_test.shape[0]:
            raise ValidationError(f"n_test: must be ≤ the {x_test.shape[0]} test records, got {params.n_test}")
        test_index = np.sort(stream(seed, "dc.test-subset").choice(x_test.shape[0], size=params.n_test, replace=False))
        x_test = x_test[test_index]
    rng = stream(seed, "dc.release")
    keep = np.ones(y.size, bool)
    source_index = np.zeros(0, np.int64)
    if params.anchor in ("smote", "real"):
        n_src = params.n_anchor if params.anchor == "real" else params.n_smote_source
        source_index = select_sources(y, n_src, rng)
        keep[source_index] = False
        anchor = smote_anchor(x_train[source_index], y[source_index], params.n_anchor, params.k_nn, rng)
    else:
        anchor = random_anchor(params.anchor, x_train[keep], params.n_anchor, rng)
    idx = allocate_parties(np.flatnonzero(keep), inputs["prepare"]["party_train"], params.n_parties,
                           params.n_per_party, rng)
    record_index = np.concatenate(idx)
    party = np.concatenate([np.full(i.size, k, dtype=np.int64) for k, i in enumerate(idx)])
    arrays = {"party": party, "y": y[record_index], "record_index": record_index, "source_index": source_index,
              "test_index": test_index}
    info = {
        "n_parties": len(idx),
        "party_sizes": [int(i.size) for i in idx],
        "n_anchor": int(anchor.X.shape[0]),
        "n_sources_removed": int(source_index.size),
        "smote_k_nn_used": {str(c): k for c, k in anchor.k_nn_used.items()},
        "smote_fallback_classes": anchor.fallback_classes,
    }
    if params.shares != "ir":
        info["released_by_parties"] = ["raw records"] if params.shares == "raw" else []
        # the anchor is the attacker's side knowledge (its control guess), not a release here
        arrays.update(anchor=anchor.X, anchor_labels=anchor.y)
        info["private_not_for_analyst"] = ["anchor", "anchor_labels", "record_index", "source_index"]
        return StageOutput(arrays=arrays, info=info)
    own, shared, settings = obfuscate_parties(
        params.obfuscation, params.d_tilde, [x_train[i] for i in idx], [anchor.X, x_test], seed
    )
    ir_train = np.vstack(own)
    arrays.update(
        ir_train=ir_train,
        ir_anchor=np.stack([s[0] for s in shared]),
        anchor_labels=anchor.y,
        ir_test=np.stack([s[1] for s in shared]),
        anchor=anchor.X,
    )
    xfam = LinkageArrays(ir_train, party, np.arange(record_index.size, dtype=np.int64), x_train[record_index])
    info.update(
        d_tilde=params.d_tilde,
        umap_settings=settings if params.obfuscation == "umap" else [],
        released_by_parties=["ir_train", "party", "y", "ir_anchor", "ir_test"],
        private_not_for_analyst=["anchor", "record_index", "source_index", "xfam_pool"],
    )
    return StageOutput(arrays=arrays, info=info, crossfamily=CrossFamilyArrays(attack=xfam))


def make_integrator(params: Params, seed: int) -> BaseIntegrator:
    """The integrator a cell's ``method`` (and NKI options) names."""
    if params.method == "nki":
        if params.nystrom_rank is not None:
            return NystromNKI(
                params.nystrom_rank, gamma=params.kernel_gamma, lam=params.lam, center=params.center, seed=seed
            )
        graph = None if params.graph == "none" else params.graph
        return NKI(
            gamma=params.kernel_gamma, lam=params.lam, graph=graph, mu=params.mu, k_nn=params.k_nn,
            center=params.center, objective=params.nki_objective,
        )
    return {"mpp": MPP, "gep": GEP, "odc": ODC, "lki": LKI}[params.method]()


def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Analyst side: fit ``{g_k}`` on the anchor IRs; map the released and test IRs.

    Timings (run-dependent, so not metrics): ``cost_fit_seconds`` (building every ``g_k``, the
    paper's RQ3 "function" time), ``cost_transform_seconds_per_record`` (its "representation" time
    over the ``nK`` test rows) and, for NKI, the CPU seconds of each fit step."""
    if params.method in BASELINES:
        return StageOutput(info={"passthrough": True, "baseline": params.method})
    rel = inputs["release"]
    ir_anchor, party, labels = rel["ir_anchor"], rel["party"], rel["anchor_labels"]
    integrator = make_integrator(params, seed)
    t0 = time.perf_counter()
    integrator.fit(list(ir_anchor), labels if np.all(labels >= 0) else None)
    t1 = time.perf_counter()
    collab_test = np.stack([integrator.transform(t, k) for k, t in enumerate(rel["ir_test"])])
    t2 = time.perf_counter()
    collab_train = np.zeros((party.size, integrator.n_components_))
    for k in range(ir_anchor.shape[0]):
        collab_train[party == k] = integrator.transform(rel["ir_train"][party == k], k)
    info = {"integrator": type(integrator).__name__, "n_components": integrator.n_components_}
    if isinstance(integrator, GEP):
        info["gep_ridge_used"] = integrator.ridge_used_
    if isinstance(integrator, NKI):
        nearest = [integrator.kernel_rows(t, k).max(axis=1) for k, t in enumerate(rel["ir_test"])]
        info.update(
            gammas=integrator.gammas_,
            median_anchor_distance=integrator.median_distances_,
            test_fraction_far_from_anchors=[float(np.mean(v < 1e-6)) for v in nearest],
            graph_skipped=integrator.graph_skipped_,
            centering_diagnostic=(np.abs(integrator.Z_.sum(0)) / np.sqrt(integrator.n_anchor_)).tolist(),
        )
    n_test_rows = collab_test.shape[0] * collab_test.shape[1]
    timings = {"cost_fit_seconds": t1 - t0, "cost_transform_seconds_per_record": (t2 - t1) / max(n_test_rows, 1)}
    if isinstance(integrator, NKI):  # CPU seconds of each fit step of the paper's Table 1
        timings.update({f"nki_{step}_cpu_seconds": v for step, v in integrator.step_seconds_.items()})
    y_test = np.asarray(inputs["prepare"]["y_test"]).astype(np.int64)[rel["test_index"]]
    xfam = UtilityArrays(collab_train, rel["y"], collab_test.reshape(-1, collab_test.shape[2]),
                         np.tile(y_test, collab_test.shape[0]))
    return StageOutput(arrays={"collab_train": collab_train, "collab_test": collab_test}, info=info, timings=timings,
                       crossfamily=CrossFamilyArrays(utility=xfam))


def _leaked_rows(labels: np.ndarray, params: Params, n_classes: int, seed: int) -> np.ndarray:
    if np.all(labels >= 0):
        return np.flatnonzero(np.isin(labels, params.leaked_labels))
    n_leak = int(np.ceil(labels.size * len(set(params.leaked_labels)) / n_classes))
    return np.sort(stream(seed, "dc.leaked-rows").choice(labels.size, size=min(n_leak, labels.size), replace=False))


def _targets(rel: dict, params: Params) -> np.ndarray:
    """Mask (n_r,) of the target party's records whose label is not leaked (spec §5)."""
    n_parties = int(rel["party"].max()) + 1
    k = params.target_party
    if k >= n_parties:
        raise ValidationError(f"target_party: must lie in [0, {n_parties - 1}], got {k}")
    target = (rel["party"] == k) & ~np.isin(rel["y"], params.leaked_labels)
    if not np.any(target):
        raise ValidationError(
            f"target_party: party {k} holds no record outside leaked_labels {list(params.leaked_labels)}"
        )
    return target


def attack_names(params: Params) -> tuple[str, ...]:
    """Attacks a cell runs: ``params.attacks``; ``("raw",)`` for Central (the raw records are shared,
    the "reconstruction" is the record itself); none for Local (nothing is shared) or ``attacks=()``."""
    if not params.attacks:
        return ()
    return {"raw": ("raw",), "nothing": ()}.get(params.shares, params.attacks)


def control_reconstruction(x_leaked: np.ndarray, n_targets: int) -> np.ndarray:
    """The control attack's reconstructions (n_targets × d): the mean of the leaked anchor records
    ``x_leaked`` (|I| × d) for every target.

    The control has the main attacks' side knowledge (the leaked anchor rows A_I) but not the
    release (no IR of the target party): the constant that minimises its expected squared error is
    the mean of what it knows. Controls for all three privacy metrics (module docstring of
    :mod:`veilbench.metrics.advantage`).
    """
    x = np.asarray(x_leaked, dtype=float)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValidationError(f"x_leaked: expected a non-empty 2-d array of leaked records, got shape {x.shape}")
    return np.repeat(x.mean(axis=0, keepdims=True), int(n_targets), axis=0)


def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Reconstruct the target party's non-leaked-label records from leaked anchor pairs (spec §5);
    also the control attack's guess (:func:`control_reconstruction`), which reads no release; then
    score them (:func:`_privacy_metrics`), as metrics and as 0-d arrays ``score__<metric>`` that
    ``evaluate`` reports. The scores depend on the release only, so every integrator of one release
    shares them (module docstring, ``STAGE_INPUTS``)."""
    rel = inputs["release"]
    if not attack_names(params):
        return StageOutput(info={"attacks": [], "skipped": "Local shares nothing" if params.shares == "nothing"
                                 else "attacks=()"})
    target = _targets(rel, params)
    k = params.target_party
    info = {"attacks": list(attack_names(params)), "n_targets": int(target.sum()), "target_party": k,
            "control": "mean of the leaked anchor records, no release"}
    n_classes = np.unique(inputs["prepare"]["y_train"]).size
    leaked = _leaked_rows(rel["anchor_labels"], params, n_classes, seed)
    if leaked.size < 2:
        raise ValidationError(f"leaked_labels: {list(params.leaked_labels)} pick {leaked.size} anchor rows, need ≥ 2")
    control = control_reconstruction(rel["anchor"][leaked], int(target.sum()))
    x_train, _ = _features(inputs, params)
    if params.shares == "raw":
        recons = x_train[rel["record_index"][target]][None]
    else:
        recons = []
        for name in params.attacks:
            att = make_attack(name, seed=seed, max_iter=params.mlp_max_iter)
            att.fit(rel["ir_anchor"][k][leaked], rel["anchor"][leaked])
            recons.append(att.reconstruct(rel["ir_train"][target]))
        recons = np.stack(recons)
        info["n_leaked_pairs"] = int(leaked.size)
    arrays = {"reconstructions": recons, "control_reconstructions": control, "target_index": rel["record_index"][target]}
    y_train = np.asarray(inputs["prepare"]["y_train"])
    metrics, info["best_attack"] = _privacy_metrics(rel, arrays, params, seed, x_train, y_train)
    arrays |= {f"{SCORE}{name}": np.asarray(value) for name, value in metrics.items()}
    return StageOutput(arrays=arrays, metrics=metrics, info=info)


def _privacy_metrics(
    rel: dict[str, np.ndarray], att: dict[str, np.ndarray], params: Params, seed: int, x_train: np.ndarray,
    y_train: np.ndarray,
) -> tuple[dict[str, float], str]:
    """Per-attack and worst-case reconstruction metrics (spec §5) of the attack arrays ``att``;
    returns (metrics, best attack)."""
    rows, target = rel["record_index"], att["target_index"]
    outside = np.setdiff1d(np.arange(y_train.size), rows[rel["party"] == params.target_party])
    if outside.size > params.evaluator_records:
        outside = stream(seed, "dc.evaluator-records").choice(outside, size=params.evaluator_records, replace=False)
    evaluator = make_classifier("rf", seed, params.n_estimators).fit(x_train[outside], y_train[outside])
    per_attack, metrics = {}, {}
    for name, rec in zip(attack_names(params), att["reconstructions"], strict=True):
        per_attack[name] = {
            "privacy_reconstruction_accuracy": float(np.mean(evaluator.predict(rec) == y_train[target])),
            "privacy_reconstruction_mse": float(np.mean((rec - x_train[target]) ** 2)),
            "privacy_linkage_rate": linkage_rate(rec, x_train, target).rate,
        }
        metrics.update({f"{metric}_{name}": value for metric, value in per_attack[name].items()})
    best = max(per_attack, key=lambda n: per_attack[n]["privacy_reconstruction_accuracy"])
    metrics.update(
        privacy_reconstruction_accuracy_best=per_attack[best]["privacy_reconstruction_accuracy"],
        privacy_reconstruction_accuracy_chance=1.0 / np.unique(y_train[target]).size,
        privacy_reconstruction_mse=min(v["privacy_reconstruction_mse"] for v in per_attack.values()),
        privacy_linkage_rate=max(v["privacy_linkage_rate"] for v in per_attack.values()),
        privacy_linkage_rate_chance=1.0 / y_train.size,
    )
    control = np.asarray(att["control_reconstructions"])
    metrics.update(
        privacy_reconstruction_accuracy_best_control=float(np.mean(evaluator.predict(control) == y_train[target])),
        privacy_reconstruction_mse_control=float(np.mean((control - x_train[target]) ** 2)),
        privacy_linkage_rate_control=linkage_rate(control, x_train, target).rate,
    )
    advantage = {"privacy_reconstruction_accuracy_best": success_advantage,
                 "privacy_reconstruction_mse": error_advantage, "privacy_linkage_rate": success_advantage}
    for metric, fn in advantage.items():
        metrics[f"{metric}_advantage"] = fn(metrics[metric], metrics[f"{metric}_control"])
    return metrics, best


def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Utility (collaboration / central / local) and reconstruction-risk metrics (spec §3, §5).

    ``utility_accuracy_central``/``_local`` only with ``references=True``. For
    ``method="central"``/``"local"`` ``utility_accuracy`` is the Central/Local accuracy; Central's
    privacy metrics score the raw records it shares, Local (nothing shared) has none; with
    ``attacks=()`` no cell has privacy metrics.
    """
    rel = inputs["release"]
    x_train, x_test = _features(inputs, params)
    x_test = x_test[rel["test_index"]]
    y_train, y_test = np.asarray(inputs["prepare"]["y_train"]), np.asarray(inputs["prepare"]["y_test"])[rel["test_index"]]
    clf = partial(make_classifier, params.classifier, seed, params.n_estimators)
    rows = rel["record_index"]
    references = {
        "central": lambda: central_accuracy(x_train[rows], y_train[rows], x_test, y_test, clf()),
        "local": lambda: local_accuracy(x_train[rows], y_train[rows], rel["party"], x_test, y_test, clf()),
    }
    wanted = set(references) if params.references else {params.method} & set(references)
    metrics = {f"utility_accuracy_{name}": score() for name, score in references.items() if name in wanted}
    info: dict = {"utility_metric": "utility_accuracy", "privacy_metric": "privacy_reconstruction_accuracy_best"}
    if params.method in BASELINES:
        metrics["utility_accuracy"] = metrics[f"utility_accuracy_{params.method}"]
    else:
        integ = inputs["integrate"]
        metrics["utility_accuracy"], info["utility_accuracy_per_party"] = collaboration_accuracy(
            integ["collab_train"], rel["y"], rel["party"], integ["collab_test"], y_test, clf(), params.readout
        )
    if attack_names(params):  # scored by the attack stage (shared by every integrator of the release)
        metrics.update({k[len(SCORE):]: float(v) for k, v in inputs["attack"].items() if k.startswith(SCORE)})
    return StageOutput(metrics={k: float(v) for k, v in metrics.items()}, info=info)
