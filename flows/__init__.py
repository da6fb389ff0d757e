"""Prefect flows composing the stage tasks; ``python -m flows.<stage>`` runs one stage,
``python -m flows.benchmark`` runs all of them, ``flows.deploy`` schedules the benchmark."""

import tasks  # noqa: F401  first: pins the numerical libraries' CPU code paths before they load (tasks.numerics)
