"""Prefect flows composing the stage tasks; ``python -m flows.<stage>`` runs one stage,
``python -m flows.benchmark`` runs all of them, ``flows.deploy`` schedules the benchmark."""
