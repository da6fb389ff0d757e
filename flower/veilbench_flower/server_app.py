"""The ServerApp (``server_app``, created at import as ``flwr`` requires): the run config's
``method`` list run one after the other (FedAvg, GCA) on all ``num-clients`` SuperNodes, then
logged to MLflow (:func:`veilbench_flower.task.log_to_mlflow`); a run in which every client failed
raises, so Flower marks it failed."""

from veilbench.gca.flower_app import deployed_setups, make_server_app
from veilbench_flower.task import experiment_name, log_to_mlflow

_, _deployed_server_setup = deployed_setups()


def _server_setup(context):
    """The deployed server setup, after the run config's MLflow experiment name is checked: a bad
    name fails the run before its first round, not after its results are computed."""
    experiment_name(context.run_config)
    return _deployed_server_setup(context)


server_app = make_server_app(None, _server_setup, results={}, on_done=log_to_mlflow)
