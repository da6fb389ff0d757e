"""The ServerApp (``server_app``, created at import as ``flwr`` requires): the run config's
``method`` list run one after the other (FedAvg, GCA) on all ``num-clients`` SuperNodes, then
logged to MLflow (:func:`veilbench_flower.task.log_to_mlflow`); a run in which every client failed
raises, so Flower marks it failed."""

from veilbench.gca.flower_app import deployed_setups, make_server_app
from veilbench_flower.task import log_to_mlflow

_, _server_setup = deployed_setups()
server_app = make_server_app(None, _server_setup, results={}, on_done=log_to_mlflow)
