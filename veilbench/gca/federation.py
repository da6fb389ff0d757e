r"""The objects every GCA engine shares (spec §1, §1.4, §3.3): options, federation, results,
evaluation, initial model, seed streams and the local optimiser.

Evaluation at a point (spec §1.4): client i's threshold :math:`\tau_i = Q_{0.75}(s_i(D_i))`;
accuracy of ``s_i(x) > τ_i`` on the full test set and the ROC AUC of :math:`s_i`, both
averaged over clients.

Determinism: every draw comes from a named stream of the run seed
(:func:`veilbench.random.stream`), never from torch's or numpy's global generator:
``"gca.init"`` the initial AE (the same for every method of a seed), ``"gca.batches"`` every
shuffle and upload sample in a fixed client order (so methods with the same seed see the same
mini-batch stream) and ``"gca.dp-noise"`` the DP noise. Runs are thus reproducible when several
run at once in one process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from veilbench.gca.models import AESpec
from veilbench.gca.training import LocalOptimizer, anomaly_scores
from veilbench.metrics.anomaly import anomaly_accuracy, quantile_threshold, roc_auc
from veilbench.random import stream
from veilbench.validation import ValidationError, check_array, check_labels

Method = Literal["single", "centralized", "fedavg", "fedprox", "fednova", "dpfedavg", "gca"]
METHODS: tuple[str, ...] = ("single", "centralized", "fedavg", "fedprox", "fednova", "dpfedavg", "gca")
PARAMETER_SHARING: tuple[str, ...] = ("fedavg", "fedprox", "fednova", "dpfedavg")
BYTES_PER_FLOAT = 4


@dataclass(frozen=True)
class FedConfig:
    """Hyper-parameters of one simulated run (defaults: the paper's, spec §3.3, §4.1, §5)."""

    rounds: int = 100
    local_epochs: int = 10
    recon_epochs: int = 5
    align_epochs: int = 5
    batch_size: int = 50
    lr: float = 1e-3
    lr_step_size: int = 1000
    lr_gamma: float = 0.1
    lr_step_unit: Literal["epoch", "step"] = "epoch"
    quantile: float = 0.75
    prox_mu: float = 1e-4
    dp_clip: float = 1.0
    dp_sigma: float = 1.0
    upload_fraction: float = 0.1
    n_clusters: int = 10
    clustering: Literal["gmm", "kmeans", "soft_kmeans", "minibatch_kmeans"] = "gmm"
    covariance_type: Literal["full", "diag"] = "full"
    reg_covar: float = 1e-6
    gmm_n_init: int = 1
    weighting: Literal["inverse", "uniform"] = "inverse"
    client_init: Literal["shared", "independent"] = "shared"
    attack_extra_epochs: int = 5


@dataclass
class Federation:
    """Client shards ``clients[i]`` ``(N_i, d_x)``, test set ``x_test`` ``(m, d_x)``, ``y_test`` (m,) in {0,1}."""

    clients: list[np.ndarray]
    x_test: np.ndarray
    y_test: np.ndarray
    spec: AESpec

    def __post_init__(self) -> None:
        if not self.clients:
            raise ValidationError("clients: need at least one client shard, got none")
        d = self.spec.input_dim
        self.clients = [
            check_array(c, f"clients[{i}]", ndim=2, min_rows=2, dtype=np.float32) for i, c in enumerate(self.clients)
        ]
        self.x_test = check_array(self.x_test, "x_test", ndim=2, dtype=np.float32)
        for name, arr in [*((f"clients[{i}]", c) for i, c in enumerate(self.clients)), ("x_test", self.x_test)]:
            if arr.shape[1] != d:
                raise ValidationError(f"{name}: expected {d} features (AESpec.input_dim), got {arr.shape[1]}")
        self.y_test = check_labels(self.y_test, "y_test", n=self.x_test.shape[0])

    @property
    def sizes(self) -> np.ndarray:
        """:math:`N_i` of every client, ``(C,)``."""
        return np.array([c.shape[0] for c in self.clients])

    def tensors(self):
        """``(client tensors, test tensor)`` as float32 torch tensors."""
        import torch

        return [torch.from_numpy(c) for c in self.clients], torch.from_numpy(self.x_test)


@dataclass(frozen=True)
class Upload:
    """One round's latent uploads as the server receives them: ``codes`` ``(U, D_z)`` float32,
    uploading ``client`` ``(U,)`` int64 (position in ``Federation.clients``) and ``row`` ``(U,)`` int64
    (row of the record in that client's shard)."""

    codes: np.ndarray
    client: np.ndarray
    row: np.ndarray

    @classmethod
    def from_clients(cls, uploads: list[tuple[np.ndarray, np.ndarray]]) -> "Upload":
        """From per-client ``(row indices (n_i,), codes (n_i, D_z))`` pairs in client order."""
        client = np.concatenate([np.full(len(idx), i, dtype=np.int64) for i, (idx, _) in enumerate(uploads)])
        return cls(np.concatenate([z for _, z in uploads]), client, np.concatenate([idx for idx, _ in uploads]))


@dataclass
class RunResult:
    """Curves and server-visible artefacts of one run.

    ``accuracy``/``auc``/``rounds``/``epochs``: ``(T,)`` evaluation curve with the 1-based round
    and in-round epoch of each point; ``points_per_round``: evaluations per round (5 for the
    paper's GCA, 1 otherwise); ``align_accuracy``: GCA's fixed-client alignment-epoch diagnostic;
    ``victim_params``: the flat ``(P,)`` model the server sees from client 0 in the last round
    (parameter sharing); ``victim_codes``: GCA's fresh post-training upload of client 0;
    ``final_models``: the trained AEs, one per client (``single``, ``gca``) or one shared model
    (global/centralized); ``last_upload``: GCA's last-round latent uploads of every client.
    """

    method: str
    accuracy: np.ndarray
    auc: np.ndarray
    rounds: np.ndarray
    epochs: np.ndarray
    points_per_round: int
    bytes_up_per_round: int
    bytes_down_per_round: int
    local_steps: np.ndarray
    victim_params: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    victim_codes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    align_accuracy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dp_noise_multiplier: float | None = None
    info: dict = field(default_factory=dict)
    final_models: list = field(default_factory=list)
    last_upload: Upload | None = None


class CurveRecorder:
    """Accumulates ``(round, epoch, accuracy, auc)`` evaluation points."""

    def __init__(self) -> None:
        self.points: list[tuple[int, int, float, float]] = []

    def add(self, rnd: int, epoch: int, acc_auc: tuple[float, float]) -> None:
        self.points.append((rnd, epoch, *acc_auc))

    def arrays(self) -> dict[str, np.ndarray]:
        p = np.array(self.points, dtype=np.float64).reshape(-1, 4)
        return {"rounds": p[:, 0].astype(np.int64), "epochs": p[:, 1].astype(np.int64),
                "accuracy": p[:, 2], "auc": p[:, 3]}


def evaluate_clients(models: list, x_clients: list, x_test, y_test: np.ndarray, quantile: float) -> tuple[float, float]:
    """Mean over clients of (accuracy at :math:`\\tau_i`, ROC AUC); ``models`` is one model per client
    or a one-element list for a shared (global) model whose test scores, and so ROC AUC, are computed
    once (every client's AUC is that one value)."""
    shared = len(models) == 1
    test_scores = anomaly_scores(models[0], x_test) if shared else None
    shared_auc = roc_auc(test_scores, y_test) if shared else None
    accs, aucs = [], []
    for i, x in enumerate(x_clients):
        model = models[0] if shared else models[i]
        s_test = test_scores if shared else anomaly_scores(model, x_test)
        tau = quantile_threshold(anomaly_scores(model, x), quantile)
        accs.append(anomaly_accuracy(s_test, y_test, tau))
        aucs.append(shared_auc if shared else roc_auc(s_test, y_test))
    return float(np.mean(accs)), float(np.mean(aucs))


def initial_model(spec: AESpec, seed: int):
    """The run's initial AE: ``spec.build`` from stream ``"gca.init"`` of ``seed``."""
    return spec.build(stream(seed, "gca.init"))


def batch_stream(seed: int) -> np.random.Generator:
    """Stream ``"gca.batches"`` of ``seed``: every shuffle and upload sample of a run."""
    return stream(seed, "gca.batches")


def noise_stream(seed: int) -> np.random.Generator:
    """Stream ``"gca.dp-noise"`` of ``seed``: DP-FedAvg's Gaussian noise."""
    return stream(seed, "gca.dp-noise")


def make_optimizer(params, cfg: FedConfig) -> LocalOptimizer:
    """Adam + StepLR on ``params`` with ``cfg``'s lr and schedule."""
    return LocalOptimizer.create(params, cfg.lr, cfg.lr_step_size, cfg.lr_gamma, cfg.lr_step_unit)
