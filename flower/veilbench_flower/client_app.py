"""The ClientApp (``client_app``, created at import as ``flwr`` requires): veilbench's client for
FedAvg and GCA, reading the node's data file (:func:`veilbench_flower.task.client_setup`)."""

from veilbench.gca.flower_app import make_client_app
from veilbench_flower.task import client_setup

client_app = make_client_app(client_setup)
