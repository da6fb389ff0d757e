r"""What the apps of this project read and write: each node's data file and the MLflow record.

A SuperNode's data is an ``.npz`` written by ``veilbench flower-export``: ``x_train`` (the node's
normal training records, ``(N_i, d_x)``), ``x_test`` ``(m, d_x)`` and ``y_test`` ``(m,)`` in {0, 1}.
Its path is the node config's ``data-path`` (a deployed SuperNode: ``flower-supernode
--node-config 'data-path="…"'``), else ``<data-dir>/node_<partition-id>.npz`` with ``data-dir``
from the run config (the simulation engine, whose virtual SuperNodes only have ``partition-id``).
Neither given, or the file absent, is a :class:`~veilbench.validation.ValidationError` naming the
missing key: the client's reply is an error and the ServerApp fails the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from veilbench.gca.flower_app import ClientSetup, config_from_run_config
from veilbench.gca.models import AESpec
from veilbench.gca.simulator import Federation
from veilbench.validation import ValidationError


def data_path(node_config: Any, run_config: Any) -> Path:
    """The node's data file (module doc); raises ValidationError when it is not configured or absent."""
    if "data-path" in node_config and str(node_config["data-path"]):
        path = Path(str(node_config["data-path"]))
    elif str(run_config.get("data-dir", "")) and "partition-id" in node_config:
        path = Path(str(run_config["data-dir"])) / f"node_{int(node_config['partition-id'])}.npz"
    else:
        raise ValidationError(
            "data-path: missing from the node config (flower-supernode --node-config 'data-path=\"DIR/node_0.npz\"'), "
            "and the run config has no data-dir (flwr run ... --run-config 'data-dir=\"DIR\"'); "
            "write the files with `veilbench flower-export`")
    if not path.is_file():
        raise ValidationError(f"data-path: {str(path)!r} is not a file (write it with `veilbench flower-export`)")
    return path


def client_setup(context: Any) -> ClientSetup:
    """The :class:`ClientSetup` of this node: options from the run config, data from :func:`data_path`."""
    import torch

    rc, nc = context.run_config, context.node_config
    with np.load(str(data_path(nc, rc)), allow_pickle=False) as f:
        missing = [k for k in ("x_train", "x_test", "y_test") if k not in f.files]
        if missing:
            raise ValidationError(f"data-path: the file lacks arrays {missing} (has {f.files})")
        x, x_test, y_test = (np.asarray(f[k]) for k in ("x_train", "x_test", "y_test"))
    if x.ndim != 2 or x.shape[1] != int(rc["input-dim"]):
        raise ValidationError(f"input-dim: run config says {int(rc['input-dim'])}, the node's x_train has shape {x.shape}")
    fed = Federation([x], x_test, y_test, AESpec("mlp", int(rc["input-dim"])))  # validates shapes/labels
    client = int(nc.get("partition-id", 0))
    return ClientSetup(fed.spec, config_from_run_config(rc), int(rc.get("seed", 0)), client, int(rc["num-clients"]),
                       torch.from_numpy(fed.clients[0]), torch.from_numpy(fed.x_test), fed.y_test)


def final_metrics(method: str, result: dict) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """(final metrics, per-round metrics) of one Flower run's ``results`` entry: FedAvg's client-mean
    accuracy/AUC of the global AE after each round; GCA's client mean after the round's last
    reconstruction epoch. Raises RuntimeError when no round was evaluated (every client failed)."""
    if method == "fedavg":
        rounds = {int(r): {"accuracy": float(m["accuracy"]), "roc_auc": float(m["roc_auc"])}
                  for r, m in result.get("evaluate", {}).items() if "accuracy" in m}
    else:
        rounds = {int(r): {"accuracy": float(list(m["accuracy-epochs"])[-1]), "roc_auc": float(list(m["auc-epochs"])[-1])}
                  for r, m in result.get("train", {}).items() if "accuracy-epochs" in m}
    if not rounds:
        raise RuntimeError(f"Flower {method}: no round was evaluated: every client failed (see the SuperNode logs)")
    return rounds[max(rounds)], rounds


def experiment_name(run_config: Any) -> str:
    """The run config's ``mlflow-experiment`` (default ``veilbench-flower``), a safe name
    (:func:`veilbench.names.safe_name`: it names the experiment's artifact folder), else a
    :class:`~veilbench.validation.UsageError` naming ``mlflow-experiment``."""
    from veilbench.names import safe_name

    return safe_name(str(run_config.get("mlflow-experiment") or "veilbench-flower"), "mlflow-experiment")


def log_to_mlflow(context: Any, methods: list[str], results: dict) -> list[str]:
    """One MLflow run per method of this Flower run (tag ``flower=true``, ``flwr_run_id``): the run
    config as params, final ``accuracy``/``roc_auc`` and their value after each round (step = round).
    Store: run config ``tracking-uri``, else veilbench's (``$VEILBENCH_TRACKING_URI`` or the root's
    ``mlflow.db``). Returns the MLflow run ids."""
    from mlflow.entities import Metric, Param

    from tasks.tracking import client_and_experiment, git_commit, tracking_uri

    rc = dict(context.run_config)
    client, exp_id = client_and_experiment(str(rc.get("tracking-uri") or "") or tracking_uri(), experiment_name(rc))
    ids = []
    for j, method in enumerate(methods):
        final, rounds = final_metrics(method, results.get(j, {}))
        tags = {"flower": "true", "stage": "flower", "method": method, "flwr_run_id": str(context.run_id),
                "mlflow.runName": f"flower:{method}", "num-clients": str(rc.get("num-clients"))}
        if git_commit():
            tags["mlflow.source.git.commit"] = git_commit()
        run = client.create_run(exp_id, run_name=f"flower:{method}", tags=tags)
        metrics = [Metric(k, v, 0, 0) for k, v in final.items()]
        metrics += [Metric(f"round.{k}", v, 0, r) for r, m in rounds.items() for k, v in m.items()]
        metrics.append(Metric("seconds", float(results[j].get("seconds", 0.0)), 0, 0))
        client.log_batch(run.info.run_id, metrics=metrics, params=[Param(k, str(v)[:500]) for k, v in rc.items()],
                         synchronous=True)
        client.set_terminated(run.info.run_id, "FINISHED")
        ids.append(run.info.run_id)
    return ids
