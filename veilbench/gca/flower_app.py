r"""Optional Flower apps (Message API) running FedAvg and GCA on a real Flower federation.

**Status: experimental and untested in this project.** Flower is not a project dependency:
every ``flwr`` import is inside a function. A pip dry-run resolved ``flwr[simulation]==1.32.1``
together with ``prefect==3.9.1``, ``mlflow==3.17.2`` and ``torch==2.13.0`` (protobuf 6.33.6,
fastapi 0.150.0, ray 2.55.1); flwr 1.35–1.42 pin fastapi 0.138.x and conflict with prefect 3.9.
Install it in a separate environment: ``pip install -e . "flwr[simulation]==1.32.1"``.

Mapping onto Flower's strategy loop (one server round = one ``train`` message per client):

* FedAvg: Flower's own ``FedAvg`` strategy; each client trains a copy of the received global AE
  for ``local_epochs`` epochs with a fresh Adam and replies its parameters with
  ``num-examples`` = :math:`N_i` (weights :math:`p_i`); evaluation replies the client's accuracy
  at its 0.75-quantile threshold with weight 1 (the simulator's unweighted client mean).
* GCA: the train message of round r carries the centroids :math:`\mu` and weights :math:`w` of
  round r − 1 (empty in round 1). A client keeps its own AE in ``context.state``, runs
  ``align_epochs`` alignment epochs (when centroids are present), then ``recon_epochs``
  reconstruction epochs, and replies a fresh upload of codes; the strategy's
  ``aggregate_train`` fits the clustering backend and returns the next :math:`(\mu, w)`.
  Differences to the simulator: optimisers are re-created every round (Flower clients hold no
  optimiser state here) and the last round has no trailing alignment phase.

Mini-batch order is seeded by ``(seed, round, client)``, so results agree with the simulator
within seed noise, not bit for bit.
"""

from __future__ import annotations

import numpy as np

from veilbench.gca.simulator import FedConfig, Federation


def _client_rng(seed: int, server_round: int, client: int) -> np.random.Generator:
    return np.random.default_rng([seed, server_round, client])


def _evaluate_local(model, fed: Federation, client: int, quantile: float) -> dict[str, float]:
    from veilbench.gca.simulator import evaluate_clients

    xs, xt = fed.tensors()
    acc, auc = evaluate_clients([model], [xs[client]], xt, fed.y_test, quantile)
    return {"accuracy": acc, "roc_auc": auc, "num-examples": 1}


def make_fedavg_apps(fed: Federation, cfg: FedConfig, seed: int, results: dict):
    """``(server_app, client_app)`` for FedAvg; per-round metrics are stored in ``results``."""
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    from veilbench.gca.simulator import make_optimizer, seed_torch
    from veilbench.gca.training import reconstruction_epoch

    n_clients = len(fed.clients)
    client_app = ClientApp()

    @client_app.train()
    def train(msg: Message, context: Context) -> Message:
        client = int(context.node_config["partition-id"])
        server_round = int(msg.content["config"]["server-round"])
        model = fed.spec.build()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        opt = make_optimizer(model.parameters(), cfg)
        x = fed.tensors()[0][client]
        rng = _client_rng(seed, server_round, client)
        for _ in range(cfg.local_epochs):
            reconstruction_epoch(model, opt, x, cfg.batch_size, rng)
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": int(x.shape[0])})})
        return Message(content=content, reply_to=msg)

    @client_app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        model = fed.spec.build()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        metrics = _evaluate_local(model, fed, int(context.node_config["partition-id"]), cfg.quantile)
        return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        seed_torch(seed)
        initial = ArrayRecord(fed.spec.build().state_dict())
        strategy = FedAvg(fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=n_clients,
                          min_evaluate_nodes=n_clients, min_available_nodes=n_clients)
        result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds)
        results["evaluate"] = {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()}
        results["final_state"] = result.arrays.to_torch_state_dict()

    return server_app, client_app


def make_gca_apps(fed: Federation, cfg: FedConfig, seed: int, results: dict):
    """``(server_app, client_app)`` for GCA (see the module doc); metrics are stored in ``results``."""
    import torch
    from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg

    from veilbench.gca.clustering import fit_centroids, inverse_count_weights, uniform_weights
    from veilbench.gca.gca import alignment_epoch, upload_codes
    from veilbench.gca.simulator import make_optimizer, seed_torch
    from veilbench.gca.training import reconstruction_epoch

    n_clients = len(fed.clients)
    weight_fn = inverse_count_weights if cfg.weighting == "inverse" else uniform_weights
    client_app = ClientApp()

    def local_model(context: Context):
        seed_torch(seed)  # shared client initialisation
        model = fed.spec.build()
        if "gca-model" in context.state:
            model.load_state_dict(context.state["gca-model"].to_torch_state_dict())
        return model

    @client_app.train()
    def train(msg: Message, context: Context) -> Message:
        client = int(context.node_config["partition-id"])
        server_round = int(msg.content["config"]["server-round"])
        rng = _client_rng(seed, server_round, client)
        model = local_model(context)
        x = fed.tensors()[0][client]
        broadcast = msg.content["arrays"].to_torch_state_dict()
        if broadcast["mu"].shape[0] > 0:
            opt = make_optimizer(model.encoder.parameters(), cfg)
            for _ in range(cfg.align_epochs):
                alignment_epoch(model, opt, x, broadcast["mu"], broadcast["w"], cfg.batch_size, rng)
        opt = make_optimizer(model.parameters(), cfg)
        for _ in range(cfg.recon_epochs):
            reconstruction_epoch(model, opt, x, cfg.batch_size, rng)
        context.state["gca-model"] = ArrayRecord(model.state_dict())
        codes = torch.from_numpy(upload_codes(model, x, cfg.upload_fraction, rng))
        content = RecordDict({"arrays": ArrayRecord({"codes": codes}),
                              "metrics": MetricRecord({"num-examples": int(x.shape[0])})})
        return Message(content=content, reply_to=msg)

    @client_app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        metrics = _evaluate_local(local_model(context), fed, int(context.node_config["partition-id"]), cfg.quantile)
        return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    class GCAStrategy(FedAvg):
        """Server side of GCA: pool uploaded codes, cluster, broadcast centroids and weights."""

        def aggregate_train(self, server_round, replies):
            codes = [m.content["arrays"].to_torch_state_dict()["codes"].numpy() for m in replies if not m.has_error()]
            if not codes:
                return None, None
            pooled = np.concatenate(codes)
            k = min(cfg.n_clusters, pooled.shape[0])
            cent = fit_centroids(pooled, k, cfg.clustering, seed + server_round, cfg.covariance_type,
                                 cfg.reg_covar, cfg.gmm_n_init)
            arrays = ArrayRecord({"mu": torch.as_tensor(cent.mu, dtype=torch.float32),
                                  "w": torch.as_tensor(weight_fn(cent.counts), dtype=torch.float32)})
            return arrays, MetricRecord({"n_codes": int(pooled.shape[0]), "n_dropped": cent.n_dropped})

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        d_z = fed.spec.build().latent_dim
        initial = ArrayRecord({"mu": torch.zeros(0, d_z), "w": torch.zeros(0)})
        strategy = GCAStrategy(fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=n_clients,
                               min_evaluate_nodes=n_clients, min_available_nodes=n_clients)
        result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds)
        results["evaluate"] = {r: dict(m) for r, m in result.evaluate_metrics_clientapp.items()}

    return server_app, client_app


def run_flower_simulation(method: str, fed: Federation, cfg: FedConfig, seed: int) -> dict:
    """Run ``method`` ∈ {"fedavg", "gca"} with Flower's in-process simulation; returns per-round metrics."""
    from flwr.simulation import run_simulation

    from veilbench.validation import ValidationError

    factories = {"fedavg": make_fedavg_apps, "gca": make_gca_apps}
    if method not in factories:
        raise ValidationError(f"method: Flower apps exist for {sorted(factories)}, got {method!r}")
    results: dict = {}
    server_app, client_app = factories[method](fed, cfg, seed, results)
    run_simulation(server_app=server_app, client_app=client_app, num_supernodes=len(fed.clients),
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    return results
