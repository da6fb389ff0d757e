"""Prefect flows composing the stage tasks; ``python -m flows.<stage>`` runs one stage,
``python -m flows.benchmark`` runs all of them, ``flows.deploy`` schedules the benchmark."""

import tasks  # noqa: F401  first: pins the numerical libraries' CPU code paths before they load (tasks.numerics)

import sys  # noqa: E402

if sys.argv[:1] == ["-m"]:  # imported to run ``python -m flows.<module>`` (Python sets argv[0] so meanwhile)
    from tasks.environment import project_prefect_home

    project_prefect_home()  # before Prefect loads: its home inside the project, never ~/.prefect
