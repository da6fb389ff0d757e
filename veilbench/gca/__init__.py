"""GCA family: federated autoencoder anomaly detection with global centroid alignment.

Modules: ``models`` (autoencoders), ``training`` (local epochs, scores), ``partition`` (IID /
Dirichlet long-tail), ``simulator`` (deterministic federation: single, centralized, FedAvg,
FedProx, FedNova, DP-FedAvg), ``gca`` (GCA rounds), ``clustering`` (server backends, weights),
``aggregation`` (server rules), ``vectorized`` (client-batched parameter sharing), ``selection``
(checkpoint protocols), ``accountant`` (DP-FedAvg ε), ``extraction`` (attack, NTMSE/Δcos),
``communication`` (bytes per round), ``data`` (stage arrays → federation), ``family`` (pipeline
stages), ``flower_app`` (optional, untested Flower apps).
"""
