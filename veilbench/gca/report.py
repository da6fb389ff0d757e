"""What GCA supplies to the report (the interface: :mod:`tasks.report.families`): its question, its
title and the communication section of ``reports/index.md``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: the question GCA answers, in a reader's words
QUESTION = ("Federated clients share Gaussian-mixture centroids of their autoencoder codes instead of model weights: "
            "how much anomaly-detection utility is kept, and how much training data can the server extract?")

#: its name in figure titles
TITLE = "GCA"


def report_section(reports: Path, sweeps: Sequence[str]) -> list[str]:
    """Write ``<reports>/gca/communication.csv``, the exact MiB per round of parameter sharing and of
    GCA at each K for the paper's dataset configurations (:mod:`veilbench.gca.communication`,
    independent of the sweeps, so written on every build), and return the ``index.md`` section
    describing it when GCA ``sweeps`` are configured (none otherwise)."""
    from veilbench.gca.communication import write_communication_csv

    write_communication_csv(Path(reports) / "gca" / "communication.csv")
    if not sweeps:
        return []
    return ["## GCA communication", "",
            "Exact MiB per round for parameter sharing and for GCA at each K, for the paper's dataset "
            "configurations (spec Tables 11–12, computed by `veilbench.gca.communication`): "
            "`gca/communication.csv`. Each GCA cell also reports `comm_mib_per_round` measured in its run.", ""]
