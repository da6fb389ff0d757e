"""Scheduled benchmark: nightly at the default size, weekly at a larger size.

``python -m flows.deploy`` registers both deployments with the Prefect server named by
``PREFECT_API_URL`` (start one with ``prefect server start --host 127.0.0.1``) and serves them,
blocking. :func:`build_deployments` builds the deployment objects without contacting a server,
which is what the tests check.
"""

from __future__ import annotations

from typing import Any

from flows.benchmark import benchmark

NIGHTLY_CRON = "0 3 * * *"  # every day at 03:00 UTC
WEEKLY_CRON = "0 4 * * 0"  # Sundays at 04:00 UTC


def build_deployments(params_path: str = "params.yaml", weekly_params_path: str = "params.large.yaml") -> list[Any]:
    """The nightly and weekly ``RunnerDeployment`` objects (no server needed to build them)."""
    nightly = benchmark.to_deployment(
        name="nightly", cron=NIGHTLY_CRON, parameters={"params_path": params_path}, tags=["veilbench", "nightly"]
    )
    weekly = benchmark.to_deployment(
        name="weekly-large", cron=WEEKLY_CRON, parameters={"params_path": weekly_params_path}, tags=["veilbench", "weekly"]
    )
    return [nightly, weekly]


if __name__ == "__main__":
    from prefect import serve

    serve(*build_deployments())
