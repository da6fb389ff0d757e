r"""GCA family: federated autoencoder anomaly detection, FL baselines, extraction attack.

Follows the spec ``shared/specs/gca.md`` of *GCA: Global Centroid Alignment in Federated
Learning*. One cell = one method (``gca``, ``fedavg``, ``fedprox``, ``fednova``,
``dpfedavg``, ``single``, ``centralized``) on one dataset/encoder; stages:

* ``release``: run the deterministic simulator (:mod:`veilbench.gca.simulator`;
  ``engine="vectorized"`` trains the clients of an MLP run in one batch,
  :mod:`veilbench.gca.vectorized`, :mod:`veilbench.gca.vectorized_gca`; ``device`` picks where
  torch trains and scores; ``client_threads`` trains and scores the clients of GCA and of the FL
  baselines side by side on that many threads, with the same bits). Resumable: with the pipeline's per-round checkpoints
  (:data:`RESUMABLE_STAGES`) a killed run continues at its last finished round with the same bits.
  Arrays: the evaluation curves on the test and the validation pools (accuracy, ROC AUC, round,
  epoch), what the server obtains from the victim (client 0): its last-round local parameters
  (parameter sharing) or a fresh latent upload after ``attack_extra_epochs`` more reconstruction
  epochs (GCA), the per-round bytes sent and, for DP-FedAvg, the noise the server added
  (``dp_noise_*``, for the white-box noise audit).
  The cross-family view (:mod:`veilbench.gca.xfam`) rides along unless ``crossfamily``
  is off (paper-scale image runs: the view encodes every record of the data set).
  Metrics: ``comm_mib_per_round``; for DP-FedAvg the privacy ledger's entry: R rounds of noise
  multiplier z, (ε, δ) of one round (exact Gaussian profile), client adjacency and the RDP
  accountant's ε for all R rounds.
* ``integrate``: checkpoint selection (:mod:`veilbench.gca.selection`) on the validation pool
  (``validation``: the point of best validation ROC AUC, the verdicts' protocol), under the paper's
  protocol (max test accuracy over all evaluation points: GCA per reconstruction epoch, baselines
  per round), the matched one (max over per-round checkpoints) and the final round; the test
  accuracy and ROC AUC at each; the per-round curves ``round_accuracy`` / ``round_auc`` ``(R,)``
  (best point of each round) and ``rounds_trend`` ``(k, 3)``: the validation-selected test ROC AUC
  and accuracy of the run cut after R' rounds for R' in :data:`TREND_ROUNDS` (a run of R' rounds
  is the prefix of a longer one).
* ``attack``: server-side extraction (:mod:`veilbench.gca.extraction`): input optimisation
  against the victim's reconstruction map (white-box for parameter sharing, a surrogate AE
  trained on the uploaded codes for GCA) from starts shared by every method of a seed, plus three
  data-free output banks of control attackers (all zeros, Gaussian noise, training mean, random
  held-out records).
* ``evaluate``: headline metrics ``utility_roc_auc`` and ``utility_accuracy`` (test set, at the
  checkpoint ``selection`` picks: by default the validation-selected one), every protocol's
  ``utility_{accuracy,roc_auc}_{validation,paper,matched,final}`` (``paper``: the paper's own
  protocol, selected on the test set, shown as the paper's column only), ``privacy_ntmse`` / ``privacy_delta_cos`` with each control's
  ``*_trivial_{zeros,noise,mean,heldout}``, the best control's ``*_control_best`` and the
  attacker's ``*_advantage`` over it (1 perfect, 0 no better than the best control), ``comm_mib_per_round`` and, for DP-FedAvg, ``dp_epsilon`` (RDP accountant)
  and the white-box audit of the server's noise, ``privacy_noise_audit_*`` (:func:`veilbench.gca.audit.audit_dp_fedavg_noise`).
  Beside the accuracy: ``utility_accuracy_flag_all``, the accuracy of flagging every test record
  (the test set's anomaly share: 0.5 with ``test_balance="balanced"``); and the convergence
  diagnostics ``utility_rounds`` (R) and ``utility_{roc_auc,accuracy}_converged_round``, the first
  round whose running best is within ``convergence_tolerance`` of the run's best.

Assumptions ([A] in the spec unless stated): clients train on the normal records of their
``party_train`` shard (or an IID / Dirichlet long-tail re-partition); normal class = most
frequent training class unless given; the reference bank is the first ``reference_size`` test
normals; shared client initialisation for GCA; StepLR stepped per epoch; defaults are a small
fast cell (few rounds/epochs, 20 attack starts, 200 steps) rather than the paper's R = 100,
10 local epochs and 100 starts × 1,000 steps; the DP accountant assumes client-level
add/remove adjacency with fixed weights; single/centralized emit no privacy metrics (nothing /
everything is shared).
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from veilbench.families.base import DataFreeMetric, FamilyParams, StageInputs, StageOutput
from veilbench.gca.communication import MIB, config_for, fl_bytes, gca_bytes
from veilbench.gca.data import FederatedData, build_federation
from veilbench.gca.selection import PROTOCOLS, converged_round, round_curve, selected_index
from veilbench.gca.simulator import PARAMETER_SHARING, FedConfig, initial_model, run_protocol
from veilbench.gca.xfam import xfam_arrays
from veilbench.random import stream
from veilbench.validation import ValidationError

#: The option naming a cell's method (:func:`veilbench.families.base.method_of`).
METHOD_KEY = "method"
#: The federations train torch autoencoders.
USES_TORCH = True
#: Data-free output banks of the control attackers (:func:`veilbench.gca.extraction.trivial_outputs`).
TRIVIAL_KINDS: tuple[str, ...] = ("zeros", "noise", "mean", "heldout")
#: Stages the pipeline may give per-round checkpoints (``checkpoints=`` keyword): a killed run resumes.
RESUMABLE_STAGES: tuple[str, ...] = ("release",)
#: Round counts R' of the rounds trend (integrate's ``rounds_trend``): those the run reaches.
TREND_ROUNDS: tuple[int, ...] = (1, 2, 5, 10, 25, 50, 100, 200, 500, 1000)

_BEST_CONTROL = "best data-free attacker"
_FLAG_ALL = "flag-all detector"
#: Metric-level data-free references (:class:`veilbench.families.base.DataFreeMetric`): the
#: attack metrics' best control (``*_control_best``: the best of :data:`TRIVIAL_KINDS` on the same
#: victim), whose advantage over itself is 0 by definition; and the detector that flags every test
#: record, whose accuracy is the test set's anomaly share (``utility_accuracy_flag_all``, under every
#: selection protocol) and whose ROC AUC is 0.5 (a constant score ties every anomaly–normal pair, each
#: tie counting ½).
DATA_FREE_METRICS: dict[str, DataFreeMetric] = {
    "privacy_ntmse": DataFreeMetric("privacy_ntmse_control_best", _BEST_CONTROL),
    "privacy_delta_cos": DataFreeMetric("privacy_delta_cos_control_best", _BEST_CONTROL),
    "privacy_ntmse_advantage": DataFreeMetric(0.0, _BEST_CONTROL),
    "privacy_delta_cos_advantage": DataFreeMetric(0.0, _BEST_CONTROL),
    **{f"utility_accuracy{s}": DataFreeMetric("utility_accuracy_flag_all", _FLAG_ALL)
       for s in ("", *(f"_{p}" for p in PROTOCOLS))},
    **{f"utility_roc_auc{s}": DataFreeMetric(0.5, _FLAG_ALL) for s in ("", *(f"_{p}" for p in PROTOCOLS))},
}


class Params(FamilyParams):
    """Options of one GCA-family cell (dataset-independent; defaults: a seconds-long cell)."""

    method: Literal["gca", "fedavg", "fedprox", "fednova", "dpfedavg", "single", "centralized"] = "gca"
    normal_classes: list[int] | None = None
    anomaly_classes: list[int] | None = None
    input_source: Literal["embed", "prepare_standardize", "prepare_minmax"] = "embed"
    architecture: Literal["mlp", "conv"] = "mlp"
    image_shape: tuple[int, int, int] | None = None
    latent_channels: int = Field(16, ge=1, le=256)
    partition: Literal["given", "iid", "dirichlet"] = "given"
    n_clients: int | None = Field(None, ge=1, le=10_000)
    dirichlet_alpha: float = Field(0.1, gt=0.0)
    rounds: int = Field(10, ge=1, le=10_000)
    local_epochs: int = Field(5, ge=1, le=1_000)
    recon_epochs: int = Field(3, ge=1, le=1_000)
    align_epochs: int = Field(2, ge=1, le=1_000)
    batch_size: int = Field(50, ge=1)
    lr: float = Field(1e-3, gt=0.0, le=1.0)
    lr_step_unit: Literal["epoch", "step"] = "epoch"
    quantile: float = Field(0.75, gt=0.0, lt=1.0)
    prox_mu: float = Field(1e-4, ge=0.0)
    dp_clip: float = Field(1.0, gt=0.0)
    dp_sigma: float = Field(1.0, gt=0.0)
    dp_delta: float = Field(1e-5, gt=0.0, lt=1.0)
    upload_fraction: float = Field(0.5, gt=0.0, le=1.0)
    n_clusters: int = Field(4, ge=1, le=4096)
    clustering: Literal["gmm", "kmeans", "soft_kmeans", "minibatch_kmeans"] = "gmm"
    covariance_type: Literal["full", "diag"] = "full"
    reg_covar: float = Field(1e-6, gt=0.0)
    gmm_n_init: int = Field(1, ge=1, le=100)
    weighting: Literal["inverse", "uniform"] = "inverse"
    client_init: Literal["shared", "independent"] = "shared"
    selection: Literal["validation", "paper", "matched", "final"] = "validation"
    validation_fraction: float = Field(0.5, gt=0.0, lt=1.0)
    attack_starts: int = Field(20, ge=1, le=10_000)
    attack_max_steps: int = Field(200, ge=1, le=100_000)
    attack_extra_epochs: int = Field(1, ge=0, le=1_000)
    surrogate_max_epochs: int = Field(200, ge=1, le=100_000)
    surrogate_patience: int = Field(20, ge=1)
    reference_size: int = Field(100, ge=1)
    test_balance: Literal["all", "balanced"] = "all"
    convergence_tolerance: float = Field(0.01, ge=0.0, le=1.0)
    engine: Literal["sequential", "vectorized"] = "sequential"
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    client_threads: int = Field(1, ge=1, le=64)
    crossfamily: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> "Params":
        if self.architecture == "conv" and self.image_shape is None:
            raise ValueError("image_shape: required (c, h, w) when architecture='conv'")
        if self.partition != "given" and self.n_clients is None:
            raise ValueError(f"n_clients: required when partition={self.partition!r}")
        if self.engine == "vectorized" and (self.method not in (*PARAMETER_SHARING, "gca") or self.architecture != "mlp"):
            raise ValueError("engine: 'vectorized' runs parameter-sharing methods and GCA on the MLP AE only")
        if self.engine == "vectorized" and self.device != "cpu":
            raise ValueError(f"engine: 'vectorized' runs on the CPU only (device 'cpu'), got device {self.device!r}")
        return self

    def torch_device(self) -> str:
        """The torch device of ``device``: ``auto`` is ``cuda`` where a CUDA device is available, else ``cpu``."""
        if self.device == "cpu":
            return "cpu"
        import torch

        if torch.cuda.is_available():
            return "cuda"
        if self.device == "auto":
            return "cpu"
        raise ValidationError("device: 'cuda' asks for a CUDA device and torch finds none "
                              "(torch.cuda.is_available() is False); use 'cpu' or 'auto'")

    def fed_config(self) -> FedConfig:
        """The simulator configuration of this cell."""
        return FedConfig(
            rounds=self.rounds, local_epochs=self.local_epochs, recon_epochs=self.recon_epochs,
            align_epochs=self.align_epochs, batch_size=self.batch_size, lr=self.lr, lr_step_unit=self.lr_step_unit,
            quantile=self.quantile, prox_mu=self.prox_mu, dp_clip=self.dp_clip, dp_sigma=self.dp_sigma,
            upload_fraction=self.upload_fraction, n_clusters=self.n_clusters, clustering=self.clustering,
            covariance_type=self.covariance_type, reg_covar=self.reg_covar, gmm_n_init=self.gmm_n_init,
            weighting=self.weighting, client_init=self.client_init, attack_extra_epochs=self.attack_extra_epochs,
            device=self.torch_device(), client_threads=self.client_threads,
        )


def _data(inputs: StageInputs, params: Params, seed: int) -> FederatedData:
    return build_federation(
        inputs, spec_kind=params.architecture, input_source=params.input_source,
        normal_classes=params.normal_classes, anomaly_classes=params.anomaly_classes, partition=params.partition,
        n_clients=params.n_clients, dirichlet_alpha=params.dirichlet_alpha, image_shape=params.image_shape,
        latent_channels=params.latent_channels, reference_size=params.reference_size, seed=seed,
        test_balance=params.test_balance, validation_fraction=params.validation_fraction,
    )


def _formula_bytes(data: FederatedData, params: Params) -> tuple[int, int]:
    """Per-round ``(up, down)`` bytes of spec §7 for this federation (nominal K; 0 without sharing)."""
    from veilbench.gca.models import count_params

    if params.method not in PARAMETER_SHARING and params.method != "gca":
        return 0, 0
    model = initial_model(data.federation.spec, 0)  # only its shape is read
    cfg = config_for(data.federation.sizes, params.upload_fraction, model.latent_dim, count_params(model))
    return gca_bytes(cfg, params.n_clusters) if params.method == "gca" else fl_bytes(cfg)


class _ClockedCheckpoints:
    """A run's checkpoints that also carry the CPU seconds spent on the run so far, so a resumed run
    reports the CPU time of all its sessions (``cpu_seconds``). The clock is this thread's CPU time,
    or with ``client_threads`` > 1 the process's (the client threads' work included; a process then
    runs one such cell at a time, as the Dask workers do). ``_cpu_partial`` in a checkpoint marks a
    count that left some of the run's threads out (a run resumed from one saved by a one-thread clock
    while its clients trained on several threads)."""

    def __init__(self, inner, threads: int = 1) -> None:
        self.clock = time.process_time if threads > 1 else time.thread_time
        self.inner, self.carried, self.partial, self.t0 = inner, 0.0, False, self.clock()
        self.name = "process" if threads > 1 else "thread"

    def load(self):
        saved = self.inner.load() if self.inner is not None else None
        if saved is not None:
            self.carried = float(saved[1].pop("_cpu_seconds", 0.0))
            clock = saved[1].pop("_cpu_clock", "thread")
            self.partial = bool(saved[1].pop("_cpu_partial", False)) or (clock != self.name and self.name == "process")
        return saved

    def save(self, round_: int, state: dict) -> None:
        if self.inner is not None:
            self.inner.save(round_, {**state, "_cpu_seconds": self.cpu_seconds(), "_cpu_clock": self.name,
                                     "_cpu_partial": self.partial})

    def cpu_seconds(self) -> float:
        return self.carried + self.clock() - self.t0


def release(inputs: StageInputs, params: Params, seed: int, checkpoints=None) -> StageOutput:
    """Run the federation; arrays: curves, victim parameters or codes, bytes per round.

    ``checkpoints``: a :class:`~veilbench.checkpoints.RoundCheckpoints` of this cell and seed (the
    pipeline's), saved after every round and resumed from. ``timings["cpu_seconds"]``: the CPU time
    of the federation's training and evaluation, over every session of a resumed run;
    ``timings["cpu_partial"]`` 1 when that count left some of its threads out (:class:`_ClockedCheckpoints`)."""
    data = _data(inputs, params, seed)
    cfg = params.fed_config()
    clock = _ClockedCheckpoints(checkpoints, params.client_threads)
    res = run_protocol(params.method, data.federation, cfg, seed, checkpoints=clock, engine=params.engine)
    cpu_seconds = clock.cpu_seconds()
    formula = _formula_bytes(data, params)
    metrics = {"comm_mib_per_round": sum(formula) / MIB}
    ledger = []
    if params.method == "dpfedavg":
        from veilbench.gca.accountant import dp_fedavg_epsilon
        from veilbench.privacy.calibration import gaussian_epsilon
        from veilbench.privacy.ledger import Release

        z = res.dp_noise_multiplier  # privacy ledger: R Gaussian rounds of multiplier z, composed there by PLD
        ledger.append(Release(gaussian_epsilon(z, 1.0, params.dp_delta), params.dp_delta, params.rounds,
                              noise_multiplier=z, adjacency="client",
                              epsilon_rdp=dp_fedavg_epsilon(z, params.rounds, params.dp_delta)))
    arrays = {
        "curve_accuracy": res.accuracy, "curve_auc": res.auc, "curve_round": res.rounds, "curve_epoch": res.epochs,
        "curve_val_accuracy": res.val_accuracy, "curve_val_auc": res.val_auc,
        "align_accuracy": res.align_accuracy, "local_steps": res.local_steps,
        "points_per_round": np.array([res.points_per_round]),
        "comm_bytes_measured": np.array([res.bytes_up_per_round, res.bytes_down_per_round], dtype=np.int64),
        "comm_bytes_formula": np.array(formula, dtype=np.int64),
        "victim_params": res.victim_params, "victim_codes": res.victim_codes,
        "dp_noise_multiplier": np.array([np.nan if res.dp_noise_multiplier is None else res.dp_noise_multiplier]),
        "dp_epsilon": np.array([ledger[0].epsilon_rdp if ledger else np.nan]),
        "test_anomaly_fraction": np.array([float(data.federation.y_test.mean())]),
    }
    noise = res.info.pop("dp_noise", None)
    if noise is not None:  # what the server added, for the white-box noise audit
        arrays.update(dp_noise_sum_sq=np.asarray(noise["sum_sq"], dtype=np.float64),
                      dp_noise_count=np.asarray(noise["count"], dtype=np.int64),
                      dp_noise_sample=np.asarray(noise["sample"], dtype=np.float64),
                      dp_noise_std=np.array([noise["std"]], dtype=np.float64))
    info = {
        "method": params.method, "n_clients": len(data.client_ids), "client_ids": data.client_ids,
        "client_sizes": data.federation.sizes.tolist(), "normal_classes": data.normal_classes,
        "anomaly_classes": data.anomaly_classes, "n_test": int(data.federation.y_test.size),
        "lr_step_unit": params.lr_step_unit, "client_init": params.client_init, "device": cfg.device,
        "n_validation": int(data.federation.y_val.size), **res.info,
    }
    return StageOutput(arrays=arrays, metrics=metrics, info=info, timings={"cpu_seconds": cpu_seconds, "cpu_partial": float(clock.partial)}, ledger=ledger,
                       crossfamily=xfam_arrays(data, res, seed) if params.crossfamily else None)


def integrate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Checkpoint selection under the validation, the paper's, the matched and the final-round protocols,
    and the rounds trend of the validation protocol."""
    rel = inputs["release"]
    ppr = int(rel["points_per_round"][0])
    acc, auc, val_auc = (np.asarray(rel[k], dtype=np.float64) for k in ("curve_accuracy", "curve_auc", "curve_val_auc"))
    idx = np.array([selected_index(acc, val_auc, ppr, p) for p in PROTOCOLS], dtype=np.int64)
    n_rounds = acc.shape[0] // ppr
    trend = []
    for r in (*(t for t in TREND_ROUNDS if t < n_rounds), n_rounds):
        t = selected_index(acc, val_auc, ppr, "validation", max_round=r)
        trend.append((r, auc[t], acc[t]))
    arrays = {
        "round_accuracy": round_curve(acc, ppr),
        "round_auc": round_curve(auc, ppr),
        "selected_accuracy": acc[idx],
        "selected_auc": auc[idx],
        "selected_val_auc": val_auc[idx],
        "selected_index": idx,
        "selected_round": np.asarray(rel["curve_round"])[idx],
        "selected_epoch": np.asarray(rel["curve_epoch"])[idx],
        "rounds_trend": np.array(trend, dtype=np.float64),
    }
    return StageOutput(arrays=arrays, info={"protocols": list(PROTOCOLS), "points_per_round": ppr,
                                            "rounds_trend_columns": ["rounds", "roc_auc", "accuracy"]})


def attack_starts(n_starts: int, dim: int, bounded: bool, seed: int) -> np.ndarray:
    """Starts shared by every method of a (dataset, seed): N(0, I) (tabular) or U(−1, 1) (bounded),
    from stream ``"gca.attack-starts"`` of ``seed``."""
    rng = stream(seed, "gca.attack-starts")
    return rng.uniform(-1.0, 1.0, (n_starts, dim)) if bounded else rng.standard_normal((n_starts, dim))


def attack(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Extraction against client 0: white-box inversion (parameter sharing) or surrogate + inversion (GCA)."""
    if params.method in ("single", "centralized"):
        return StageOutput(info={"attack": f"none: {params.method} shares no model or codes"})
    from veilbench.gca.extraction import invert_reconstruction_map, train_surrogate, trivial_outputs
    from veilbench.gca.training import set_flat_params

    rel = inputs["release"]
    data = _data(inputs, params, seed)
    spec = data.federation.spec
    bounded = params.input_source == "prepare_minmax"
    if params.method == "gca":
        transform = train_surrogate(rel["victim_codes"], spec, seed, max_epochs=params.surrogate_max_epochs,
                                    patience=params.surrogate_patience)
    else:
        transform = initial_model(spec, seed)  # overwritten by the victim's parameters
        set_flat_params(transform, rel["victim_params"])
    starts = attack_starts(params.attack_starts, spec.input_dim, bounded, seed)
    inv = invert_reconstruction_map(transform, starts, max_steps=params.attack_max_steps,
                                    bounds=(-1.0, 1.0) if bounded else None)
    rng = stream(seed, "gca.controls")
    arrays = {"reconstructions": inv.outputs, "attack_steps": inv.steps}
    for kind in TRIVIAL_KINDS:
        out = trivial_outputs(kind, params.attack_starts, data.train_mean, data.heldout, rng)
        arrays[f"trivial_{kind}"] = np.clip(out, -1.0, 1.0) if bounded else out
    info = {"attack": "surrogate" if params.method == "gca" else "white-box", "mean_steps": float(inv.steps.mean())}
    if params.method == "dpfedavg":  # empirical ε of one round beside the accountant's (veilbench.gca.audit)
        from veilbench.gca.audit import audit_dp_fedavg_round

        audit = audit_dp_fedavg_round(n_clients=len(data.client_ids), clip=params.dp_clip,
                                      noise_multiplier=float(rel["dp_noise_multiplier"][0]), delta=params.dp_delta,
                                      seed=seed)
        arrays["audit_round_epsilon"] = np.array([audit.audit.epsilon_lower_bound, audit.epsilon_claimed])
        arrays["audit_round_plan"] = np.array([audit.plan.max_certifiable_epsilon, audit.plan.power_half_noise,
                                               float(audit.plan.decidable), audit.plan.n_releases])
        info["audit"] = "one DP-FedAvg round, canary client update c·e1 vs absent"
    return StageOutput(arrays=arrays, info=info)


def _privacy_metrics(inputs: StageInputs, params: Params, seed: int) -> dict[str, float]:
    """NTMSE and Δcos of the attack and of every control, the best control's and the advantage
    over it (:mod:`veilbench.gca.extraction`: larger advantage = the attacker does better)."""
    from veilbench.gca.extraction import advantage, ntmse_delta_cos, perfect_values

    data = _data(inputs, params, seed)
    targets, att = data.federation.clients[0], inputs["attack"]
    m: dict[str, float] = {}
    m["privacy_ntmse"], m["privacy_delta_cos"] = ntmse_delta_cos(targets, att["reconstructions"], data.reference)
    for kind in TRIVIAL_KINDS:
        m[f"privacy_ntmse_trivial_{kind}"], m[f"privacy_delta_cos_trivial_{kind}"] = ntmse_delta_cos(
            targets, att[f"trivial_{kind}"], data.reference)
    perfect = dict(zip(("ntmse", "delta_cos"), perfect_values(targets, data.reference)))
    for name, best in (("ntmse", min), ("delta_cos", max)):
        control = best(v for k, v in m.items() if k.startswith(f"privacy_{name}_trivial_"))
        m[f"privacy_{name}_control_best"] = control
        m[f"privacy_{name}_advantage"] = advantage(m[f"privacy_{name}"], control, perfect[name])
    return m


def evaluate(inputs: StageInputs, params: Params, seed: int) -> StageOutput:
    """Headline utility, privacy, communication and (DP-FedAvg) ε metrics of the cell."""
    integ, rel = inputs["integrate"], inputs["release"]
    k = PROTOCOLS.index(params.selection)
    metrics = {
        "utility_accuracy": float(integ["selected_accuracy"][k]),
        "utility_roc_auc": float(integ["selected_auc"][k]),
        "utility_roc_auc_validation_set": float(integ["selected_val_auc"][k]),
        "utility_argmax_round": float(integ["selected_round"][k]),
        "comm_mib_per_round": float(np.sum(rel["comm_bytes_formula"]) / MIB),
        "comm_mib_per_round_measured": float(np.sum(rel["comm_bytes_measured"]) / MIB),
        "utility_accuracy_flag_all": float(rel["test_anomaly_fraction"][0]),
        "utility_rounds": float(len(integ["round_auc"])),
        "utility_roc_auc_converged_round": float(converged_round(integ["round_auc"], params.convergence_tolerance)),
        "utility_accuracy_converged_round": float(converged_round(integ["round_accuracy"],
                                                                  params.convergence_tolerance)),
    }
    for j, name in enumerate(PROTOCOLS):
        metrics[f"utility_accuracy_{name}"] = float(integ["selected_accuracy"][j])
        metrics[f"utility_roc_auc_{name}"] = float(integ["selected_auc"][j])
    if params.method == "gca" and np.size(rel["align_accuracy"]):
        metrics["utility_align_accuracy_client0"] = float(np.max(rel["align_accuracy"]))
    if params.method == "dpfedavg":
        metrics["dp_epsilon"] = float(rel["dp_epsilon"][0])
        metrics["dp_delta"] = params.dp_delta
        lower, claimed = inputs["attack"]["audit_round_epsilon"]
        metrics["privacy_epsilon_lower_bound_round"] = float(lower)
        metrics["privacy_epsilon_claimed_round"] = float(claimed)
        if "audit_round_plan" in inputs["attack"]:  # what the audit's run count can decide (veilbench.privacy.audit)
            cert, power, decidable, runs = inputs["attack"]["audit_round_plan"]
            metrics.update(privacy_audit_max_certifiable_epsilon_round=float(cert),
                           privacy_audit_power_half_noise_round=float(power),
                           privacy_audit_decidable_round=float(decidable), privacy_audit_releases_round=float(runs))
        if "dp_noise_sum_sq" in rel:  # white-box audit of the server's noise in every round (veilbench.gca.audit)
            from veilbench.gca.aggregation import sample_weights
            from veilbench.gca.audit import audit_dp_fedavg_noise

            weights = sample_weights(_data(inputs, params, seed).federation.sizes)
            metrics.update(audit_dp_fedavg_noise(rel, params.dp_clip, params.dp_sigma, weights, params.dp_delta,
                                                 metrics["dp_epsilon"]).metrics())
    if params.method in PARAMETER_SHARING or params.method == "gca":
        metrics.update(_privacy_metrics(inputs, params, seed))
    return StageOutput(metrics=metrics)
