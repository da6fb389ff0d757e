"""veilbench's FedAvg and GCA as a Flower app project (``flwr run``); see ../README.md."""
