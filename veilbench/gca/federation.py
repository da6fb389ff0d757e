r"""The objects every GCA engine shares (spec §1, §1.4, §3.3): options, federation, results,
evaluation, initial model, seed streams and the local optimiser.

Evaluation at a point (spec §1.4): client i's threshold :math:`\tau_i = Q_{0.75}(s_i(D_i))`;
accuracy of ``s_i(x) > τ_i`` on an evaluation pool and the ROC AUC of :math:`s_i` on it, both
averaged over clients. The pools are the test set and, when the federation has one, a disjoint
validation set (:attr:`Federation.x_val`), on which checkpoints are selected
(:mod:`veilbench.gca.selection`) so that the test set is only ever reported on.

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
    device: str = "cpu"
    client_threads: int = 1


@dataclass
class Federation:
    """Client shards ``clients[i]`` ``(N_i, d_x)``, test set ``x_test`` ``(m, d_x)``, ``y_test`` (m,) in {0,1},
    and optionally a validation set ``x_val`` ``(v, d_x)``, ``y_val`` (v,) in {0,1} disjoint from the test set."""

    clients: list[np.ndarray]
    x_test: np.ndarray
    y_test: np.ndarray
    spec: AESpec
    x_val: np.ndarray | None = None
    y_val: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not self.clients:
            raise ValidationError("clients: need at least one client shard, got none")
        d = self.spec.input_dim
        self.clients = [
            check_array(c, f"clients[{i}]", ndim=2, min_rows=2, dtype=np.float32) for i, c in enumerate(self.clients)
        ]
        self.x_test = check_array(self.x_test, "x_test", ndim=2, dtype=np.float32)
        if (self.x_val is None) != (self.y_val is None):
            raise ValidationError("x_val, y_val: give both (a validation set) or neither")
        pools = [("x_test", self.x_test)]
        if self.x_val is not None:
            self.x_val = check_array(self.x_val, "x_val", ndim=2, dtype=np.float32)
            pools.append(("x_val", self.x_val))
        for name, arr in [*((f"clients[{i}]", c) for i, c in enumerate(self.clients)), *pools]:
            if arr.shape[1] != d:
                raise ValidationError(f"{name}: expected {d} features (AESpec.input_dim), got {arr.shape[1]}")
        self.y_test = check_labels(self.y_test, "y_test", n=self.x_test.shape[0])
        if self.y_val is not None:
            self.y_val = check_labels(self.y_val, "y_val", n=self.x_val.shape[0])

    @property
    def sizes(self) -> np.ndarray:
        """:math:`N_i` of every client, ``(C,)``."""
        return np.array([c.shape[0] for c in self.clients])

    def tensors(self, device: str = "cpu"):
        """``(client tensors, test tensor)`` as float32 torch tensors on ``device``."""
        import torch

        return ([torch.from_numpy(c).to(device) for c in self.clients],
                torch.from_numpy(self.x_test).to(device))

    def pools(self, device: str = "cpu") -> "EvalPools":
        """The evaluation pools: the test set, then the validation set when there is one."""
        sets = [("test", self.x_test, self.y_test)]
        if self.x_val is not None:
            sets.append(("val", self.x_val, self.y_val))
        return EvalPools.of(sets, device)


@dataclass
class EvalPools:
    """Evaluation pools scored together: ``x`` the rows of every pool stacked ``(m_1 + … + m_k, d_x)``
    (a tensor on the run's device), ``bounds`` each pool's row slice, ``labels`` its {0,1} labels
    ``(m_j,)`` and ``names`` its name (``"test"``, ``"val"``)."""

    x: object
    bounds: list[slice]
    labels: list[np.ndarray]
    names: tuple[str, ...]

    @classmethod
    def of(cls, sets: list[tuple[str, np.ndarray, np.ndarray]], device: str = "cpu") -> "EvalPools":
        import torch

        bounds, start = [], 0
        for _, x, _ in sets:
            bounds.append(slice(start, start + x.shape[0]))
            start += x.shape[0]
        x = torch.from_numpy(np.ascontiguousarray(np.concatenate([x for _, x, _ in sets]), dtype=np.float32))
        return cls(x.to(device), bounds, [y for _, _, y in sets], tuple(n for n, _, _ in sets))


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

    ``accuracy``/``auc``/``rounds``/``epochs``: ``(T,)`` test-set evaluation curve with the 1-based
    round and in-round epoch of each point; ``val_accuracy``/``val_auc``: ``(T,)`` the same points on
    the validation set (NaN without one); ``points_per_round``: evaluations per round (5 for the
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
    val_accuracy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    val_auc: np.ndarray = field(default_factory=lambda: np.zeros(0))
    victim_params: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    victim_codes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    align_accuracy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dp_noise_multiplier: float | None = None
    info: dict = field(default_factory=dict)
    final_models: list = field(default_factory=list)
    last_upload: Upload | None = None


class CurveRecorder:
    """Accumulates evaluation points ``(round, epoch, test accuracy, test AUC, val accuracy, val AUC)``
    (NaN where there is no validation pool)."""

    def __init__(self, points: np.ndarray | None = None) -> None:
        self.points: list[tuple[float, ...]] = [] if points is None else [tuple(p) for p in np.asarray(points)]

    def add(self, rnd: int, epoch: int, scores) -> None:
        """One point: ``scores`` is :func:`evaluate_pools`' ``(k, 2)`` (test first) or a test ``(acc, auc)``."""
        s = np.asarray(scores, dtype=np.float64).reshape(-1, 2)
        val = s[1] if s.shape[0] > 1 else (np.nan, np.nan)
        self.points.append((rnd, epoch, float(s[0, 0]), float(s[0, 1]), float(val[0]), float(val[1])))

    def state(self) -> np.ndarray:
        """The points so far, ``(T, 6)`` float64 (a checkpoint's copy)."""
        return np.array(self.points, dtype=np.float64).reshape(-1, 6)

    def arrays(self) -> dict[str, np.ndarray]:
        p = self.state()
        return {"rounds": p[:, 0].astype(np.int64), "epochs": p[:, 1].astype(np.int64),
                "accuracy": p[:, 2], "auc": p[:, 3], "val_accuracy": p[:, 4], "val_auc": p[:, 5]}


def client_map(fn, items: list, threads: int = 1) -> list:
    """``[fn(item) for item in items]``, on ``threads`` worker threads when > 1 (torch's kernels release
    the GIL, so clients' passes run side by side; each result is computed as it would be alone)."""
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        return list(pool.map(fn, items))


def evaluate_pools(models: list, x_clients: list, pools: EvalPools, quantile: float, threads: int = 1) -> np.ndarray:
    """Mean over clients of (accuracy at :math:`\\tau_i`, ROC AUC) on every pool, ``(k, 2)`` in the
    pools' order. ``models`` is one model per client, or a one-element list for a shared (global)
    model whose pool scores, and so ROC AUCs, are computed once (every client's AUC is that value).
    Each model scores all pools in one pass; ``threads`` > 1 scores clients side by side
    (:func:`client_map`, same values)."""
    shared = len(models) == 1
    pooled = anomaly_scores(models[0], pools.x) if shared else None
    shared_auc = [roc_auc(pooled[b], y) for b, y in zip(pools.bounds, pools.labels)] if shared else None
    accs = np.zeros((len(x_clients), len(pools.names)))
    aucs = np.zeros_like(accs)

    def score(i: int) -> tuple[np.ndarray, np.ndarray]:
        model = models[0] if shared else models[i]
        return (pooled if shared else anomaly_scores(model, pools.x)), anomaly_scores(model, x_clients[i])

    for i, (scores, own) in enumerate(client_map(score, list(range(len(x_clients))), threads)):
        tau = quantile_threshold(own, quantile)
        for j, (b, y) in enumerate(zip(pools.bounds, pools.labels)):
            accs[i, j] = anomaly_accuracy(scores[b], y, tau)
            aucs[i, j] = shared_auc[j] if shared else roc_auc(scores[b], y)
    return np.stack([accs.mean(0), aucs.mean(0)], axis=1)


def evaluate_clients(models: list, x_clients: list, x_test, y_test: np.ndarray, quantile: float) -> tuple[float, float]:
    """:func:`evaluate_pools` on one pool (``x_test`` ``(m, d_x)`` tensor, ``y_test`` (m,)): ``(accuracy, AUC)``."""
    pool = EvalPools(x_test, [slice(0, len(y_test))], [y_test], ("test",))
    acc, auc = evaluate_pools(models, x_clients, pool, quantile)[0]
    return float(acc), float(auc)


def initial_model(spec: AESpec, seed: int, device: str = "cpu"):
    """The run's initial AE: ``spec.build`` from stream ``"gca.init"`` of ``seed`` (drawn on the CPU,
    then moved to ``device``)."""
    return spec.build(stream(seed, "gca.init")).to(device)


def batch_stream(seed: int) -> np.random.Generator:
    """Stream ``"gca.batches"`` of ``seed``: every shuffle and upload sample of a run."""
    return stream(seed, "gca.batches")


def noise_stream(seed: int) -> np.random.Generator:
    """Stream ``"gca.dp-noise"`` of ``seed``: DP-FedAvg's Gaussian noise."""
    return stream(seed, "gca.dp-noise")


def make_optimizer(params, cfg: FedConfig) -> LocalOptimizer:
    """Adam + StepLR on ``params`` with ``cfg``'s lr and schedule."""
    return LocalOptimizer.create(params, cfg.lr, cfg.lr_step_size, cfg.lr_gamma, cfg.lr_step_unit)
