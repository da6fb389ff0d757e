r"""Per-round communication accounting (spec §7, Tables 11–12).

With β = 4 bytes (FP32), uploads :math:`U = \sum_i \lfloor \rho N_i \rfloor`, latent size
:math:`D_z`, C clients, K centroids and P AE parameters:

* GCA: :math:`B_{GCA} = \beta [U D_z + C K (D_z + 1)]` (codes up; K centroids + K counts down
  to each client), nominal K even if components were dropped;
* parameter sharing (FedAvg/FedProx/FedNova/DP-FedAvg): :math:`B_{FL} = 2 \beta C P`;
* reduction :math:`1 - B_{GCA}/B_{FL}`. Everything in MiB = 2^20 bytes. Headers,
  serialisation and acknowledgements are excluded.

:data:`PAPER_CONFIGS` holds the paper's (C, U, D_z, P) per dataset (Table 11).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from veilbench.io import atomic_write_text

BETA = 4
MIB = 2**20
K_GRID: tuple[int, ...] = (10, 20, 40, 80)


@dataclass(frozen=True)
class CommConfig:
    """One dataset's federation: clients C, uploaded codes U, latent size D_z, parameters P."""

    n_clients: int
    n_uploads: int
    latent_dim: int
    n_params: int


PAPER_CONFIGS: dict[str, CommConfig] = {
    "Academic": CommConfig(10, 390, 16, 46_758),
    "Adult": CommConfig(20, 2_460, 16, 42_654),
    "Bank": CommConfig(20, 3_960, 16, 43_167),
    "Credit": CommConfig(50, 28_350, 16, 50_349),
    "MAGIC": CommConfig(10, 1_410, 16, 38_037),
    "CIFAR-10": CommConfig(20, 500, 1_024, 339_219),
    "FMNIST": CommConfig(20, 600, 784, 334_609),
}


def upload_size(n: int, fraction: float) -> int:
    """Codes uploaded by a client of ``n`` records: :math:`\\max(1, \\lfloor \\rho n \\rfloor)` (at least one)."""
    return max(1, int(np.floor(fraction * n)))


def config_for(sizes: np.ndarray, upload_fraction: float, latent_dim: int, n_params: int) -> CommConfig:
    """:class:`CommConfig` of a federation with client sizes ``(C,)``.

    :math:`U = \\sum_i \\max(1, \\lfloor \\rho N_i \\rfloor)`.
    """
    uploads = sum(upload_size(int(n), upload_fraction) for n in sizes)
    return CommConfig(len(sizes), uploads, int(latent_dim), int(n_params))


def gca_bytes(cfg: CommConfig, n_clusters: int) -> tuple[int, int]:
    """``(up, down)`` bytes of one GCA round: :math:`\\beta U D_z` and :math:`\\beta C K (D_z+1)`."""
    return BETA * cfg.n_uploads * cfg.latent_dim, BETA * cfg.n_clients * n_clusters * (cfg.latent_dim + 1)


def fl_bytes(cfg: CommConfig) -> tuple[int, int]:
    """``(up, down)`` bytes of one parameter-sharing round: :math:`\\beta C P` each way."""
    return BETA * cfg.n_clients * cfg.n_params, BETA * cfg.n_clients * cfg.n_params


def gca_mib(cfg: CommConfig, n_clusters: int) -> float:
    """Total GCA MiB per round."""
    return sum(gca_bytes(cfg, n_clusters)) / MIB


def fl_mib(cfg: CommConfig) -> float:
    """Total parameter-sharing MiB per round."""
    return sum(fl_bytes(cfg)) / MIB


def reduction(cfg: CommConfig, n_clusters: int) -> float:
    """:math:`1 - B_{GCA}/B_{FL}`."""
    return 1.0 - sum(gca_bytes(cfg, n_clusters)) / sum(fl_bytes(cfg))


def communication_rows(configs: dict[str, CommConfig], k_grid: tuple[int, ...] = K_GRID) -> list[dict]:
    """One row per (dataset, method): ``{"dataset", "method", "K", "mib_per_round", "reduction"}``."""
    rows = []
    for name, cfg in configs.items():
        rows.append({"dataset": name, "method": "parameter_sharing", "K": "", "mib_per_round": fl_mib(cfg),
                     "reduction": 0.0})
        for k in k_grid:
            rows.append({"dataset": name, "method": "gca", "K": k, "mib_per_round": gca_mib(cfg, k),
                         "reduction": reduction(cfg, k)})
    return rows


def write_communication_csv(path: str | Path, configs: dict[str, CommConfig] | None = None,
                            k_grid: tuple[int, ...] = K_GRID) -> list[dict]:
    """Write :func:`communication_rows` (default: the paper's configs) as CSV atomically; return the rows."""
    rows = communication_rows(PAPER_CONFIGS if configs is None else configs, k_grid)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["dataset", "method", "K", "mib_per_round", "reduction"])
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, "mib_per_round": f"{row['mib_per_round']:.6f}", "reduction": f"{row['reduction']:.6f}"})
    atomic_write_text(path, buf.getvalue())
    return rows
