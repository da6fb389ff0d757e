r"""Flower apps (Message API, ``flwr`` 1.32) running FedAvg and GCA on a Flower federation.

Flower is an optional extra (``pip install -e ".[flower]"``, see the README); every ``flwr``
import is inside a function, so this module imports without it.

**Simulation** (in-process, Ray backend): :func:`run_flower_simulation` ``(methods, fed, cfg, seed)``
runs ``fedavg`` and/or ``gca`` one after the other on a :class:`~veilbench.gca.simulator.Federation`
(one SuperNode per client; ``partition-id`` = client index; one Ray start for all runs) and
returns their evaluation curves. Each message's config names its ``method`` and ``run``, so one
ClientApp serves every run and keeps GCA state per run.

**A real federation**: the module attributes ``server_app`` and ``client_app`` (built on first
access) read their options from the run config and each SuperNode's data from an ``.npz`` with
arrays ``x_train`` (the node's normal training records, ``(N_i, d_x)``), ``x_test`` ``(m, d_x)``
and ``y_test`` ``(m,)`` in {0, 1}, already scaled the same way on every node::

    # pyproject.toml of a Flower app project (or pass the same keys with --run-config)
    [tool.flwr.app.components]
    serverapp = "veilbench.gca.flower_app:server_app"
    clientapp = "veilbench.gca.flower_app:client_app"
    [tool.flwr.app.config]
    method = "gca"          # "fedavg", or several run one after the other: "fedavg,gca"
    num-clients = 3         # every round waits for all of them (full participation, spec §1.1)
    input-dim = 14          # d_x of the tabular AE
    seed = 100
    rounds = 100            # any FedConfig field, '-' for '_': local-epochs, n-clusters, ...

    flower-superlink --insecure
    flower-supernode --insecure --superlink 127.0.0.1:9092 --clientappio-api-address 127.0.0.1:9094 \
        --node-config 'partition-id=0 data-path="/data/client0.npz"'        # one per client
    flwr run . <superlink>   # from the app project; <superlink>: a connection in Flower's config
                             # (address 127.0.0.1:9093, insecure = true)

Protocol mapping (one server round = one ``train`` message per client):

* **FedAvg**: Flower's ``FedAvg`` strategy, weights ``num-examples`` = :math:`N_i`
  (:math:`p_i = N_i / \sum_j N_j`, spec §5). A client trains a copy of the received global AE
  for ``local_epochs`` epochs with a fresh Adam (as the simulator) and replies its parameters.
  Each round the global AE is evaluated on every client (threshold :math:`\tau_i` from its shard,
  the full test set) and the strategy averages accuracy and AUC with weight 1 per client: the
  simulator's unweighted client mean.
* **GCA** (spec §4.4): the ``train`` message of round r carries the centroids :math:`\mu`
  ``(K', D_z)`` and weights :math:`w` ``(K',)`` of round r − 1 (empty in round 1). The client
  keeps its AE *and both Adam states* (reconstruction: encoder + decoder; alignment: encoder) in
  ``context.state``, runs ``align_epochs`` alignment epochs on the received centroids, then
  ``recon_epochs`` reconstruction epochs, evaluating itself after each, and replies a fresh
  upload of :math:`\lfloor\rho N_i\rfloor` codes plus its per-epoch accuracy/AUC. The
  strategy's ``aggregate_train`` fits the clustering backend to the pooled codes, returns the
  next :math:`(\mu, w)` and the client-mean per-epoch curve (the paper's evaluation points).
  Alignment thus opens round r + 1 instead of closing round r: the curve is the same, only the
  last round has no trailing alignment.

Initial AEs are the simulator's (:func:`veilbench.gca.gca.client_initial_model`). Mini-batch order
and upload samples come from stream ``"gca.flower.client"`` of ``(seed, round, client)``
(:func:`veilbench.random.stream`; the simulator uses one stream in client order), and GMM seeds
are ``seed + round``: for the same seed the two agree within seed noise, not bit for bit.
Thread limits are the deployment's (e.g. ``OMP_NUM_THREADS``), not set here.
"""

from __future__ import annotations

import dataclasses
import io
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from veilbench.gca.models import AESpec
from veilbench.gca.federation import FedConfig, Federation
from veilbench.validation import ValidationError

METHODS: tuple[str, ...] = ("fedavg", "gca")


@dataclass(frozen=True)
class ClientSetup:
    """What one client handler needs: the AE, the options, the seed, its index and its data
    (``x`` ``(N_i, d_x)`` and ``x_test`` ``(m, d_x)`` float32 tensors, ``y_test`` ``(m,)`` in {0,1})."""

    spec: AESpec
    cfg: FedConfig
    seed: int
    client: int
    n_clients: int
    x: object
    x_test: object
    y_test: np.ndarray


@dataclass(frozen=True)
class ServerSetup:
    """What the server needs: the AE (initial model, latent size), options, seed and federation size."""

    spec: AESpec
    cfg: FedConfig
    seed: int
    n_clients: int


def federation_setups(fed: Federation, cfg: FedConfig, seed: int):
    """``(client_setup(context), server_setup(context))`` serving ``fed``'s shard ``partition-id``."""
    xs, xt = fed.tensors()

    def client_setup(context) -> ClientSetup:
        client = int(context.node_config["partition-id"])
        return ClientSetup(fed.spec, cfg, seed, client, len(xs), xs[client], xt, fed.y_test)

    return client_setup, lambda context: ServerSetup(fed.spec, cfg, seed, len(xs))


def config_from_run_config(run_config) -> FedConfig:
    """A :class:`FedConfig` from run-config keys spelled with ``-`` (``local-epochs`` → ``local_epochs``)."""
    fields = {f.name for f in dataclasses.fields(FedConfig)}
    given = {k.replace("-", "_"): v for k, v in dict(run_config).items()}
    return FedConfig(**{k: v for k, v in given.items() if k in fields})


def deployed_setups():
    """Setups of a real federation: options from the run config, data from ``node_config['data-path']``."""
    import torch

    def server_setup(context) -> ServerSetup:
        rc = context.run_config
        return ServerSetup(AESpec("mlp", int(rc["input-dim"])), config_from_run_config(rc), int(rc.get("seed", 0)),
                           int(rc["num-clients"]))

    def client_setup(context) -> ClientSetup:
        rc, nc = context.run_config, context.node_config
        with np.load(str(nc["data-path"]), allow_pickle=False) as f:
            x, x_test, y_test = (np.asarray(f[k]) for k in ("x_train", "x_test", "y_test"))
        fed = Federation([x], x_test, y_test, AESpec("mlp", int(rc["input-dim"])))  # validates shapes/labels
        return ClientSetup(fed.spec, config_from_run_config(rc), int(rc.get("seed", 0)), int(nc["partition-id"]),
                           int(rc["num-clients"]), torch.from_numpy(fed.clients[0]), torch.from_numpy(fed.x_test),
                           fed.y_test)

    return client_setup, server_setup


def _evaluate(model, s: ClientSetup) -> tuple[float, float]:
    """(accuracy at :math:`\\tau_i`, ROC AUC) of ``model`` for client ``s.client``."""
    from veilbench.gca.federation import evaluate_clients

    return evaluate_clients([model], [s.x], s.x_test, s.y_test, s.cfg.quantile)


def _client_rng(s: ClientSetup, server_round: int) -> np.random.Generator:
    from veilbench.random import stream

    return stream((s.seed, server_round, s.client), "gca.flower.client")


def _save_optimizer(context, key: str, opt) -> None:
    """Keep an Adam + StepLR state in ``context.state`` (a node-local record, never sent)."""
    import torch
    from flwr.app import ConfigRecord

    buf = io.BytesIO()
    torch.save({"optimizer": opt.optimizer.state_dict(), "scheduler": opt.scheduler.state_dict()}, buf)
    context.state[key] = ConfigRecord({"state": buf.getvalue()})


def _load_optimizer(context, key: str, opt) -> None:
    import torch

    if key in context.state:
        state = torch.load(io.BytesIO(context.state[key]["state"]), weights_only=True)
        opt.optimizer.load_state_dict(state["optimizer"])
        opt.scheduler.load_state_dict(state["scheduler"])


def make_client_app(setup: Callable):
    """A ``ClientApp`` serving every method of :data:`METHODS`; each message's config names its
    ``method`` and ``run`` (so one node serves several runs, each with its own GCA state);
    ``setup(context)`` gives a :class:`ClientSetup`."""
    import torch
    from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp

    from veilbench.gca.gca import alignment_epoch, client_initial_model, upload_codes
    from veilbench.gca.federation import initial_model, make_optimizer
    from veilbench.gca.simulator import local_training
    from veilbench.gca.training import reconstruction_epoch

    app = ClientApp()

    def reply(msg, arrays: dict, metrics: dict):
        content = RecordDict({"arrays": ArrayRecord(arrays), "metrics": MetricRecord(metrics)})
        return Message(content=content, reply_to=msg)

    def received_model(msg, s: ClientSetup):
        model = initial_model(s.spec, s.seed)  # overwritten by the received parameters
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        return model

    def gca_model(context, s: ClientSetup, key: str):
        model = client_initial_model(s.spec, s.seed, s.client, s.cfg.client_init)
        if key in context.state:
            model.load_state_dict(context.state[key].to_torch_state_dict())
        return model

    @app.train()
    def train(msg, context):
        s = setup(context)
        config = msg.content["config"]
        rng = _client_rng(s, int(config["server-round"]))
        if _check_method(str(config["method"])) == "fedavg":
            model = received_model(msg, s)
            local_training(model, s.x, s.cfg, rng)  # the simulator's client step
            return reply(msg, model.state_dict(), {"num-examples": int(s.x.shape[0])})
        key = f"gca-{config['run']}"
        model = gca_model(context, s, f"{key}-model")
        rec = make_optimizer(model.parameters(), s.cfg)
        align = make_optimizer(model.encoder.parameters(), s.cfg)
        _load_optimizer(context, f"{key}-opt-recon", rec)
        _load_optimizer(context, f"{key}-opt-align", align)
        broadcast = msg.content["arrays"].to_torch_state_dict()
        if broadcast["mu"].shape[0] > 0:
            for _ in range(s.cfg.align_epochs):
                alignment_epoch(model, align, s.x, broadcast["mu"], broadcast["w"], s.cfg.batch_size, rng)
        curve = []
        for _ in range(s.cfg.recon_epochs):
            reconstruction_epoch(model, rec, s.x, s.cfg.batch_size, rng)
            curve.append(_evaluate(model, s))
        context.state[f"{key}-model"] = ArrayRecord(model.state_dict())
        _save_optimizer(context, f"{key}-opt-recon", rec)
        _save_optimizer(context, f"{key}-opt-align", align)
        _, codes = upload_codes(model, s.x, s.cfg.upload_fraction, rng)
        return reply(msg, {"codes": torch.from_numpy(codes)},
                     {"num-examples": int(s.x.shape[0]), "accuracy-epochs": [a for a, _ in curve],
                      "auc-epochs": [u for _, u in curve]})

    @app.evaluate()
    def evaluate(msg, context):
        s = setup(context)
        config = msg.content["config"]
        fedavg = _check_method(str(config["method"])) == "fedavg"
        model = received_model(msg, s) if fedavg else gca_model(context, s, f"gca-{config['run']}-model")
        acc, auc = _evaluate(model, s)
        return reply(msg, {}, {"accuracy": acc, "roc_auc": auc, "num-examples": 1})

    return app


def make_server_app(methods: Sequence[str] | None, setup: Callable, results: dict | None = None,
                    on_done: Callable | None = None):
    """A ``ServerApp`` running the strategies of ``methods`` one after the other on the same nodes
    (``None``: the run config's comma-separated ``method``); ``setup(context)`` gives a
    :class:`ServerSetup`. ``on_done(context, methods, results)``, when given (with a ``results``
    dict), runs after the last strategy (e.g. to log the results); what it raises fails the run.

    When ``results`` is a dict (simulation), run j's wall-clock ``results[j]["seconds"]`` (all its
    rounds) and per-round metrics are stored in ``results[j]["evaluate"][r]`` (FedAvg: client-mean accuracy/AUC of the global AE) and
    ``results[j]["train"][r]`` (GCA: client-mean ``accuracy-epochs``/``auc-epochs``, ``n-codes``).
    """
    import torch
    from logging import INFO

    from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
    from flwr.common import log
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg

    from veilbench.gca.clustering import centroid_weights, fit_centroids
    from veilbench.gca.federation import initial_model

    for method in methods or ():
        _check_method(method)

    class GCAStrategy(FedAvg):
        """Server side of GCA: pool the uploaded codes, cluster, broadcast centroids and weights."""

        def __init__(self, s: ServerSetup, **kwargs) -> None:
            super().__init__(**kwargs)
            self.s = s

        def aggregate_train(self, server_round, replies):
            """Pool the codes of the replies without error; each error is logged with its node and
            reason (as Flower's own strategies do), so a run whose clients fail says why."""
            replies = list(replies)
            failed = [m for m in replies if m.has_error()]
            replies = [m for m in replies if not m.has_error()]
            log(INFO, "aggregate_train: Received %s results and %s failures", len(replies), len(failed))
            for m in failed:
                log(INFO, "\t> Received error in reply from node %d: %s", m.metadata.src_node_id, m.error.reason)
            if not replies:
                return None, None
            cfg = self.s.cfg
            pooled = np.concatenate([m.content["arrays"].to_torch_state_dict()["codes"].numpy() for m in replies])
            cent = fit_centroids(pooled, min(cfg.n_clusters, pooled.shape[0]), cfg.clustering,
                                 self.s.seed + server_round, cfg.covariance_type, cfg.reg_covar, cfg.gmm_n_init)
            arrays = ArrayRecord({"mu": torch.as_tensor(cent.mu, dtype=torch.float32),
                                  "w": torch.as_tensor(centroid_weights(cent.counts, cfg.weighting), dtype=torch.float32)})
            curves = {key: np.mean([list(m.content["metrics"][key]) for m in replies], axis=0).tolist()
                      for key in ("accuracy-epochs", "auc-epochs")}
            return arrays, MetricRecord({**curves, "n-codes": int(pooled.shape[0]), "n-dropped": int(cent.n_dropped)})

    app = ServerApp()

    @app.main()
    def main(grid, context) -> None:
        s = setup(context)
        n = s.n_clients
        todo = methods or [_check_method(m.strip()) for m in str(context.run_config["method"]).split(",")]
        for run, method in enumerate(todo):
            if method == "fedavg":
                initial = ArrayRecord(initial_model(s.spec, s.seed).state_dict())  # the simulator's
                strategy = FedAvg(fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=n,
                                  min_evaluate_nodes=n, min_available_nodes=n)
            else:
                d_z = s.spec.latent_dim
                initial = ArrayRecord({"mu": torch.zeros(0, d_z), "w": torch.zeros(0)})
                strategy = GCAStrategy(s, fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=n,
                                       min_evaluate_nodes=0, min_available_nodes=n)
            config = ConfigRecord({"method": method, "run": run})
            start = time.perf_counter()
            result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=s.cfg.rounds,
                                    train_config=config, evaluate_config=ConfigRecord(dict(config)))
            if results is not None:
                results[run] = {"seconds": time.perf_counter() - start, "evaluate": {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()},
                                "train": {r: dict(m) for r, m in result.train_metrics_clientapp.items()}}
        if on_done is not None:
            on_done(context, list(todo), results)

    return app


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValidationError(f"method: Flower apps exist for {list(METHODS)}, got {method!r}")
    return method


@dataclass
class FlowerRun:
    """Evaluation curve of a Flower run: ``accuracy``/``auc``/``rounds`` ``(T,)`` with
    ``points_per_round`` points per round (1 for FedAvg, ``recon_epochs`` for GCA); ``seconds``: wall
    clock of all rounds (after the simulation started; the first run also starts the Ray workers)."""

    accuracy: np.ndarray
    auc: np.ndarray
    rounds: np.ndarray
    points_per_round: int
    seconds: float


def run_flower_simulation(methods: Sequence[str], fed: Federation, cfg: FedConfig, seed: int,
                          num_cpus: int = 1) -> list[FlowerRun]:
    """Run each of ``methods`` (⊆ {"fedavg", "gca"}, in order) on ``fed`` in one Flower simulation
    (Ray backend, ``num_cpus`` client workers); returns one :class:`FlowerRun` per method."""
    methods = [_check_method(m) for m in methods]
    from flwr.simulation import run_simulation

    client_setup, server_setup = federation_setups(fed, cfg, seed)
    results: dict = {}
    run_simulation(server_app=make_server_app(methods, server_setup, results),
                   client_app=make_client_app(client_setup), num_supernodes=len(fed.clients),
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                   "init_args": {"num_cpus": int(num_cpus), "log_to_driver": False}})
    runs = []
    for j, method in enumerate(methods):
        if j not in results:
            raise RuntimeError(f"Flower simulation did not finish run {j} ({method}); see its log")
        if method == "fedavg":
            per_round = [results[j]["evaluate"][r] for r in sorted(results[j]["evaluate"])]
            acc, auc = [[m["accuracy"]] for m in per_round], [[m["roc_auc"]] for m in per_round]
        else:
            per_round = [results[j]["train"][r] for r in sorted(results[j]["train"])]
            acc, auc = [m["accuracy-epochs"] for m in per_round], [m["auc-epochs"] for m in per_round]
        if len(acc) != cfg.rounds:
            raise RuntimeError(f"Flower {method}: {len(acc)} of {cfg.rounds} rounds evaluated; see its log")
        ppr = len(acc[0])
        runs.append(FlowerRun(np.ravel(acc).astype(np.float64), np.ravel(auc).astype(np.float64),
                              np.repeat(np.arange(1, cfg.rounds + 1), ppr), ppr, float(results[j]["seconds"])))
    return runs


def __getattr__(name: str):
    """``server_app`` / ``client_app`` for ``flwr run`` (module doc), built on first access."""
    if name in ("server_app", "client_app"):
        client_setup, server_setup = deployed_setups()
        apps = {"server_app": make_server_app(None, server_setup), "client_app": make_client_app(client_setup)}
        globals().update(apps)
        return apps[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
